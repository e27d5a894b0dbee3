//! `images.put`: an image kept for a message sent after (the session's
//! way in keeps inline ones the same way, see `session/input_task.rs`).

use forge_proto::ImageInfo;
use forge_proto::params::ImagePutParams;

use super::Engine;
use crate::error::EngineError;

impl Engine {
    /// `images.put`: one image kept for a message sent after.
    pub async fn images_put(&self, p: ImagePutParams) -> Result<ImageInfo, EngineError> {
        self.check_running()?;
        crate::session::keep_image(self.shared(), &p.data, p.mime_type.as_deref(), p.name).await
    }

    /// `images.get`: a kept image's bytes; a blob that is not an image (a
    /// file's content kept for rewind) is not given.
    pub async fn images_get(
        &self,
        p: forge_proto::params::ImageGetParams,
    ) -> Result<forge_proto::ImageData, EngineError> {
        let missing =
            || EngineError::new(forge_proto::ErrorKind::InvalidParams, format!("no image {} is kept", p.hash));
        let bytes = self.shared().store.blob(&p.hash).await?.ok_or_else(missing)?;
        let decoded = crate::images::describe(bytes, None, None).map_err(|_| missing())?;
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(&decoded.data);
        Ok(forge_proto::ImageData { info: decoded.info, data })
    }
}
