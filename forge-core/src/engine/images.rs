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
}
