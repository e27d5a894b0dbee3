//! No event larger than a client can take: a connection carries messages
//! of at most `MAX_MESSAGE_BYTES` (8 MiB), so an event is held to half of
//! that when it is journaled, and one journaled before that rule (or
//! grown past it) is cut the same way when it is replayed. What is cut is
//! the longest text in it, with a note saying how much is not shown; the
//! event stays the same kind with the same fields.

use std::borrow::Cow;

use serde_json::Value;

/// The largest event JSON journaled or sent.
pub const MAX_EVENT_BYTES: usize = forge_proto::MAX_MESSAGE_BYTES as usize / 2;

/// `json` (an event) within `max` bytes: as it is if it fits, else with its
/// longest strings cut, each ending with a note of what was left out.
pub fn clamp(json: &str, max: usize) -> Cow<'_, str> {
    if json.len() <= max {
        return Cow::Borrowed(json);
    }
    let Ok(mut value) = serde_json::from_str::<Value>(json) else { return Cow::Borrowed(json) };
    let mut len = json.len();
    // Each round cuts the longest string by what is over (and room for the
    // note); escaping makes the written size differ a little, so measure.
    for _ in 0..16 {
        let longest = longest(&value);
        if longest < 1024 {
            break;
        }
        let over = len - max;
        let keep = longest.saturating_sub(over + 512).min(longest / 2 + longest / 4);
        cut(&mut value, longest, keep);
        let Ok(text) = serde_json::to_string(&value) else { break };
        len = text.len();
        if len <= max {
            return Cow::Owned(text);
        }
    }
    Cow::Owned(serde_json::to_string(&value).unwrap_or_default())
}

/// The length of the longest string in `v`.
fn longest(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(longest).max().unwrap_or(0),
        Value::Object(o) => o.values().map(longest).max().unwrap_or(0),
        _ => 0,
    }
}

/// Cuts the first string of length `len` in `v` to `keep` bytes (on a
/// character boundary) and says so at its end.
fn cut(v: &mut Value, len: usize, keep: usize) -> bool {
    match v {
        Value::String(s) if s.len() == len => {
            let at = s.floor_char_boundary(keep);
            let gone = s.len() - at;
            s.truncate(at);
            s.push_str(&format!(
                "\n[… {gone} more bytes not shown: an event holds at most {} MiB]",
                MAX_EVENT_BYTES / (1024 * 1024)
            ));
            true
        }
        Value::Array(a) => a.iter_mut().any(|x| cut(x, len, keep)),
        Value::Object(o) => o.values_mut().any(|x| cut(x, len, keep)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_event_is_untouched_and_a_huge_one_keeps_its_shape() {
        let small = r#"{"seq":1,"kind":"text_delta","text":"hi"}"#;
        assert!(matches!(clamp(small, 100), Cow::Borrowed(_)));
        let text = "é".repeat(300_000) + "\u{1}";
        let json =
            serde_json::json!({"seq": 2, "kind": "tool_output", "call_id": "c", "stream": "stdout", "text": text})
                .to_string();
        let cut = clamp(&json, 100_000);
        assert!(cut.len() <= 100_000, "{}", cut.len());
        let v: Value = serde_json::from_str(&cut).unwrap_or_default();
        assert_eq!(
            (v["seq"].as_u64(), v["kind"].as_str(), v["stream"].as_str()),
            (Some(2), Some("tool_output"), Some("stdout"))
        );
        let shown = v["text"].as_str().unwrap_or_default();
        assert!(shown.starts_with("éé") && shown.contains("more bytes not shown"), "{}", &shown[shown.len() - 80..]);
    }
}
