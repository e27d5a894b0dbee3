//! A small MCP server for Forge's tests, written from the wire format (not
//! with an SDK, so it checks Forge's client against the protocol itself).
//! Over stdio by default; `--http FILE` serves streamable HTTP on a
//! loopback port and writes its URL to FILE.
//!
//! Tools: `echo` (read-only), `note` (appends to `--notes FILE`), `slow`
//! (sleeps), `big` (a text of `bytes` bytes), `crash` (the process exits), `grow` (adds the tool `extra` and
//! sends `tools/list_changed`), `picture` (an image and text), `fail`
//! (`isError`). `--log FILE` gets a line per start and per call.
//!
//! Prompts: `review` (arguments `pr`, required, and `focus`) and `hello`
//! (none). Resources: `test://notes.txt` (text) and `test://logo.png`
//! (binary).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

#[derive(Parser)]
struct Args {
    /// Serve streamable HTTP and write the endpoint's URL to this file
    #[arg(long, value_name = "FILE")]
    http: Option<PathBuf>,
    /// Append a line per start and per tool call here
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Where `note` appends
    #[arg(long, value_name = "FILE")]
    notes: Option<PathBuf>,
    /// (HTTP) Refuse requests without `Authorization: Bearer TOKEN`
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Answer `initialize` only after this many milliseconds
    #[arg(long, default_value_t = 0)]
    slow_start_ms: u64,
}

struct Server {
    args: Args,
    grown: AtomicBool,
}

impl Server {
    fn log(&self, line: &str) {
        if let Some(path) = &self.args.log
            && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }

    fn tools(&self) -> Value {
        let text_arg =
            |name: &str| json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]});
        let mut tools = vec![
            json!({"name": "echo", "description": "Says the text back.", "inputSchema": text_arg("text"),
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "note", "description": "Appends the text to the notes file.", "inputSchema": text_arg("text")}),
            json!({"name": "slow", "description": "Waits, then answers.",
                   "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "big", "description": "A long text.",
                   "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "crash", "description": "The server exits.", "inputSchema": {"type": "object"}}),
            json!({"name": "grow", "description": "Adds the tool `extra`.", "inputSchema": {"type": "object"}}),
            json!({"name": "picture", "description": "An image and a caption.", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "fail", "description": "Fails.", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}}),
        ];
        if self.grown.load(Ordering::Relaxed) {
            tools.push(json!({"name": "extra", "description": "Came later.", "inputSchema": {"type": "object"},
                              "annotations": {"readOnlyHint": true}}));
        }
        json!({"tools": tools})
    }

    /// The answer to one request, and a notification to send after it.
    async fn answer(&self, method: &str, params: &Value) -> (Result<Value, (i64, String)>, Option<Value>) {
        match method {
            "initialize" => {
                if self.args.slow_start_ms > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(self.args.slow_start_ms)).await;
                }
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
                let version = if ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"].contains(&asked) {
                    asked
                } else {
                    "2025-11-25"
                };
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": true}, "prompts": {}, "resources": {}},
                    "serverInfo": {"name": "forge-mcp-test", "version": "1.0.0"},
                });
                (Ok(result), None)
            }
            "ping" => (Ok(json!({})), None),
            "tools/list" => (Ok(self.tools()), None),
            "tools/call" => self.call(params).await,
            "prompts/list" => (
                Ok(json!({"prompts": [
                    {"name": "review", "description": "Review a pull request",
                     "arguments": [{"name": "pr", "required": true}, {"name": "focus"}]},
                    {"name": "hello", "description": "Say hello"},
                ]})),
                None,
            ),
            "prompts/get" => {
                self.log(&format!("prompt {params}"));
                let args = &params["arguments"];
                let text = match params["name"].as_str() {
                    Some("review") => match args["pr"].as_str() {
                        Some(pr) => format!(
                            "Review pull request {pr}, focusing on {}.",
                            args["focus"].as_str().unwrap_or("everything")
                        ),
                        None => return (Err((-32602, "missing argument pr".into())), None),
                    },
                    Some("hello") => "Say hello from the MCP prompt.".into(),
                    _ => return (Err((-32602, "no such prompt".into())), None),
                };
                (Ok(json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]})), None)
            }
            "resources/list" => (
                Ok(json!({"resources": [
                    {"uri": "test://notes.txt", "name": "notes", "description": "The team's notes", "mimeType": "text/plain"},
                    {"uri": "test://logo.png", "name": "logo", "mimeType": "image/png"},
                ]})),
                None,
            ),
            "resources/read" => match params["uri"].as_str() {
                Some(uri @ "test://notes.txt") => {
                    (Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "ship on Friday"}]})), None)
                }
                Some(uri @ "test://logo.png") => {
                    (Ok(json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": "iVBORw0KGgo="}]})), None)
                }
                _ => (Err((-32002, "Resource not found".into())), None),
            },
            other => (Err((-32601, format!("Method not found: {other}"))), None),
        }
    }

    async fn call(&self, params: &Value) -> (Result<Value, (i64, String)>, Option<Value>) {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        self.log(&format!("call {name} {args}"));
        let text = |t: String| Ok(json!({"content": [{"type": "text", "text": t}], "isError": false}));
        match name {
            "echo" => (text(format!("echo: {}", args["text"].as_str().unwrap_or(""))), None),
            "note" => {
                let line = args["text"].as_str().unwrap_or("").to_string();
                if let Some(path) = &self.args.notes
                    && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
                {
                    let _ = writeln!(f, "{line}");
                }
                (text(format!("noted: {line}")), None)
            }
            "slow" => {
                let secs = args["seconds"].as_f64().unwrap_or(1.0);
                tokio::time::sleep(std::time::Duration::from_secs_f64(secs)).await;
                (text(format!("waited {secs} s")), None)
            }
            "big" => (text("x".repeat(args["bytes"].as_u64().unwrap_or(0) as usize)), None),
            "crash" => {
                eprintln!("forge-mcp-test: crashing on purpose");
                std::process::exit(3);
            }
            "grow" => {
                self.grown.store(true, Ordering::Relaxed);
                let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                (text("grew a tool".into()), Some(note))
            }
            "picture" => (
                Ok(json!({"content": [
                    {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "mimeType": "image/png"},
                    {"type": "text", "text": "a tiny picture"}
                ]})),
                None,
            ),
            "extra" if self.grown.load(Ordering::Relaxed) => (text("extra works".into()), None),
            "fail" => {
                (Ok(json!({"content": [{"type": "text", "text": "it failed on purpose"}], "isError": true})), None)
            }
            other => (Err((-32602, format!("Unknown tool: {other}"))), None),
        }
    }
}

fn response(id: Value, result: Result<Value, (i64, String)>) -> Value {
    match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    }
}

async fn stdio(server: Arc<Server>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(msg) = rx.recv().await {
            let mut line = msg.to_string();
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id").cloned()) else {
            continue; // a notification or a response
        };
        let (server, tx, method) = (server.clone(), tx.clone(), method.to_string());
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        // Each request on its own: a slow call does not hold up the others.
        tokio::spawn(async move {
            let (result, note) = server.answer(&method, &params).await;
            let _ = tx.send(response(id, result));
            if let Some(note) = note {
                let _ = tx.send(note);
            }
        });
    }
    // stdin closed: the client is gone.
    drop(tx);
    let _ = writer.await;
}

async fn http(server: Arc<Server>, url_file: PathBuf) -> std::io::Result<()> {
    use http_body_util::{BodyExt, Full};
    use hyper::{Method, Request, Response, StatusCode};
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    // Written whole, then renamed: a reader never sees half a URL.
    let tmp = url_file.with_extension("tmp");
    std::fs::write(&tmp, &url)?;
    std::fs::rename(&tmp, &url_file)?;
    loop {
        let (stream, _) = listener.accept().await?;
        let server = server.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let server = server.clone();
                async move {
                    let reply = |status: StatusCode, body: String| {
                        Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(bytes::Bytes::from(body)))
                    };
                    if req.uri().path() != "/mcp" {
                        return reply(StatusCode::NOT_FOUND, String::new());
                    }
                    if let Some(token) = &server.args.token {
                        let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
                        if auth != format!("Bearer {token}") {
                            return reply(StatusCode::UNAUTHORIZED, String::new());
                        }
                    }
                    if req.method() != Method::POST {
                        // No server-initiated stream.
                        return reply(StatusCode::METHOD_NOT_ALLOWED, String::new());
                    }
                    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
                        let err =
                            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
                        return reply(StatusCode::BAD_REQUEST, err.to_string());
                    };
                    let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id").cloned())
                    else {
                        return reply(StatusCode::ACCEPTED, String::new());
                    };
                    let params = msg.get("params").cloned().unwrap_or(Value::Null);
                    let (result, _) = server.answer(method, &params).await;
                    reply(StatusCode::OK, response(id, result).to_string())
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let server = Arc::new(Server { args, grown: AtomicBool::new(false) });
    server.log(&format!("start {}", std::process::id()));
    match server.args.http.clone() {
        Some(file) => {
            if let Err(e) = http(server, file).await {
                eprintln!("forge-mcp-test: {e}");
                std::process::exit(1);
            }
        }
        None => stdio(server).await,
    }
}
