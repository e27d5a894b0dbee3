//! One MCP server's life: connect, list its tools, serve calls, notice
//! `tools/list_changed` and a lost connection, and start again with
//! backoff. One task per server owns the connection (`connect.rs` opens
//! it); calls borrow its peer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;

use crate::config::McpServerConfig;
use crate::connect::{Handler, connect, stderr_tail};
use crate::extras::{PromptEntry, ResourceEntry};
pub(crate) use crate::signals::Control;
use crate::signals::{Changed, Listing, Orders};
use crate::tool::{McpTool, Remote};

/// The first wait before starting a failed server again; it doubles up
/// to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lasted this long starts the backoff over.
const STABLE_AFTER: Duration = Duration::from_secs(30);

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Connecting for the first time.
    Starting,
    Ready,
    /// Down: `error` says why; the next attempt is at `retry_at`.
    Failed {
        error: String,
        attempt: u32,
        retry_at: Instant,
    },
    /// Connecting again after a failure or a restart.
    Restarting {
        attempt: u32,
    },
    /// `enabled = false`, or forged is stopping.
    Stopped,
}

/// The hub's change count, and a wake-up for whoever waits on it (a turn
/// waiting for servers still starting).
#[derive(Default)]
pub(crate) struct Changes {
    count: AtomicU64,
    notify: tokio::sync::Notify,
}

impl Changes {
    pub(crate) fn bump(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.notify.notify_waiters();
    }

    pub(crate) fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Resolves at the next bump after this call (even if it is polled
    /// only later).
    pub(crate) fn next(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

pub(crate) struct Server {
    pub(crate) config: McpServerConfig,
    /// The session it belongs to, for servers an editor gave a session.
    pub(crate) session: Option<String>,
    pub(crate) state: Mutex<State>,
    pub(crate) calls: AtomicU64,
    orders: Arc<Orders>,
    /// Bumped whenever a server's tools or state change.
    version: Arc<Changes>,
}

pub(crate) struct State {
    pub status: Status,
    /// The last tools listed: still offered while the server restarts
    /// (calls then fail saying so), so the model's tools stay stable.
    pub tools: Vec<Arc<McpTool>>,
    /// Its prompts and resources (servers that offer them), listed as
    /// the tools are.
    pub prompts: Vec<PromptEntry>,
    pub resources: Vec<ResourceEntry>,
    peer: Option<Peer<RoleClient>>,
    /// `name version` as the server introduced itself.
    pub server_info: Option<String>,
    /// The last error, kept once the server is up again.
    pub last_error: Option<String>,
    pub restarts: u32,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Server {
    /// The server and its task (started at once; stopped by
    /// [`Control::Shutdown`] or when the server is dropped).
    pub(crate) fn spawn(
        config: McpServerConfig,
        session: Option<String>,
        http: crate::http::LazyHttp,
        version: Arc<Changes>,
    ) -> Arc<Server> {
        let orders = Arc::new(Orders::default());
        let enabled = config.enabled();
        let server = Arc::new(Server {
            config,
            session,
            state: Mutex::new(State {
                status: if enabled { Status::Starting } else { Status::Stopped },
                tools: Vec::new(),
                prompts: Vec::new(),
                resources: Vec::new(),
                peer: None,
                server_info: None,
                last_error: None,
                restarts: 0,
                stderr: Default::default(),
            }),
            calls: AtomicU64::new(0),
            orders: orders.clone(),
            version,
        });
        if enabled {
            tokio::spawn(run(Arc::downgrade(&server), orders, http));
        } else {
            orders.end();
        }
        server
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// Tells the server's task; false if it has ended.
    pub(crate) fn send(&self, c: Control) -> bool {
        self.orders.give(c)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state());
        self.version.bump();
    }

    /// Calls `tool` on the live connection; an error says what happened
    /// in words for the model and the user.
    pub(crate) async fn call(&self, tool: &str, arguments: serde_json::Map<String, Value>) -> Result<Value, String> {
        let peer = self.live_peer("the call")?;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        match peer.call_tool(params).await {
            Ok(result) => serde_json::to_value(&result).map_err(|e| format!("cannot read the result: {e}")),
            Err(e) => Err(self.failed(e, "the call")),
        }
    }

    /// `prompts/get`: the prompt's text.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<String, String> {
        let peer = self.live_peer("the prompt request")?;
        let params = GetPromptRequestParams::new(name.to_string()).with_arguments(arguments);
        let asked = tokio::time::timeout(self.config.tool_timeout(), peer.get_prompt(params));
        match asked.await {
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).map_err(|e| format!("cannot read the prompt: {e}"))?;
                Ok(crate::extras::prompt_text(&value))
            }
            Ok(Err(e)) => Err(self.failed(e, "the prompt")),
            Err(_) => Err(self.too_slow("prompts/get")),
        }
    }

    /// `resources/read`: the resource as the text added to a message.
    pub(crate) async fn read_resource(&self, uri: &str) -> Result<String, String> {
        let peer = self.live_peer("the resource request")?;
        let asked =
            tokio::time::timeout(self.config.tool_timeout(), peer.read_resource(ReadResourceRequestParams::new(uri)));
        match asked.await {
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).map_err(|e| format!("cannot read the resource: {e}"))?;
                Ok(crate::extras::resource_text(self.name(), uri, &value))
            }
            Ok(Err(e)) => Err(self.failed(e, "the resource")),
            Err(_) => Err(self.too_slow("resources/read")),
        }
    }

    fn too_slow(&self, method: &str) -> String {
        format!(
            "MCP server `{}` did not answer {method} within {} s (tool_timeout_seconds)",
            self.name(),
            self.config.tool_timeout().as_secs()
        )
    }

    fn live_peer(&self, what: &str) -> Result<Peer<RoleClient>, String> {
        let state = self.state();
        match (&state.status, &state.peer) {
            (Status::Ready, Some(peer)) => Ok(peer.clone()),
            (status, _) => Err(self.unavailable(status, what)),
        }
    }

    /// A failed request in words; a lost connection is restarted.
    fn failed(&self, e: ServiceError, what: &str) -> String {
        match e {
            e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                let why = format!("the connection to MCP server `{}` was lost ({e})", self.name());
                self.send(Control::Lost(why.clone()));
                format!("{why}; it is being restarted, and {what} may not have gone through")
            }
            ServiceError::McpError(e) if e.code.0 == crate::stdio::TOO_LARGE => {
                format!("MCP server `{}` {}", self.name(), e.message)
            }
            ServiceError::McpError(e) => format!("MCP server `{}` refused {what}: {}", self.name(), e.message),
            e => format!("MCP server `{}`: {e}", self.name()),
        }
    }

    fn unavailable(&self, status: &Status, what: &str) -> String {
        let name = self.name();
        match status {
            Status::Starting => {
                format!("MCP server `{name}` is still starting; {what} was not made, try again shortly")
            }
            Status::Restarting { attempt } => {
                format!("MCP server `{name}` is restarting (attempt {attempt}); {what} was not made, try again shortly")
            }
            Status::Failed { error, retry_at, .. } => format!(
                "MCP server `{name}` is down ({error}); the next attempt to start it is in {} s; {what} was not made",
                retry_at.saturating_duration_since(Instant::now()).as_secs()
            ),
            Status::Stopped => format!("MCP server `{name}` is stopped; {what} was not made"),
            Status::Ready => format!("MCP server `{name}` has no connection; {what} was not made"),
        }
    }
}

/// A server dropped (removed from the hub) stops its task, as a
/// shutdown would.
impl Drop for Server {
    fn drop(&mut self) {
        self.orders.give(Control::Shutdown);
    }
}

/// How a connection ended.
enum End {
    Lost(String),
    Restart,
    Shutdown,
}

async fn run(server: Weak<Server>, orders: Arc<Orders>, http: crate::http::LazyHttp) {
    run_until_shutdown(server, &orders, http).await;
    orders.end();
}

async fn run_until_shutdown(server: Weak<Server>, control: &Orders, http: crate::http::LazyHttp) {
    let mut attempt: u32 = 0;
    loop {
        let Some(s) = server.upgrade() else { return };
        let config = s.config.clone();
        let stderr = s.state().stderr.clone();
        drop(s);
        let changed = Arc::new(Changed::default());
        let started = Instant::now();
        let connecting = tokio::time::timeout(
            config.startup_timeout(),
            connect(&config, http.clone(), changed.clone(), stderr.clone()),
        );
        let connected = tokio::select! {
            c = connecting => match c {
                Ok(c) => c,
                Err(_) => Err(format!("it did not answer within {} s (startup_timeout_seconds)", config.startup_timeout().as_secs())),
            },
            c = control.next() => match c {
                Control::Restart | Control::Lost(_) => { attempt = 0; continue; }
                Control::Shutdown => break,
            },
        };
        let end = match connected {
            Ok((running, tools)) => {
                let peer = running.peer().clone();
                let info = running
                    .peer_info()
                    .and_then(|i| i.server_info.as_ref().map(|i| format!("{} {}", i.name, i.version)));
                let (has_prompts, has_resources) = running
                    .peer_info()
                    .map_or((false, false), |i| (i.capabilities.prompts.is_some(), i.capabilities.resources.is_some()));
                let prompts = if has_prompts { list_prompts(&peer).await } else { Vec::new() };
                let resources = if has_resources { list_resources(&peer).await } else { Vec::new() };
                let Some(s) = server.upgrade() else { return };
                let made = make_tools(&s, tools);
                s.update(|st| {
                    st.status = Status::Ready;
                    st.peer = Some(peer.clone());
                    st.server_info = info;
                    st.tools = made;
                    st.prompts = prompts;
                    st.resources = resources;
                });
                tracing::info!(server = s.name(), tools = s.state().tools.len(), "MCP server ready");
                drop(s);
                serve(&server, running, &peer, &changed, control).await
            }
            Err(error) => End::Lost(error),
        };
        let Some(s) = server.upgrade() else { return };
        s.update(|st| st.peer = None);
        match end {
            End::Shutdown => break,
            End::Restart => {
                attempt = 0;
                s.update(|st| {
                    st.restarts += 1;
                    st.status = Status::Restarting { attempt: 1 };
                });
                continue;
            }
            End::Lost(mut error) => {
                if let Some(tail) = stderr_tail(&stderr) {
                    error = format!("{error}; its stderr ended with: {tail}");
                }
                tracing::warn!(server = s.name(), "MCP server down: {error}");
                if started.elapsed() >= STABLE_AFTER {
                    attempt = 0;
                }
                attempt += 1;
                let delay = FIRST_BACKOFF.saturating_mul(1 << (attempt - 1).min(6)).min(MAX_BACKOFF);
                s.update(|st| {
                    st.last_error = Some(error.clone());
                    st.status = Status::Failed { error, attempt, retry_at: Instant::now() + delay };
                });
                drop(s);
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    c = control.next() => match c {
                        Control::Restart => attempt = 0,
                        Control::Lost(_) => {}
                        Control::Shutdown => break,
                    },
                }
                let Some(s) = server.upgrade() else { return };
                s.update(|st| {
                    st.restarts += 1;
                    st.status = Status::Restarting { attempt: attempt + 1 };
                });
            }
        }
    }
    if let Some(s) = server.upgrade() {
        s.update(|st| {
            st.status = Status::Stopped;
            st.peer = None;
        });
    }
}

/// Serves a live connection until it ends.
async fn serve(
    server: &Weak<Server>,
    running: RunningService<RoleClient, Handler>,
    peer: &Peer<RoleClient>,
    changed: &Changed,
    control: &Orders,
) -> End {
    let stop = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let end = 'serve: loop {
        tokio::select! {
            quit = &mut waiting => {
                let why = match quit {
                    Ok(rmcp::service::QuitReason::JoinError(e)) | Err(e) => format!("its connection task failed: {e}"),
                    Ok(_) => "it closed the connection".to_string(),
                };
                return End::Lost(why);
            }
            // Several notifications in a row need one listing each.
            what = changed.next() => {
                let Some(s) = server.upgrade() else { break End::Shutdown };
                for listing in what {
                    match listing {
                        Listing::Tools => match peer.list_all_tools().await {
                            Ok(tools) => {
                                let made = make_tools(&s, tools);
                                tracing::info!(server = s.name(), tools = made.len(), "MCP tools changed");
                                s.update(|st| st.tools = made);
                            }
                            Err(e) => break 'serve End::Lost(format!("listing its tools again failed: {e}")),
                        },
                        Listing::Prompts => {
                            let prompts = list_prompts(peer).await;
                            s.update(|st| st.prompts = prompts);
                        }
                        Listing::Resources => {
                            let resources = list_resources(peer).await;
                            s.update(|st| st.resources = resources);
                        }
                    }
                }
            }
            c = control.next() => match c {
                Control::Restart => break End::Restart,
                Control::Lost(why) => break End::Lost(why),
                Control::Shutdown => break End::Shutdown,
            },
        }
    };
    stop.cancel();
    let _ = waiting.await;
    end
}

impl Remote for Server {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: serde_json::Map<String, Value>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + 'a>> {
        Box::pin(Server::call(self, tool, arguments))
    }
}

fn make_tools(server: &Arc<Server>, tools: Vec<rmcp::model::Tool>) -> Vec<Arc<McpTool>> {
    let timeout = server.config.tool_timeout();
    let mut made: Vec<Arc<McpTool>> = Vec::new();
    for tool in tools {
        let Ok(value) = serde_json::to_value(&tool) else { continue };
        let Some(t) =
            McpTool::new(Arc::downgrade(&(server.clone() as Arc<dyn Remote>)), server.name(), &value, timeout)
        else {
            continue;
        };
        if made.iter().any(|m| m.exposed == t.exposed) {
            tracing::warn!(server = server.name(), tool = %t.remote_name, "two tools share the name {}; the second is not offered", t.exposed);
            continue;
        }
        made.push(Arc::new(t));
    }
    made
}

/// The server's prompts; a failed listing is logged and offers none (its
/// tools still work).
async fn list_prompts(peer: &Peer<RoleClient>) -> Vec<PromptEntry> {
    match peer.list_all_prompts().await {
        Ok(list) => list
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .filter_map(|v| PromptEntry::from_value(&v))
            .collect(),
        Err(e) => {
            tracing::warn!("listing an MCP server's prompts failed: {e}");
            Vec::new()
        }
    }
}

async fn list_resources(peer: &Peer<RoleClient>) -> Vec<ResourceEntry> {
    match peer.list_all_resources().await {
        Ok(list) => crate::extras::resources_from(list.iter().filter_map(|r| serde_json::to_value(r).ok()).collect()),
        Err(e) => {
            tracing::warn!("listing an MCP server's resources failed: {e}");
            Vec::new()
        }
    }
}
