//! Anthropic Messages API, streamed (`POST {base}/v1/messages`, SSE with
//! `event:` names equal to the data's `type`).

use serde_json::{Value, json};

use super::sse::{ParseError, Step, WireParser};
use super::{
    ChatMessage, ChatRequest, ChatRole, ProviderEvent, ProviderSettings, Reasoning, WireOptions, args_object,
    pair_tool_results,
};
use forge_proto::Usage;

const API_VERSION: &str = "2023-06-01";

/// At most this many `cache_control` breakpoints per request (the API's
/// limit).
const MAX_BREAKPOINTS: usize = 4;

fn cache_mark() -> Value {
    json!({"type": "ephemeral"})
}

/// An assistant message's content blocks as the API wants them back:
/// thinking (with signatures, in order) first, then the text, then the
/// tool calls.
fn assistant_blocks(m: &ChatMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    for r in &m.reasoning {
        match r {
            Reasoning::Thinking { thinking, signature } => {
                blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}))
            }
            Reasoning::RedactedThinking { data } => blocks.push(json!({"type": "redacted_thinking", "data": data})),
            // Another provider's: it cannot read them.
            _ => {}
        }
    }
    if !m.text.is_empty() {
        blocks.push(json!({"type": "text", "text": m.text}));
    }
    for c in &m.tool_calls {
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": args_object(&c.arguments)}));
    }
    blocks
}

fn body(req: &ChatRequest, opts: &WireOptions) -> Value {
    let paired = pair_tool_results(&req.messages);
    let mut messages: Vec<Value> = paired
        .iter()
        .map(|m| match m.role {
            ChatRole::User => json!({ "role": "user", "content": [{"type": "text", "text": m.text}] }),
            ChatRole::Assistant => json!({ "role": "assistant", "content": assistant_blocks(m) }),
            // Results go back as a user turn; the API merges consecutive ones.
            ChatRole::Tool => {
                let (id, is_error) = m.tool_result.clone().unwrap_or_default();
                json!({ "role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": m.text, "is_error": is_error}
                ]})
            }
        })
        .collect();
    // The API refuses thinking when the answer being continued (the last
    // assistant message, with its tool calls) does not start with a
    // thinking block: e.g. it came from another provider.
    let continues_unsigned_calls = paired.iter().rev().find(|m| m.role == ChatRole::Assistant).is_some_and(|m| {
        !m.tool_calls.is_empty()
            && !m.reasoning.iter().any(|r| matches!(r, Reasoning::Thinking { .. } | Reasoning::RedactedThinking { .. }))
    }) && paired.last().is_some_and(|m| m.role == ChatRole::Tool);
    // Ending on an answer (`continue`) makes it a prefill the model goes
    // on from: the API refuses one that ends in white space, and thinking
    // with one.
    let prefill = paired.last().is_some_and(|m| m.role == ChatRole::Assistant);
    if prefill && let Some(blocks) = messages.last_mut().and_then(|m| m["content"].as_array_mut()) {
        blocks.retain(|b| b["type"] == "text");
        if let Some(text) = blocks.last_mut().and_then(|b| b.get_mut("text")) {
            let trimmed = text.as_str().unwrap_or_default().trim_end().to_string();
            *text = Value::String(trimmed);
        }
        blocks.retain(|b| b["text"] != "");
        if blocks.is_empty() {
            messages.pop();
        }
    }
    let thinking = opts
        .anthropic_thinking_budget
        // budget_tokens must be at least 1024 and below max_tokens.
        .map(|b| b.min(req.max_output_tokens.saturating_sub(1)))
        .filter(|b| *b >= 1024 && !continues_unsigned_calls && !prefill);
    let mut breakpoints = 0;
    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
        .collect();
    let mut system: Vec<Value> = req.system.iter().map(|s| json!({"type": "text", "text": s})).collect();
    if opts.anthropic_cache {
        // The cached prefix runs tools, system, messages: one breakpoint
        // after the tools, one after the system prompt, and two in the
        // conversation (its end, which the next turn reads back, and the
        // previous user turn, which this one can read).
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_mark();
            breakpoints += 1;
        }
        if let Some(last) = system.last_mut() {
            last["cache_control"] = cache_mark();
            breakpoints += 1;
        }
        let user_turns: Vec<usize> =
            messages.iter().enumerate().filter(|(_, m)| m["role"] == "user").map(|(i, _)| i).rev().take(2).collect();
        let mut marks = vec![messages.len().saturating_sub(1)];
        marks.extend(user_turns.get(1).copied());
        for i in marks {
            if breakpoints >= MAX_BREAKPOINTS {
                break;
            }
            if let Some(block) =
                messages.get_mut(i).and_then(|m| m["content"].as_array_mut()).and_then(|c| c.last_mut())
                && block.get("cache_control").is_none()
                && !matches!(block["type"].as_str(), Some("thinking" | "redacted_thinking"))
            {
                block["cache_control"] = cache_mark();
                breakpoints += 1;
            }
        }
    }
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(std::mem::take(&mut tools));
    }
    if let Some(budget) = thinking {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
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
    let request = http
        .post(&url)
        .header("anthropic-version", API_VERSION)
        .header("accept", "text/event-stream")
        .json(&body(req, &settings.options));
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
    /// The thinking block being streamed: its index, text and signature,
    /// kept whole to be sent back.
    thinking: Option<(u64, String, String)>,
}

impl WireParser for AnthropicParser {
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError> {
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        // Most of a stream is text deltas: read those without building a
        // JSON tree.
        if event == "content_block_delta"
            && let Ok(d) = serde_json::from_str::<TextDeltaEvent>(data)
            && d.delta.kind == "text_delta"
        {
            if !d.delta.text.is_empty() {
                out.push(ProviderEvent::TextDelta(d.delta.text.into_owned()));
            }
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
                    Some("thinking") => {
                        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                        let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default().to_string();
                        if !text.is_empty() {
                            out.push(ProviderEvent::ThinkingDelta(text.clone()));
                        }
                        let signature = block.get("signature").and_then(Value::as_str).unwrap_or_default();
                        self.thinking = Some((index, text, signature.to_string()));
                    }
                    Some("redacted_thinking") => {
                        let data = block.get("data").and_then(Value::as_str).unwrap_or_default().to_string();
                        out.push(ProviderEvent::Reasoning(Reasoning::RedactedThinking { data }));
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
                    Some("thinking_delta") => {
                        if let Some(t) = text("thinking") {
                            if let Some((_, whole, _)) = &mut self.thinking {
                                whole.push_str(&t);
                            }
                            out.push(ProviderEvent::ThinkingDelta(t));
                        }
                    }
                    Some("signature_delta") => {
                        if let (Some((_, _, sig)), Some(s)) = (&mut self.thinking, text("signature")) {
                            sig.push_str(&s);
                        }
                    }
                    Some("input_json_delta") => {
                        let block = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                        if let (Some(&index), Some(fragment)) = (self.tool_blocks.get(&block), text("partial_json")) {
                            out.push(ProviderEvent::ToolCallArgs { index, fragment });
                        }
                    }
                    // Delta types added after this client was written.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                if self.thinking.as_ref().is_some_and(|(i, _, _)| *i == index)
                    && let Some((_, thinking, signature)) = self.thinking.take()
                {
                    out.push(ProviderEvent::Reasoning(Reasoning::Thinking { thinking, signature }));
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

/// A `content_block_delta` as the fast path reads it.
#[derive(serde::Deserialize)]
struct TextDeltaEvent<'a> {
    #[serde(borrow)]
    delta: TextDelta<'a>,
}

#[derive(serde::Deserialize)]
struct TextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    text: std::borrow::Cow<'a, str>,
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
    use crate::provider::sse::testing::{assert_every_split, run, tool_args};

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
        assert_every_split(AnthropicParser::default, TOOL_STREAM, |e| e);
        assert_every_split(AnthropicParser::default, &crlf, |e| e);
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
            output_schema: None,
        };
        let b = body(&req, &WireOptions::default());
        assert_eq!(b["model"], "claude-x");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["stream"], true);
        assert_eq!(b["messages"][0]["role"], "user");
        assert_eq!(b["messages"][0]["content"][0]["text"], "hi");
        assert!(b.get("tools").is_none());
        assert!(b.get("thinking").is_none());
        assert!(!b.to_string().contains("cache_control"), "no breakpoints when caching is off");
    }

    #[test]
    fn a_continued_answer_is_a_prefill_without_trailing_space_or_thinking() {
        let req = ChatRequest {
            model: "m".into(),
            system: None,
            messages: vec![ChatMessage::user("write"), ChatMessage::assistant("Roses are red,\n", Vec::new())],
            max_output_tokens: 4096,
            tools: Vec::new(),
            output_schema: None,
        };
        let opts = WireOptions { anthropic_thinking_budget: Some(2048), ..Default::default() };
        let b = body(&req, &opts);
        assert_eq!(b["messages"][1]["role"], "assistant");
        assert_eq!(b["messages"][1]["content"][0]["text"], "Roses are red,");
        assert!(b.get("thinking").is_none(), "the API takes no thinking with a prefill");
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
            output_schema: None,
        };
        let b = body(&req, &WireOptions::default());
        let m = &b["messages"];
        assert_eq!(m[1]["content"][1]["type"], "tool_use");
        assert_eq!(m[1]["content"][1]["input"]["path"], "a");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(m[3]["content"][0]["tool_use_id"], "t2", "the unanswered call gets a result");
        assert_eq!(m[3]["content"][0]["is_error"], true);
        assert_eq!(m[4]["content"][0]["text"], "next");
        assert!(
            b["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "read_file" && t["input_schema"]["type"] == "object"))
        );
    }

    /// A thinking block (signed), a redacted one, text and a call.
    const THINKING_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"think.\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAh\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":30}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    #[test]
    fn thinking_is_streamed_and_kept_whole_with_its_signature() {
        let (reference, ok) = run(AnthropicParser::default(), THINKING_STREAM, usize::MAX);
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(
            &reference[..5],
            &[
                ProviderEvent::ThinkingDelta("Let me ".into()),
                ProviderEvent::ThinkingDelta("think.".into()),
                ProviderEvent::Reasoning(Reasoning::Thinking {
                    thinking: "Let me think.".into(),
                    signature: "EqQBCgIYAh".into()
                }),
                ProviderEvent::Reasoning(Reasoning::RedactedThinking { data: "EmwKAhgB".into() }),
                ProviderEvent::TextDelta("Done.".into()),
            ]
        );
        assert!(reference.iter().any(|e| matches!(e, ProviderEvent::Usage(u) if u.cache_read_tokens == 900)));
        assert_every_split(AnthropicParser::default, THINKING_STREAM, |e| e);
    }

    fn tool_loop_request() -> ChatRequest {
        let call = forge_proto::ToolCallRecord { id: "t1".into(), name: "read_file".into(), arguments: "{}".into() };
        ChatRequest {
            model: "claude-sonnet-4-6".into(),
            system: Some("be Forge".into()),
            messages: vec![
                ChatMessage::user("go"),
                ChatMessage::assistant("reading", vec![call]).with_reasoning(vec![
                    Reasoning::Thinking { thinking: "hmm".into(), signature: "sig".into() },
                    Reasoning::RedactedThinking { data: "xx".into() },
                    Reasoning::GeminiSignature { signature: "other provider's".into(), call: None },
                ]),
                ChatMessage::tool_result("t1", "contents", false),
            ],
            max_output_tokens: 18_000,
            tools: crate::tools::ToolRegistry::builtin().specs(),
            output_schema: None,
        }
    }

    #[test]
    fn thinking_goes_back_first_and_unmodified_with_the_thinking_config() {
        let opts = WireOptions { anthropic_thinking_budget: Some(10_000), ..Default::default() };
        let b = body(&tool_loop_request(), &opts);
        assert_eq!(b["thinking"], json!({"type": "enabled", "budget_tokens": 10_000}));
        let blocks = &b["messages"][1]["content"];
        assert_eq!(blocks[0], json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}));
        assert_eq!(blocks[1], json!({"type": "redacted_thinking", "data": "xx"}));
        assert_eq!(blocks[2]["type"], "text");
        assert_eq!(blocks[3]["type"], "tool_use");
        assert_eq!(blocks.as_array().map(Vec::len), Some(4), "another provider's signature is left out");
        // The budget stays below max_tokens; too little room means no thinking.
        let small = ChatRequest { max_output_tokens: 4000, ..tool_loop_request() };
        assert_eq!(body(&small, &opts)["thinking"]["budget_tokens"], 3999);
        let tiny = ChatRequest { max_output_tokens: 1000, ..tool_loop_request() };
        assert!(body(&tiny, &opts).get("thinking").is_none());
        // Continuing calls that were made without thinking: the API would
        // refuse thinking, so it is off for this request.
        let mut unsigned = tool_loop_request();
        unsigned.messages[1].reasoning.clear();
        assert!(body(&unsigned, &opts).get("thinking").is_none());
    }

    #[test]
    fn cache_breakpoints_cover_tools_system_and_the_conversation() {
        let mut req = tool_loop_request();
        req.messages.push(ChatMessage::assistant("read it", Vec::new()));
        req.messages.push(ChatMessage::user("now edit"));
        let b = body(&req, &WireOptions { anthropic_cache: true, ..Default::default() });
        let text = b.to_string();
        assert_eq!(text.matches("cache_control").count(), 4, "at most 4 breakpoints: {text}");
        let tools = b["tools"].as_array().cloned().unwrap_or_default();
        assert!(tools.last().is_some_and(|t| t["cache_control"]["type"] == "ephemeral"));
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        let m = b["messages"].as_array().cloned().unwrap_or_default();
        let last = m.last().and_then(|m| m["content"].as_array().and_then(|c| c.last().cloned()));
        assert!(last.is_some_and(|b| b["cache_control"].is_object()), "the end of the conversation");
        // The previous user turn (the tool result) too, so this request
        // reads what the last one wrote.
        assert!(m[2]["content"][0]["cache_control"].is_object());
        // Byte-stable: the same request twice is the same body.
        assert_eq!(body(&req, &WireOptions { anthropic_cache: true, ..Default::default() }), b);
    }
}
