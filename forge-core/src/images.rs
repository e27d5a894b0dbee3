//! Images in messages: decoded and checked when a client sends one (its
//! bytes decide the type; dimensions read from the header), kept once in
//! the store's blobs by SHA-256, held to each provider's limits, and
//! counted in the context budget as the provider counts them.

use base64::Engine as _;
use forge_proto::ImageInfo;
use sha2::{Digest, Sha256};

use crate::provider_kind::ProviderKind;

pub use forge_proto::images::{MAX_IMAGE_BYTES, MAX_IMAGES};

/// An image read from a client, with its bytes.
pub struct Decoded {
    pub info: ImageInfo,
    pub data: Vec<u8>,
}

/// `data` (base64) as an image: a type every provider names, dimensions
/// from its header. `mime_type`, when given, must agree with the bytes.
pub fn decode(data: &str, mime_type: Option<&str>, name: Option<String>) -> Result<Decoded, String> {
    let what = name.as_deref().map(|n| format!("image {n}")).unwrap_or_else(|| "the image".into());
    if data.len() > MAX_IMAGE_BYTES / 3 * 4 + 4 {
        return Err(format!("{what} is over {} MiB; scale it down", MAX_IMAGE_BYTES / (1024 * 1024)));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("{what} is not base64 ({e})"))?;
    describe(bytes, mime_type, name)
}

/// `bytes` as an image (see [`decode`]).
pub fn describe(bytes: Vec<u8>, mime_type: Option<&str>, name: Option<String>) -> Result<Decoded, String> {
    let what = name.as_deref().map(|n| format!("image {n}")).unwrap_or_else(|| "the image".into());
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!("{what} is over {} MiB; scale it down", MAX_IMAGE_BYTES / (1024 * 1024)));
    }
    let kind = imagesize::image_type(&bytes).map_err(|_| format!("{what} is not an image Forge can read"))?;
    let mime = match kind {
        imagesize::ImageType::Png => "image/png",
        imagesize::ImageType::Jpeg => "image/jpeg",
        imagesize::ImageType::Gif => "image/gif",
        imagesize::ImageType::Webp => "image/webp",
        other => return Err(format!("{what} is {other:?}; send PNG, JPEG, GIF or WebP")),
    };
    if let Some(given) = mime_type.filter(|m| !m.is_empty())
        && given != mime
    {
        return Err(format!("{what} says it is {given} but its bytes are {mime}"));
    }
    let size = imagesize::blob_size(&bytes).map_err(|e| format!("{what}: cannot read its size ({e})"))?;
    let (width, height) =
        (u32::try_from(size.width).unwrap_or(u32::MAX), u32::try_from(size.height).unwrap_or(u32::MAX));
    if width == 0 || height == 0 {
        return Err(format!("{what} has no pixels"));
    }
    let hash = hex(&Sha256::digest(&bytes));
    let info = ImageInfo { hash, mime_type: mime.into(), width, height, bytes: bytes.len() as u64, name };
    Ok(Decoded { info, data: bytes })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `provider` takes `image`, and why not.
pub fn check_for(provider: ProviderKind, image: &ImageInfo) -> Result<(), String> {
    let what = image.name.clone().unwrap_or_else(|| format!("{}×{} {}", image.width, image.height, image.mime_type));
    match provider {
        // Anthropic: 5 MB and 8000 px a side.
        ProviderKind::Claude if image.bytes > 5 * 1024 * 1024 => {
            Err(format!("{what} is over 5 MiB, the most Claude takes per image; scale it down"))
        }
        ProviderKind::Claude if image.width > 8000 || image.height > 8000 => {
            Err(format!("{what} is {}×{}; Claude takes at most 8000 px a side", image.width, image.height))
        }
        ProviderKind::Gemini if image.mime_type == "image/gif" => {
            Err(format!("{what} is a GIF, which Gemini does not read; send PNG, JPEG or WebP"))
        }
        _ => Ok(()),
    }
}

/// What an image costs in the context, as `provider` counts it.
pub fn tokens(provider: ProviderKind, image: &ImageInfo) -> u64 {
    let (w, h) = (f64::from(image.width), f64::from(image.height));
    match provider {
        // Scaled to fit 1568 px on the long edge, then w×h/750.
        ProviderKind::Claude => {
            let scale = (1568.0 / w.max(h)).min(1.0);
            ((w * scale) * (h * scale) / 750.0).ceil() as u64
        }
        // Fit in 2048², shortest side to 768, then 170 per 512 px tile.
        ProviderKind::OpenAi => {
            let fit = (2048.0 / w.max(h)).min(1.0);
            let (w, h) = (w * fit, h * fit);
            let short = (768.0 / w.min(h)).min(1.0);
            let (w, h) = (w * short, h * short);
            85 + 170 * ((w / 512.0).ceil() * (h / 512.0).ceil()) as u64
        }
        ProviderKind::Gemini => 1120,
    }
}

/// An image's share of a request, as the bytes of text the estimator
/// would count for it: the most any provider counts (about 4 bytes a
/// token), so the budget errs on the side of room.
pub fn budget_bytes(image: &ImageInfo) -> usize {
    let most = [ProviderKind::Claude, ProviderKind::OpenAi, ProviderKind::Gemini]
        .into_iter()
        .map(|p| tokens(p, image))
        .max()
        .unwrap_or(0);
    most as usize * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×2 PNG's header (enough for the type and size).
    fn png() -> String {
        let mut b = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, b'I', b'H', b'D', b'R'];
        b.extend([0, 0, 0, 3, 0, 0, 0, 2, 8, 6, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn an_image_is_known_by_its_bytes() {
        let d = decode(&png(), None, Some("shot.png".into())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((d.info.width, d.info.height, d.info.mime_type.as_str()), (3, 2, "image/png"));
        assert_eq!(d.info.hash.len(), 64);
        let wrong = decode(&png(), Some("image/jpeg"), None).err().unwrap_or_default();
        assert!(wrong.contains("its bytes are image/png"), "{wrong}");
        let text = base64::engine::general_purpose::STANDARD.encode("hello, not an image");
        assert!(decode(&text, None, None).is_err());
        assert!(decode("%%%", None, None).err().unwrap_or_default().contains("not base64"));
    }

    #[test]
    fn each_provider_has_its_limits_and_counts() {
        let big = ImageInfo {
            hash: String::new(),
            mime_type: "image/gif".into(),
            width: 9000,
            height: 100,
            bytes: 1000,
            name: None,
        };
        assert!(check_for(ProviderKind::Claude, &big).is_err());
        assert!(check_for(ProviderKind::Gemini, &big).is_err());
        assert!(check_for(ProviderKind::OpenAi, &big).is_ok());
        let shot = ImageInfo { width: 1000, height: 1000, mime_type: "image/png".into(), ..big };
        assert_eq!(tokens(ProviderKind::Claude, &shot), 1334);
        assert_eq!(tokens(ProviderKind::OpenAi, &shot), 85 + 170 * 4);
        assert_eq!(tokens(ProviderKind::Gemini, &shot), 1120);
    }
}
