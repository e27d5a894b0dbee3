//! `web_fetch`: a web page as readable text. Size and time limits; only
//! http(s). It reaches the network, so it asks for approval by default (a
//! URL can carry data out).

use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

pub struct WebFetch;

const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
}

fn client() -> Result<&'static reqwest::Client, ToolError> {
    static CLIENT: OnceLock<Option<reqwest::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::limited(5))
                .user_agent(concat!("forge/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok()
        })
        .as_ref()
        .ok_or_else(|| ToolError::ExecutionFailed { tool: "web_fetch".into(), message: "no HTTP client".into() })
}

/// HTML to readable text: scripts, styles and tags dropped, a few entities
/// decoded, block elements on their own lines, blank lines dropped.
pub(crate) fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let rest = &lower[i..];
        if rest.starts_with("<script") || rest.starts_with("<style") || rest.starts_with("<!--") {
            let end = if rest.starts_with("<!--") {
                "-->"
            } else if rest.starts_with("<script") {
                "</script>"
            } else {
                "</style>"
            };
            i += rest.find(end).map(|p| p + end.len()).unwrap_or(rest.len());
            continue;
        }
        if rest.starts_with('<') {
            let close = rest.find('>').map(|p| p + 1).unwrap_or(rest.len());
            let tag = &rest[1..close.saturating_sub(1)];
            let name = tag.trim_start_matches('/').split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or("");
            if matches!(
                name,
                "p" | "div"
                    | "br"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "pre"
                    | "section"
                    | "article"
            ) {
                out.push('\n');
            }
            i += close;
            continue;
        }
        let ch = html[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let mut text = String::new();
    for line in decoded.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text
}

impl ToolExecutor for WebFetch {
    fn name(&self) -> &str {
        "web_fetch"
    }
    fn description(&self) -> &str {
        "Fetch a web page (http or https) and return its readable text."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        // It reaches the network: a URL can carry data out.
        true
    }
    fn approval_summary(&self, args: &Value, _sandbox: &crate::Sandbox) -> String {
        format!("fetch {}", args.get("url").and_then(Value::as_str).unwrap_or("?"))
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
                return Err(ToolError::BadArgs { message: "only http:// and https:// URLs".into() });
            }
            let failed = |message: String| ToolError::ExecutionFailed { tool: "web_fetch".into(), message };
            let resp = client()?.get(&args.url).send().await.map_err(|e| failed(format!("{}: {e}", args.url)))?;
            let status = resp.status();
            let kind =
                resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
            let mut body = Vec::new();
            let mut stream = resp.bytes_stream();
            let mut cut = false;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| failed(format!("reading {}: {e}", args.url)))?;
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY_BYTES {
                    body.truncate(MAX_BODY_BYTES);
                    cut = true;
                    break;
                }
            }
            if !status.is_success() {
                return Err(failed(format!("{} answered HTTP {}", args.url, status.as_u16())));
            }
            let raw = String::from_utf8_lossy(&body);
            let mut text = if kind.contains("html") || kind.is_empty() && raw.trim_start().starts_with('<') {
                html_to_text(&raw)
            } else if kind.starts_with("text/") || kind.contains("json") || kind.contains("xml") {
                raw.into_owned()
            } else {
                return Err(failed(format!("{} is `{kind}`, not text", args.url)));
            };
            if cut {
                text.push_str(&format!("\n[page cut at {MAX_BODY_BYTES} bytes]"));
            }
            Ok(truncate_output(text, ctx.limits.output_bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn html_becomes_readable_text() {
        let t = html_to_text(
            "<html><head><style>p{}</style><script>x()</script></head><body><h1>Title</h1><p>A &amp; B&nbsp;&lt;c&gt;</p><!-- no --><ul><li>one</li><li>two</li></ul></body></html>",
        );
        assert_eq!(t, "Title\nA & B <c>\none\ntwo\n");
    }

    #[test]
    fn fetches_a_page_from_a_loopback_server() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let out = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
            let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
            tokio::spawn(async move {
                if let Ok((mut s, _)) = listener.accept().await {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let body = "<html><body><p>Hello from loopback</p></body></html>";
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                }
            });
            let ctx = ToolCtx::for_tests(dir.path(), 10_000);
            WebFetch.execute(json!({"url": format!("http://{addr}/")}), &ctx).await
        });
        assert_eq!(out, Ok("Hello from loopback\n".into()));
        let bad =
            crate::run_blocking(&WebFetch, json!({"url": "file:///etc/passwd"}), &ToolCtx::for_tests(dir.path(), 100));
        assert!(matches!(bad, Err(ToolError::BadArgs { .. })));
    }
}
