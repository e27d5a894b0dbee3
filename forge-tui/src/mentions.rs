//! `@server:uri` in a message: an MCP resource to attach. Only what a
//! server lists counts (an address or a handle typed in passing is text),
//! and Tab completes one from the list.

use forge_proto::McpResourceInfo;

fn key(r: &McpResourceInfo) -> String {
    format!("{}:{}", r.server, r.uri)
}

/// The resources `text` mentions, in order, each once (`server:uri`).
pub fn attached(text: &str, listed: &[McpResourceInfo]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace().filter_map(|w| w.strip_prefix('@')) {
        // A mention may end a sentence: `see @docs:guide.`
        let candidates = [word, word.trim_end_matches(['.', ',', ';', ':', '!', '?', ')'])];
        if let Some(found) = candidates.iter().find(|c| listed.iter().any(|r| key(r) == **c))
            && !out.iter().any(|o| o == found)
        {
            out.push(found.to_string());
        }
    }
    out
}

/// What Tab adds after `before` (the draft up to the cursor) when its last
/// word is the start of a listed resource's `@server:uri`: the rest of the
/// only match (and a space), or what all matches share.
pub fn complete(before: &str, listed: &[McpResourceInfo]) -> Option<String> {
    let word = before.rsplit(char::is_whitespace).next()?.strip_prefix('@')?;
    let matches: Vec<String> = listed.iter().map(key).filter(|k| k.starts_with(word)).collect();
    match matches.as_slice() {
        [] => None,
        [one] => Some(format!("{} ", &one[word.len()..])),
        [first, rest @ ..] => {
            let mut shared = first.len();
            for m in rest {
                shared = shared.min(first.bytes().zip(m.bytes()).take_while(|(a, b)| a == b).count());
            }
            while !first.is_char_boundary(shared) {
                shared -= 1;
            }
            (shared > word.len()).then(|| first[word.len()..shared].to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> Vec<McpResourceInfo> {
        ["test://notes.txt", "test://logo.png"]
            .iter()
            .map(|uri| McpResourceInfo {
                server: "t".into(),
                uri: uri.to_string(),
                name: String::new(),
                description: String::new(),
                mime_type: None,
            })
            .collect()
    }

    #[test]
    fn only_listed_resources_are_attached() {
        let text = "compare @t:test://notes.txt, and @t:test://logo.png with @me:home and mail@x:y @t:test://notes.txt";
        assert_eq!(attached(text, &listed()), ["t:test://notes.txt", "t:test://logo.png"]);
        assert!(attached("write to ann@example.com", &listed()).is_empty());
    }

    #[test]
    fn tab_completes_a_mention() {
        assert_eq!(complete("see @t:test://n", &listed()).as_deref(), Some("otes.txt "));
        assert_eq!(complete("see @t", &listed()).as_deref(), Some(":test://"));
        assert_eq!(complete("see @x", &listed()), None);
        assert_eq!(complete("see t:", &listed()), None);
    }
}
