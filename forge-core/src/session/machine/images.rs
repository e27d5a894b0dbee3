//! A message's images, checked against the model that will read them:
//! one that reads images at all (the catalog's `vision`), and within its
//! provider's limits.

use forge_proto::{ErrorKind, ImageInfo};

use super::Session;
use crate::error::EngineError;
use crate::images::MAX_IMAGES;

impl Session {
    /// `model`: the one the message's turn asks (a command's, or the
    /// session's).
    pub(super) fn check_images(&self, images: &[ImageInfo], model: &str) -> Result<(), EngineError> {
        if images.is_empty() {
            return Ok(());
        }
        let invalid = |m: String| EngineError::new(ErrorKind::InvalidParams, m);
        if images.len() > MAX_IMAGES {
            return Err(invalid(format!("{} images; a message carries at most {MAX_IMAGES}", images.len())));
        }
        let kind = self.provider_kind()?;
        if !crate::catalog::lookup(&self.config, kind, model).vision {
            return Err(invalid(format!(
                "{model} does not read images (as far as Forge knows); switch to a model that does (`forgectl models`), \
                 or, if it does, say `vision = true` in its [[models]] entry"
            )));
        }
        for image in images {
            crate::images::check_for(kind, image).map_err(invalid)?;
        }
        Ok(())
    }
}
