//! LLM providers: one streaming client per wire format, all yielding the
//! same [`ProviderEvent`]s. Requests go out over one shared reqwest client
//! (rustls); responses are parsed as SSE by `sse::SseFramer`.

mod anthropic;
mod arrivals;
mod errors;
mod gemini;
mod openai;
mod responses;
mod sse;

use std::time::Duration;

use crate::config::{ForgeConfig, expand_env_vars};
pub use crate::provider_kind::ProviderKind;
pub use crate::redact::redact_secrets;
pub use errors::{ProviderError, RetryHint};
use forge_proto::{ToolCallRecord, Usage};

use crate::tools::ToolSpec;

/// One message of the conversation sent to the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: ChatRole,
    pub text: String,
    /// Tool calls of an assistant message.
    pub tool_calls: Vec<ToolCallRecord>,
    /// For a tool result: the call it answers, and whether it failed.
    pub tool_result: Option<(String, bool)>,
    /// What the provider that wrote this answer needs back to continue
    /// (thinking signatures, reasoning items); each wire format sends only
    /// its own kind and leaves the others out.
    pub reasoning: Vec<Reasoning>,
    /// The history node it is, when it is one (not sent).
    pub node: Option<String>,
    /// Images of a user message (their data filled in by the shell just
    /// before a request: the session holds only what names them).
    pub images: Vec<ImagePart>,
}

/// A user message's parts as a wire format makes them: its images first
/// (`image(mime, base64)`), then its text (`text`; left out when empty and
/// there are images). An image whose bytes could not be read is said in
/// words instead.
pub(crate) fn user_parts(
    m: &ChatMessage,
    image: impl Fn(&str, &str) -> serde_json::Value,
    text: impl Fn(&str) -> serde_json::Value,
) -> Vec<serde_json::Value> {
    let mut parts = Vec::with_capacity(m.images.len() + 1);
    for i in &m.images {
        match &i.data {
            Some(data) => parts.push(image(&i.info.mime_type, data)),
            None => parts.push(text(&format!(
                "[image {}×{} {}: its bytes are no longer in the store]",
                i.info.width, i.info.height, i.info.mime_type
            ))),
        }
    }
    if !m.text.is_empty() || parts.is_empty() {
        parts.push(text(&m.text));
    }
    parts
}

/// Where a wire format's tool results carry only text (OpenAI's): the
/// images of the results just before, as a user message after them.
pub(crate) fn tool_images_message(images: Vec<ImagePart>) -> ChatMessage {
    let mut m = ChatMessage::user("(The images the tool results above returned.)");
    m.images = images;
    m
}

/// An image of a message, and its bytes (base64) once read for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePart {
    pub info: forge_proto::ImageInfo,
    pub data: Option<std::sync::Arc<str>>,
}

pub use crate::store::rows::Reasoning;

impl ChatMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: ChatRole::User,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_result: None,
            reasoning: Vec::new(),
            node: None,
            images: Vec::new(),
        }
    }
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCallRecord>) -> Self {
        Self {
            role: ChatRole::Assistant,
            text: text.into(),
            tool_calls,
            tool_result: None,
            reasoning: Vec::new(),
            node: None,
            images: Vec::new(),
        }
    }
    pub fn with_node(mut self, id: impl Into<String>) -> Self {
        self.node = Some(id.into());
        self
    }
    pub fn with_images(mut self, images: Vec<forge_proto::ImageInfo>) -> Self {
        self.images = images.into_iter().map(|info| ImagePart { info, data: None }).collect();
        self
    }
    pub fn with_reasoning(mut self, reasoning: Vec<Reasoning>) -> Self {
        self.reasoning = reasoning;
        self
    }
    pub fn tool_result(call_id: impl Into<String>, text: impl Into<String>, is_error: bool) -> Self {
        Self {
            role: ChatRole::Tool,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_result: Some((call_id.into(), is_error)),
            reasoning: Vec::new(),
            node: None,
            images: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatRole {
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub max_output_tokens: u32,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The final answer must be JSON valid against this schema: sent as
    /// the provider's structured output where it has one.
    pub output_schema: Option<serde_json::Value>,
    /// The provider may search the web (`[tools.web_search]`).
    pub web_search: Option<crate::tools::config::WebSearchConfig>,
    /// `temperature` and `top_p`, already fitted to the provider and model
    /// (`crate::sampling::fit`): each wire format sends what is set.
    pub sampling: forge_proto::Sampling,
    /// The session's active files, read by the shell into the request
    /// just before it goes ([`ChatRequest::read_active_files`]).
    pub active_files: Option<ActiveFilesRead>,
}

/// Active files to read into a request: their paths, and the sandbox and
/// limits they are read under.
#[derive(Debug, Clone)]
pub struct ActiveFilesRead {
    pub sandbox: crate::tools::Sandbox,
    pub limits: crate::tools::ToolLimits,
    pub paths: Vec<String>,
}

impl ChatRequest {
    /// Reads the active files' text into the request: one user message
    /// just before the last one of the user's (so the turn's earlier
    /// requests stay a cacheable prefix, and the question comes last).
    pub fn read_active_files(&mut self) {
        let Some(files) = self.active_files.take() else { return };
        let text = crate::tools::builtin::update_context::read_block(&files.sandbox, &files.limits, &files.paths);
        // Secrets in a file never reach the model, as with read_file.
        let text = crate::redact::scrub(&text).into_owned();
        let at = self.messages.iter().rposition(|m| m.role == ChatRole::User).unwrap_or(self.messages.len());
        self.messages.insert(at, ChatMessage::user(text));
    }

    /// Writes the sampling parameters that are set into `body` under the
    /// wire format's own names.
    pub(crate) fn put_sampling(&self, body: &mut serde_json::Value, temperature: &str, top_p: &str) {
        if let Some(t) = self.sampling.temperature {
            body[temperature] = serde_json::json!(t);
        }
        if let Some(p) = self.sampling.top_p {
            body[top_p] = serde_json::json!(p);
        }
    }
}

/// Providers reject a tool call without a result. A call left unanswered
/// (its turn was cancelled or interrupted) gets an honest error result
/// right after its message, so the conversation stays valid. The
/// conversation itself is borrowed, not copied (it can be megabytes).
pub fn pair_tool_results(messages: &[ChatMessage]) -> Vec<std::borrow::Cow<'_, ChatMessage>> {
    use std::borrow::Cow;
    let mut out = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        out.push(Cow::Borrowed(m));
        i += 1;
        if m.role != ChatRole::Assistant || m.tool_calls.is_empty() {
            continue;
        }
        let mut answered = std::collections::HashSet::new();
        while i < messages.len() && messages[i].role == ChatRole::Tool {
            if let Some((id, _)) = &messages[i].tool_result {
                answered.insert(id.clone());
            }
            out.push(Cow::Borrowed(&messages[i]));
            i += 1;
        }
        for call in &m.tool_calls {
            if !answered.contains(&call.id) {
                out.push(Cow::Owned(ChatMessage::tool_result(
                    call.id.clone(),
                    "error: this tool call was not executed (the turn was cancelled or interrupted)",
                    true,
                )));
            }
        }
    }
    out
}

/// Arguments as JSON for providers that want an object; invalid JSON (a
/// call cut off mid-stream) becomes an empty object.
pub(crate) fn args_object(arguments: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .filter(|v| v.is_object())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// What a provider stream yields, in order. A stream ends with exactly one
/// `Done` or `Error`.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// The model starts a tool call. `index` numbers the calls of this
    /// answer from 0, in the order they started.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of a tool call's JSON arguments; concatenated in order
    /// they form the whole arguments.
    ToolCallArgs {
        index: usize,
        fragment: String,
    },
    /// A finished thinking block's signature, a redacted block, a
    /// reasoning item: to be kept with the answer and sent back.
    Reasoning(Reasoning),
    /// The provider searched the web for the answer.
    WebSearch(String),
    /// A source the answer cites.
    Citation(forge_proto::Citation),
    Usage(Usage),
    StopReason(String),
    Done,
    Error(ProviderError),
}

/// Resolved connection settings for one provider.
#[derive(Clone)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    pub base_url: String,
    /// The key, if any. Never logged: `Debug` redacts it.
    api_key: Option<String>,
    /// True when the user pointed the provider at their own server: a key is
    /// then optional (local OpenAI-compatible servers accept none).
    pub custom_base_url: bool,
    pub options: WireOptions,
}

/// What config.toml asks of requests, per provider section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireOptions {
    /// `[anthropic] cache_enabled`: cache_control breakpoints.
    pub anthropic_cache: bool,
    /// `[anthropic] thinking_budget_tokens` when `thinking_enabled`.
    pub anthropic_thinking_budget: Option<u32>,
    /// `[openai] wire_api`: Responses (true) or Chat Completions.
    pub openai_responses: bool,
    pub reasoning_effort: Option<String>,
    pub verbosity: Option<String>,
    /// As the Responses API takes it: `auto` or `disabled`.
    pub truncation: Option<String>,
    /// `[google] thinking_enabled`: thought summaries streamed as thinking.
    pub gemini_thinking: bool,
    /// `[google] cache_ttl_seconds` when `cache_enabled`: the stable
    /// prefix (system instruction and tools) cached with `cachedContents`.
    pub gemini_cache_ttl: Option<u64>,
}

impl WireOptions {
    fn from_config(kind: ProviderKind, cfg: &ForgeConfig, custom_base_url: bool) -> Self {
        match kind {
            ProviderKind::Claude => Self {
                anthropic_cache: cfg.anthropic.cache_enabled.unwrap_or(true),
                anthropic_thinking_budget: cfg
                    .anthropic
                    .thinking_enabled
                    .unwrap_or(false)
                    .then(|| cfg.anthropic.thinking_budget_tokens.unwrap_or(DEFAULT_THINKING_BUDGET)),
                ..Self::default()
            },
            ProviderKind::OpenAi => Self {
                openai_responses: match cfg.openai.wire_api.as_deref() {
                    Some(w) => w == "responses",
                    None => !custom_base_url,
                },
                reasoning_effort: cfg.openai.reasoning_effort.clone(),
                verbosity: cfg.openai.verbosity.clone(),
                truncation: cfg.openai.truncation.as_deref().map(|t| match t {
                    "auto" => "auto".to_string(),
                    // `none` and `preserve`: never drop anything; Forge
                    // decides what a request holds.
                    _ => "disabled".to_string(),
                }),
                ..Self::default()
            },
            ProviderKind::Gemini => Self {
                gemini_thinking: cfg.google.thinking_enabled.unwrap_or(true),
                gemini_cache_ttl: cfg
                    .google
                    .cache_enabled
                    .unwrap_or(true)
                    .then(|| cfg.google.cache_ttl_seconds.unwrap_or(DEFAULT_GEMINI_CACHE_TTL)),
                ..Self::default()
            },
        }
    }

    /// Output tokens the request adds for thinking (Anthropic counts its
    /// budget inside `max_tokens`).
    pub fn thinking_tokens(&self) -> u32 {
        self.anthropic_thinking_budget.unwrap_or(0)
    }
}

/// `[anthropic] thinking_budget_tokens` when thinking is on and no budget
/// is given.
pub const DEFAULT_THINKING_BUDGET: u32 = 10_000;
/// `[google] cache_ttl_seconds` when not given.
pub const DEFAULT_GEMINI_CACHE_TTL: u64 = 3600;

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish()
    }
}

impl ProviderSettings {
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self {
            kind: ProviderKind::Claude,
            base_url: "http://127.0.0.1:9".into(),
            api_key: None,
            custom_base_url: true,
            options: WireOptions::default(),
        }
    }

    /// Settings from the config file, then the environment.
    pub fn resolve(kind: ProviderKind, cfg: &ForgeConfig) -> Self {
        let from_config = match kind {
            ProviderKind::Claude => cfg.api_keys.anthropic.as_deref(),
            ProviderKind::OpenAi => cfg.api_keys.openai.as_deref(),
            ProviderKind::Gemini => cfg.api_keys.google.as_deref(),
        }
        .map(expand_env_vars)
        .filter(|k| !k.trim().is_empty());
        let api_key = from_config.or_else(|| std::env::var(kind.key_env()).ok().filter(|k| !k.trim().is_empty()));
        let (cfg_url, env_var, default) = match kind {
            ProviderKind::Claude => {
                (cfg.anthropic.base_url.as_deref(), Some("ANTHROPIC_BASE_URL"), "https://api.anthropic.com")
            }
            ProviderKind::OpenAi => {
                (cfg.openai.base_url.as_deref(), Some("OPENAI_BASE_URL"), "https://api.openai.com/v1")
            }
            ProviderKind::Gemini => {
                (cfg.google.base_url.as_deref(), Some("GEMINI_BASE_URL"), "https://generativelanguage.googleapis.com")
            }
        };
        let custom = cfg_url
            .map(expand_env_vars)
            .or_else(|| env_var.and_then(|v| std::env::var(v).ok()))
            .filter(|u| !u.trim().is_empty());
        let custom_base_url = custom.is_some();
        let base_url = custom.unwrap_or_else(|| default.to_string()).trim_end_matches('/').to_string();
        let options = WireOptions::from_config(kind, cfg, custom_base_url);
        Self { kind, base_url, api_key, custom_base_url, options }
    }

    pub fn has_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The secrets to scrub from anything shown or logged.
    pub fn secrets(&self) -> Vec<String> {
        self.api_key.iter().cloned().collect()
    }

    /// Checks that a request can be made at all; the error says what to set.
    pub fn check_ready(&self) -> Result<(), ProviderError> {
        if self.api_key.is_none() && !self.custom_base_url {
            return Err(ProviderError::missing_key(self.kind));
        }
        Ok(())
    }

    fn config_hint(&self) -> String {
        format!(
            "set {} in forged's environment or `{} = \"...\"` under [api_keys] in $FORGE_HOME/config.toml, then restart forged (`forgectl shutdown`)",
            self.kind.key_env(),
            self.kind.config_key_name()
        )
    }
}

/// Reads at most 64 KiB of an error response.
async fn read_error_body(resp: reqwest::Response) -> String {
    use futures::StreamExt;
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        out.extend_from_slice(&chunk);
        if out.len() > 64 * 1024 {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Makes provider requests. Cheap to clone; shares one connection pool,
/// made with the first request (an idle daemon does without its TLS
/// set-up).
#[derive(Clone)]
pub struct ProviderClient {
    http: std::sync::Arc<std::sync::OnceLock<reqwest::Client>>,
    gemini_caches: std::sync::Arc<gemini::PrefixCaches>,
}

impl ProviderClient {
    pub fn new() -> Result<Self, ProviderError> {
        // reqwest is built without a default crypto provider; ring it is.
        // An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self { http: Default::default(), gemini_caches: Default::default() })
    }

    /// The HTTP client, made on first use.
    fn http(&self) -> Result<reqwest::Client, ProviderError> {
        if let Some(http) = self.http.get() {
            return Ok(http.clone());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            // Between two reads of a stream; a long answer may take minutes
            // in total, but a silent connection this long is dead.
            .read_timeout(Duration::from_secs(300))
            .user_agent(concat!("forge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(self.http.get_or_init(|| http).clone())
    }

    /// One completion as a stream of events, ending with `Done` or
    /// `Error`. Nothing is sent until it is first polled; dropping it
    /// cancels the request.
    pub fn stream(&self, settings: ProviderSettings, req: ChatRequest) -> ProviderStream {
        use futures::StreamExt;
        let http = self.http();
        let caches = self.gemini_caches.clone();
        let opened = async move {
            let http = http?;
            settings.check_ready()?;
            let wire = Wire::of(&settings);
            let request = match wire {
                Wire::Anthropic => anthropic::request(&http, &settings, &req),
                Wire::OpenAiChat => openai::request(&http, &settings, &req),
                Wire::OpenAiResponses => responses::request(&http, &settings, &req),
                Wire::Gemini => {
                    let cached = match settings.options.gemini_cache_ttl {
                        Some(ttl) => caches.prefix(&http, &settings, &req, ttl).await,
                        None => None,
                    };
                    gemini::request(&http, &settings, &req, cached.as_deref())
                }
            };
            let resp = request.send().await.map_err(|e| ProviderError::connect(&settings, &e))?;
            let status = resp.status();
            if !status.is_success() {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(errors::parse_retry_after);
                let text = read_error_body(resp).await;
                return Err(ProviderError::from_http(&settings, &req.model, status.as_u16(), &text, retry_after));
            }
            let bytes = resp.bytes_stream();
            Ok(match wire {
                Wire::Anthropic => sse::events(bytes, settings, anthropic::AnthropicParser::for_request(&req)).boxed(),
                Wire::OpenAiChat => sse::events(bytes, settings, openai::OpenAiParser::default()).boxed(),
                Wire::OpenAiResponses => sse::events(bytes, settings, responses::ResponsesParser::default()).boxed(),
                Wire::Gemini => sse::events(bytes, settings, gemini::GeminiParser::default()).boxed(),
            })
        };
        futures::stream::once(opened)
            .flat_map(|opened| match opened {
                Ok(events) => events,
                Err(e) => futures::stream::iter([ProviderEvent::Error(e)]).boxed(),
            })
            .boxed()
    }
}

/// The wire formats Forge streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAiChat,
    OpenAiResponses,
    Gemini,
}

impl Wire {
    pub fn of(settings: &ProviderSettings) -> Self {
        match settings.kind {
            ProviderKind::Claude => Self::Anthropic,
            ProviderKind::OpenAi if settings.options.openai_responses => Self::OpenAiResponses,
            ProviderKind::OpenAi => Self::OpenAiChat,
            ProviderKind::Gemini => Self::Gemini,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic-messages",
            Self::OpenAiChat => "openai-chat",
            Self::OpenAiResponses => "openai-responses",
            Self::Gemini => "gemini",
        }
    }
}

/// A provider's answer as it streams (see [`ProviderClient::stream`]).
pub type ProviderStream = futures::stream::BoxStream<'static, ProviderEvent>;

/// A one-off request's whole answer: its text and usage (an error ends it).
pub async fn collect_text(mut stream: ProviderStream) -> Result<(String, Option<forge_proto::Usage>), String> {
    use futures::StreamExt;
    let (mut text, mut usage) = (String::new(), None);
    while let Some(event) = stream.next().await {
        match event {
            ProviderEvent::TextDelta(t) => text.push_str(&t),
            ProviderEvent::Usage(u) => usage = Some(u),
            ProviderEvent::Error(e) => return Err(e.to_string()),
            ProviderEvent::Done => break,
            _ => {}
        }
    }
    Ok((text, usage))
}
