//! The engine: the registry of sessions and the operations the daemon
//! exposes. It owns the store, the journal writer and the provider client;
//! it knows nothing of sockets (`forged` maps RPC calls onto it).

mod admin;
mod create;
mod tree;

pub(crate) use admin::mcp_config;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use forge_proto::{
    CancelResult, ClientRef, ErrorKind, EventKind, HistoryResult, JournalHealth, JournalStatus, OperationStateKind,
    SendResult, SessionEvent, SessionInfo,
};
use tokio::sync::Mutex;

use crate::config::ForgeConfig;
use crate::error::EngineError;
use crate::forest::Forest;
use crate::ids::{new_id, now_ms};
use crate::journal::{JournalWriter, ResetOutcome, StoreOp, WriteBatch};
use crate::provider::{ProviderClient, ProviderKind};
use crate::session::actor::SessionActor;
use crate::session::machine::pipeline::event_kind_name;
use crate::session::{SessionCmd, SessionHandle};
use crate::store::{SessionRow, Store};

/// What every session actor shares.
pub(crate) struct Shared {
    pub db: PathBuf,
    pub store: Store,
    pub writer: JournalWriter,
    pub providers: ProviderClient,
    /// The built-in tools.
    pub tools: Arc<crate::tools::ToolRegistry>,
    /// The MCP servers and their tools.
    pub mcp: forge_mcp::McpHub,
    pub config: Arc<ForgeConfig>,
    /// The system prompt's template (rendered per session).
    pub prompt: Arc<crate::prompt::PromptTemplate>,
    /// The folders whose own hooks and MCP servers the user trusts.
    pub trust: crate::trust::TrustStore,
}

/// How `session.send` is to answer.
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    /// Answers to ask for, each a sibling of the others (default 1).
    pub n: Option<u32>,
    /// No new message: answer what the session holds now.
    pub continued: bool,
}

pub struct EngineOptions {
    /// `$FORGE_HOME`: holds `forge.db`.
    pub home: PathBuf,
    pub config: ForgeConfig,
}

impl Shared {
    fn db_path(&self) -> &Path {
        &self.db
    }

    /// The tools `session` offers now: the built-in ones and its MCP
    /// servers' (MCP names hold `__`, so they never clash with these).
    pub(crate) fn tools_for(&self, session: &str) -> Arc<crate::tools::ToolRegistry> {
        let mcp = self.mcp.tools(Some(session));
        if mcp.is_empty() {
            return self.tools.clone();
        }
        let mut all = (*self.tools).clone();
        for tool in mcp {
            if let Err(e) = all.register(tool) {
                tracing::warn!("MCP tool not offered: {e}");
            }
        }
        Arc::new(all)
    }
}

/// Parameters of `session.create`.
#[derive(Debug, Default, Clone)]
pub struct CreateSession {
    pub name: Option<String>,
    pub cwd: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The user means it when `cwd` is a broad directory.
    pub allow_broad_root: bool,
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    sessions: Mutex<HashMap<String, SessionHandle>>,
    /// Serialises name changes so two sessions never get one name.
    names: Mutex<()>,
    shutting_down: AtomicBool,
}

const MAX_NAME_LEN: usize = 64;

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
        // for hours.
        let mcp_http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(15))
            .user_agent(concat!("forge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| EngineError::internal(format!("cannot build the HTTP client for MCP servers: {e}")))?;
        let mut mcp_config = opts.config.mcp.clone();
        for server in mcp_config.servers.iter_mut().filter(|s| s.sandbox == Some(true)) {
            server.confine = Some(crate::tools::confine::Settings::from_config(opts.config.tools.sandbox.as_ref()));
        }
        let mcp = forge_mcp::McpHub::start(&mcp_config, mcp_http);
        let config = Arc::new(opts.config);
        let trust = crate::trust::TrustStore::open(&opts.home);
        let shared = Arc::new(Shared { db: db.clone(), store, writer, providers, tools, mcp, config, prompt, trust });
        let engine = Engine {
            inner: Arc::new(Inner {
                shared,
                sessions: Mutex::new(HashMap::new()),
                names: Mutex::new(()),
                shutting_down: AtomicBool::new(false),
            }),
        };
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
        let row = self.shared().store.session(id).await?.ok_or_else(|| EngineError::not_found(id))?;
        let cwd = row.cwd.clone();
        let handle = SessionActor::spawn(self.inner.shared.clone(), row).await?;
        sessions.insert(id.to_string(), handle.clone());
        self.start_project_servers(id, Path::new(&cwd));
        Ok(handle)
    }

    async fn handle_for(&self, selector: &str) -> Result<SessionHandle, EngineError> {
        let id = self.resolve(selector).await?;
        self.handle(&id).await
    }

    fn info_from(&self, row: SessionRow, live: Option<&SessionHandle>, message_count: u64) -> SessionInfo {
        let (state, queued, last_seq, attached) = match live {
            Some(h) => {
                // State and seq from one snapshot: the state is what the
                // events up to `last_seq` made it, so a client that joins
                // with this state and follows from `last_seq + 1` misses
                // nothing (`forgectl attach --from live`).
                let s = h.snapshot.borrow().clone();
                (s.state, s.queued, s.last_seq, h.attached_count())
            }
            None => (OperationStateKind::Idle, 0, row.last_seq, 0),
        };
        SessionInfo {
            id: row.id,
            name: row.name,
            cwd: row.cwd,
            provider: row.provider,
            model: row.model,
            created_ms: row.created_ms,
            updated_ms: row.updated_ms,
            state,
            waiting_on: state.waiting_on().to_string(),
            attached_clients: attached,
            queued_messages: queued,
            message_count,
            last_seq,
            head: row.head_id,
            usage: None,
            approval_mode: row.approval.mode,
            always_allow: row.approval.always,
            untrusted: None,
        }
    }

    async fn session_info(&self, id: &str) -> Result<SessionInfo, EngineError> {
        let row = self.shared().store.session(id).await?.ok_or_else(|| EngineError::not_found(id))?;
        let count = match &row.head_id {
            Some(h) => self.shared().store.path_to(h).await?.len() as u64,
            None => 0,
        };
        let live = self.inner.sessions.lock().await.get(id).filter(|h| h.is_alive()).cloned();
        let mut info = self.info_from(row, live.as_ref(), count);
        info.usage = Some(crate::session::load::session_total(self.shared(), id).await?);
        Ok(info)
    }

    /// Starts a summary of the session's conversation up to its newest
    /// exchange.
    pub async fn summarize(&self, selector: &str) -> Result<forge_proto::SummarizeResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::Summarize { reply }).await
    }

    /// The facts kept from a session's summarized spans that match
    /// `query`, best first (what the model's `recall` tool finds).
    pub async fn recall(
        &self,
        selector: &str,
        query: &str,
        limit: Option<u32>,
    ) -> Result<forge_proto::RecallResult, EngineError> {
        let session_id = self.resolve(selector).await?;
        if query.trim().is_empty() {
            return Err(EngineError::new(ErrorKind::InvalidParams, "give words to search for"));
        }
        let limit = limit.unwrap_or(10);
        let hits = crate::librarian::recall(&self.shared().store, &session_id, query, limit).await?;
        Ok(forge_proto::RecallResult { session_id, query: query.to_string(), hits })
    }

    /// Tokens and estimated cost per session, directory and model (of one
    /// session, from a time on, if given).
    pub async fn usage(
        &self,
        selector: Option<&str>,
        since_ms: Option<i64>,
    ) -> Result<forge_proto::UsageReport, EngineError> {
        let id = match selector {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        crate::session::load::spent(self.shared(), id.as_deref(), since_ms).await
    }

    pub async fn list_sessions(&self) -> Result<Vec<SessionInfo>, EngineError> {
        let rows = self.shared().store.sessions().await?;
        let counts = self.shared().store.node_counts().await?;
        let sessions = self.inner.sessions.lock().await;
        Ok(rows
            .into_iter()
            .map(|row| {
                let live = sessions.get(&row.id).filter(|h| h.is_alive());
                let count = counts.get(&row.id).copied().unwrap_or(0);
                self.info_from(row, live, count)
            })
            .collect())
    }

    pub async fn show(&self, selector: &str) -> Result<SessionInfo, EngineError> {
        let id = self.resolve(selector).await?;
        self.session_info(&id).await
    }

    pub async fn rename(
        &self,
        selector: &str,
        name: Option<String>,
        client: ClientRef,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let name = name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
        let _names = self.inner.names.lock().await;
        if let Some(n) = &name {
            self.check_name(n, Some(&handle.id)).await?;
        }
        handle.request(|reply| SessionCmd::Rename { name, client, reply }).await?;
        drop(_names);
        self.session_info(&handle.id).await
    }

    /// Switches provider and/or model; a provider alone gets its default model.
    pub async fn configure(
        &self,
        selector: &str,
        provider: Option<String>,
        model: Option<String>,
        client: ClientRef,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let model = model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
        let (provider, model) = match provider {
            Some(p) => {
                let kind = ProviderKind::parse(&p).ok_or_else(|| {
                    EngineError::new(
                        ErrorKind::InvalidParams,
                        format!("unknown provider \"{p}\"; use claude (or anthropic), openai or gemini"),
                    )
                })?;
                (kind.as_str().to_string(), model.unwrap_or_else(|| kind.default_model().to_string()))
            }
            None => match model {
                // A model alone keeps the session's provider.
                Some(m) => (self.session_info(&handle.id).await?.provider, m),
                None => return Err(EngineError::new(ErrorKind::InvalidParams, "give a provider, a model or both")),
            },
        };
        handle.request(|reply| SessionCmd::Configure { provider, model, client, reply }).await?;
        self.session_info(&handle.id).await
    }

    pub async fn clear(&self, selector: &str, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::Clear { client, reply }).await?;
        self.session_info(&handle.id).await
    }

    /// How much of the model's window the session uses; with `system`, the
    /// system prompt its requests carry too.
    pub async fn context(
        &self,
        selector: &str,
        system: bool,
        span: Option<u32>,
    ) -> Result<forge_proto::ContextInfo, EngineError> {
        let handle = self.handle_for(selector).await?;
        let mut info = handle.request(|reply| SessionCmd::Context { system, reply }).await?;
        let store = &self.shared().store;
        let summaries = store.summaries(&handle.id).await?;
        info.summaries = summaries
            .iter()
            .filter_map(|n| {
                Some(forge_proto::SummaryInfo {
                    summary_id: n.id.clone(),
                    span: n.meta.summary_of.clone()?,
                    text: n.text.clone(),
                    created_ms: n.created_ms,
                })
            })
            .collect();
        if let Some(n) = span {
            let s = (n as usize).checked_sub(1).and_then(|i| info.summaries.get(i)).ok_or_else(|| {
                EngineError::new(
                    ErrorKind::InvalidParams,
                    format!(
                        "the session has {} summaries; --span takes 1 to {}",
                        info.summaries.len(),
                        info.summaries.len()
                    ),
                )
            })?;
            // Summaries are cumulative: the span is the path up to its last node.
            let nodes = store.path_to(&s.span.last).await?;
            info.span_messages = Some(nodes.iter().map(|n| n.to_history()).collect());
        }
        Ok(info)
    }

    pub async fn remove(&self, selector: &str) -> Result<String, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::Remove { reply }).await?;
        self.inner.sessions.lock().await.remove(&handle.id);
        Ok(handle.id)
    }

    pub async fn send(&self, selector: &str, text: String, client: ClientRef) -> Result<SendResult, EngineError> {
        self.send_with(selector, text, SendOptions::default(), client).await
    }

    /// `session.send` with its options: `n` sibling answers, or, with
    /// `continued`, an answer to what the session holds (no new message).
    pub async fn send_with(
        &self,
        selector: &str,
        text: String,
        options: SendOptions,
        client: ClientRef,
    ) -> Result<SendResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        // Prefix matching: the same message again under the same node is
        // that node, answered anew (a sibling answer), not a copy.
        let same = match options.continued {
            true => Vec::new(),
            false => self.shared().store.user_messages_under_head(&handle.id, &text).await?,
        };
        let (n, continued) = (options.n.unwrap_or(1), options.continued);
        handle.request(|reply| SessionCmd::Send { text, client, same, n, continued, reply }).await
    }

    pub async fn cancel(
        &self,
        selector: &str,
        drop_queued: bool,
        client: ClientRef,
    ) -> Result<CancelResult, EngineError> {
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::Cancel { client, drop_queued, reply }).await
    }

    /// Every pending approval of the live sessions (sessions with one are
    /// started with the daemon, so none is missed).
    pub async fn approvals(&self) -> Vec<forge_proto::PendingApproval> {
        self.inner
            .sessions
            .lock()
            .await
            .values()
            .filter(|h| h.is_alive())
            .filter_map(|h| h.snapshot.borrow().approval.clone())
            .collect()
    }

    #[allow(clippy::too_many_arguments)] // the wire's params, one by one
    pub async fn answer_approval(
        &self,
        selector: &str,
        decision: forge_proto::ApprovalDecision,
        approval_id: Option<String>,
        call_ids: Option<Vec<String>>,
        indices: Option<Vec<u32>>,
        always: bool,
        client: ClientRef,
    ) -> Result<forge_proto::ApprovalResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle
            .request(|reply| SessionCmd::Approve { decision, approval_id, call_ids, indices, always, client, reply })
            .await
    }

    /// A session's own approval rules, changed as asked.
    pub async fn approval_rules(
        &self,
        selector: &str,
        mode: Option<String>,
        allow: Vec<String>,
        clear: bool,
        client: ClientRef,
    ) -> Result<forge_proto::ApprovalRules, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::ApprovalRules { mode, allow, clear, client, reply }).await
    }

    pub async fn tool_result(
        &self,
        selector: &str,
        call_id: String,
        output: String,
        is_error: bool,
        client: ClientRef,
    ) -> Result<forge_proto::ToolResultAccepted, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::ToolResult { call_id, output, is_error, client, reply }).await
    }

    pub async fn recover(
        &self,
        selector: &str,
        action: forge_proto::RecoverAction,
        client: ClientRef,
    ) -> Result<forge_proto::RecoverResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        handle.request(|reply| SessionCmd::Recover { action, client, reply }).await
    }

    pub async fn history(&self, selector: &str) -> Result<HistoryResult, EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let messages = match &row.head_id {
            Some(h) => self.shared().store.path_to(h).await?.iter().map(|n| n.to_history()).collect(),
            None => Vec::new(),
        };
        Ok(HistoryResult { session_id: id, head: row.head_id, messages })
    }

    /// Stored events after `after_seq`, as JSON bodies.
    pub async fn events(
        &self,
        selector: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<(String, Vec<String>), EngineError> {
        let id = self.resolve(selector).await?;
        self.shared().writer.sync().await;
        let rows = self.shared().store.events_after(&id, after_seq, limit.clamp(1, 10_000)).await?;
        Ok((id, rows.into_iter().map(|(_, b)| b).collect()))
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
        self.shared().store.close().await;
    }
}

pub use crate::session::subscription::{EventFeed, FeedItem};
