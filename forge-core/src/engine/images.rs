//! Images a client sends: each decoded and checked (`crate::images`),
//! its bytes written to the store's blobs (content-addressed, so once),
//! before the message naming it reaches the session. A blob no message
//! names is dropped when the store next opens.

use forge_proto::params::{ImagePutParams, SendParams};
use forge_proto::{ErrorKind, ImageInfo, ImageInput};

use super::Engine;
use crate::error::EngineError;
use crate::journal::{StoreOp, WriteBatch};

impl Engine {
    /// `images.put`: one image kept for a message sent after.
    pub async fn images_put(&self, p: ImagePutParams) -> Result<ImageInfo, EngineError> {
        self.check_running()?;
        self.keep_image(&p.data, p.mime_type.as_deref(), p.name).await
    }

    async fn keep_image(&self, data: &str, mime: Option<&str>, name: Option<String>) -> Result<ImageInfo, EngineError> {
        let decoded = crate::images::decode(data, mime, name).map_err(invalid)?;
        let batch = WriteBatch { ops: vec![StoreOp::PutBlob { hash: decoded.info.hash.clone(), data: decoded.data }] };
        self.shared().writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
        Ok(decoded.info)
    }

    /// The images of `params`, kept and described (taken out of the
    /// params: the session gets what names them, never their bytes).
    pub(super) async fn send_images(&self, params: &mut SendParams) -> Result<Vec<ImageInfo>, EngineError> {
        let inputs = std::mem::take(&mut params.images);
        if inputs.len() > crate::images::MAX_IMAGES {
            return Err(invalid(format!(
                "{} images; a message carries at most {}",
                inputs.len(),
                crate::images::MAX_IMAGES
            )));
        }
        let mut out = Vec::with_capacity(inputs.len());
        for ImageInput { data, hash, mime_type, name } in inputs {
            let info = match (data, hash) {
                (Some(data), _) => self.keep_image(&data, mime_type.as_deref(), name).await?,
                (None, Some(hash)) => {
                    let bytes = self.shared().store.blob(&hash).await?.ok_or_else(|| {
                        invalid(format!("no image {hash} is kept (it is dropped when forged restarts); send it again"))
                    })?;
                    crate::images::describe(bytes, mime_type.as_deref(), name).map_err(invalid)?.info
                }
                (None, None) => {
                    return Err(invalid("an image needs `data` (base64) or the `hash` images.put gave".into()));
                }
            };
            out.push(info);
        }
        Ok(out)
    }
}

fn invalid(message: String) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}
