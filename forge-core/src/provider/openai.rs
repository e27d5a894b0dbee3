//! OpenAI Chat Completions, streamed (`POST {base}/chat/completions`,
//! data-only SSE ending in `[DONE]`). Also the client for OpenAI-compatible
//! local servers (Ollama, llama.cpp, vLLM), whose quirks it tolerates.

use serde_json::{Value, json};

use super::sse::{ParseError, Step, WireParser};
use super::{ChatMessage, ChatRequest, ChatRole, ProviderEvent, ProviderSettings, pair_tool_results};
use forge_proto::Usage;

fn body(req: &ChatRequest, compat: bool) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = &req.system {
        // Local servers often do not know the `developer` role.
        let role = if compat { "system" } else { "developer" };
        messages.push(json!({ "role": role, "content": system }));
    }
    let user = |m: &ChatMessage| {
        json!({ "role": "user", "content": super::user_parts(
            m,
            |mime, data| json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}),
            |text| json!({"type": "text", "text": text}),
        )})
    };
    // A tool message holds text only: its images follow the run of them.
    let mut shown = Vec::new();
    for m in pair_tool_results(&req.messages) {
        if m.role != ChatRole::Tool && !shown.is_empty() {
            messages.push(user(&super::tool_images_message(std::mem::take(&mut shown))));
        }
        messages.push(match m.role {
            ChatRole::User if m.images.is_empty() => json!({ "role": "user", "content": m.text }),
            ChatRole::User => user(&m),
            ChatRole::Assistant if m.tool_calls.is_empty() => json!({ "role": "assistant", "content": m.text }),
            ChatRole::Assistant => {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                let content = if m.text.is_empty() { Value::Null } else { json!(m.text) };
                json!({ "role": "assistant", "content": content, "tool_calls": calls })
            }
            ChatRole::Tool => {
                shown.extend(m.images.iter().cloned());
                let (id, _) = m.tool_result.clone().unwrap_or_default();
                json!({ "role": "tool", "tool_call_id": id, "content": m.text })
            }
        });
    }
    if !shown.is_empty() {
        messages.push(user(&super::tool_images_message(shown)));
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(schema) = &req.output_schema {
        body["response_format"] =
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": false}});
    }
    req.put_sampling(&mut body, "temperature", "top_p");
    if compat {
        body["max_tokens"] = json!(req.max_output_tokens);
    } else {
        body["max_completion_tokens"] = json!(req.max_output_tokens);
    }
    body
}

/// The request for one streamed answer.
pub(super) fn request(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    req: &ChatRequest,
) -> reqwest::RequestBuilder {
    bearer_sse_post(http, settings, "chat/completions", &body(req, settings.custom_base_url))
}

/// An SSE request to OpenAI's API (`path` under the base URL), with the
/// key as a bearer token when there is one (local servers take none).
pub(super) fn bearer_sse_post(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    path: &str,
    body: &Value,
) -> reqwest::RequestBuilder {
    let request = http.post(format!("{}/{path}", settings.base_url)).header("accept", "text/event-stream").json(body);
    match &settings.api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    }
}

/// The Chat Completions chunk stream, chunk by chunk.
#[derive(Default)]
pub(super) struct OpenAiParser {
    finish_seen: bool,
    /// Per wire `index`: (our call number, the call's id). Servers that give
    /// every parallel call `index: 0` are told apart by a new, different id.
    calls: std::collections::HashMap<u64, (usize, String)>,
    next_call: usize,
}

impl WireParser for OpenAiParser {
    fn on_event(&mut self, _event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        if data == "[DONE]" {
            return Ok(Step::Finished);
        }
        // Most chunks carry a piece of text and nothing else: read those
        // without building a JSON tree.
        if let Ok(c) = serde_json::from_str::<TextChunk>(data)
            && c.error.is_none()
            && c.usage.is_none()
            && let [choice] = c.choices.as_slice()
            && choice.finish_reason.is_none()
            && choice.delta.tool_calls.is_none()
            && choice.delta.reasoning_content.is_none()
            && choice.delta.reasoning.is_none()
        {
            if let Some(text) = choice.delta.content.as_deref().filter(|t| !t.is_empty()) {
                out.push(ProviderEvent::TextDelta(text.to_string()));
            }
            return Ok(Step::Continue);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| ParseError::Broken(format!("malformed chunk ({e})")))?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let et = err.get("type").or_else(|| err.get("code")).and_then(Value::as_str).unwrap_or("error");
            let msg = err.get("message").and_then(Value::as_str).or_else(|| err.as_str()).unwrap_or("unknown error");
            return Err(ParseError::Reported { error_type: et.into(), message: msg.into() });
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            let text = |key: &str| delta.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_string);
            for key in ["reasoning_content", "reasoning"] {
                out.extend(text(key).map(ProviderEvent::ThinkingDelta));
            }
            out.extend(text("content").map(ProviderEvent::TextDelta));
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                self.tool_call_fragment(call, out);
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_seen = true;
                out.push(ProviderEvent::StopReason(r.to_string()));
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let get = |k: &str| u.pointer(k).and_then(Value::as_u64).unwrap_or(0);
            let cached = get("/prompt_tokens_details/cached_tokens");
            out.push(ProviderEvent::Usage(Usage {
                input_tokens: get("/prompt_tokens").saturating_sub(cached),
                output_tokens: get("/completion_tokens"),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                reasoning_tokens: get("/completion_tokens_details/reasoning_tokens"),
                web_search_requests: 0,
                estimated: false,
            }));
        }
        Ok(Step::Continue)
    }

    fn on_eof(&mut self, _out: &mut Vec<ProviderEvent>) -> Result<(), ParseError> {
        if self.finish_seen {
            // Some local servers end without `[DONE]` after a finish_reason.
            Ok(())
        } else {
            Err(ParseError::Broken("the connection closed before the answer finished".into()))
        }
    }
}

/// A chunk as the fast path reads it; anything else it holds sends the
/// chunk down the general path.
#[derive(serde::Deserialize)]
struct TextChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<TextChoice<'a>>,
    usage: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TextChoice<'a> {
    #[serde(borrow)]
    delta: TextChoiceDelta<'a>,
    finish_reason: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TextChoiceDelta<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    tool_calls: Option<serde::de::IgnoredAny>,
    reasoning_content: Option<serde::de::IgnoredAny>,
    reasoning: Option<serde::de::IgnoredAny>,
}

impl OpenAiParser {
    fn tool_call_fragment(&mut self, call: &Value, out: &mut Vec<ProviderEvent>) {
        let wire_index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let id = call.get("id").and_then(Value::as_str).filter(|i| !i.is_empty());
        let starts_new = match (self.calls.get(&wire_index), id) {
            (None, _) => true,
            (Some((_, open_id)), Some(id)) => open_id != id,
            (Some(_), None) => false,
        };
        if starts_new {
            let index = self.next_call;
            self.next_call += 1;
            let id = id.map(str::to_string).unwrap_or_else(|| format!("call_{index}"));
            self.calls.insert(wire_index, (index, id.clone()));
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string();
            out.push(ProviderEvent::ToolCallStart { index, id, name });
        }
        let index = self.calls.get(&wire_index).map(|(i, _)| *i).unwrap_or(0);
        if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
            out.push(ProviderEvent::ToolCallArgs { index, fragment: args.to_string() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;
    use crate::provider::sse::testing::{assert_every_split, run, tool_args};

    fn chunk(delta: Value, finish: Value) -> String {
        format!(
            "data: {}\n\n",
            json!({"id":"c","object":"chat.completion.chunk","created":1,"model":"m",
                   "choices":[{"index":0,"delta":delta,"logprobs":null,"finish_reason":finish}],"obfuscation":"x7"})
        )
    }

    /// Two parallel calls with arguments in fragments, then usage and [DONE].
    fn tool_stream() -> String {
        let mut s = chunk(json!({"role":"assistant","content":null}), Value::Null);
        s += &chunk(
            json!({"tool_calls":[{"index":0,"id":"call_A","type":"function","function":{"name":"read_file","arguments":""}}]}),
            Value::Null,
        );
        s += &chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}), Value::Null);
        s += &chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"\"a.rs\"}"}}]}), Value::Null);
        s += &chunk(
            json!({"tool_calls":[{"index":1,"id":"call_B","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"*\"}"}}]}),
            Value::Null,
        );
        s += &chunk(json!({}), json!("tool_calls"));
        s += &format!(
            "data: {}\n\n",
            json!({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}})
        );
        s += "data: [DONE]\n\n";
        s
    }

    #[test]
    fn parallel_tool_calls_parse_identically_at_every_split() {
        let body = tool_stream();
        let (reference, ok) = run(OpenAiParser::default(), &body, usize::MAX);
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(
            reference[0],
            ProviderEvent::ToolCallStart { index: 0, id: "call_A".into(), name: "read_file".into() }
        );
        let args = tool_args(&reference, 0);
        assert_eq!(args, "{\"path\":\"a.rs\"}");
        assert!(reference.contains(&ProviderEvent::ToolCallStart {
            index: 1,
            id: "call_B".into(),
            name: "glob".into()
        }));
        assert!(reference.contains(&ProviderEvent::StopReason("tool_calls".into())));
        assert_every_split(OpenAiParser::default, &body, |e| e);
    }

    #[test]
    fn calls_sharing_index_zero_are_told_apart_by_id() {
        let mut body =
            chunk(json!({"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]}), Value::Null);
        body += &chunk(
            json!({"tool_calls":[{"index":0,"id":"b","function":{"name":"y","arguments":"{}"}}]}),
            json!("stop"),
        );
        let (events, ok) = run(OpenAiParser::default(), &body, 7);
        assert!(ok.is_ok(), "a finish_reason without [DONE] is a complete answer");
        assert!(events.contains(&ProviderEvent::ToolCallStart { index: 1, id: "b".into(), name: "y".into() }));
    }

    #[test]
    fn a_stream_cut_before_finishing_is_an_error() {
        let body = tool_stream();
        let cut = &body[..body.find("tool_calls\"}").unwrap_or(body.len() / 2)];
        assert!(run(OpenAiParser::default(), cut, 3).1.is_err());
    }

    #[test]
    fn compat_servers_get_system_role_and_max_tokens() {
        let req = ChatRequest {
            model: "llama".into(),
            system: Some("be brief".into()),
            messages: vec![ChatMessage::user("hi")],
            max_output_tokens: 10,
            tools: Vec::new(),
            output_schema: None,
            web_search: None,
            sampling: Default::default(),
            active_files: None,
        };
        let b = body(&req, true);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["max_tokens"], 10);
        let b = body(&req, false);
        assert_eq!(b["messages"][0]["role"], "developer");
        assert_eq!(b["max_completion_tokens"], 10);
        assert_eq!(b["stream_options"]["include_usage"], true);
    }

    #[test]
    fn a_tool_results_images_follow_the_run_of_results_as_a_user_message() {
        let image = crate::provider::ImagePart {
            info: forge_proto::ImageInfo {
                hash: "h".into(),
                mime_type: "image/png".into(),
                width: 1,
                height: 1,
                bytes: 70,
                name: None,
            },
            data: Some("AAAA".into()),
        };
        let call =
            |id: &str| forge_proto::ToolCallRecord { id: id.into(), name: "shot".into(), arguments: "{}".into() };
        let mut first = ChatMessage::tool_result("c1", "[image 1: shown]", false);
        first.images = vec![image];
        let req = ChatRequest {
            model: "gpt-5.4".into(),
            system: None,
            messages: vec![
                ChatMessage::user("look"),
                ChatMessage::assistant("", vec![call("c1"), call("c2")]),
                first,
                ChatMessage::tool_result("c2", "done", false),
            ],
            max_output_tokens: 10,
            tools: Vec::new(),
            output_schema: None,
            web_search: None,
            sampling: Default::default(),
            active_files: None,
        };
        let b = body(&req, false);
        let roles: Vec<&str> =
            b["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"], "the images after both results");
        let last = &b["messages"][4];
        assert_eq!(last["role"], "user", "{b}");
        assert_eq!(last["content"][0]["image_url"]["url"], "data:image/png;base64,AAAA");
        assert_eq!(b["messages"][2]["content"], "[image 1: shown]", "the tool message stays text");
    }
}
