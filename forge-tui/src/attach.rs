//! Images attached to the next message: `/image PATH`, or a path to an
//! image pasted (what terminals paste when a file is dropped on them).
//! The daemon checks them again (type, size, the model's limits); here
//! only what saves a round trip.

use std::path::{Path, PathBuf};

use base64::Engine as _;

/// The largest image the daemon takes.
const MAX_BYTES: u64 = 6 * 1024 * 1024;
const EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub name: String,
    /// The image, base64.
    pub data: String,
    pub bytes: u64,
}

/// Reads an image file to attach.
pub fn read(path: &Path) -> Result<Attachment, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a file"));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!("{shown} is {} MiB; images of at most 6 MiB can be sent", meta.len() >> 20));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| shown.to_string());
    Ok(Attachment { name, bytes: bytes.len() as u64, data: base64::engine::general_purpose::STANDARD.encode(bytes) })
}

/// A paste that is only the path of an image file (quoted, escaped or as
/// a `file://` URL, as terminals write a dropped file).
pub fn pasted_path(text: &str) -> Option<PathBuf> {
    let t = text.trim();
    if t.contains('\n') || t.is_empty() {
        return None;
    }
    let t = t.trim_matches(|c| c == '\'' || c == '"');
    let t = t.strip_prefix("file://").unwrap_or(t);
    let path = PathBuf::from(t.replace("\\ ", " "));
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    (EXTENSIONS.contains(&ext.as_str()) && path.is_file()).then_some(path)
}

/// What the input's title says of them: `+2 images`.
pub fn summary(attached: &[Attachment]) -> Option<String> {
    match attached.len() {
        0 => None,
        1 => Some("+1 image".into()),
        n => Some(format!("+{n} images")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_file_is_an_attachment_and_other_text_is_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let shot = dir.path().join("my shot.png");
        std::fs::write(&shot, b"\x89PNG").unwrap_or_else(|e| panic!("{e}"));
        let escaped = shot.display().to_string().replace(' ', "\\ ");
        assert_eq!(pasted_path(&escaped), Some(shot.clone()));
        assert_eq!(pasted_path(&format!("'{}'\n", shot.display())), Some(shot.clone()));
        assert_eq!(pasted_path(&format!("file://{}", shot.display())), Some(shot.clone()));
        assert_eq!(pasted_path("look at this.png please"), None);
        assert_eq!(pasted_path(&dir.path().join("gone.png").display().to_string()), None);
        let a = read(&shot).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.name.as_str(), a.bytes), ("my shot.png", 4));
        assert_eq!(summary(&[a.clone(), a]).as_deref(), Some("+2 images"));
    }
}
