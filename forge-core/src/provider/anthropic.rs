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

/// The tool through which Claude gives an answer on a JSON schema
/// (`output_schema`): the Messages API has no response format, but a
/// tool's input is held to its schema. Its input comes back as the
/// answer's text, never as a call.
pub(super) const ANSWER_TOOL: &str = "final_answer";

/// The answer tool for `req`, if it asks for structured output, and
/// whether the schema was wrapped (a tool's input must be an object: any
/// other schema becomes the `value` of one).
fn answer_tool(req: &ChatRequest) -> Option<(Value, bool)> {
    let schema = req.output_schema.as_ref()?;
    if req.tools.iter().any(|t| t.name == ANSWER_TOOL) {
        return None;
    }
    let wrapped = schema.get("type").and_then(Value::as_str) != Some("object");
    let input_schema = if wrapped {
        json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
    } else {
        schema.clone()
    };
    let description = "Give your final answer by calling this tool once you are done, with the answer as its input; \
                       it must be valid against the input schema. Call no other tool with it.";
    Some((json!({"name": ANSWER_TOOL, "description": description, "input_schema": input_schema}), wrapped))
}

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
            ChatRole::User => json!({ "role": "user", "content": super::user_parts(
                m,
                |mime, data| json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}),
                |text| json!({"type": "text", "text": text}),
            )}),
            ChatRole::Assistant => json!({ "role": "assistant", "content": assistant_blocks(m) }),
            // Results go back as a user turn; the API merges consecutive ones.
            ChatRole::Tool => {
                let (id, is_error) = m.tool_result.clone().unwrap_or_default();
                // A result's images go in it, after its text.
                let content = if m.images.is_empty() {
                    json!(m.text)
                } else {
                    let mut blocks = vec![json!({"type": "text", "text": m.text})];
                    blocks.extend(m.images.iter().filter_map(|i| {
                        let data = i.data.as_ref()?;
                        Some(json!({"type": "image", "source": {"type": "base64", "media_type": i.info.mime_type, "data": data}}))
                    }));
                    Value::Array(blocks)
                };
                json!({ "role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}
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
    // The provider's own search: it runs at Anthropic, not here.
    if let Some(search) = &req.web_search {
        let mut tool = json!({"type": "web_search_20250305", "name": "web_search"});
        if let Some(n) = search.max_uses {
            tool["max_uses"] = json!(n);
        }
        // The API takes one list or the other.
        if !search.allowed_domains.is_empty() {
            tool["allowed_domains"] = json!(search.allowed_domains);
        } else if !search.blocked_domains.is_empty() {
            tool["blocked_domains"] = json!(search.blocked_domains);
        }
        tools.push(tool);
    }
    let answer = answer_tool(req);
    // With nothing else to call, the answer tool is the answer; with
    // thinking on, the API allows no forced tool.
    let force_answer = answer.is_some() && tools.is_empty() && thinking.is_none();
    tools.extend(answer.map(|(tool, _)| tool));
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
    req.put_sampling(&mut body, "temperature", "top_p");
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(std::mem::take(&mut tools));
    }
    if let Some(budget) = thinking {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if force_answer {
        body["tool_choice"] = json!({"type": "tool", "name": ANSWER_TOOL});
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
    /// The request offered the answer tool (`Some(wrapped)`).
    answer: Option<bool>,
    /// The answer tool's block being streamed: its index and input.
    answer_block: Option<(u64, String)>,
    answered: bool,
    /// Text was streamed before (the answer then starts on a line of its own).
    texted: bool,
    /// The web search being asked for: its block's index and input.
    search_block: Option<(u64, String)>,
    usage: Usage,
    /// Content block index -> tool call number, for `tool_use` blocks.
    tool_blocks: std::collections::HashMap<u64, usize>,
    /// The thinking block being streamed: its index, text and signature,
    /// kept whole to be sent back.
    thinking: Option<(u64, String, String)>,
}

impl AnthropicParser {
    pub(super) fn for_request(req: &ChatRequest) -> Self {
        AnthropicParser { answer: answer_tool(req).map(|(_, wrapped)| wrapped), ..Default::default() }
    }

    /// The answer tool's input, complete: the answer's text.
    fn answer_done(&mut self, input: &str, out: &mut Vec<ProviderEvent>) {
        let input: Value = serde_json::from_str(if input.trim().is_empty() { "{}" } else { input })
            .unwrap_or_else(|_| Value::String(input.to_string()));
        let value = match (self.answer, input) {
            (Some(true), Value::Object(mut o)) if o.contains_key("value") => o.remove("value").unwrap_or_default(),
            (_, v) => v,
        };
        let text = match value {
            // Not JSON: given as it came, for the check to say so.
            Value::String(s) if self.answer == Some(false) => s,
            v => v.to_string(),
        };
        if self.texted {
            out.push(ProviderEvent::TextDelta("\n\n".into()));
        }
        out.push(ProviderEvent::TextDelta(text));
        self.answered = true;
        self.texted = true;
    }
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
                self.texted = true;
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
                    Some("server_tool_use") => {
                        let index = data.get("index").and_then(Value::as_u64).unwrap_or(u64::MAX);
                        self.search_block = Some((index, String::new()));
                    }
                    // What the search found: the answer cites it.
                    Some("web_search_tool_result") => {}
                    Some("tool_use")
                        if self.answer.is_some() && block.get("name").and_then(Value::as_str) == Some(ANSWER_TOOL) =>
                    {
                        let index = data.get("index").and_then(Value::as_u64).unwrap_or(u64::MAX);
                        self.answer_block = Some((index, String::new()));
                    }
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
                            self.texted = true;
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
                    Some("text_delta") => {
                        if let Some(t) = text("text") {
                            self.texted = true;
                            out.push(ProviderEvent::TextDelta(t));
                        }
                    }
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
                        if let Some((answer, input)) = &mut self.answer_block
                            && *answer == block
                        {
                            input.push_str(&text("partial_json").unwrap_or_default());
                        } else if let Some((search, input)) = &mut self.search_block
                            && *search == block
                        {
                            input.push_str(&text("partial_json").unwrap_or_default());
                        } else if let (Some(&index), Some(fragment)) =
                            (self.tool_blocks.get(&block), text("partial_json"))
                        {
                            out.push(ProviderEvent::ToolCallArgs { index, fragment });
                        }
                    }
                    Some("citations_delta") => out.extend(citation(delta.get("citation"))),
                    // Delta types added after this client was written.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                if self.answer_block.as_ref().is_some_and(|(i, _)| *i == index)
                    && let Some((_, input)) = self.answer_block.take()
                {
                    self.answer_done(&input, out);
                }
                if self.search_block.as_ref().is_some_and(|(i, _)| *i == index)
                    && let Some((_, input)) = self.search_block.take()
                {
                    let query = serde_json::from_str::<Value>(&input).ok();
                    let query = query.as_ref().and_then(|q| q.get("query")).and_then(Value::as_str).unwrap_or_default();
                    out.push(ProviderEvent::WebSearch(query.to_string()));
                }
                if self.thinking.as_ref().is_some_and(|(i, _, _)| *i == index)
                    && let Some((_, thinking, signature)) = self.thinking.take()
                {
                    out.push(ProviderEvent::Reasoning(Reasoning::Thinking { thinking, signature }));
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    // The answer tool alone was called: the answer is complete.
                    let r =
                        if r == "tool_use" && self.answered && self.tool_blocks.is_empty() { "end_turn" } else { r };
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

/// A text block's citation of a search result.
fn citation(c: Option<&Value>) -> Option<ProviderEvent> {
    let c = c?;
    let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ProviderEvent::Citation(forge_proto::Citation {
        url: s("url")?,
        title: s("title").unwrap_or_default(),
        cited_text: s("cited_text"),
    }))
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
    if let Some(v) = u.pointer("/server_tool_use/web_search_requests").and_then(Value::as_u64) {
        usage.web_search_requests = v;
    }
}

#[cfg(test)]
mod tests;
