//! Images in messages, and a session's files shown to clients: what a client sends (`ImageInput`, or first
//! `images.put`) and what history and events show (`ImageInfo`: never the
//! data itself, which the daemon keeps once, named by its SHA-256).

use serde::{Deserialize, Serialize};

/// The largest image the daemon takes (its base64 must fit in one
/// JSON-RPC message); clients check it too, to save a round trip.
pub const MAX_IMAGE_BYTES: usize = 6 * 1024 * 1024;
/// The most images one message carries.
pub const MAX_IMAGES: usize = 20;

/// An image as the daemon keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageInfo {
    /// The SHA-256 of its bytes (hex): `session.send` may name it.
    pub hash: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: String,
    pub width: u32,
    pub height: u32,
    pub bytes: u64,
    /// The file name it came from, if the client gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `images.get`: a kept image's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageData {
    pub info: ImageInfo,
    /// Its bytes, base64.
    pub data: String,
}

/// `session.file`: a text file of a session, as its tools would read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionFile {
    /// As asked.
    pub path: String,
    /// Its text (the first [`MAX_FILE_SHOWN`] bytes when `truncated`).
    pub text: String,
    pub bytes: u64,
    #[serde(default)]
    pub truncated: bool,
}

/// The most of a file `session.file` gives.
pub const MAX_FILE_SHOWN: usize = 1024 * 1024;

/// An image for `session.send`: inline (`data`, base64) or one
/// `images.put` stored before (`hash`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Checked against the bytes (which decide) when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ImageInfo {
    /// How clients show it in place of the picture:
    /// `[image shot.png, 1280×720 PNG, 214 KiB]`.
    pub fn placeholder(&self) -> String {
        let kind = self.mime_type.strip_prefix("image/").unwrap_or(&self.mime_type).to_ascii_uppercase();
        let size = if self.bytes >= 1024 * 1024 {
            format!("{:.1} MiB", self.bytes as f64 / (1024.0 * 1024.0))
        } else {
            format!("{} KiB", self.bytes.div_ceil(1024))
        };
        let name = self.name.as_deref().map(|n| format!("{n}, ")).unwrap_or_default();
        format!("[image {name}{}×{} {kind}, {size}]", self.width, self.height)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_placeholder_says_name_size_and_type() {
        let i = super::ImageInfo {
            hash: "h".into(),
            mime_type: "image/png".into(),
            width: 1280,
            height: 720,
            bytes: 219_000,
            name: Some("shot.png".into()),
        };
        assert_eq!(i.placeholder(), "[image shot.png, 1280×720 PNG, 214 KiB]");
    }
}
