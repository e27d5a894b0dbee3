//! The engine: the registry of sessions and the operations the daemon
//! exposes. It owns the store, the journal writer and the provider client;
//! it knows nothing of sockets (`forged` maps RPC calls onto it).

mod admin;
mod create;
mod git;
mod git_marks;
mod git_restore;
mod helpers;
mod images;
mod mcp;
mod queries;
mod store_admin;
mod tree;
mod trust;

pub(crate) use admin::mcp_config;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use forge_proto::params::{Addressed, SessionRef};
use forge_proto::{ClientRef, ErrorKind, EventKind, JournalHealth, JournalStatus, OperationStateKind, SessionInfo};
use tokio::sync::Mutex;

use crate::config::ForgeConfig;
use crate::error::EngineError;
use crate::forest::Forest;
use crate::journal::{JournalWriter, ResetOutcome, StoreOp, WriteBatch};
use crate::provider::{ProviderClient, ProviderKind};
use crate::session::actor::SessionActor;
use crate::session::{Reply, SessionCmd, SessionHandle};
use crate::shared::Shared;
use crate::store::Store;

pub struct EngineOptions {
    /// `$FORGE_HOME`: holds `forge.db`.
    pub home: PathBuf,
    pub config: ForgeConfig,
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Where sessions send what concerns helper agents; routed by
    /// `helpers.rs`.
    helpers: tokio::sync::mpsc::UnboundedSender<crate::session::machine::HelperOut>,
    sessions: Mutex<HashMap<String, SessionHandle>>,
    shutting_down: AtomicBool,
}

impl Engine {
    /// Opens the store, starts the writer, and recovers sessions that were
    /// interrupted or have queued messages.
    pub async fn open(opts: EngineOptions) -> Result<Engine, EngineError> {
        std::fs::create_dir_all(&opts.home)
            .map_err(|e| EngineError::internal(format!("cannot create {}: {e}", opts.home.display())))?;
        let db = opts.home.join("forge.db");
        let store = Store::open(&db, opts.config.journal.durability)
            .await
            .map_err(|e| EngineError::internal(format!("cannot open {}: {e}", db.display())))?;
        // The writer thread is detached: it ends once every handle is gone,
        // and whatever it acknowledged is committed already.
        let (writer, _writer_thread) = JournalWriter::spawn(&db, opts.config.journal.durability)
            .map_err(|e| EngineError::internal(format!("cannot open {} for writing: {e}", db.display())))?;
        let providers = ProviderClient::new()?;
        let tools = Arc::new(crate::tools::ToolRegistry::builtin());
        let prompt = Arc::new(crate::prompt::PromptTemplate::load(&opts.config, &opts.home)?);
        // MCP connections: no read timeout, an SSE stream may be quiet
        // for hours. Built when an HTTP server first connects.
        let mcp_http = forge_mcp::LazyHttp::new(|| {
            reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(15))
                .user_agent(concat!("forge/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        });
        let mut mcp_config = opts.config.mcp.clone();
        for server in mcp_config.servers.iter_mut().filter(|s| s.sandbox == Some(true)) {
            server.confine = Some(crate::tools::confine::Settings::from_config(opts.config.tools.sandbox.as_ref()));
        }
        let mcp = forge_mcp::McpHub::start(&mcp_config, mcp_http);
        let config = Arc::new(opts.config);
        let trust = crate::trust::TrustStore::open(&opts.home);
        let tool_approvals = crate::project_tools::ToolApprovals::open(&opts.home);
        let (helpers, routed) = tokio::sync::mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            db: db.clone(),
            store,
            writer,
            providers,
            tools,
            mcp,
            config,
            prompt,
            trust,
            tool_approvals,
            repo_maps: Default::default(),
            clock: crate::ids::Clock::system(),
            trackers: Default::default(),
            names: Default::default(),
        });
        let engine = Engine {
            inner: Arc::new(Inner {
                shared,
                helpers,
                sessions: Mutex::new(HashMap::new()),
                shutting_down: AtomicBool::new(false),
            }),
        };
        helpers::route(Arc::downgrade(&engine.inner), routed);
        for id in engine.inner.shared.store.sessions_needing_attention().await? {
            engine.handle(&id).await?;
        }
        Ok(engine)
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    fn check_running(&self) -> Result<(), EngineError> {
        if self.inner.shutting_down.load(Ordering::Relaxed) {
            return Err(EngineError::new(ErrorKind::ShuttingDown, "forged is shutting down"));
        }
        Ok(())
    }

    /// Resolves a selector (id, unique id prefix, or name) to a session id.
    pub async fn resolve(&self, selector: &str) -> Result<String, EngineError> {
        let selector = selector.trim();
        if selector.is_empty() {
            return Err(EngineError::new(ErrorKind::InvalidParams, "no session given"));
        }
        // A running session named by its whole id (how clients name the
        // session they just sent to) needs no query.
        if self.inner.sessions.lock().await.get(selector).is_some_and(|h| h.is_alive()) {
            return Ok(selector.to_string());
        }
        let ids = self.shared().store.find_session_ids(selector).await?;
        match ids.as_slice() {
            [id] => Ok(id.clone()),
            [] => Err(EngineError::not_found(selector)),
            _ => Err(EngineError::new(
                ErrorKind::SessionAmbiguous,
                format!("\"{selector}\" matches several sessions; give more of the id"),
            )),
        }
    }

    /// The live actor of a session, started on first use.
    async fn handle(&self, id: &str) -> Result<SessionHandle, EngineError> {
        let mut sessions = self.inner.sessions.lock().await;
        if let Some(h) = sessions.get(id)
            && h.is_alive()
        {
            return Ok(h.clone());
        }
        // Stopping: every actor was asked to stop; none starts again (a
        // helper's news arriving late would start one beside it).
        self.check_running()?;
        let row = self.shared().store.session(id).await?.ok_or_else(|| EngineError::not_found(id))?;
        let cwd = row.cwd.clone();
        let handle = SessionActor::spawn(self.inner.shared.clone(), self.inner.helpers.clone(), row).await?;
        sessions.insert(id.to_string(), handle.clone());
        self.start_project_servers(id, Path::new(&cwd));
        Ok(handle)
    }

    async fn handle_for(&self, selector: &str) -> Result<SessionHandle, EngineError> {
        let id = self.resolve(selector).await?;
        self.handle(&id).await
    }

    /// A session's command: its params go to the session named in them
    /// as they are. Returns the session's id with the answer.
    /// A command of the method table's `machine` block: handed, as the
    /// wire gave it, to the session its params name, whose machine
    /// answers it (`machine/requests.rs`).
    pub async fn request(
        &self,
        mut request: forge_proto::methods::SessionRequest,
        client: ClientRef,
    ) -> Result<serde_json::Value, EngineError> {
        let id = self.resolve(request.session()).await?;
        *request.session_mut() = id.clone();
        let cmd = |request, reply| SessionCmd::Request { request, client, reply };
        Ok(self.command_on(id, request, cmd).await?.1)
    }

    async fn command<P: Addressed, T: Send + 'static>(
        &self,
        params: P,
        cmd: impl FnOnce(P, Reply<T>) -> SessionCmd,
    ) -> Result<(String, T), EngineError> {
        let id = self.resolve(params.session()).await?;
        self.command_on(id, params, cmd).await
    }

    /// [`Self::command`] for a session already resolved to `id` (not
    /// looked up in the store a second time).
    async fn command_on<P, T: Send + 'static>(
        &self,
        id: String,
        params: P,
        cmd: impl FnOnce(P, Reply<T>) -> SessionCmd,
    ) -> Result<(String, T), EngineError> {
        self.check_running()?;
        let handle = self.handle(&id).await?;
        let answer = handle.request(|reply| cmd(params, reply)).await?;
        Ok((id, answer))
    }

    pub async fn remove(&self, params: SessionRef) -> Result<String, EngineError> {
        let git = match self.resolve(&params.session).await {
            Ok(id) => self.shared().store.session(&id).await?.and_then(|r| r.git),
            Err(_) => None,
        };
        let (id, ()) = self.command(params, |_, reply| SessionCmd::Remove { reply }).await?;
        self.inner.sessions.lock().await.remove(&id);
        crate::session::forget_saved_guard(&self.shared().db, &id);
        // Its worktree goes; its branch, and so every turn, stays.
        if let Some(git) = git {
            self.remove_git_worktree(&id, &git).await;
        }
        Ok(id)
    }

    pub async fn subscribe(&self, selector: &str, from_seq: Option<u64>) -> Result<EventFeed, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        EventFeed::new(handle, self.shared().store.clone(), self.shared().writer.clone(), from_seq)
    }

    /// Cancels running turns, waits until everything is durable, and stops
    /// the writer. Idempotent.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::Relaxed);
        let handles: Vec<SessionHandle> = self.inner.sessions.lock().await.drain().map(|(_, h)| h).collect();
        let mut waits = Vec::new();
        for h in handles {
            let (reply, rx) = tokio::sync::oneshot::channel();
            // A full command queue: the actor still exits when its handles
            // are dropped below.
            if h.command(SessionCmd::Shutdown { reply }).is_ok() {
                waits.push(rx);
            }
        }
        for w in waits {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), w).await;
        }
        self.shared().mcp.shutdown().await;
        if let Err(e) = self.shared().writer.close().await {
            tracing::error!(error = %e, "the store could not be written back before stopping");
        }
        self.shared().store.close().await;
    }
}

pub use crate::session::subscription::{EventFeed, FeedItem};
