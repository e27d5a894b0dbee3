//! Gemini, streamed (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! data-only SSE, often CRLF-framed, ending at EOF after the chunk that
//! carries `finishReason`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::sse::{ParseError, Step, WireParser};
use super::{
    ChatRequest, ChatRole, ProviderEvent, ProviderSettings, Reasoning, WireOptions, args_object, pair_tool_results,
};
use forge_proto::Usage;

/// Ids Forge gives calls that came without one (Gemini often sends none);
/// they are not echoed back to the API.
const LOCAL_ID: &str = "gemini-call-";

/// The part of every request that does not change during a session: the
/// system instruction and the tool declarations.
fn stable_prefix(req: &ChatRequest) -> Value {
    let mut prefix = json!({});
    if let Some(system) = &req.system {
        prefix["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !req.tools.is_empty() {
        let declarations: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        prefix["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    prefix
}

fn body(req: &ChatRequest, opts: &WireOptions, cached: Option<&str>) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    // A function response names the function: the call's name by its id.
    let mut names: HashMap<&str, &str> = HashMap::new();
    let paired = pair_tool_results(&req.messages);
    for m in &paired {
        for c in &m.tool_calls {
            names.insert(&c.id, &c.name);
        }
    }
    for m in &paired {
        let (role, parts) = match m.role {
            ChatRole::User => (
                "user",
                super::user_parts(
                    m,
                    |mime, data| json!({"inlineData": {"mimeType": mime, "data": data}}),
                    |text| json!({"text": text}),
                ),
            ),
            ChatRole::Assistant => {
                let signature = |call: Option<usize>| {
                    m.reasoning.iter().find_map(|r| match r {
                        Reasoning::GeminiSignature { signature, call: c } if *c == call => Some(signature.clone()),
                        _ => None,
                    })
                };
                let mut parts = Vec::new();
                if !m.text.is_empty() {
                    let mut part = json!({"text": m.text});
                    if let Some(s) = signature(None) {
                        part["thoughtSignature"] = json!(s);
                    }
                    parts.push(part);
                }
                for (i, c) in m.tool_calls.iter().enumerate() {
                    let mut call = json!({"name": c.name, "args": args_object(&c.arguments)});
                    if !c.id.starts_with(LOCAL_ID) {
                        call["id"] = json!(c.id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(s) = signature(Some(i)) {
                        part["thoughtSignature"] = json!(s);
                    }
                    parts.push(part);
                }
                ("model", parts)
            }
            ChatRole::Tool => {
                let (id, is_error) = m.tool_result.clone().unwrap_or_default();
                let key = if is_error { "error" } else { "output" };
                let mut response = json!({
                    "name": names.get(id.as_str()).copied().unwrap_or("unknown"),
                    "response": {key: m.text},
                });
                if !id.starts_with(LOCAL_ID) {
                    response["id"] = json!(id);
                }
                let mut parts = vec![json!({"functionResponse": response})];
                // The images the result carries, beside it.
                parts.extend(m.images.iter().filter_map(|i| {
                    i.data.as_ref().map(|d| json!({"inlineData": {"mimeType": i.info.mime_type, "data": d}}))
                }));
                ("user", parts)
            }
        };
        if parts.is_empty() {
            continue;
        }
        // One turn per role change: the responses to parallel calls go
        // together, as the API wants them.
        match contents.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["parts"].as_array_mut() {
                    existing.extend(parts);
                }
            }
            _ => contents.push(json!({"role": role, "parts": parts})),
        }
    }
    let mut generation = json!({"maxOutputTokens": req.max_output_tokens});
    if opts.gemini_thinking {
        generation["thinkingConfig"] = json!({"includeThoughts": true});
    }
    if let Some(schema) = &req.output_schema {
        generation["responseMimeType"] = json!("application/json");
        generation["responseJsonSchema"] = schema.clone();
    }
    let mut body = match cached {
        // The cache holds the system instruction and tools; a request that
        // uses it must not repeat them.
        Some(name) => json!({"cachedContent": name}),
        None => stable_prefix(req),
    };
    body["contents"] = Value::Array(contents);
    body["generationConfig"] = generation;
    body
}

/// Explicit caches (`cachedContents`) of the stable prefix, shared by every
/// session: one per endpoint, model and prefix. A prefix too small for the
/// API, or a refused creation, is not tried again for a while.
#[derive(Default)]
pub(crate) struct PrefixCaches {
    entries: Mutex<HashMap<u64, CacheState>>,
}

#[derive(Clone)]
enum CacheState {
    Ready { name: String, expires: Instant },
    Refused { until: Instant },
}

/// The least the API caches (Flash models; Pro ones need more, and refuse).
const MIN_CACHE_TOKENS: u64 = 1024;
/// After a refusal, requests go without a cache this long.
const RETRY_REFUSED: Duration = Duration::from_secs(600);

impl PrefixCaches {
    /// The name of a live cache of `req`'s prefix, created (or its TTL
    /// extended) if needed; `None` to send the request whole.
    pub(crate) async fn prefix(
        &self,
        http: &reqwest::Client,
        settings: &ProviderSettings,
        req: &ChatRequest,
        ttl_secs: u64,
    ) -> Option<String> {
        let prefix = stable_prefix(req);
        let text = prefix.to_string();
        if crate::catalog::estimate_tokens(text.len()) < MIN_CACHE_TOKENS {
            return None;
        }
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&settings.base_url, &req.model, &text).hash(&mut h);
            h.finish()
        };
        let ttl = Duration::from_secs(ttl_secs.max(60));
        let now = Instant::now();
        let state = self.entries.lock().ok()?.get(&key).cloned();
        match state {
            Some(CacheState::Refused { until }) if now < until => return None,
            // Well within its life: use it.
            Some(CacheState::Ready { name, expires }) if expires > now + ttl / 2 => return Some(name),
            // Past half its life: extend it (a failure means it is gone).
            Some(CacheState::Ready { name, expires }) if expires > now + Duration::from_secs(30) => {
                let url = format!("{}/v1beta/{name}?updateMask=ttl", settings.base_url);
                let sent = with_key(http.patch(&url), settings)
                    .timeout(Duration::from_secs(10))
                    .json(&json!({"ttl": format!("{}s", ttl.as_secs())}))
                    .send()
                    .await;
                if sent.is_ok_and(|r| r.status().is_success()) {
                    self.set(key, CacheState::Ready { name: name.clone(), expires: now + ttl });
                    return Some(name);
                }
            }
            _ => {}
        }
        let mut create = prefix;
        create["model"] = json!(format!("models/{}", req.model));
        create["ttl"] = json!(format!("{}s", ttl.as_secs()));
        let url = format!("{}/v1beta/cachedContents", settings.base_url);
        let resp = with_key(http.post(&url), settings).timeout(Duration::from_secs(15)).json(&create).send().await;
        let name = match resp {
            Ok(r) if r.status().is_success() => {
                r.json::<Value>().await.ok().and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
            }
            Ok(r) => {
                let status = r.status();
                let body = super::read_error_body(r).await;
                tracing::info!(model = %req.model, %status, error = %super::redact_secrets(&body, &settings.secrets()),
                    "Gemini did not cache the prompt prefix; requests go without it");
                None
            }
            Err(e) => {
                tracing::info!(model = %req.model, error = %super::redact_secrets(&e.to_string(), &settings.secrets()),
                    "cannot create a Gemini context cache; requests go without it");
                None
            }
        };
        match &name {
            Some(n) => self.set(key, CacheState::Ready { name: n.clone(), expires: now + ttl }),
            None => self.set(key, CacheState::Refused { until: now + RETRY_REFUSED }),
        }
        name
    }

    fn set(&self, key: u64, state: CacheState) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(key, state);
        }
    }
}

fn with_key(request: reqwest::RequestBuilder, settings: &ProviderSettings) -> reqwest::RequestBuilder {
    match &settings.api_key {
        Some(key) => request.header("x-goog-api-key", key),
        None => request,
    }
}

/// The request for one streamed answer.
/// The request for one streamed answer; `cached` names a cache of its
/// stable prefix.
pub(super) fn request(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    req: &ChatRequest,
    cached: Option<&str>,
) -> reqwest::RequestBuilder {
    let url = format!("{}/v1beta/models/{}:streamGenerateContent?alt=sse", settings.base_url, req.model);
    let request = http.post(&url).header("accept", "text/event-stream").json(&body(req, &settings.options, cached));
    with_key(request, settings)
}

/// The Gemini chunk stream, chunk by chunk.
#[derive(Default)]
pub(super) struct GeminiParser {
    calls: usize,
    finish: Option<String>,
    usage: Option<Usage>,
}

/// One streamed chunk, as much of it as Forge reads. Typed and borrowing:
/// the fields it does not need (model version, safety ratings, ...) are
/// skipped without being built.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default, borrow)]
    candidates: Vec<Candidate<'a>>,
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow)]
    error: Option<ChunkError<'a>>,
    #[serde(borrow)]
    prompt_feedback: Option<PromptFeedback<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow)]
    content: Option<Content<'a>>,
    #[serde(borrow)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct Content<'a> {
    #[serde(default, borrow)]
    parts: Vec<Part<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    thought: bool,
    #[serde(borrow)]
    thought_signature: Option<std::borrow::Cow<'a, str>>,
    function_call: Option<FunctionCall>,
}

#[derive(serde::Deserialize)]
struct FunctionCall {
    id: Option<String>,
    #[serde(default)]
    name: String,
    args: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct UsageMetadata {
    prompt_token_count: u64,
    tool_use_prompt_token_count: u64,
    cached_content_token_count: u64,
    candidates_token_count: u64,
    thoughts_token_count: u64,
}

#[derive(serde::Deserialize)]
struct ChunkError<'a> {
    #[serde(borrow)]
    status: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(borrow)]
    block_reason: Option<std::borrow::Cow<'a, str>>,
}

impl WireParser for GeminiParser {
    fn bare_json_lines(&self) -> bool {
        true
    }

    fn on_event(&mut self, _event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| ParseError::Broken(format!("malformed chunk ({e})")))?;
        if let Some(err) = chunk.error {
            return Err(ParseError::Reported {
                error_type: err.status.as_deref().unwrap_or("error").into(),
                message: err.message.as_deref().unwrap_or("unknown error").into(),
            });
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            return Err(ParseError::Reported {
                error_type: "blocked".into(),
                message: format!("Gemini blocked the prompt ({reason})"),
            });
        }
        let candidate = chunk.candidates.into_iter().next();
        let (content, finish) = match candidate {
            Some(c) => (c.content, c.finish_reason),
            None => (None, None),
        };
        for part in content.map(|c| c.parts).unwrap_or_default() {
            let mut call = None;
            if let Some(fc) = part.function_call {
                let index = self.calls;
                self.calls += 1;
                call = Some(index);
                let id = fc.id.filter(|i| !i.is_empty()).unwrap_or_else(|| crate::ids::new_id(LOCAL_ID));
                out.push(ProviderEvent::ToolCallStart { index, id, name: fc.name });
                let args = fc.args.filter(Value::is_object).unwrap_or_else(|| json!({}));
                out.push(ProviderEvent::ToolCallArgs { index, fragment: args.to_string() });
            } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                let text = text.into_owned();
                out.push(if part.thought {
                    ProviderEvent::ThinkingDelta(text)
                } else {
                    ProviderEvent::TextDelta(text)
                });
            }
            if let Some(signature) = part.thought_signature {
                out.push(ProviderEvent::Reasoning(Reasoning::GeminiSignature {
                    signature: signature.into_owned(),
                    call,
                }));
            }
        }
        if let Some(u) = chunk.usage_metadata {
            // Cumulative so far: the last one counts.
            self.usage = Some(Usage {
                input_tokens: (u.prompt_token_count + u.tool_use_prompt_token_count)
                    .saturating_sub(u.cached_content_token_count),
                output_tokens: u.candidates_token_count + u.thoughts_token_count,
                cache_read_tokens: u.cached_content_token_count,
                cache_write_tokens: 0,
                reasoning_tokens: u.thoughts_token_count,
                web_search_requests: 0,
            });
        }
        if let Some(reason) = finish {
            self.finish = Some(match reason.as_ref() {
                // STOP also ends an answer that calls tools.
                "STOP" if self.calls > 0 => "tool_calls".into(),
                "STOP" => "stop".into(),
                "MAX_TOKENS" => "max_tokens".into(),
                other => other.to_ascii_lowercase(),
            });
        }
        Ok(Step::Continue)
    }

    fn on_eof(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ParseError> {
        let Some(reason) = self.finish.take() else {
            return Err(ParseError::Broken("the connection closed before the answer finished".into()));
        };
        out.extend(self.usage.take().map(ProviderEvent::Usage));
        out.push(ProviderEvent::StopReason(reason));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;
    use crate::provider::sse::testing::{assert_every_split, run, tool_args};

    fn chunk(v: Value) -> String {
        format!("data: {v}\r\n\r\n")
    }

    /// A thought part, text in two chunks, then two parallel calls (the
    /// first signed) with the finish reason and usage, CRLF-framed.
    fn stream() -> String {
        let mut s = chunk(
            json!({"candidates":[{"content":{"parts":[{"text":"Plan: read.","thought":true}],"role":"model"},"index":0}],
            "usageMetadata":{"promptTokenCount":16,"totalTokenCount":16}}),
        );
        s += &chunk(json!({"candidates":[{"content":{"parts":[{"text":"Reading "}],"role":"model"},"index":0}]}));
        s += &chunk(
            json!({"candidates":[{"content":{"parts":[{"text":"\u{65e5}\u{672c}"}],"role":"model"},"index":0}]}),
        );
        s += &chunk(json!({"candidates":[{"content":{"parts":[
                {"functionCall":{"name":"read_file","args":{"path":"a.rs"}},"thoughtSignature":"c2ln"},
                {"functionCall":{"name":"glob","args":{"pattern":"*"}}}],"role":"model"},
              "finishReason":"STOP","index":0}],
            "usageMetadata":{"promptTokenCount":16,"cachedContentTokenCount":4,"candidatesTokenCount":9,"thoughtsTokenCount":5,"totalTokenCount":30},
            "modelVersion":"gemini-3.5-flash"}));
        s
    }

    #[test]
    fn thoughts_text_calls_and_signatures_parse_identically_at_every_split() {
        let body = stream();
        let (reference, ok) = run(GeminiParser::default(), &body, usize::MAX);
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(reference[0], ProviderEvent::ThinkingDelta("Plan: read.".into()));
        assert_eq!(reference[1], ProviderEvent::TextDelta("Reading ".into()));
        assert!(matches!(&reference[3], ProviderEvent::ToolCallStart { index: 0, name, .. } if name == "read_file"));
        assert_eq!(serde_json::from_str::<Value>(&tool_args(&reference, 0)).ok(), Some(json!({"path": "a.rs"})));
        assert!(reference.contains(&ProviderEvent::Reasoning(Reasoning::GeminiSignature {
            signature: "c2ln".into(),
            call: Some(0)
        })));
        assert!(reference.contains(&ProviderEvent::StopReason("tool_calls".into())));
        assert!(reference.iter().any(|e| matches!(e, ProviderEvent::Usage(u)
            if u.input_tokens == 12 && u.cache_read_tokens == 4 && u.output_tokens == 14 && u.reasoning_tokens == 5)));
        // Split anywhere, CRLF included; the generated call ids differ.
        let shape = |events: Vec<ProviderEvent>| -> Vec<ProviderEvent> {
            events
                .into_iter()
                .map(|e| match e {
                    ProviderEvent::ToolCallStart { index, name, .. } => {
                        ProviderEvent::ToolCallStart { index, id: String::new(), name }
                    }
                    other => other,
                })
                .collect()
        };
        let reference = shape(reference);
        for split in [1, 2, 3, 17, 64] {
            assert_eq!(shape(run(GeminiParser::default(), &body, split).0), reference, "split {split}");
        }
        assert_every_split(GeminiParser::default, &body, shape);
    }

    #[test]
    fn a_bare_json_error_mid_stream_is_the_providers_error() {
        let mut body = chunk(json!({"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}]}));
        body += "{\"error\": {\"code\": 503,\r\n \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\r\n";
        let (events, end) = run(GeminiParser::default(), &body, 7);
        assert_eq!(events, vec![ProviderEvent::TextDelta("Hel".into())]);
        assert!(end.is_err_and(|e| e.message.contains("The model is overloaded") && e.retry.is_some()));
    }

    #[test]
    fn errors_blocks_and_cuts_are_errors() {
        let err = chunk(json!({"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}));
        let (_, end) = run(GeminiParser::default(), &err, 5);
        assert!(end.is_err_and(|e| e.retry.is_some() && e.message.contains("overloaded")));
        let blocked = chunk(json!({"promptFeedback":{"blockReason":"SAFETY"}}));
        assert!(run(GeminiParser::default(), &blocked, 5).1.is_err_and(|e| e.message.contains("SAFETY")));
        let body = stream();
        let cut = &body[..body.rfind("data:").unwrap_or(0)];
        assert!(run(GeminiParser::default(), cut, 9).1.is_err(), "EOF without finishReason is a truncation");
    }

    #[test]
    fn the_request_sends_signatures_back_and_names_function_responses() {
        let call = |id: &str, name: &str| forge_proto::ToolCallRecord {
            id: id.into(),
            name: name.into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let answer = ChatMessage::assistant("reading", vec![call("gemini-call-1", "read_file"), call("g2", "glob")])
            .with_reasoning(vec![Reasoning::GeminiSignature { signature: "c2ln".into(), call: Some(0) }]);
        let req = ChatRequest {
            model: "gemini-3.5-flash".into(),
            system: Some("be Forge".into()),
            messages: vec![
                ChatMessage::user("go"),
                answer,
                ChatMessage::tool_result("gemini-call-1", "contents", false),
                ChatMessage::tool_result("g2", "no match", true),
            ],
            max_output_tokens: 100,
            tools: crate::tools::ToolRegistry::builtin().specs(),
            output_schema: None,
            web_search: None,
        };
        let b = body(&req, &WireOptions { gemini_thinking: true, ..Default::default() }, None);
        assert_eq!(b["systemInstruction"]["parts"][0]["text"], "be Forge");
        assert_eq!(b["generationConfig"]["thinkingConfig"]["includeThoughts"], true);
        let c = &b["contents"];
        assert_eq!(c[1]["role"], "model");
        assert_eq!(c[1]["parts"][1]["thoughtSignature"], "c2ln");
        assert!(c[1]["parts"][1]["functionCall"].get("id").is_none(), "a local id is not sent");
        assert_eq!(c[1]["parts"][2]["functionCall"]["id"], "g2");
        assert_eq!(c[2]["role"], "user");
        assert_eq!(c[2]["parts"][0]["functionResponse"]["name"], "read_file");
        assert_eq!(c[2]["parts"][1]["functionResponse"]["response"]["error"], "no match");
        assert_eq!(c.as_array().map(Vec::len), Some(3), "parallel responses share one turn");
        assert!(b["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].is_object());
        // With a cache of the prefix, the request carries its name instead.
        let c = body(&req, &WireOptions::default(), Some("cachedContents/abc"));
        assert_eq!(c["cachedContent"], "cachedContents/abc");
        assert!(c.get("systemInstruction").is_none() && c.get("tools").is_none());
        assert_eq!(c["contents"], b["contents"]);
    }
}
