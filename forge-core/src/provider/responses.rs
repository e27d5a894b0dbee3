//! OpenAI Responses API, streamed (`POST {base}/responses`, SSE with
//! `event:` names equal to the data's `type`, no `[DONE]`). Requests are
//! stateless (`store: false`): the whole conversation goes every time, and
//! reasoning continues through the encrypted reasoning items the previous
//! answers returned.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::sse::{ParseError, Step, WireParser};
use super::{
    ChatMessage, ChatRequest, ChatRole, ProviderEvent, ProviderSettings, Reasoning, WireOptions, pair_tool_results,
};
use forge_proto::Usage;

/// Models that reason, and so take the `reasoning` field (others refuse it).
fn reasons(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    m.starts_with("gpt-5") || m.starts_with("codex") || (m.starts_with('o') && m[1..].starts_with(char::is_numeric))
}

/// An assistant message as input items: its reasoning (only what can be
/// sent back without server-side storage), its text, its calls.
fn assistant_items(m: &ChatMessage, items: &mut Vec<Value>) {
    for r in &m.reasoning {
        if let Reasoning::OpenAiReasoning { encrypted_content: Some(content), summary, .. } = r {
            // No `id`: with `store: false` the server has no such item to
            // look up, and refuses a reference to it.
            let summary: Vec<Value> = summary.iter().map(|s| json!({"type": "summary_text", "text": s})).collect();
            items.push(json!({"type": "reasoning", "summary": summary, "encrypted_content": content}));
        }
    }
    if !m.text.is_empty() {
        items.push(
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": m.text}]}),
        );
    }
    for c in &m.tool_calls {
        items.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}));
    }
}

fn body(req: &ChatRequest, opts: &WireOptions) -> Value {
    let mut input = Vec::with_capacity(req.messages.len());
    let user = |m: &ChatMessage| {
        json!({"role": "user", "content": super::user_parts(
            m,
            |mime, data| json!({"type": "input_image", "image_url": format!("data:{mime};base64,{data}")}),
            |text| json!({"type": "input_text", "text": text}),
        )})
    };
    // A function call's output is text: its images follow the run of them.
    let mut shown = Vec::new();
    for m in pair_tool_results(&req.messages) {
        if m.role != ChatRole::Tool && !shown.is_empty() {
            input.push(user(&super::tool_images_message(std::mem::take(&mut shown))));
        }
        match m.role {
            ChatRole::User => input.push(user(&m)),
            ChatRole::Assistant => assistant_items(&m, &mut input),
            ChatRole::Tool => {
                shown.extend(m.images.iter().cloned());
                let (id, _) = m.tool_result.clone().unwrap_or_default();
                input.push(json!({"type": "function_call_output", "call_id": id, "output": m.text}));
            }
        }
    }
    if !shown.is_empty() {
        input.push(user(&super::tool_images_message(shown)));
    }
    let mut body = json!({
        "model": req.model,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": req.max_output_tokens,
    });
    req.put_sampling(&mut body, "temperature", "top_p");
    if let Some(system) = &req.system {
        body["instructions"] = json!(system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
            .collect();
        body["parallel_tool_calls"] = json!(true);
    }
    // OpenAI's own search, run on their side (it filters by allowed
    // domains only).
    if let Some(search) = &req.web_search {
        let mut tool = json!({"type": "web_search"});
        if !search.allowed_domains.is_empty() {
            tool["filters"] = json!({"allowed_domains": search.allowed_domains});
        }
        match body["tools"].as_array_mut() {
            Some(tools) => tools.push(tool),
            None => body["tools"] = json!([tool]),
        }
    }
    if reasons(&req.model) || opts.reasoning_effort.is_some() {
        let mut reasoning = json!({"summary": "auto"});
        if let Some(effort) = &opts.reasoning_effort {
            reasoning["effort"] = json!(effort);
        }
        body["reasoning"] = reasoning;
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    if let Some(v) = &opts.verbosity {
        body["text"] = json!({"verbosity": v});
    }
    if let Some(schema) = &req.output_schema {
        body["text"]["format"] = json!({"type": "json_schema", "name": "output", "schema": schema, "strict": false});
    }
    if let Some(t) = &opts.truncation {
        body["truncation"] = json!(t);
    }
    body
}

/// The request for one streamed answer.
pub(super) fn request(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    req: &ChatRequest,
) -> reqwest::RequestBuilder {
    super::openai::bearer_sse_post(http, settings, "responses", &body(req, &settings.options))
}

/// The Responses event stream, event by event.
#[derive(Default)]
pub(super) struct ResponsesParser {
    /// Function-call item id -> (our call number, whether arguments
    /// streamed as deltas).
    calls: HashMap<String, (usize, bool)>,
    /// Reasoning summary parts seen so far (parts after the first are
    /// set apart by a blank line).
    summary_parts: usize,
    /// Web searches run for the answer.
    searches: u64,
}

impl WireParser for ResponsesParser {
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError> {
        if data.trim().is_empty() {
            return Ok(Step::Continue);
        }
        // Most of a stream is text deltas: read those without building a
        // JSON tree.
        if event == "response.output_text.delta"
            && let Ok(d) = serde_json::from_str::<TextDelta>(data)
        {
            if !d.delta.is_empty() {
                out.push(ProviderEvent::TextDelta(d.delta.into_owned()));
            }
            return Ok(Step::Continue);
        }
        let data: Value = serde_json::from_str(data)
            .map_err(|e| ParseError::Broken(format!("malformed event data ({e}) in `{event}` event")))?;
        let ty = data.get("type").and_then(Value::as_str).unwrap_or(event);
        let str_at = |p: &str| data.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        match ty {
            "response.output_text.delta" => {
                out.extend(Some(str_at("/delta")).filter(|d| !d.is_empty()).map(ProviderEvent::TextDelta))
            }
            "response.reasoning_summary_part.added" => {
                if self.summary_parts > 0 {
                    out.push(ProviderEvent::ThinkingDelta("\n\n".into()));
                }
                self.summary_parts += 1;
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.extend(Some(str_at("/delta")).filter(|d| !d.is_empty()).map(ProviderEvent::ThinkingDelta))
            }
            "response.output_item.added" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let index = self.calls.len();
                    let item_id = str_at("/item/id");
                    self.calls.insert(item_id, (index, false));
                    out.push(ProviderEvent::ToolCallStart {
                        index,
                        id: str_at("/item/call_id"),
                        name: str_at("/item/name"),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let fragment = str_at("/delta");
                if let Some((index, streamed)) = self.calls.get_mut(&str_at("/item_id"))
                    && !fragment.is_empty()
                {
                    *streamed = true;
                    out.push(ProviderEvent::ToolCallArgs { index: *index, fragment });
                }
            }
            "response.output_item.done" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let summary = item
                            .get("summary")
                            .and_then(Value::as_array)
                            .map(|parts| {
                                parts
                                    .iter()
                                    .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default();
                        out.push(ProviderEvent::Reasoning(Reasoning::OpenAiReasoning {
                            id: str_at("/item/id"),
                            encrypted_content: item
                                .get("encrypted_content")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                            summary,
                        }));
                    }
                    Some("web_search_call") => {
                        self.searches += 1;
                        out.push(ProviderEvent::WebSearch(str_at("/item/action/query")));
                    }
                    // Arguments that came whole, without deltas.
                    Some("function_call") => {
                        if let Some((index, false)) = self.calls.get(&str_at("/item/id")).copied() {
                            let fragment = str_at("/item/arguments");
                            if !fragment.is_empty() {
                                out.push(ProviderEvent::ToolCallArgs { index, fragment });
                            }
                        }
                    }
                    _ => {}
                }
            }
            "response.output_text.annotation.added" => {
                let a = data.get("annotation").unwrap_or(&Value::Null);
                if a.get("type").and_then(Value::as_str) == Some("url_citation")
                    && let Some(url) = a.get("url").and_then(Value::as_str)
                {
                    let title = a.get("title").and_then(Value::as_str).unwrap_or_default();
                    out.push(ProviderEvent::Citation(forge_proto::Citation {
                        url: url.into(),
                        title: title.into(),
                        cited_text: None,
                    }));
                }
            }
            "response.completed" | "response.incomplete" => {
                if let Some(u) = data.pointer("/response/usage").filter(|u| u.is_object()) {
                    let mut usage = usage(u);
                    usage.web_search_requests = self.searches;
                    out.push(ProviderEvent::Usage(usage));
                }
                let reason = match data.pointer("/response/incomplete_details/reason").and_then(Value::as_str) {
                    Some(r) => r.to_string(),
                    None if !self.calls.is_empty() => "tool_calls".into(),
                    None => "stop".into(),
                };
                out.push(ProviderEvent::StopReason(reason));
                return Ok(Step::Finished);
            }
            "response.failed" => {
                let code = data.pointer("/response/error/code").and_then(Value::as_str).unwrap_or("server_error");
                let message =
                    data.pointer("/response/error/message").and_then(Value::as_str).unwrap_or("the response failed");
                return Err(ParseError::Reported { error_type: code.into(), message: message.into() });
            }
            "error" => {
                let code = data
                    .get("code")
                    .and_then(Value::as_str)
                    .or_else(|| data.pointer("/error/type").and_then(Value::as_str))
                    .unwrap_or("error");
                let message = data
                    .get("message")
                    .and_then(Value::as_str)
                    .or_else(|| data.pointer("/error/message").and_then(Value::as_str))
                    .unwrap_or("unknown error");
                return Err(ParseError::Reported { error_type: code.into(), message: message.into() });
            }
            // created, in_progress, content parts, `.done` echoes, and event
            // types added after this client was written.
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn on_eof(&mut self, _out: &mut Vec<ProviderEvent>) -> Result<(), ParseError> {
        Err(ParseError::Broken("the connection closed before `response.completed`".into()))
    }
}

/// A `response.output_text.delta` as the fast path reads it.
#[derive(serde::Deserialize)]
struct TextDelta<'a> {
    #[serde(borrow)]
    delta: std::borrow::Cow<'a, str>,
}

fn usage(u: &Value) -> Usage {
    let get = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = get("/input_tokens_details/cached_tokens");
    let written = get("/input_tokens_details/cache_write_tokens");
    Usage {
        input_tokens: get("/input_tokens").saturating_sub(cached + written),
        output_tokens: get("/output_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: written,
        reasoning_tokens: get("/output_tokens_details/reasoning_tokens"),
        web_search_requests: 0,
        estimated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::sse::testing::{assert_every_split, run, tool_args};

    fn ev(data: Value) -> String {
        format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or("x"))
    }

    /// Reasoning with a two-part summary, text, two function calls (one
    /// streamed, one whole), then completion with usage.
    fn stream() -> String {
        let mut s = ev(
            json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[],"usage":null}}),
        );
        s += &ev(
            json!({"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}),
        );
        s += &ev(
            json!({"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}),
        );
        s += &ev(
            json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Look at "}),
        );
        s += &ev(
            json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"the file."}),
        );
        s += &ev(
            json!({"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}),
        );
        s += &ev(
            json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Then glob."}),
        );
        s += &ev(
            json!({"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Look at the file."},{"type":"summary_text","text":"Then glob."}],"encrypted_content":"gAAAA-enc"}}),
        );
        s += &ev(
            json!({"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}),
        );
        s += &ev(
            json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Reading \u{65e5}","logprobs":[]}),
        );
        s += &ev(
            json!({"type":"response.output_text.done","item_id":"msg_1","output_index":1,"content_index":0,"text":"Reading \u{65e5}","logprobs":[]}),
        );
        s += &ev(
            json!({"type":"response.output_item.added","output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_A","name":"read_file"}}),
        );
        s += &ev(
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"{\"path\":"}),
        );
        s += &ev(
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"\"a.rs\"}"}),
        );
        s += &ev(
            json!({"type":"response.output_item.done","output_index":2,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"a.rs\"}","call_id":"call_A","name":"read_file"}}),
        );
        s += &ev(
            json!({"type":"response.output_item.added","output_index":3,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_B","name":"glob"}}),
        );
        s += &ev(
            json!({"type":"response.output_item.done","output_index":3,"item":{"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"pattern\":\"*\"}","call_id":"call_B","name":"glob"}}),
        );
        s += &ev(json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],
            "usage":{"input_tokens":31,"input_tokens_details":{"cached_tokens":7},"output_tokens":70,"output_tokens_details":{"reasoning_tokens":58},"total_tokens":101}}}));
        s
    }

    #[test]
    fn reasoning_text_and_calls_parse_identically_at_every_split() {
        let body = stream();
        let (reference, ok) = run(ResponsesParser::default(), &body, usize::MAX);
        assert!(ok.is_ok(), "{ok:?}");
        let thinking: String = reference
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ThinkingDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, "Look at the file.\n\nThen glob.");
        assert!(reference.contains(&ProviderEvent::Reasoning(Reasoning::OpenAiReasoning {
            id: "rs_1".into(),
            encrypted_content: Some("gAAAA-enc".into()),
            summary: vec!["Look at the file.".into(), "Then glob.".into()],
        })));
        assert!(reference.contains(&ProviderEvent::TextDelta("Reading \u{65e5}".into())));
        assert_eq!(tool_args(&reference, 0), "{\"path\":\"a.rs\"}");
        assert_eq!(tool_args(&reference, 1), "{\"pattern\":\"*\"}", "whole arguments from output_item.done");
        assert!(reference.contains(&ProviderEvent::ToolCallStart {
            index: 1,
            id: "call_B".into(),
            name: "glob".into()
        }));
        assert!(reference.contains(&ProviderEvent::StopReason("tool_calls".into())));
        assert!(reference.iter().any(|e| matches!(e, ProviderEvent::Usage(u) if u.input_tokens == 24 && u.cache_read_tokens == 7 && u.reasoning_tokens == 58 && u.output_tokens == 70)));
        assert_every_split(ResponsesParser::default, &body, |e| e);
    }

    #[test]
    fn failures_and_cuts_are_errors() {
        let failed = ev(
            json!({"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}),
        );
        let (_, end) = run(ResponsesParser::default(), &failed, 3);
        assert!(end.is_err_and(|e| e.retry.is_some() && e.message.contains("boom")));
        let body = stream();
        let cut = &body[..body.len() / 2];
        assert!(run(ResponsesParser::default(), cut, 7).1.is_err());
    }

    #[test]
    fn the_request_is_stateless_and_sends_reasoning_back() {
        let call = forge_proto::ToolCallRecord {
            id: "call_A".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let answer = ChatMessage::assistant("reading", vec![call]).with_reasoning(vec![
            Reasoning::OpenAiReasoning {
                id: "rs_1".into(),
                encrypted_content: Some("enc".into()),
                summary: vec!["s".into()],
            },
            Reasoning::Thinking { thinking: "claude's".into(), signature: "sig".into() },
        ]);
        let req = ChatRequest {
            model: "gpt-5.4-mini".into(),
            system: Some("be Forge".into()),
            messages: vec![ChatMessage::user("go"), answer, ChatMessage::tool_result("call_A", "contents", false)],
            max_output_tokens: 100,
            tools: crate::tools::ToolRegistry::builtin().specs(),
            output_schema: None,
            web_search: None,
            sampling: Default::default(),
            active_files: None,
        };
        let opts = WireOptions {
            reasoning_effort: Some("high".into()),
            verbosity: Some("low".into()),
            truncation: Some("auto".into()),
            ..Default::default()
        };
        let b = body(&req, &opts);
        assert_eq!(b["store"], false);
        assert_eq!(b["instructions"], "be Forge");
        assert_eq!(b["reasoning"]["effort"], "high");
        assert_eq!(b["text"]["verbosity"], "low");
        assert_eq!(b["truncation"], "auto");
        assert_eq!(b["include"][0], "reasoning.encrypted_content");
        let input = b["input"].as_array().cloned().unwrap_or_default();
        let types: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap_or("user")).collect();
        assert_eq!(types, ["user", "reasoning", "message", "function_call", "function_call_output"]);
        assert_eq!(input[1]["encrypted_content"], "enc");
        assert!(input[1].get("id").is_none(), "no reference to an item the server did not store");
        assert_eq!(input[4]["call_id"], "call_A");
        assert!(
            b["tools"].as_array().is_some_and(|t| t.iter().all(|t| t["type"] == "function" && t["name"].is_string()))
        );
        // A model that does not reason is not sent reasoning options.
        let plain = ChatRequest { model: "gpt-4.1".into(), ..req };
        assert!(body(&plain, &WireOptions::default()).get("reasoning").is_none());
    }
}
