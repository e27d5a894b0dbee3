//! A server's prompts and resources: what a user brings into a message
//! (`/server:prompt args`, a resource attached with `@server:uri`), as
//! opposed to tools, which the model calls.

use serde_json::{Map, Value};

/// The most text of one resource put into a message; the rest is cut and
/// the cut said (a whole log or database dump would drown the context).
pub const MAX_RESOURCE_BYTES: usize = 100 * 1024;
/// The most resources kept from one server's listing (for completion).
const MAX_LISTED: usize = 1000;

/// One prompt a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEntry {
    pub name: String,
    pub description: String,
    pub arguments: Vec<PromptArg>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptArg {
    pub name: String,
    pub description: String,
    pub required: bool,
}

impl PromptEntry {
    pub(crate) fn from_value(v: &Value) -> Option<PromptEntry> {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let name = s(v, "name");
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return None;
        }
        let arguments = v
            .get("arguments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| PromptArg {
                name: s(a, "name"),
                description: s(a, "description"),
                required: a.get("required").and_then(Value::as_bool).unwrap_or(false),
            })
            .filter(|a| !a.name.is_empty())
            .collect();
        let description = Some(s(v, "description")).filter(|d| !d.is_empty()).unwrap_or_else(|| s(v, "title"));
        Some(PromptEntry { name, description, arguments })
    }

    /// `<pr> [focus]`: the arguments as a user types them.
    pub fn argument_hint(&self) -> Option<String> {
        let words: Vec<String> = self
            .arguments
            .iter()
            .map(|a| if a.required { format!("<{}>", a.name) } else { format!("[{}]", a.name) })
            .collect();
        (!words.is_empty()).then(|| words.join(" "))
    }

    /// The arguments of `/server:name REST`: a prompt of one argument takes
    /// the whole rest; otherwise words (quotes keep spaces) fill the
    /// arguments in order and the last takes what is left.
    pub fn arguments_from(&self, server: &str, rest: &str) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        let rest = rest.trim();
        match self.arguments.len() {
            0 => {}
            1 => {
                if !rest.is_empty() {
                    out.insert(self.arguments[0].name.clone(), Value::String(rest.to_string()));
                }
            }
            n => {
                let mut words = split_words(rest);
                if words.len() > n {
                    let tail = words.split_off(n - 1).join(" ");
                    words.push(tail);
                }
                for (arg, word) in self.arguments.iter().zip(words) {
                    out.insert(arg.name.clone(), Value::String(word));
                }
            }
        }
        let missing: Vec<&str> = self
            .arguments
            .iter()
            .filter(|a| a.required && !out.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "/{server}:{} needs {} (usage: /{server}:{} {})",
                self.name,
                missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" and "),
                self.name,
                self.argument_hint().unwrap_or_default()
            ));
        }
        Ok(out)
    }
}

/// Words split on white space; "double" or 'single' quotes keep spaces.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// One resource a server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceEntry {
    pub uri: String,
    pub name: String,
    pub description: String,
    pub mime_type: Option<String>,
}

impl ResourceEntry {
    pub(crate) fn from_value(v: &Value) -> Option<ResourceEntry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let uri = s("uri");
        (!uri.is_empty()).then(|| ResourceEntry {
            uri,
            name: s("name"),
            description: s("description"),
            mime_type: Some(s("mimeType")).filter(|m| !m.is_empty()),
        })
    }
}

pub(crate) fn resources_from(list: Vec<Value>) -> Vec<ResourceEntry> {
    list.iter().filter_map(ResourceEntry::from_value).take(MAX_LISTED).collect()
}

/// A `prompts/get` result as the message text: its messages' content,
/// one after the other.
pub(crate) fn prompt_text(result: &Value) -> String {
    let content: Vec<Value> = result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content").cloned())
        .collect();
    let (text, _) = crate::content::to_text(&serde_json::json!({ "content": content }));
    text
}

/// A `resources/read` result as the text added to a message: each part in
/// a `<mcp-resource>` block the model can tell from the user's words.
pub(crate) fn resource_text(server: &str, uri: &str, result: &Value) -> String {
    let mut out = String::new();
    let parts = result.get("contents").and_then(Value::as_array).cloned().unwrap_or_default();
    if parts.is_empty() {
        return format!("<mcp-resource server=\"{server}\" uri=\"{uri}\">\n(empty)\n</mcp-resource>");
    }
    for part in parts {
        let s = |k: &str| part.get(k).and_then(Value::as_str).unwrap_or("");
        let part_uri = Some(s("uri")).filter(|u| !u.is_empty()).unwrap_or(uri);
        let body = match part.get("text").and_then(Value::as_str) {
            Some(text) => cut(text),
            None => format!(
                "[{} bytes of {}; not shown to the model]",
                crate::content::base64_len(s("blob")),
                Some(s("mimeType")).filter(|m| !m.is_empty()).unwrap_or("binary data")
            ),
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("<mcp-resource server=\"{server}\" uri=\"{part_uri}\">\n{body}\n</mcp-resource>"));
    }
    out
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_RESOURCE_BYTES {
        return text.to_string();
    }
    let mut end = MAX_RESOURCE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes not shown]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review() -> PromptEntry {
        PromptEntry::from_value(&json!({"name": "review", "description": "Review a change",
            "arguments": [{"name": "pr", "required": true}, {"name": "focus"}]}))
        .unwrap()
    }

    #[test]
    fn words_fill_the_arguments_in_order_and_the_last_takes_the_rest() {
        let p = review();
        assert_eq!(p.argument_hint().as_deref(), Some("<pr> [focus]"));
        let args = p.arguments_from("gh", "12 error handling and tests").unwrap();
        assert_eq!(Value::Object(args), json!({"pr": "12", "focus": "error handling and tests"}));
        let args = p.arguments_from("gh", "\"the fix\" 'a b'").unwrap();
        assert_eq!(Value::Object(args), json!({"pr": "the fix", "focus": "a b"}));
        let err = p.arguments_from("gh", "  ").unwrap_err();
        assert_eq!(err, "/gh:review needs `pr` (usage: /gh:review <pr> [focus])");
    }

    #[test]
    fn a_prompt_of_one_argument_takes_the_whole_text() {
        let p = PromptEntry::from_value(&json!({"name": "ask", "arguments": [{"name": "q"}]})).unwrap();
        let args = p.arguments_from("s", " why is \"it\" slow ").unwrap();
        assert_eq!(Value::Object(args), json!({"q": "why is \"it\" slow"}));
        assert!(p.arguments_from("s", "").unwrap().is_empty());
    }

    #[test]
    fn a_resource_is_fenced_and_a_long_one_cut() {
        let text = resource_text(
            "docs",
            "docs://a",
            &json!({"contents": [
                {"uri": "docs://a", "text": "hello"},
                {"uri": "docs://b", "blob": "AAAA", "mimeType": "image/png"}
            ]}),
        );
        assert_eq!(
            text,
            "<mcp-resource server=\"docs\" uri=\"docs://a\">\nhello\n</mcp-resource>\n\
             <mcp-resource server=\"docs\" uri=\"docs://b\">\n[3 bytes of image/png; not shown to the model]\n</mcp-resource>"
        );
        let long = "é".repeat(MAX_RESOURCE_BYTES);
        let text = resource_text("d", "u", &json!({"contents": [{"uri": "u", "text": long}]}));
        assert!(
            text.contains(&format!("[… {} more bytes not shown]", MAX_RESOURCE_BYTES)),
            "{}",
            &text[text.len() - 80..]
        );
    }

    #[test]
    fn a_prompts_messages_become_one_text() {
        let text = prompt_text(&json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Review PR 12."}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "gh://12.diff", "text": "+x"}}}
        ]}));
        assert_eq!(text, "Review PR 12.\n[resource: gh://12.diff]\n+x");
    }
}
