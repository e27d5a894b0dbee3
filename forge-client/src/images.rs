//! Images a client attaches to a message, the same in every client: read
//! and checked for what a client can tell (a file, not too large), then
//! kept in the daemon one `images.put` each (several would not fit in one
//! message together) and named for the send. The daemon checks them again
//! (type, size, the model's limits).

use std::path::Path;

use base64::Engine as _;
use forge_proto::ImageInput;
use forge_proto::images::MAX_IMAGE_BYTES;
use forge_proto::methods::ForgeClient;
use forge_proto::params::ImagePutParams;

/// An image to attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub name: Option<String>,
    /// The image, base64.
    pub data: String,
    pub bytes: u64,
    /// As the client was told it (ACP); the bytes decide otherwise.
    pub mime_type: Option<String>,
}

impl Attachment {
    /// Bytes read elsewhere (a clipboard), checked for size.
    pub fn from_bytes(name: Option<String>, bytes: Vec<u8>, what: &str) -> Result<Attachment, String> {
        too_large(bytes.len() as u64).map_or(Ok(()), |why| Err(format!("{what} is {why}")))?;
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        Ok(Attachment { name, bytes: bytes.len() as u64, data, mime_type: None })
    }
}

/// Why an image of `bytes` cannot be sent, if it cannot.
pub fn too_large(bytes: u64) -> Option<String> {
    (bytes > MAX_IMAGE_BYTES as u64).then(|| {
        format!("{} MiB; images of at most {} MiB can be sent, scale it down", bytes >> 20, MAX_IMAGE_BYTES >> 20)
    })
}

/// Reads an image file to attach; the error names the file.
pub fn read(path: &Path) -> Result<Attachment, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a file"));
    }
    if let Some(why) = too_large(meta.len()) {
        return Err(format!("{shown}: {why}"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    Attachment::from_bytes(name, bytes, &shown.to_string())
}

/// Keeps each image in the daemon and names them for `session.send`.
pub async fn put_all<C: ForgeClient + Sync>(
    client: &C,
    attached: Vec<Attachment>,
) -> Result<Vec<ImageInput>, jsonrpsee::core::client::Error> {
    let mut out = Vec::with_capacity(attached.len());
    for a in attached {
        let kept = client.images_put(ImagePutParams { data: a.data, mime_type: a.mime_type, name: a.name }).await?;
        out.push(ImageInput { hash: Some(kept.hash), name: kept.name, ..Default::default() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_image_over_the_limit_is_refused_with_the_limit() {
        assert_eq!(super::too_large(6 * 1024 * 1024), None);
        let why = super::too_large(7 * 1024 * 1024).unwrap_or_default();
        assert_eq!(why, "7 MiB; images of at most 6 MiB can be sent, scale it down");
        let dir = std::env::temp_dir();
        assert!(super::read(&dir).is_err_and(|e| e.ends_with(": not a file")));
    }
}
