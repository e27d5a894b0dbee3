//! Opening one connection to an MCP server: a stdio child (in the command
//! sandbox when it asks for it) or streamable HTTP, the MCP handshake, the
//! first listing of its tools, and the tail of a stdio server's stderr.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;

use crate::config::{McpServerConfig, Transport};
use crate::signals::{Changed, Listing};

/// Lines of a stdio server's stderr kept to explain a failure.
const STDERR_LINES: usize = 8;

/// Tells the server task about `*/list_changed`.
pub(crate) struct Handler {
    changed: Arc<Changed>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("forge", env!("CARGO_PKG_VERSION")))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.mark(Listing::Tools);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.mark(Listing::Prompts);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.mark(Listing::Resources);
    }
}

/// The sandbox of a server with `sandbox = true`: its `cwd` writable, and
/// a private temporary directory of its own that lasts across restarts.
fn sandbox_for(
    config: &McpServerConfig,
    settings: &forge_tools::confine::Settings,
) -> Result<Option<forge_tools::supervisor::Confinement>, String> {
    // (Some: a server asking for the sandbox gets it or does not start.)
    if !settings.kernel_active() {
        // Asked for a sandbox this machine cannot give: not started.
        let why =
            forge_tools::confine::support().missing().unwrap_or_else(|| "[tools.sandbox] mode = \"paths-only\"".into());
        return Err(format!("it asks for sandbox = true, but commands cannot be confined here: {why}"));
    }
    // A fresh private directory (0700, a random name) for each start.
    let tmp = tempfile::Builder::new()
        .prefix(&format!("forge-mcp-{}-", config.name))
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?
        .keep();
    let roots: Vec<std::path::PathBuf> =
        config.cwd.iter().filter_map(|c| std::path::Path::new(c).canonicalize().ok()).collect();
    let policy = forge_tools::confine::Policy::build(settings, &roots, &tmp, false);
    Ok(Some(forge_tools::supervisor::Confinement::new(policy)))
}

/// Connects, initializes and lists the tools.
pub(crate) async fn connect(
    config: &McpServerConfig,
    http: crate::http::LazyHttp,
    changed: Arc<Changed>,
    stderr: Arc<Mutex<VecDeque<String>>>,
) -> Result<(RunningService<RoleClient, Handler>, Vec<rmcp::model::Tool>), String> {
    let handler = Handler { changed };
    let running = match config.transport() {
        Transport::Stdio { command, args } => {
            let confinement = match &config.confine {
                Some(settings) if config.sandbox == Some(true) => sandbox_for(config, settings)?,
                _ => None,
            };
            let mut cmd = forge_tools::supervisor::exec_command(command, args, confinement.as_ref());
            cmd.envs(&config.env);
            if let Some(dir) = &config.cwd {
                cmd.current_dir(dir);
            }
            let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
            // The whole group goes when the connection is dropped.
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            let (transport, err) =
                crate::stdio::ChildTransport::spawn(wrapped).map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(err) = err {
                tokio::spawn(keep_stderr(err, config.name.clone(), stderr));
            }
            handler.serve(transport).await.map_err(|e| format!("it did not complete the MCP handshake: {e}"))?
        }
        Transport::Http { url } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &config.headers {
                // Checked when the configuration was read.
                if let (Ok(k), Ok(v)) =
                    (reqwest::header::HeaderName::from_bytes(k.as_bytes()), reqwest::header::HeaderValue::from_str(v))
                {
                    headers.insert(k, v);
                }
            }
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            if let Some(var) = &config.bearer_token_env_var {
                match &config.bearer_token {
                    Some(token) => cfg = cfg.auth_header(token.clone()),
                    None => {
                        return Err(format!(
                            "the environment variable {var} (bearer_token_env_var) was not set when forged started"
                        ));
                    }
                }
            }
            let transport = StreamableHttpClientTransport::with_client(http.get(), cfg);
            handler
                .serve(transport)
                .await
                .map_err(|e| format!("it did not complete the MCP handshake at {url}: {e}"))?
        }
    };
    let tools = running.peer().list_all_tools().await.map_err(|e| format!("listing its tools failed: {e}"))?;
    Ok((running, tools))
}

/// Keeps the last lines a stdio server wrote to stderr (and logs them).
async fn keep_stderr(err: tokio::process::ChildStderr, name: String, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = tokio::io::BufReader::new(err).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %name, "stderr: {line}");
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        if t.len() == STDERR_LINES {
            t.pop_front();
        }
        t.push_back(line);
    }
}

pub(crate) fn stderr_tail(tail: &Arc<Mutex<VecDeque<String>>>) -> Option<String> {
    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
    let lines: Vec<String> = t.drain(..).collect();
    let text = lines.join(" / ");
    (!text.trim().is_empty()).then_some(text)
}
