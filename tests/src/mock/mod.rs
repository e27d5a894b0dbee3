//! An in-tree mock LLM server speaking the four streaming wire formats
//! Forge uses over loopback: Anthropic Messages, OpenAI Chat Completions,
//! OpenAI Responses and Gemini `streamGenerateContent`.
//!
//! What it answers is scripted by directives in the last user message, so
//! tests (and the demo) drive it through the real client:
//!
//! | directive | effect |
//! |---|---|
//! | `mock:tokens=N` | reply with `N` tokens `w0 w1 ...` (see [`token_text`]) |
//! | `mock:delay=MS` | wait `MS` ms between chunks (on a schedule: `N` chunks take `N × MS` ms) |
//! | `mock:status=CODE` | answer HTTP `CODE` with the provider's error body (429 adds `retry-after: 1`) |
//! | `mock:echo-key` | answer 400 with an error that quotes the request's API key |
//! | `mock:midstream_error=N` | after `N` text chunks, report an error inside the stream |
//! | `mock:drop=N` | after `N` text chunks, cut the connection |
//! | `mock:malformed=N` | after `N` text chunks, send an SSE event whose data is not JSON |
//! | `mock:split=N` | write the SSE bytes in pieces of `N` bytes (splits UTF-8 and lines) |
//! | `mock:pad=N` | pad each `mock:tokens` token to `N` bytes (see [`padded_token_text`]) |
//! | `mock:tool=NAME` | after the text, call tool `NAME` (repeat for parallel calls); arguments [`tool_args`] stream in small fragments |
//! | (`GET /page`) | a small HTML page, for `web_fetch` |
//! | `mock:tool=NAME:JSON` | the same with these arguments (JSON without spaces) |
//! | `mock:sleep=S` | a `run_command` call runs `echo started; sleep S` instead |
//! | `mock:stamp` | each token is `t<unix ns> `, the time the mock wrote it to the socket (for latency benchmarks) |
//! | `mock:no_usage` | (Chat Completions) no usage chunk, as llama.cpp-based servers answer |
//! | (a model named `retired-*`) | 404 with the provider's "no such model" error |
//!
//! Without directives it answers with a short text that says plainly it is
//! the mock, echoes the question and counts the messages it was sent.
//! Requests are recorded for assertions. The key `bad-key` is refused with
//! 401, like a revoked key.

/// The directives, for `forge-mock --help`.
pub const DIRECTIVES: &str = "\
Directives: words in the last user message script the reply (removed from any echo):
  mock:tokens=N             reply with N tokens `w0 w1 ...`
  mock:delay=MS             wait MS ms between chunks (overrides --delay-ms)
  mock:pad=N                pad each mock:tokens token to N bytes
  mock:tool=NAME            after the text, call tool NAME (repeat for parallel calls)
  mock:tool=NAME:JSON       the same with these arguments (JSON without spaces)
  mock:sleep=S              a run_command call runs `echo started; sleep S`
  mock:status=CODE          answer HTTP CODE with the provider's error body
  mock:echo-key             answer 400 with an error quoting the request's API key
                            (429 also sends retry-after: 1)
  mock:fail=N               ...only the first N times this message is sent
                            (`mock:status=529 mock:fail=2`: two overloads, then an answer)
  mock:retry_after=S        send retry-after: S with the error
  mock:redacted             (Anthropic) a redacted_thinking block after the thinking
  mock:thinking=N           think N pieces `thought0 thought1 ...` before answering
                            (Anthropic: a signed thinking block; Chat: reasoning_content;
                            Responses: a reasoning summary with encrypted content;
                            Gemini: thought parts; calls and text signed)
  mock:midstream_error=N    after N text chunks, report an error inside the stream
  mock:drop=N               after N text chunks, cut the connection
  mock:malformed=N          after N text chunks, send an SSE event that is not JSON
  mock:split=N              write the SSE bytes in pieces of N bytes
  mock:stamp                each token is `t<unix ns> ` (for latency benchmarks)
  mock:no_usage             (Chat Completions) send no usage, as llama.cpp-based servers do
  mock:json=VALUE           the answer is exactly this JSON (spaces written \\u0020;
                            Claude given its final_answer tool answers through it)
  mock:search               search the web first and cite a source, where the request
                            offers the provider's search ([tools.web_search])
Without directives it answers with a short text that says it is the mock, echoes
the question and counts the messages it was sent. After tool results, it says
what they were. The key `bad-key` is refused with 401; a model named `retired-*`
gets 404, the provider's \"no such model\".

Try it without a key:
  forge-mock --delay-ms 30 &        # prints ANTHROPIC_BASE_URL=, OPENAI_BASE_URL=, GEMINI_BASE_URL=
  export ANTHROPIC_BASE_URL=<printed> ANTHROPIC_API_KEY=mock
  forgectl send \"hello mock:tokens=50\"
  forgectl send \"mock:tool=write_file make a file\"   # then: forgectl approve SESSION --all
  # two helper agents at once (the task tool), each answering 40 words:
  forgectl send 'mock:tool=task:{\"description\":\"a\",\"prompt\":\"mock:tokens=40\"} mock:tool=task:{\"description\":\"b\",\"prompt\":\"mock:tokens=40\"}'";

pub mod anthropic;
pub mod gemini;
mod openai;
mod responses;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, std::io::Error>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
    Responses,
    Gemini,
}

impl Wire {
    fn format(self) -> &'static dyn Format {
        match self {
            Wire::Anthropic => &anthropic::Anthropic,
            Wire::OpenAi => &openai::OpenAi,
            Wire::Responses => &responses::Responses,
            Wire::Gemini => &gemini::Gemini,
        }
    }
}

/// What the mock reads of a request, whatever its wire format.
#[derive(Debug, Default)]
struct Conversation {
    /// Messages of the conversation (system prompts excluded).
    count: usize,
    /// The text of the last user message.
    last_user: String,
    /// The tool results the request ends with, if it ends with any.
    results: Option<Vec<String>>,
}

fn role(v: &Value) -> Option<&str> {
    v.get("role").and_then(Value::as_str)
}

fn conversation(wire: Wire, body: &Value) -> Conversation {
    let list = |key: &str| body.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    match wire {
        Wire::Anthropic | Wire::OpenAi => {
            // A system prompt sent as a message (OpenAI's `system` /
            // `developer` roles) is not part of the conversation.
            let messages: Vec<Value> =
                list("messages").into_iter().filter(|m| !matches!(role(m), Some("system" | "developer"))).collect();
            Conversation { count: messages.len(), last_user: last_user_text(body), results: tool_results(&messages) }
        }
        Wire::Responses => {
            let items = list("input");
            let trailing: Vec<String> = items
                .iter()
                .rev()
                .take_while(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"))
                .map(|i| i.get("output").map(content_text).unwrap_or_default())
                .collect();
            Conversation {
                count: items
                    .iter()
                    .filter(|i| {
                        matches!(role(i), Some("user" | "assistant"))
                            || i.get("type").and_then(Value::as_str) == Some("function_call_output")
                    })
                    .count(),
                last_user: items
                    .iter()
                    .rev()
                    .find(|i| role(i) == Some("user"))
                    .and_then(|i| i.get("content"))
                    .map(content_text)
                    .unwrap_or_default(),
                results: (!trailing.is_empty()).then(|| trailing.into_iter().rev().collect()),
            }
        }
        Wire::Gemini => {
            let contents = list("contents");
            let responses = |c: &Value| -> Vec<String> {
                c.get("parts")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.pointer("/functionResponse/response"))
                    .map(|r| r.get("output").or_else(|| r.get("error")).map(content_text).unwrap_or_default())
                    .collect()
            };
            let results = contents.last().filter(|c| role(c) == Some("user")).map(responses).filter(|r| !r.is_empty());
            Conversation {
                count: contents.len(),
                last_user: contents
                    .iter()
                    .rev()
                    .find(|c| role(c) == Some("user") && responses(c).is_empty())
                    .and_then(|c| c.get("parts"))
                    .map(content_text)
                    .unwrap_or_default(),
                results,
            }
        }
    }
}

/// One wire format's side of the conversation: how it authenticates, and
/// the SSE events of each part of a reply (split at the format's own
/// boundaries, so that a reply is these in order).
trait Format: Sync {
    fn error_body(&self, status: u16, error_type: &str, message: &str) -> String;
    /// The status a refused key gets.
    fn auth_status(&self) -> u16 {
        401
    }
    /// The key the request carries; `Err` for a request the API refuses
    /// outright (a missing required header).
    fn api_key(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, ()>;
    /// Whether a request without a key is refused (OpenAI-compatible local
    /// servers take none).
    fn key_required(&self) -> bool;
    /// Events before the first text chunk: the thinking (`thinking`, in
    /// pieces; a content block of its own before the text where the format
    /// has blocks), then the start of the text.
    fn start(&self, model: &str, thinking: &[String], counts: Counts) -> Vec<String>;
    /// A text chunk; `block` is the text's content block (after thinking).
    fn text(&self, model: &str, block: usize, chunk: &str) -> String;
    /// An error reported inside the stream.
    fn midstream_error(&self) -> String;
    /// Events after the last text chunk; `whole` is the text sent.
    fn text_end(&self, block: usize, whole: &str) -> Vec<String>;
    /// The `k`-th tool call (content block `block`), its arguments in
    /// small fragments.
    fn tool_call(&self, model: &str, block: usize, k: usize, id: &str, name: &str, args: &str) -> Vec<String>;
    /// The end of the reply: stop reason and usage.
    fn finish(&self, model: &str, tool_use: bool, counts: Counts) -> Vec<String>;
}

/// What a reply's usage reports.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    /// Input tokens not read from a cache: a quarter of the request's
    /// bytes (what a tokenizer makes of English and code, roughly).
    input: usize,
    /// Text chunks streamed.
    output: usize,
    /// Thinking pieces (reasoning tokens where the format counts them).
    thinking: usize,
    /// Input tokens read from a cache the request named or marked.
    cached_input: usize,
    /// Input tokens written to a cache the request marked.
    cache_written: usize,
    /// A redacted thinking block follows the thinking (Anthropic).
    redacted: bool,
    /// `mock:search` with the web search offered: the answer searches
    /// first and cites what it found (Anthropic).
    searched: bool,
    /// `mock:no_usage`: no usage reported (Chat Completions).
    no_usage: bool,
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub wire: Wire,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

#[derive(Debug, Clone, Default)]
pub struct MockOptions {
    /// Delay between chunks when the message gives none.
    pub default_delay_ms: u64,
    /// Appends, per streamed reply, the wall-clock time (Unix ns) at which
    /// the first text chunk was written: the benchmark's first-byte mark.
    pub first_byte_log: Option<std::path::PathBuf>,
    /// Appends each request as a JSON line (`{"path", "body"}`): what a
    /// client sent, for a user to look at (keys are in headers, not here).
    pub request_log: Option<std::path::PathBuf>,
}

pub struct MockServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockServer {
    pub async fn start(opts: MockOptions) -> std::io::Result<MockServer> {
        Self::start_on("127.0.0.1:0", opts).await
    }

    pub async fn start_on(addr: &str, opts: MockOptions) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                // Streaming servers disable Nagle; without it, a chunk written
                // while the client delays its ACK waits ~40 ms.
                let _ = stream.set_nodelay(true);
                let recorded = recorded.clone();
                let opts = opts.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, recorded.clone(), opts.clone()));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(MockServer { addr, requests, task })
    }

    /// Base URL for Anthropic (`ANTHROPIC_BASE_URL`).
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL for OpenAI (`OPENAI_BASE_URL`): Chat Completions and
    /// Responses.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for Gemini (`GEMINI_BASE_URL`, the root without `/v1beta`).
    pub fn gemini_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The body of the last request of a conversation turn (a git
    /// session's commit-message requests left out), as text.
    pub fn last_turn_request(&self) -> String {
        self.requests()
            .iter()
            .map(|r| r.body.to_string())
            .rfind(|b| !b.contains("You write git commit messages"))
            .unwrap_or_default()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A `mock:tool=NAME:JSON` directive calling `name` with `args` (the
/// directive's JSON may hold no space, so spaces are escaped).
pub fn tool_call(name: &str, args: &serde_json::Value) -> String {
    format!("mock:tool={name}:{}", args.to_string().replace(' ', "\\u0020"))
}

/// A repository map request answered: for each `=== path ===` block, the
/// path and the block's first non-empty line.
fn summaries_of(prompt: &str) -> String {
    let mut out = String::new();
    let mut lines = prompt.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(path) = line.strip_prefix("=== ").and_then(|l| l.strip_suffix(" ===")) else { continue };
        let mut first = "an empty file".to_string();
        while let Some(next) = lines.peek() {
            if next.starts_with("=== ") {
                break;
            }
            let next = lines.next().unwrap_or_default().trim();
            if !next.is_empty() && first == "an empty file" {
                first = format!("starts with \"{}\" (mock summary)", next.chars().take(60).collect::<String>());
            }
        }
        out.push_str(&format!("{path}: {first}\n"));
    }
    out
}

/// The text of a `mock:tokens=N` reply.
pub fn token_text(n: usize) -> String {
    padded_token_text(n, 0)
}

/// The text of a `mock:tokens=N mock:pad=P` reply.
pub fn padded_token_text(n: usize, pad: usize) -> String {
    (0..n).map(|i| token(i, pad)).collect()
}

fn token(i: usize, pad: usize) -> String {
    let mut t = format!("w{i}");
    while t.len() + 1 < pad {
        t.push('x');
    }
    t.push(' ');
    t
}

#[derive(Debug, Default, Clone)]
struct Script {
    tokens: Option<usize>,
    delay_ms: u64,
    status: Option<u16>,
    /// Thinking pieces before the answer.
    thinking: Option<usize>,
    /// `status` only for the first N requests carrying this message.
    fail_first: Option<u64>,
    retry_after: Option<u64>,
    midstream_error: Option<usize>,
    drop_after: Option<usize>,
    malformed_after: Option<usize>,
    split: Option<usize>,
    pad: usize,
    stamp: bool,
    /// (name, arguments if given).
    tools: Vec<(String, Option<String>)>,
    /// Input tokens the request read from (or wrote to) a cache it named
    /// or marked.
    cached_input: usize,
    cache_written: usize,
    /// `mock:redacted`: a redacted thinking block after the thinking.
    redacted: bool,
    /// The request's input tokens, as the mock counts them.
    input: usize,
    sleep: Option<u64>,
    /// `mock:json=VALUE`: the answer is exactly this JSON (compact; spaces
    /// inside strings written \u0020).
    json: Option<String>,
    /// `mock:search`: search the web first, if the request offers it.
    search: bool,
    /// `mock:no_usage`: the reply reports no usage (Chat Completions).
    no_usage: bool,
}

fn parse_script(text: &str, opts: &MockOptions) -> Script {
    let mut s = Script { delay_ms: opts.default_delay_ms, ..Default::default() };
    for word in text.split_whitespace() {
        if word == "mock:stamp" {
            s.stamp = true;
            continue;
        }
        if word == "mock:redacted" {
            s.redacted = true;
            continue;
        }
        if word == "mock:search" {
            s.search = true;
            continue;
        }
        if word == "mock:no_usage" {
            s.no_usage = true;
            continue;
        }
        let Some(rest) = word.strip_prefix("mock:") else { continue };
        if let Some(value) = rest.strip_prefix("json=") {
            s.json = serde_json::from_str::<Value>(value).ok().map(|v| v.to_string());
            continue;
        }
        if let Some(call) = rest.strip_prefix("tool=") {
            let (name, args) = match call.split_once(':') {
                Some((name, args)) => (name.to_string(), Some(args.to_string())),
                None => (call.to_string(), None),
            };
            s.tools.push((name, args));
            continue;
        }
        let Some((k, v)) = rest.split_once('=') else { continue };
        let n: Option<u64> = v.trim_end_matches(['.', ',']).parse().ok();
        match (k, n) {
            ("tokens", Some(n)) => s.tokens = Some(n as usize),
            ("delay", Some(n)) => s.delay_ms = n,
            ("status", Some(n)) => s.status = Some(n as u16),
            ("fail", Some(n)) => s.fail_first = Some(n),
            ("thinking", Some(n)) => s.thinking = Some(n.min(10_000) as usize),
            ("retry_after", Some(n)) => s.retry_after = Some(n),
            ("midstream_error", Some(n)) => s.midstream_error = Some(n as usize),
            ("drop", Some(n)) => s.drop_after = Some(n as usize),
            ("malformed", Some(n)) => s.malformed_after = Some(n as usize),
            ("split", Some(n)) => s.split = Some(n.max(1) as usize),
            ("pad", Some(n)) => s.pad = n.min(4096) as usize,
            ("sleep", Some(n)) => s.sleep = Some(n),
            _ => {}
        }
    }
    s
}

/// The text of the last user message of a request body.
fn last_user_text(body: &Value) -> String {
    body.get("messages")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")))
        .and_then(|m| m.get("content"))
        .map(content_text)
        .unwrap_or_default()
}

fn full(status: StatusCode, content_type: &str, body: String, extra: &[(&str, &str)]) -> Response<Body> {
    let mut b = Response::builder().status(status).header("content-type", content_type);
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body)).map_err(|e: Infallible| match e {}).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).map_err(|e: Infallible| match e {}).boxed()))
}

fn error_body(wire: Wire, status: u16) -> String {
    let (ty, msg) = match status {
        400 => ("invalid_request_error", "The request is invalid (mock)."),
        401 => ("authentication_error", "invalid x-api-key (mock)"),
        403 => ("permission_error", "Your key lacks permission (mock)."),
        404 => ("not_found_error", "No such model (mock)."),
        413 => ("request_too_large", "Request too large (mock)."),
        429 => ("rate_limit_error", "Number of requests has exceeded your rate limit (mock)."),
        500 => ("api_error", "Internal server error (mock)."),
        529 => ("overloaded_error", "Overloaded (mock)"),
        _ => ("api_error", "Unexpected error (mock)."),
    };
    wire.format().error_body(status, ty, msg)
}

async fn handle(
    req: Request<Incoming>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    opts: MockOptions,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    if path.starts_with("/v1beta/cachedContents") {
        return Ok(cached_contents(req, recorded).await);
    }
    if path == "/page" {
        // A web page, for web_fetch.
        let html = "<html><head><title>Mock page</title><script>var x = 1;</script></head>\
                    <body><h1>Forge mock page</h1><p>Served on loopback.</p></body></html>";
        return Ok(full(StatusCode::OK, "text/html; charset=utf-8", html.to_string(), &[]));
    }
    // Gemini names the model in the path: /v1beta/models/{model}:streamGenerateContent.
    let gemini_model = path
        .strip_prefix("/v1beta/models/")
        .and_then(|rest| rest.strip_suffix(":streamGenerateContent"))
        .map(str::to_string);
    let wire = match path.as_str() {
        "/v1/messages" => Wire::Anthropic,
        "/v1/chat/completions" | "/chat/completions" => Wire::OpenAi,
        "/v1/responses" | "/responses" => Wire::Responses,
        _ if gemini_model.is_some() => Wire::Gemini,
        _ => {
            return Ok(full(
                StatusCode::NOT_FOUND,
                "application/json",
                json!({"error":"no such route"}).to_string(),
                &[],
            ));
        }
    };
    let headers: Vec<(String, String)> =
        req.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Ok(full(StatusCode::BAD_REQUEST, "application/json", error_body(wire, 400), &[])),
    };
    if let Ok(mut r) = recorded.lock() {
        r.push(Recorded { wire, path: path.clone(), headers: headers.clone(), body: body.clone() });
    }
    if let Some(log) = &opts.request_log {
        let line = json!({"path": path, "body": body}).to_string();
        let appended = std::fs::OpenOptions::new().create(true).append(true).open(log);
        if let Ok(mut f) = appended {
            let _ = std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes());
        }
    }

    // Authentication as the real APIs check it.
    let Ok(key) = wire.format().api_key(&header) else {
        return Ok(full(StatusCode::BAD_REQUEST, "application/json", error_body(wire, 400), &[]));
    };
    if key.as_deref() == Some("bad-key") || (wire.format().key_required() && key.is_none()) {
        let status = wire.format().auth_status();
        let body = wire.format().error_body(status, "authentication_error", "invalid x-api-key (mock)");
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
        return Ok(full(code, "application/json", body, &[]));
    }

    // A retired model: the provider's "no such model".
    let asked = gemini_model.clone().or_else(|| body.get("model").and_then(Value::as_str).map(str::to_string));
    if asked.as_deref().is_some_and(|m| m.starts_with("retired-")) {
        return Ok(full(StatusCode::NOT_FOUND, "application/json", error_body(wire, 404), &[]));
    }
    let Conversation { count, last_user, results } = conversation(wire, &body);
    // Some APIs quote the key they refused: a client must not show it.
    if last_user.split_whitespace().any(|w| w == "mock:echo-key") {
        let message = format!("Incorrect API key provided: {}", key.unwrap_or_default());
        let body = wire.format().error_body(400, "invalid_request_error", &message);
        return Ok(full(StatusCode::BAD_REQUEST, "application/json", body, &[]));
    }
    // After tool results the mock answers them instead of following the
    // directives again (which would call the tools forever).
    // A git session's commit message request: answered with a message
    // made of the user's request (its directives are not for it).
    let commit_message = body.to_string().contains("You write git commit messages");
    // A repository map's summaries: one line per file asked about.
    let repo_summaries = body.to_string().contains("You summarize files for a map");
    let mut script = parse_script(if commit_message || repo_summaries { "" } else { &last_user }, &opts);
    script.input = (bytes.len() / 4).max(1);
    if wire == Wire::Gemini && body.get("cachedContent").is_some() {
        script.cached_input = CACHED_PREFIX_TOKENS;
    }
    // Anthropic: a request that marks its prefix for caching writes the
    // cache the first time that prefix comes, and reads it after.
    if wire == Wire::Anthropic && body.to_string().contains("cache_control") {
        let seen = recorded.lock().map(|r| {
            r.iter()
                .filter(|q| {
                    q.wire == Wire::Anthropic && q.body["system"] == body["system"] && q.body["tools"] == body["tools"]
                })
                .count()
        });
        // The cached prefix is part of the request: what is read from or
        // written to the cache is not counted again as input.
        let cached = CACHED_PREFIX_TOKENS.min(script.input.saturating_sub(1));
        if seen.unwrap_or(1) > 1 {
            script.cached_input = cached;
        } else {
            script.cache_written = cached;
        }
        script.input -= cached;
    }
    if results.is_some() {
        script.tools.clear();
        script.tokens = None;
        script.status = None;
    }
    // With `mock:fail=N`: how many times this message has come (this
    // request included).
    let sent = |n: u64| {
        let seen =
            recorded.lock().map(|r| r.iter().filter(|q| conversation(q.wire, &q.body).last_user == last_user).count());
        seen.unwrap_or(1) as u64 <= n
    };
    if let Some(status) = script.status
        && script.fail_first.is_none_or(sent)
    {
        let after = script.retry_after.or((status == 429).then_some(1)).map(|s| s.to_string());
        let extra: Vec<(&str, &str)> = after.iter().map(|a| ("retry-after", a.as_str())).collect();
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Ok(full(code, "application/json", error_body(wire, status), &extra));
    }
    // A search only where the request offers one (Gemini: in the cached
    // prefix the request names, if it names one).
    let tools = match body["cachedContent"].as_str() {
        Some(name) if wire == Wire::Gemini => cached_prefix(&recorded, name)["tools"].clone(),
        _ => body["tools"].clone(),
    };
    let offers_search = tools.as_array().is_some_and(|t| {
        t.iter()
            .any(|t| t["type"].as_str().is_some_and(|k| k.starts_with("web_search")) || t.get("googleSearch").is_some())
    });
    script.search &= offers_search && results.is_none();
    // Claude given the answer tool (`output_schema`) answers through it.
    let answer_tool = body["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "final_answer").cloned());
    if wire == Wire::Anthropic
        && results.is_none()
        && let (Some(tool), Some(json)) = (answer_tool, script.json.take())
    {
        let value: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
        let wrapped = tool["input_schema"]["properties"].get("value").is_some() && !value.is_object();
        let input = if wrapped { json!({"value": value}) } else { value };
        script.tools = vec![("final_answer".into(), Some(input.to_string()))];
        script.tokens = Some(0);
    }
    let chunks: Vec<String> = match (script.tokens, &results) {
        _ if repo_summaries => vec![summaries_of(&last_user)],
        (_, None) if script.json.is_some() => vec![script.json.clone().unwrap_or_default()],
        _ if commit_message => {
            let request = last_user.lines().skip_while(|l| !l.starts_with("User request:")).nth(1).unwrap_or("");
            let subject: String =
                request.split_whitespace().filter(|w| !w.starts_with("mock:")).collect::<Vec<_>>().join(" ");
            vec![format!("{subject}\n\nWritten by Forge's mock provider, not a real model.")]
        }
        (_, Some(results)) => {
            split_words(&format!("The mock received {} tool result(s): {}", results.len(), results.join(" | ")))
        }
        (Some(n), None) => (0..n).map(|i| token(i, script.pad)).collect(),
        (None, None) => {
            let question: String =
                last_user.split_whitespace().filter(|w| !w.starts_with("mock:")).collect::<Vec<_>>().join(" ");
            let text = format!(
                "This is Forge's built-in mock provider on loopback, not a real model. You said: \u{201c}{question}\u{201d}. \
                 I was sent {} message(s) of conversation.",
                count
            );
            split_words(&text)
        }
    };
    let model = gemini_model
        .or_else(|| body.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "mock-model".to_string());
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    let stamp = script.stamp;
    tokio::spawn(stream_reply(wire, model, chunks, script, tx, opts.first_byte_log.clone()));
    let stream = futures::stream::unfold(rx, move |mut rx| async move {
        let item = rx.recv().await?;
        // Stamped when hyper takes the chunk to write it: the time measured
        // starts as the bytes leave for forged, not while they wait here.
        let item = if stamp { item.map(stamp_frame) } else { item };
        Some((item, rx))
    });
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream; charset=utf-8")
        .header("cache-control", "no-cache")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).map_err(|e: Infallible| match e {}).boxed()));
    Ok(resp)
}

/// The prefix a Gemini context cache `name` was made of (the body of the
/// `cachedContents` request that made it).
fn cached_prefix(recorded: &Mutex<Vec<Recorded>>, name: &str) -> Value {
    let n: usize = name.strip_prefix("cachedContents/mock-").and_then(|n| n.parse().ok()).unwrap_or(0);
    let made = recorded.lock().ok().and_then(|r| {
        r.iter().filter(|q| q.path == "/v1beta/cachedContents").nth(n.saturating_sub(1)).map(|q| q.body.clone())
    });
    made.unwrap_or(Value::Null)
}

/// What a Gemini context cache holds, in tokens (as the mock reports it).
pub const CACHED_PREFIX_TOKENS: usize = 2000;

/// Gemini's `cachedContents`: create (POST) answers with a new cache's
/// name; a TTL update (PATCH) with the cache. Requests are recorded.
async fn cached_contents(req: Request<Incoming>, recorded: Arc<Mutex<Vec<Recorded>>>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let post = req.method() == hyper::Method::POST;
    let headers: Vec<(String, String)> =
        req.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let key = headers.iter().find(|(k, _)| k == "x-goog-api-key").map(|(_, v)| v.clone());
    if key.is_none() || key.as_deref() == Some("bad-key") {
        let refused = Wire::Gemini.format().error_body(400, "authentication_error", "");
        return full(StatusCode::BAD_REQUEST, "application/json", refused, &[]);
    }
    let n = recorded.lock().map(|mut r| {
        r.push(Recorded { wire: Wire::Gemini, path: path.clone(), headers, body: body.clone() });
        r.iter().filter(|q| q.path == "/v1beta/cachedContents").count()
    });
    let name = if post {
        format!("cachedContents/mock-{}", n.unwrap_or(0))
    } else {
        path.trim_start_matches("/v1beta/").to_string()
    };
    let answer = json!({"name": name, "model": body.get("model"), "expireTime": "2099-01-01T00:00:00Z",
        "usageMetadata": {"totalTokenCount": CACHED_PREFIX_TOKENS}});
    full(StatusCode::OK, "application/json", answer.to_string(), &[])
}

/// The tool results a request ends with, if it ends with any.
fn tool_results(messages: &[Value]) -> Option<Vec<String>> {
    let trailing_tool: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| m.get("content").map(content_text).unwrap_or_default())
        .collect();
    if !trailing_tool.is_empty() {
        return Some(trailing_tool.into_iter().rev().collect());
    }
    // Anthropic: trailing user turns made of tool_result blocks.
    let results_of = |m: &Value| -> Vec<String> {
        m.get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .map(|b| b.get("content").map(content_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut results: Vec<String> = Vec::new();
    for m in messages.iter().rev() {
        let r = results_of(m);
        if r.is_empty() {
            break;
        }
        results.splice(0..0, r);
    }
    (!results.is_empty()).then_some(results)
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("")
        }
        _ => String::new(),
    }
}

/// Splits text into word-sized chunks that concatenate back to it.
fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        cur.push(ch);
        if ch == ' ' {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A stamped token before it is stamped: as long as `t<unix ns> ` until
/// the year 2286.
const STAMP_PLACEHOLDER: &str = "t0000000000000000000 ";

/// Puts the current time into a frame's stamp placeholder.
fn stamp_frame(frame: Frame<Bytes>) -> Frame<Bytes> {
    let Some(data) = frame.data_ref() else { return frame };
    let Some(at) = data.windows(STAMP_PLACEHOLDER.len()).position(|w| w == STAMP_PLACEHOLDER.as_bytes()) else {
        return frame;
    };
    let stamp = format!("t{:019} ", unix_ns());
    let mut bytes = data.to_vec();
    bytes[at..at + stamp.len()].copy_from_slice(stamp.as_bytes());
    Frame::data(Bytes::from(bytes))
}

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

struct Writer {
    tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    split: Option<usize>,
}

impl Writer {
    async fn write(&self, text: String) -> bool {
        let bytes = Bytes::from(text);
        match self.split {
            Some(n) => {
                for piece in bytes.chunks(n) {
                    if self.tx.send(Ok(Frame::data(Bytes::copy_from_slice(piece)))).await.is_err() {
                        return false;
                    }
                }
                true
            }
            None => self.tx.send(Ok(Frame::data(bytes))).await.is_ok(),
        }
    }

    async fn cut(&self) {
        let _ = self.tx.send(Err(std::io::Error::other("mock: connection dropped"))).await;
    }
}

async fn stream_reply(
    wire: Wire,
    model: String,
    chunks: Vec<String>,
    script: Script,
    tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    first_byte_log: Option<std::path::PathBuf>,
) {
    let w = Writer { tx, split: script.split };
    let format = wire.format();
    let delay = Duration::from_millis(script.delay_ms);
    let total = chunks.len();
    let thinking: Vec<String> = (0..script.thinking.unwrap_or(0)).map(|i| format!("thought{i} ")).collect();
    // Content blocks: the thinking (if any), the text, then each tool call.
    let redacted = script.redacted && wire == Wire::Anthropic && !thinking.is_empty();
    let searched = script.search && matches!(wire, Wire::Anthropic | Wire::Responses | Wire::Gemini);
    // A search takes two content blocks (Anthropic) or one output item.
    let search_blocks = match wire {
        Wire::Anthropic => 2,
        _ => 1,
    };
    let text_block = usize::from(!thinking.is_empty()) + usize::from(redacted) + search_blocks * usize::from(searched);
    let counts = Counts {
        searched,
        input: script.input,
        output: total,
        thinking: thinking.len(),
        cached_input: script.cached_input,
        cache_written: script.cache_written,
        redacted,
        no_usage: script.no_usage,
    };
    for (i, event) in format.start(&model, &thinking, counts).into_iter().enumerate() {
        if !w.write(event).await && i == 0 {
            return;
        }
    }
    let paced = tokio::time::Instant::now();
    for (i, chunk) in chunks.iter().enumerate() {
        if script.midstream_error == Some(i) {
            let _ = w.write(format.midstream_error()).await;
            return;
        }
        if script.drop_after == Some(i) {
            w.cut().await;
            return;
        }
        if script.malformed_after == Some(i) {
            let _ = w.write("data: {this is not json\n\n".to_string()).await;
            return;
        }
        if !delay.is_zero() {
            // On a schedule from the first chunk, so the timer's coarseness
            // does not add up: `delay=1` streams 1,000 chunks a second.
            tokio::time::sleep_until(paced + delay * (i as u32 + 1)).await;
        }
        let chunk = if script.stamp { STAMP_PLACEHOLDER } else { chunk };
        if !w.write(format.text(&model, text_block, chunk)).await {
            return;
        }
        if i == 0
            && let Some(path) = &first_byte_log
        {
            log_now(path);
        }
    }
    let whole: String = chunks.iter().map(|c| if script.stamp { STAMP_PLACEHOLDER } else { c.as_str() }).collect();
    for event in format.text_end(text_block, &whole) {
        let _ = w.write(event).await;
    }
    for (k, (name, given)) in script.tools.iter().enumerate() {
        let args = match (name.as_str(), script.sleep, given) {
            (_, _, Some(args)) => args.clone(),
            ("run_command", Some(secs), None) => format!("{{\"command\": \"echo started; sleep {secs}\"}}"),
            _ => tool_args(k, name),
        };
        for event in format.tool_call(&model, text_block + 1 + k, k, &format!("call_mock_{k}"), name, &args) {
            let _ = w.write(event).await;
        }
    }
    for event in format.finish(&model, !script.tools.is_empty(), counts) {
        let _ = w.write(event).await;
    }
}

/// The JSON arguments the mock sends for its `n`-th tool call, to `name`.
pub fn tool_args(n: usize, name: &str) -> String {
    match name {
        "run_command" => "{\"command\": \"echo streamed; echo k=$ANTHROPIC_API_KEY; printf done\"}".to_string(),
        "apply_patch" => serde_json::json!({
            "patch": "LP1\nF src/file0.rs\nR\nfn main() {}\n.\nfn main() { println!(\"patched\"); }\n.\nEND\n"
        })
        .to_string(),
        "introspect" | "current_date" => "{}".to_string(),
        "write_file" => format!("{{\"path\": \"out{n}.txt\", \"content\": \"hello from the mock \\u00e9\\n\"}}"),
        _ => format!("{{\"path\": \"src/file{n}.rs\", \"start_line\": 1, \"end_line\": 50}}"),
    }
}

/// Splits `s` into pieces of about `n` bytes, on char boundaries.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in s.chars() {
        cur.push(ch);
        if cur.len() >= n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Wall-clock time in Unix nanoseconds.
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn log_now(path: &std::path::Path) {
    use std::io::Write;
    let ns = unix_ns();
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{ns}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_parsed() {
        let s = parse_script("hello mock:tokens=5 mock:delay=7 mock:status=429", &MockOptions::default());
        assert_eq!(s.tokens, Some(5));
        assert_eq!(s.delay_ms, 7);
        assert_eq!(s.status, Some(429));
    }

    #[test]
    fn words_concatenate_back() {
        let t = "a bc  d\u{1f44b} e";
        assert_eq!(split_words(t).concat(), t);
    }
}
