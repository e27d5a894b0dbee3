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
    // Google Search grounding, run by the API. Beside function
    // declarations, Gemini 3 wants the searches it runs shown and sent back
    // (`toolCall`/`toolResponse` parts, kept as the answer's reasoning).
    if req.web_search.is_some() {
        let mut tools = prefix["tools"].as_array().cloned().unwrap_or_default();
        tools.push(json!({"googleSearch": {}}));
        let mut config = json!({"includeServerSideToolInvocations": true});
        if !req.tools.is_empty() {
            config["functionCallingConfig"] = json!({"mode": "VALIDATED"});
        }
        prefix["tools"] = Value::Array(tools);
        prefix["toolConfig"] = config;
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
                // The searches the API ran for this answer, as they came.
                let mut parts: Vec<Value> = m
                    .reasoning
                    .iter()
                    .filter_map(|r| match r {
                        Reasoning::GeminiServerPart { part } => Some(part.clone()),
                        _ => None,
                    })
                    .collect();
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
    req.put_sampling(&mut generation, "temperature", "topP");
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
    /// The searches and sources said so far (grounding metadata may come
    /// again, grown, in later chunks).
    searched: Vec<String>,
    cited: Vec<String>,
}

impl GeminiParser {
    /// Google Search grounding: each new query a search, each new web
    /// source a citation (with the first piece of the answer it supports).
    fn grounding(&mut self, g: GroundingMetadata, out: &mut Vec<ProviderEvent>) {
        for query in g.web_search_queries {
            if !self.searched.contains(&query) {
                out.push(ProviderEvent::WebSearch(query.clone()));
                self.searched.push(query);
            }
        }
        for (i, chunk) in g.grounding_chunks.into_iter().enumerate() {
            let Some(web) = chunk.web.filter(|w| !w.uri.is_empty()) else { continue };
            if self.cited.contains(&web.uri) {
                continue;
            }
            let cited_text = g
                .grounding_supports
                .iter()
                .find(|s| s.grounding_chunk_indices.contains(&i))
                .map(|s| s.segment.text.clone())
                .filter(|t| !t.is_empty());
            self.cited.push(web.uri.clone());
            out.push(ProviderEvent::Citation(forge_proto::Citation { url: web.uri, title: web.title, cited_text }));
        }
    }
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
    grounding_metadata: Option<GroundingMetadata>,
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
    /// A tool the API ran itself (Google Search), and what it found.
    tool_call: Option<Value>,
    tool_response: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct GroundingMetadata {
    web_search_queries: Vec<String>,
    grounding_chunks: Vec<GroundingChunk>,
    grounding_supports: Vec<GroundingSupport>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct GroundingChunk {
    web: Option<WebSource>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct WebSource {
    uri: String,
    title: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct GroundingSupport {
    segment: Segment,
    grounding_chunk_indices: Vec<usize>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Segment {
    text: String,
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
        let (content, finish, grounding) = match candidate {
            Some(c) => (c.content, c.finish_reason, c.grounding_metadata),
            None => (None, None, None),
        };
        for part in content.map(|c| c.parts).unwrap_or_default() {
            let mut call = None;
            if part.tool_call.is_some() || part.tool_response.is_some() {
                let mut raw = json!({});
                if let Some(v) = part.tool_call {
                    // The search is said as it starts, not with the sources.
                    let queries = v.pointer("/args/queries").and_then(Value::as_array).cloned().unwrap_or_default();
                    for q in queries.iter().filter_map(Value::as_str) {
                        if !self.searched.iter().any(|s| s == q) {
                            out.push(ProviderEvent::WebSearch(q.to_string()));
                            self.searched.push(q.to_string());
                        }
                    }
                    raw["toolCall"] = v;
                }
                if let Some(v) = part.tool_response {
                    raw["toolResponse"] = v;
                }
                if let Some(s) = part.thought_signature {
                    raw["thoughtSignature"] = json!(s);
                }
                out.push(ProviderEvent::Reasoning(Reasoning::GeminiServerPart { part: raw }));
                continue;
            }
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
        if let Some(g) = grounding {
            self.grounding(g, out);
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
                estimated: false,
            });
        }
        if let Some(usage) = &mut self.usage {
            usage.web_search_requests = self.searched.len() as u64;
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
mod tests;
