//! Every MCP server forged runs: those of config.toml, for every session,
//! and those an editor gave one session (over ACP).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_tools::ToolExecutor;

use crate::config::{McpConfig, McpServerConfig};
use crate::extras::{PromptEntry, ResourceEntry};
use crate::http::LazyHttp;
use crate::server::{Changes, Control, Server, Status};

#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Hub>,
}

struct Hub {
    servers: Mutex<Vec<Arc<Server>>>,
    version: Arc<Changes>,
    http: LazyHttp,
}

/// A server as `forgectl mcp` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    pub name: String,
    /// The session it belongs to (servers an editor gave one session).
    pub session: Option<String>,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The command line or URL.
    pub target: String,
    /// `starting`, `ready`, `failed`, `restarting` or `stopped`.
    pub state: &'static str,
    /// Why it is down (`failed`), or the last failure.
    pub error: Option<String>,
    /// Seconds until the next attempt (`failed`).
    pub retry_in_seconds: Option<u64>,
    pub server_info: Option<String>,
    pub restarts: u32,
    pub calls: u64,
    pub tools: Vec<ToolReport>,
    /// Its prompts' names (each a `/server:prompt` command).
    pub prompts: Vec<String>,
    /// How many resources it lists.
    pub resources: usize,
}

/// A prompt a session can use as `/server:prompt`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptReport {
    pub server: String,
    pub prompt: PromptEntry,
}

/// A resource a session can attach as `@server:uri`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceReport {
    pub server: String,
    pub resource: ResourceEntry,
}

/// A prompt or resource could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ExtraError {
    #[error(transparent)]
    UnknownServer(#[from] UnknownServer),
    /// Unknown prompt, missing arguments, or the server failed or refused.
    #[error("{0}")]
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolReport {
    /// The name the model sees (`server__tool`).
    pub name: String,
    /// The name the server gave it.
    pub remote_name: String,
    pub description: String,
    pub read_only: bool,
}

/// `forgectl mcp restart` named no server forged knows.
#[derive(Debug, thiserror::Error)]
#[error("there is no MCP server called `{0}` ([[mcp.servers]] in config.toml; `forgectl mcp` lists them)")]
pub struct UnknownServer(pub String);

impl McpHub {
    /// Starts every enabled server of `config` (must run inside a tokio
    /// runtime). `http` carries the streamable-HTTP connections.
    pub fn start(config: &McpConfig, http: LazyHttp) -> McpHub {
        let version = Arc::new(Changes::default());
        let servers =
            config.servers.iter().map(|c| Server::spawn(c.clone(), None, http.clone(), version.clone())).collect();
        McpHub { inner: Arc::new(Hub { servers: Mutex::new(servers), version, http }) }
    }

    fn servers(&self) -> Vec<Arc<Server>> {
        self.inner.servers.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes whenever a server's tools or state change.
    pub fn version(&self) -> u64 {
        self.inner.version.get()
    }

    /// The servers `session` sees that are still starting for the first
    /// time (their tools are not listed yet).
    pub fn starting(&self, session: Option<&str>) -> Vec<String> {
        self.visible(session)
            .iter()
            .filter(|s| matches!(s.state.lock().map(|st| st.status.clone()), Ok(Status::Starting)))
            .map(|s| s.name().to_string())
            .collect()
    }

    /// Waits until no server `session` sees is still starting, or `limit`
    /// has passed; returns those still starting then.
    pub async fn wait_started(&self, session: Option<&str>, limit: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Taken before looking, so a change in between is not missed.
            let changed = self.inner.version.next();
            let starting = self.starting(session);
            if starting.is_empty() || tokio::time::timeout_at(deadline, changed).await.is_err() {
                return starting;
            }
        }
    }

    /// The MCP tools a session is offered: its own servers' and, where no
    /// own server has the same name, the configured ones.
    pub fn tools(&self, session: Option<&str>) -> Vec<Arc<dyn ToolExecutor>> {
        let servers = self.visible(session);
        let mut tools = Vec::new();
        for s in servers {
            let state = s.state.lock().unwrap_or_else(|p| p.into_inner());
            tools.extend(crate::tool::as_executors(&state.tools));
        }
        tools
    }

    /// The prompts of the servers `session` sees.
    pub fn prompts(&self, session: Option<&str>) -> Vec<PromptReport> {
        let mut out = Vec::new();
        for s in self.visible(session) {
            let state = s.state.lock().unwrap_or_else(|p| p.into_inner());
            let server = s.name().to_string();
            out.extend(state.prompts.iter().map(|p| PromptReport { server: server.clone(), prompt: p.clone() }));
        }
        out
    }

    /// The resources the servers `session` sees list.
    pub fn resources(&self, session: Option<&str>) -> Vec<ResourceReport> {
        let mut out = Vec::new();
        for s in self.visible(session) {
            let state = s.state.lock().unwrap_or_else(|p| p.into_inner());
            let server = s.name().to_string();
            out.extend(state.resources.iter().map(|r| ResourceReport { server: server.clone(), resource: r.clone() }));
        }
        out
    }

    fn server(&self, session: Option<&str>, name: &str) -> Result<Arc<Server>, UnknownServer> {
        self.visible(session).into_iter().find(|s| s.name() == name).ok_or_else(|| UnknownServer(name.to_string()))
    }

    /// `/server:prompt REST` as the message text: `REST` fills the
    /// prompt's arguments (see [`PromptEntry::arguments_from`]).
    pub async fn prompt_text(
        &self,
        session: Option<&str>,
        server: &str,
        prompt: &str,
        rest: &str,
    ) -> Result<String, ExtraError> {
        let s = self.server(session, server)?;
        let entry = {
            let state = s.state.lock().unwrap_or_else(|p| p.into_inner());
            state.prompts.iter().find(|p| p.name == prompt).cloned()
        };
        let Some(entry) = entry else {
            return Err(ExtraError::Failed(format!("MCP server `{server}` has no prompt `{prompt}`")));
        };
        let arguments = entry.arguments_from(server, rest).map_err(ExtraError::Failed)?;
        s.get_prompt(prompt, arguments).await.map_err(ExtraError::Failed)
    }

    /// A resource as the text attached to a message.
    pub async fn resource_text(&self, session: Option<&str>, server: &str, uri: &str) -> Result<String, ExtraError> {
        let s = self.server(session, server)?;
        s.read_resource(uri).await.map_err(ExtraError::Failed)
    }

    fn visible(&self, session: Option<&str>) -> Vec<Arc<Server>> {
        let all = self.servers();
        let own: Vec<Arc<Server>> =
            all.iter().filter(|s| s.session.is_some() && s.session.as_deref() == session).cloned().collect();
        let mut visible: Vec<Arc<Server>> =
            all.into_iter().filter(|s| s.session.is_none() && !own.iter().any(|o| o.name() == s.name())).collect();
        visible.extend(own);
        visible
    }

    /// Every server (or those `session` sees), for `forgectl mcp`.
    pub fn report(&self, session: Option<&str>) -> Vec<ServerReport> {
        let servers = match session {
            Some(_) => self.visible(session),
            None => self.servers(),
        };
        servers.iter().map(|s| report(s)).collect()
    }

    /// Reconnects a server now (its backoff is reset). With `session`,
    /// that session's own server of this name is meant first.
    pub fn restart(&self, name: &str, session: Option<&str>) -> Result<ServerReport, UnknownServer> {
        let servers = self.visible(session);
        let server = servers.iter().find(|s| s.name() == name).ok_or_else(|| UnknownServer(name.to_string()))?;
        if !server.send(Control::Restart) {
            // Its task ended (`enabled = false`): start one.
            let mut config = server.config.clone();
            config.enabled = Some(true);
            let fresh =
                Server::spawn(config, server.session.clone(), self.inner.http.clone(), self.inner.version.clone());
            let mut all = self.inner.servers.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = all.iter_mut().find(|s| Arc::ptr_eq(s, server)) {
                *slot = fresh.clone();
            }
            self.inner.version.bump();
            return Ok(report(&fresh));
        }
        Ok(report(server))
    }

    /// Starts servers for one session (an editor's, over ACP), replacing
    /// any it had.
    pub fn set_session_servers(&self, session: &str, configs: Vec<McpServerConfig>) {
        let fresh: Vec<Arc<Server>> = configs
            .into_iter()
            .map(|c| Server::spawn(c, Some(session.to_string()), self.inner.http.clone(), self.inner.version.clone()))
            .collect();
        let mut all = self.inner.servers.lock().unwrap_or_else(|p| p.into_inner());
        for old in all.iter().filter(|s| s.session.as_deref() == Some(session)) {
            old.send(Control::Shutdown);
        }
        all.retain(|s| s.session.as_deref() != Some(session));
        all.extend(fresh);
        self.inner.version.bump();
    }

    /// Stops every server and waits (a few seconds at most) until they
    /// are gone.
    pub async fn shutdown(&self) {
        let servers = std::mem::take(&mut *self.inner.servers.lock().unwrap_or_else(|p| p.into_inner()));
        for s in &servers {
            s.send(Control::Shutdown);
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        for s in &servers {
            while Instant::now() < deadline
                && !matches!(s.state.lock().map(|st| st.status.clone()), Ok(Status::Stopped))
            {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

fn report(s: &Server) -> ServerReport {
    let state = s.state.lock().unwrap_or_else(|p| p.into_inner());
    let (word, error, retry_in) = match &state.status {
        Status::Starting => ("starting", None, None),
        Status::Ready => ("ready", None, None),
        Status::Failed { error, retry_at, .. } => {
            ("failed", Some(error.clone()), Some(retry_at.saturating_duration_since(Instant::now()).as_secs()))
        }
        Status::Restarting { .. } => ("restarting", None, None),
        Status::Stopped => ("stopped", None, None),
    };
    ServerReport {
        name: s.name().to_string(),
        session: s.session.clone(),
        transport: s.config.transport_name(),
        target: s.config.target(),
        state: word,
        error: error.or_else(|| state.last_error.clone()),
        retry_in_seconds: retry_in,
        server_info: state.server_info.clone(),
        restarts: state.restarts,
        calls: s.calls.load(Ordering::Relaxed),
        tools: state
            .tools
            .iter()
            .map(|t| ToolReport {
                name: t.exposed.clone(),
                remote_name: t.remote_name.clone(),
                description: t.description.clone(),
                read_only: t.read_only,
            })
            .collect(),
        prompts: state.prompts.iter().map(|p| p.name.clone()).collect(),
        resources: state.resources.len(),
    }
}
