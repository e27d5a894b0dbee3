//! Anthropic Messages API, streamed (`POST {base}/v1/messages`, SSE with
//! `event:` names equal to the data's `type`).

use serde_json::{Value, json};

use super::sse::{ParseError, Step, WireParser};
use super::{ChatRequest, ChatRole, ProviderEvent, ProviderSettings, args_object, pair_tool_results};
use forge_proto::Usage;

const API_VERSION: &str = "2023-06-01";

fn body(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = pair_tool_results(&req.messages)
        .iter()
        .map(|m| match m.role {
            ChatRole::User => json!({ "role": "user", "content": m.text }),
            ChatRole::Assistant if m.tool_calls.is_empty() => json!({ "role": "assistant", "content": m.text }),
            ChatRole::Assistant => {
                let mut blocks = Vec::new();
                if !m.text.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.text}));
                }
                for c in &m.tool_calls {
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": args_object(&c.arguments)}),
                    );
                }
                json!({ "role": "assistant", "content": blocks })
            }
            // Results go back as a user turn; the API merges consecutive ones.
            ChatRole::Tool => {
                let (id, is_error) = m.tool_result.clone().unwrap_or_default();
                json!({ "role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": m.text, "is_error": is_error}
                ]})
            }
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &req.system {
        body["system"] = json!(system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// The request for one streamed answer.
pub(super) fn request(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    req: &ChatRequest,
) -> reqwest::RequestBuilder {
    let url = format!("{}/v1/messages", settings.base_url);
    let request =
        http.post(&url).header("anthropic-version", API_VERSION).header("accept", "text/event-stream").json(&body(req));
    match &settings.api_key {
        Some(key) => request.header("x-api-key", key),
        None => request,
    }
}

/// The Anthropic Messages event stream, event by event.
#[derive(Default)]
pub(super) struct AnthropicParser {
    usage: Usage,
    /// Content block index -> tool call number, for `tool_use` blocks.
    tool_blocks: std::collections::HashMap<u64, usize>,
}

impl WireParser for AnthropicParser {
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError> {
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        let data: Value = serde_json::from_str(data)
            .map_err(|e| ParseError::Broken(format!("malformed event data ({e}) in `{event}` event")))?;
        let ty = data.get("type").and_then(Value::as_str).unwrap_or(event);
        match ty {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage") {
                    merge_usage(&mut self.usage, u);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let index = self.tool_blocks.len();
                        let block_index = data.get("index").and_then(Value::as_u64).unwrap_or(index as u64);
                        self.tool_blocks.insert(block_index, index);
                        let id = block.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                        let name = block.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                        out.push(ProviderEvent::ToolCallStart { index, id, name });
                    }
                    // A text block may start with text already in it.
                    _ => {
                        if let Some(t) = block.get("text").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            out.push(ProviderEvent::TextDelta(t.to_string()));
                        }
                    }
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let text =
                    |key: &str| delta.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_string);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => out.extend(text("text").map(ProviderEvent::TextDelta)),
                    Some("thinking_delta") => out.extend(text("thinking").map(ProviderEvent::ThinkingDelta)),
                    Some("input_json_delta") => {
                        let block = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                        if let (Some(&index), Some(fragment)) = (self.tool_blocks.get(&block), text("partial_json")) {
                            out.push(ProviderEvent::ToolCallArgs { index, fragment });
                        }
                    }
                    // Signatures and future delta types.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push(ProviderEvent::StopReason(r.to_string()));
                }
                if let Some(u) = data.get("usage") {
                    merge_usage(&mut self.usage, u);
                }
            }
            "message_stop" => {
                out.push(ProviderEvent::Usage(self.usage.clone()));
                return Ok(Step::Finished);
            }
            "error" => {
                let et = data.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
                let msg = data.pointer("/error/message").and_then(Value::as_str).unwrap_or("unknown error");
                return Err(ParseError::Reported { error_type: et.into(), message: msg.into() });
            }
            // ping and event types added after this client was written.
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn on_eof(&mut self, _out: &mut Vec<ProviderEvent>) -> Result<(), ParseError> {
        Err(ParseError::Broken("the connection closed before `message_stop`".into()))
    }
}

/// Usage fields overwrite: `message_delta` carries cumulative numbers.
fn merge_usage(usage: &mut Usage, u: &Value) {
    let get = |k: &str| u.get(k).and_then(Value::as_u64);
    if let Some(v) = get("input_tokens") {
        usage.input_tokens = v;
    }
    if let Some(v) = get("output_tokens") {
        usage.output_tokens = v;
    }
    if let Some(v) = get("cache_read_input_tokens") {
        usage.cache_read_tokens = v;
    }
    if let Some(v) = get("cache_creation_input_tokens") {
        usage.cache_write_tokens = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;
    use crate::provider::sse::testing::{run, tool_args};

    /// A text block then two tool calls whose JSON arguments arrive in
    /// fragments (the first one empty), as the API streams them.
    const TOOL_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":14,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I\\u2019ll read \\u65e5\\u672c\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_A\",\"name\":\"read_file\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"th\\\": \\\"a.rs\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_B\",\"name\":\"glob\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pattern\\\":\\\"*.rs\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":58}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"      }\n\n";

    #[test]
    fn tool_calls_text_and_usage_parse_identically_at_every_split() {
        let (reference, ok) = run(AnthropicParser::default(), TOOL_STREAM, usize::MAX);
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(reference[0], ProviderEvent::TextDelta("I\u{2019}ll read \u{65e5}\u{672c}".into()));
        assert_eq!(
            reference[1],
            ProviderEvent::ToolCallStart { index: 0, id: "toolu_A".into(), name: "read_file".into() }
        );
        let args = tool_args(&reference, 0);
        assert_eq!(serde_json::from_str::<Value>(&args).ok(), Some(json!({"path": "a.rs"})));
        assert!(reference.contains(&ProviderEvent::ToolCallStart {
            index: 1,
            id: "toolu_B".into(),
            name: "glob".into()
        }));
        assert!(reference.contains(&ProviderEvent::StopReason("tool_use".into())));
        assert!(
            matches!(reference.last(), Some(ProviderEvent::Usage(u)) if u.input_tokens == 14 && u.output_tokens == 58)
        );
        for split in [1, 2, 3, 5, 7, 64] {
            let (events, ok) = run(AnthropicParser::default(), TOOL_STREAM, split);
            assert!(ok.is_ok());
            assert_eq!(events, reference, "split {split}");
        }
        let crlf = TOOL_STREAM.replace('\n', "\r\n");
        assert_eq!(run(AnthropicParser::default(), &crlf, 3).0, reference, "CRLF framing");
    }

    #[test]
    fn a_stream_cut_before_message_stop_is_an_error() {
        let cut = &TOOL_STREAM[..TOOL_STREAM.find("event: message_delta").unwrap_or(0)];
        let (_, result) = run(AnthropicParser::default(), cut, 5);
        assert!(result.is_err());
    }

    #[test]
    fn request_body_has_the_required_fields() {
        let req = ChatRequest {
            model: "claude-x".into(),
            system: None,
            messages: vec![ChatMessage::user("hi")],
            max_output_tokens: 100,
            tools: Vec::new(),
        };
        let b = body(&req);
        assert_eq!(b["model"], "claude-x");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["stream"], true);
        assert_eq!(b["messages"][0]["role"], "user");
        assert_eq!(b["messages"][0]["content"], "hi");
        assert!(b.get("tools").is_none());
    }

    #[test]
    fn tool_calls_and_results_become_blocks_and_unanswered_calls_get_a_result() {
        let call = |id: &str| forge_proto::ToolCallRecord {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let req = ChatRequest {
            model: "m".into(),
            system: None,
            messages: vec![
                ChatMessage::user("go"),
                ChatMessage::assistant("reading", vec![call("t1"), call("t2")]),
                ChatMessage::tool_result("t1", "contents", false),
                ChatMessage::user("next"),
            ],
            max_output_tokens: 10,
            tools: crate::tools::ToolRegistry::builtin().specs(),
        };
        let b = body(&req);
        let m = &b["messages"];
        assert_eq!(m[1]["content"][1]["type"], "tool_use");
        assert_eq!(m[1]["content"][1]["input"]["path"], "a");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(m[3]["content"][0]["tool_use_id"], "t2", "the unanswered call gets a result");
        assert_eq!(m[3]["content"][0]["is_error"], true);
        assert_eq!(m[4]["content"], "next");
        assert!(
            b["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "read_file" && t["input_schema"]["type"] == "object"))
        );
    }
}
