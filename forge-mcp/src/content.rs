//! A `tools/call` result as the text the model gets.
//!
//! Tool results are text in Forge's history, so what is not text is
//! described: an image or audio clip by its type and size, a resource by
//! its URI (with its text when it has some). Structured content is added
//! as JSON when no text block carries it already.

use serde_json::Value;

/// The result's text, and whether the server said the call failed.
pub fn to_text(result: &Value) -> (String, bool) {
    let (text, is_error, _) = with_images(result, false);
    (text, is_error)
}

/// The result's text, whether it failed, and (with `keep_images`) its
/// images, which the text then names as shown.
pub fn with_images(result: &Value, keep_images: bool) -> (String, bool, Vec<forge_tools::ToolImage>) {
    let mut images = Vec::new();
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut parts: Vec<String> = Vec::new();
    let mut has_text = false;
    for item in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let str_of = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => {
                has_text = true;
                parts.push(str_of("text").to_string());
            }
            "image" if keep_images && !str_of("data").is_empty() => {
                images
                    .push(forge_tools::ToolImage { mime_type: str_of("mimeType").into(), data: str_of("data").into() });
                parts.push(format!(
                    "[image {}: {}, {} bytes, shown to the model]",
                    images.len(),
                    non_empty(str_of("mimeType"), "unknown type"),
                    base64_len(str_of("data"))
                ));
            }
            "image" | "audio" => parts.push(format!(
                "[{kind}: {}, {} bytes; not shown to the model]",
                non_empty(str_of("mimeType"), "unknown type"),
                base64_len(str_of("data"))
            )),
            "resource_link" => parts.push(format!(
                "[resource link: {}{}{}]",
                str_of("uri"),
                optional(" ", str_of("name")),
                optional(", ", str_of("mimeType"))
            )),
            "resource" => {
                let r = item.get("resource").cloned().unwrap_or(Value::Null);
                let s = |key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_string();
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => {
                        has_text = true;
                        parts.push(format!("[resource: {}]\n{text}", s("uri")));
                    }
                    None => parts.push(format!(
                        "[resource: {}{}, {} bytes; not shown to the model]",
                        s("uri"),
                        optional(", ", &s("mimeType")),
                        base64_len(&s("blob"))
                    )),
                }
            }
            other => parts.push(format!("[{} content; not shown to the model]", non_empty(other, "unknown"))),
        }
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
        && !has_text
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if text.is_empty() && !is_error {
        return ("(the tool returned nothing)".into(), false, images);
    }
    (text, is_error, images)
}

fn non_empty<'a>(s: &'a str, or: &'a str) -> &'a str {
    if s.is_empty() { or } else { s }
}

fn optional(prefix: &str, s: &str) -> String {
    if s.is_empty() { String::new() } else { format!("{prefix}{s}") }
}

/// The decoded size of base64 `data`.
pub(crate) fn base64_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_kind_becomes_text() {
        let (text, err) = to_text(&json!({"content": [
            {"type": "text", "text": "72°F"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs", "mimeType": "text/x-rust"},
            {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
            {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAAA"}},
        ]}));
        assert!(!err);
        assert_eq!(
            text,
            "72°F\n[image: image/png, 5 bytes; not shown to the model]\n[resource link: file:///a.rs a.rs, text/x-rust]\n[resource: file:///b.txt]\nbee\n[resource: file:///c.bin, 3 bytes; not shown to the model]"
        );
    }

    #[test]
    fn structured_content_is_shown_when_no_text_carries_it() {
        let (text, _) = to_text(&json!({"content": [], "structuredContent": {"t": 1}}));
        assert_eq!(text, r#"{"t":1}"#);
        let (text, _) =
            to_text(&json!({"content": [{"type": "text", "text": "{\"t\":1}"}], "structuredContent": {"t": 1}}));
        assert_eq!(text, r#"{"t":1}"#, "not twice");
        let (text, err) = to_text(&json!({"content": [{"type": "text", "text": "no such city"}], "isError": true}));
        assert_eq!((text.as_str(), err), ("no such city", true));
        assert_eq!(to_text(&json!({"content": []})).0, "(the tool returned nothing)");
    }
}
