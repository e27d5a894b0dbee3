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

    /// `session.file`: a text file as the session's tools may read it.
    pub async fn session_file(
        &self,
        p: forge_proto::params::SessionFileParams,
    ) -> Result<forge_proto::SessionFile, EngineError> {
        use forge_proto::ErrorKind::InvalidParams;
        let id = self.resolve(&p.session).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let sandbox = crate::session::machine::sandbox_for(&row, &self.shared().config);
        let path = p.path;
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let full = sandbox.resolve(&path).map_err(|e| EngineError::new(InvalidParams, e.to_string()))?;
            let file = sandbox
                .open_checked(&full, &path)
                .map_err(|e| EngineError::new(InvalidParams, format!("cannot read {path}: {e}")))?;
            let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut data = Vec::new();
            file.take(forge_proto::MAX_FILE_SHOWN as u64)
                .read_to_end(&mut data)
                .map_err(|e| EngineError::new(InvalidParams, format!("cannot read {path}: {e}")))?;
            if data.contains(&0) {
                return Err(EngineError::new(InvalidParams, format!("{path} is binary: only text files are shown")));
            }
            let truncated = bytes > data.len() as u64;
            let text = String::from_utf8_lossy(&data).into_owned();
            Ok(forge_proto::SessionFile { path, text, bytes, truncated })
        })
        .await
        .map_err(|e| EngineError::internal(e.to_string()))?
    }
}
