//! The engine: the registry of sessions and the operations the daemon
//! exposes. It owns the store, the journal writer and the provider client;
//! it knows nothing of sockets (`forged` maps RPC calls onto it).

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
    /// Per session: held while a rewind moves its files (from its idle
    /// check to the head's move), and while a message is sent or a
    /// message edited, so no turn starts in the middle of a rewind.
    files: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    shutting_down: AtomicBool,
    /// What a `SessionStart` hook added, for the session's first message.
    start_context: std::sync::Mutex<HashMap<String, String>>,
}

const MAX_NAME_LEN: usize = 64;
/// Turns a `Stop` hook may extend one after the other.
const MAX_STOP_CONTINUATIONS: u32 = 3;

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
                files: Mutex::new(HashMap::new()),
                shutting_down: AtomicBool::new(false),
                start_context: Default::default(),
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
        if self.has_hooks(crate::hooks::HookEvent::Stop, &cwd)
            && let Some(events) = handle.subscribe_live()
        {
            tokio::spawn(watch_stops(self.clone(), id.to_string(), cwd, events));
        }
        Ok(handle)
    }

    async fn handle_for(&self, selector: &str) -> Result<SessionHandle, EngineError> {
        let id = self.resolve(selector).await?;
        self.handle(&id).await
    }

    pub async fn create_session(&self, req: CreateSession, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.create_session_at(req, client, None).await
    }

    /// A new session; with `fork` (session, node), one sharing that
    /// session's path up to the node.
    async fn create_session_at(
        &self,
        req: CreateSession,
        client: ClientRef,
        fork: Option<(String, String)>,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let cfg = &self.shared().config;
        let provider_name = req.provider.unwrap_or_else(|| cfg.default_provider().as_str().to_string());
        let provider = ProviderKind::parse(&provider_name).ok_or_else(|| {
            EngineError::new(
                ErrorKind::Config,
                format!("unknown provider \"{provider_name}\"; use claude (or anthropic), openai or gemini"),
            )
        })?;
        let model = req
            .model
            .filter(|m| !m.trim().is_empty())
            .or_else(|| cfg.app.model.clone().filter(|_| req_provider_matches_config(cfg, provider)))
            .unwrap_or_else(|| provider.default_model().to_string());
        let cwd = match req.cwd {
            Some(c) if !c.is_empty() => c,
            _ => std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
        };
        if !Path::new(&cwd).is_absolute() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("cwd must be an absolute path, got \"{cwd}\""),
            ));
        }
        check_root(&cwd, req.allow_broad_root)?;
        let _names = self.inner.names.lock().await;
        if let Some(name) = &req.name {
            self.check_name(name, None).await?;
        }
        let id = new_id("s");
        let created_ms = now_ms();
        let event = SessionEvent {
            session_id: id.clone(),
            seq: 1,
            ts_ms: created_ms,
            client: Some(client),
            kind: EventKind::SessionCreated {
                name: req.name.clone(),
                cwd: cwd.clone(),
                provider: provider.as_str().into(),
                model: model.clone(),
            },
        };
        let body: Arc<str> = serde_json::to_string(&event).map_err(|e| EngineError::internal(e.to_string()))?.into();
        let mut batch = WriteBatch {
            ops: vec![
                StoreOp::CreateSession {
                    id: id.clone(),
                    name: req.name,
                    cwd,
                    provider: provider.as_str().into(),
                    model,
                    created_ms,
                },
                StoreOp::AppendEvent {
                    session_id: id.clone(),
                    seq: 1,
                    ts_ms: created_ms,
                    kind: event_kind_name(&event.kind),
                    body,
                },
            ],
        };
        let fresh = fork.is_none();
        if let Some((from, node)) = fork {
            let event = SessionEvent {
                session_id: id.clone(),
                seq: 2,
                ts_ms: created_ms,
                client: event.client.clone(),
                kind: EventKind::SessionForked { from: from.clone(), node: node.clone() },
            };
            let body: Arc<str> =
                serde_json::to_string(&event).map_err(|e| EngineError::internal(e.to_string()))?.into();
            batch.ops.push(StoreOp::ForkSession { id: id.clone(), from, node });
            batch.ops.push(StoreOp::AppendEvent {
                session_id: id.clone(),
                seq: 2,
                ts_ms: created_ms,
                kind: event_kind_name(&event.kind),
                body,
            });
        }
        self.shared().writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
        drop(_names);
        if fresh {
            self.session_start_hooks(&id).await?;
        }
        let mut info = self.session_info(&id).await?;
        self.start_project_servers(&id, Path::new(&info.cwd));
        info.untrusted = self.untrusted(Path::new(&info.cwd));
        if let Some(u) = &info.untrusted {
            tracing::info!(session = %id, dir = %u.dir, ignored = ?u.provides, "a folder's own hooks and servers are ignored until trusted");
        }
        Ok(info)
    }

    /// Whether any hook for `event` may apply in a session working in `cwd`.
    fn has_hooks(&self, event: crate::hooks::HookEvent, cwd: &str) -> bool {
        let config = &self.shared().config.hooks;
        config.hooks.iter().any(|h| h.event == event)
            || (config.import_claude && std::path::Path::new(cwd).join(".claude").is_dir())
    }

    /// Runs `event`'s hooks for session `id`, journaling each run; the
    /// runs, in order (stopping at the first that does not allow).
    async fn run_session_hooks(
        &self,
        handle: &SessionHandle,
        cwd: &str,
        event: crate::hooks::HookEvent,
        extra: serde_json::Value,
        client: Option<ClientRef>,
    ) -> Result<Vec<crate::hooks::HookRun>, EngineError> {
        let config = &self.shared().config;
        let trusted = self.shared().trust.state(Path::new(cwd)).trusted();
        let (set, _) = crate::hooks::HookSet::for_session(&config.hooks, Path::new(cwd), trusted);
        let hooks = set.matching(event, None);
        let mut runs = Vec::new();
        if hooks.is_empty() {
            return Ok(runs);
        }
        let sandbox = crate::tools::Sandbox::for_session(Path::new(cwd), &config.tools);
        for hook in &hooks {
            let input = crate::hooks::input(event, &handle.id, cwd, extra.clone());
            let run = crate::hooks::run(hook, &input, &sandbox, None).await;
            let (journaled, c) = (run.clone(), client.clone());
            handle.request(|reply| SessionCmd::HookRan { run: journaled, client: c, reply }).await?;
            let stop = run.decision != crate::hooks::HookDecision::Allow;
            runs.push(run);
            if stop {
                break;
            }
        }
        Ok(runs)
    }

    /// `SessionStart` hooks of a new session: what they add goes with its
    /// first message.
    async fn session_start_hooks(&self, id: &str) -> Result<(), EngineError> {
        let Some(row) = self.shared().store.session(id).await? else { return Ok(()) };
        if !self.has_hooks(crate::hooks::HookEvent::SessionStart, &row.cwd) {
            return Ok(());
        }
        let handle = self.handle(id).await?;
        let runs = self
            .run_session_hooks(
                &handle,
                &row.cwd,
                crate::hooks::HookEvent::SessionStart,
                serde_json::json!({"source": "startup"}),
                None,
            )
            .await?;
        let added: Vec<String> = runs.into_iter().filter_map(|r| r.context).collect();
        if !added.is_empty() {
            self.inner.start_context.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), added.join("\n"));
        }
        Ok(())
    }

    /// `Stop` hooks after a turn ended: the reason of one that blocks, to
    /// send the model on with.
    async fn stop_hooks(&self, id: &str, cwd: &str, active: bool) -> Option<String> {
        let handle = self.handle(id).await.ok()?;
        let runs = self
            .run_session_hooks(
                &handle,
                cwd,
                crate::hooks::HookEvent::Stop,
                serde_json::json!({"stop_hook_active": active}),
                None,
            )
            .await
            .ok()?;
        let last = runs.last()?;
        // A Stop hook's `continue: false` means "stop": that is no reason
        // to send the model on.
        (last.decision == crate::hooks::HookDecision::Block && !last.halt)
            .then(|| last.reason.clone().unwrap_or_else(|| "a Stop hook asked to go on".into()))
    }

    /// A node of a session's tree named by id, bookmark or id prefix.
    async fn resolve_node(&self, session: &str, node: &str) -> Result<(Forest, String), EngineError> {
        let forest = Forest::new(self.shared().store.tree(session).await?);
        let node = node.trim();
        if forest.contains(node) {
            return Ok((forest, node.to_string()));
        }
        if let Some((_, id)) = self.shared().store.bookmarks(session).await?.into_iter().find(|(name, _)| name == node)
        {
            return Ok((forest, id));
        }
        let matches: Vec<String> =
            forest.nodes().filter(|n| !node.is_empty() && n.id.starts_with(node)).map(|n| n.id.clone()).collect();
        match matches.as_slice() {
            [one] => {
                let one = one.clone();
                Ok((forest, one))
            }
            [] => Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!(
                    "no node `{node}` in session {session} (by id, id prefix or bookmark); `forgectl tree {session}` lists them"
                ),
            )),
            many => Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("`{node}` matches {} nodes; give more of the id", many.len()),
            )),
        }
    }

    /// Every node of a session's tree, with its head and bookmarks.
    pub async fn tree(&self, selector: &str) -> Result<forge_proto::TreeInfo, EngineError> {
        let id = self.resolve(selector).await?;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let forest = Forest::new(store.tree(&id).await?);
        let on_path: std::collections::HashSet<&str> = match row.head_id.as_deref() {
            Some(h) => forest.path(h)?.into_iter().map(|n| n.id.as_str()).collect(),
            None => Default::default(),
        };
        let bookmarks = store.bookmarks(&id).await?;
        let mut files: std::collections::HashMap<String, Vec<String>> = Default::default();
        // A call that left a file as it was (it failed, say) changed nothing.
        for c in self.lineage_changes(&id).await?.into_iter().filter(|c| !(c.done && c.before == c.after)) {
            let paths = files.entry(c.node_id).or_default();
            if !paths.contains(&c.path) {
                paths.push(c.path);
            }
        }
        let marks = |node: &str| -> Vec<String> {
            bookmarks.iter().filter(|(_, n)| n == node).map(|(name, _)| name.clone()).collect()
        };
        let nodes = forest
            .nodes()
            .map(|n| forge_proto::TreeNode {
                id: n.id.clone(),
                parent_id: n.parent_id.clone(),
                role: n.role,
                preview: crate::forest::preview(&n.text, 60),
                status: n.status,
                created_ms: n.created_ms,
                replies: forest.replies(Some(&n.id)).len() as u32,
                on_path: on_path.contains(n.id.as_str()),
                bookmarks: marks(&n.id),
                files: files.remove(&n.id).unwrap_or_default(),
                system_prompt: n.meta.system_prompt.clone(),
            })
            .collect();
        Ok(forge_proto::TreeInfo {
            session_id: id.clone(),
            head: row.head_id,
            forked_from: store.forked_from(&id).await?,
            nodes,
        })
    }

    /// The file changes recorded in a session and the sessions it was
    /// forked from (a fork shares their nodes).
    async fn lineage_changes(&self, id: &str) -> Result<Vec<crate::rewind::Change>, EngineError> {
        let store = &self.shared().store;
        let sessions = store.lineage(id).await?;
        Ok(store.file_changes(&sessions).await?)
    }

    /// Where each branch of a session's tree ends.
    pub async fn branches(&self, selector: &str) -> Result<Vec<forge_proto::BranchInfo>, EngineError> {
        let id = self.resolve(selector).await?;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let forest = Forest::new(store.tree(&id).await?);
        let head_path: std::collections::HashSet<String> = match row.head_id.as_deref() {
            Some(h) => forest.path(h)?.into_iter().map(|n| n.id.clone()).collect(),
            None => Default::default(),
        };
        let bookmarks = store.bookmarks(&id).await?;
        let mut out = Vec::new();
        for leaf in forest.leaves() {
            let path = forest.path(&leaf.id)?;
            out.push(forge_proto::BranchInfo {
                leaf: leaf.id.clone(),
                role: leaf.role,
                preview: crate::forest::preview(&leaf.text, 60),
                created_ms: leaf.created_ms,
                messages: path.len() as u64,
                diverges_at: path.iter().find(|n| !head_path.contains(&n.id)).map(|n| n.id.clone()),
                head: row.head_id.as_deref() == Some(leaf.id.as_str()),
                bookmarks: bookmarks.iter().filter(|(_, n)| *n == leaf.id).map(|(name, _)| name.clone()).collect(),
            });
        }
        Ok(out)
    }

    pub async fn checkout(&self, selector: &str, node: &str, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::Checkout { node, client, reply }).await?;
        self.session_info(&handle.id).await
    }

    pub async fn edit(
        &self,
        selector: &str,
        node: &str,
        text: String,
        client: ClientRef,
    ) -> Result<forge_proto::EditResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        let files = self.files_lock(&handle.id).await;
        let _no_rewind = files.lock().await;
        handle.request(|reply| SessionCmd::Edit { node, text, client, reply }).await
    }

    /// A new session sharing `selector`'s path up to `node` (its head if
    /// none), in the same directory with the same model.
    /// With `files.0`, the files move from the origin's head to the fork
    /// node's state (`files.1`: forced).
    pub async fn fork(
        &self,
        selector: &str,
        node: Option<&str>,
        name: Option<String>,
        files: (bool, bool),
        client: ClientRef,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let id = self.resolve(selector).await?;
        // Moving the origin's files: no turn of it starts meanwhile, and
        // none may be running.
        let lock = self.files_lock(&id).await;
        let _moving = match files.0 {
            true => Some(lock.lock().await),
            false => None,
        };
        if files.0 {
            let handle = self.handle_for(&id).await?;
            if !matches!(handle.snapshot.borrow().state, forge_proto::OperationStateKind::Idle) {
                return Err(EngineError::new(
                    ErrorKind::SessionBusy,
                    format!(
                        "session {id} is running a turn; wait for it to end (or cancel it), then fork with --restore-files"
                    ),
                ));
            }
        }
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let node = match node {
            Some(n) => self.resolve_node(&id, n).await?.1,
            None => row.head_id.clone().ok_or_else(|| {
                EngineError::new(
                    ErrorKind::InvalidParams,
                    "the conversation is empty: nothing to fork (`forgectl session new` starts a session)",
                )
            })?,
        };
        let forest = Forest::new(self.shared().store.tree(&id).await?);
        if forest.get(&node)?.role == forge_proto::Role::Summary {
            return Err(EngineError::new(ErrorKind::InvalidParams, "a fork starts at a message, not at a summary"));
        }
        // Files first: a conflict stops the fork before it exists.
        let mut moved = forge_proto::RewindResult {
            session_id: id.clone(),
            node: Some(node.clone()),
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run: false,
            diff: None,
            conversation: true,
        };
        if files.0 {
            let from = Self::path_ids(&forest, row.head_id.as_deref())?;
            let to = Self::path_ids(&forest, Some(&node))?;
            self.move_files(&id, &from, &to, false, files.1, &mut moved).await?;
        }
        // The source session's directory was accepted when it was made.
        let req = CreateSession {
            name,
            cwd: Some(row.cwd),
            provider: Some(row.provider),
            model: Some(row.model),
            allow_broad_root: true,
        };
        let info = self.create_session_at(req, client.clone(), Some((id, node.clone()))).await?;
        if !moved.files.is_empty() {
            let handle = self.handle_for(&info.id).await?;
            let files = moved.files;
            handle.request(|reply| SessionCmd::FilesRestored { node: Some(node), files, client, reply }).await?;
        }
        Ok(info)
    }

    /// The node ids from the root to `head` (empty for none).
    fn path_ids(forest: &Forest, head: Option<&str>) -> Result<Vec<String>, EngineError> {
        Ok(match head {
            Some(h) => forest.path(h)?.into_iter().map(|n| n.id.clone()).collect(),
            None => Vec::new(),
        })
    }

    /// Rewinds a session to `node` (the last turn's start if none): the
    /// files tools changed since are put back, then the head moves there.
    #[allow(clippy::too_many_arguments)]
    pub async fn rewind(
        &self,
        selector: &str,
        node: Option<&str>,
        files: bool,
        conversation: bool,
        dry_run: bool,
        force: bool,
        client: ClientRef,
    ) -> Result<forge_proto::RewindResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let id = handle.id.clone();
        // From the head read to the head moved, no turn starts.
        let lock = self.files_lock(&id).await;
        let _moving = lock.lock().await;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let (forest, target) = match node {
            Some(n) => {
                let (forest, n) = self.resolve_node(&id, n).await?;
                if forest.get(&n)?.role == forge_proto::Role::Summary {
                    return Err(EngineError::new(ErrorKind::InvalidParams, "rewind to a message, not to a summary"));
                }
                (forest, Some(n))
            }
            None => {
                let forest = Forest::new(store.tree(&id).await?);
                let path = Self::path_ids(&forest, row.head_id.as_deref())?;
                let last_user =
                    path.iter().rev().find(|n| forest.get(n).is_ok_and(|n| n.role == forge_proto::Role::User));
                let Some(last_user) = last_user.cloned() else {
                    return Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        "nothing to undo: the conversation has no turn",
                    ));
                };
                let parent = forest.get(&last_user)?.parent_id.clone();
                (forest, parent)
            }
        };
        if !matches!(handle.snapshot.borrow().state, forge_proto::OperationStateKind::Idle) {
            return Err(EngineError::new(
                ErrorKind::SessionBusy,
                format!("session {id} is running a turn; wait for it to end (or cancel it), then rewind"),
            ));
        }
        let from = Self::path_ids(&forest, row.head_id.as_deref())?;
        let to = Self::path_ids(&forest, target.as_deref())?;
        let mut result = forge_proto::RewindResult {
            session_id: id.clone(),
            node: target.clone(),
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run,
            diff: None,
            conversation: conversation && !dry_run,
        };
        if files {
            self.move_files(&id, &from, &to, dry_run, force, &mut result).await?;
        }
        if dry_run {
            return Ok(result);
        }
        if !result.files.is_empty() {
            let (node, files) = (target.clone(), result.files.clone());
            let client = client.clone();
            handle.request(|reply| SessionCmd::FilesRestored { node, files, client, reply }).await?;
        }
        if conversation {
            match target {
                Some(node) => handle.request(|reply| SessionCmd::Checkout { node, client, reply }).await?,
                None => handle.request(|reply| SessionCmd::Clear { client, reply }).await?,
            }
        }
        Ok(result)
    }

    /// Moves the files of session `id` (and what its forks' origins
    /// recorded) from their state at the end of `from` to the end of `to`.
    async fn move_files(
        &self,
        id: &str,
        from: &[String],
        to: &[String],
        dry_run: bool,
        force: bool,
        result: &mut forge_proto::RewindResult,
    ) -> Result<(), EngineError> {
        let store = &self.shared().store;
        let changes = self.lineage_changes(id).await?;
        let steps = crate::rewind::plan(from, to, &changes);
        // What each file holds now, read off the session task.
        let paths: Vec<String> = steps.iter().map(|s| s.path.clone()).collect();
        let current = tokio::task::spawn_blocking(move || {
            paths.iter().map(|p| crate::rewind::read_state(Path::new(p))).collect::<Vec<_>>()
        })
        .await
        .map_err(|e| EngineError::internal(e.to_string()))?;
        let mut todo = Vec::new();
        let mut conflicts = Vec::new();
        for (step, now) in steps.into_iter().zip(current) {
            let now =
                now.map_err(|e| EngineError::new(ErrorKind::InvalidParams, format!("cannot read {}: {e}", step.path)))?;
            let now_state = now.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
            let Some(target) = step.target.clone() else {
                result.unknown.push(step.path.clone());
                continue;
            };
            if target == now_state {
                continue;
            }
            let conflict = step.expected.as_ref().is_some_and(|e| *e != now_state);
            if conflict {
                conflicts.push(step.path.clone());
            }
            let action = match (&now_state, &target) {
                (Some(_), None) => "delete",
                (None, Some(_)) => "create",
                _ => "restore",
            };
            result.files.push(forge_proto::RestoredFile {
                path: step.path.clone(),
                action: action.into(),
                conflict,
                overwritten: None,
                note: None,
            });
            todo.push((step.path, now, target, step.expected));
        }
        if !conflicts.is_empty() && !force && !dry_run {
            return Err(EngineError::new(
                ErrorKind::RewindConflict,
                format!(
                    "these files changed outside Forge since Forge last changed them, and were left as they are: {}. \
                     Look at them (--dry-run shows the diff), then rewind with --force to overwrite them (what they hold is kept)",
                    conflicts.join(", ")
                ),
            ));
        }
        let mut diff = String::new();
        for ((path, now, target, expected), file) in todo.into_iter().zip(result.files.iter_mut()) {
            let target_data = match &target {
                Some((hash, mode)) => match store.blob(hash).await? {
                    Some(data) => Some((data, *mode)),
                    // Content holding a secret is never stored.
                    None => {
                        file.action = "kept".into();
                        file.note = Some("its recorded content held a secret, which Forge does not store".into());
                        continue;
                    }
                },
                None => None,
            };
            if dry_run {
                diff.push_str(&crate::rewind::unified_diff(
                    &path,
                    now.as_ref().map(|(d, _)| d.as_slice()),
                    target_data.as_ref().map(|(d, _)| d.as_slice()),
                ));
                continue;
            }
            if file.conflict {
                // Forced: what is overwritten is kept, as a change made
                // after the head it leaves, so going back there (checkout
                // with --restore-files) brings it back.
                let mut ops = Vec::new();
                let after = now.as_ref().map(|(data, mode)| {
                    let hash = crate::rewind::hash(data);
                    ops.extend(StoreOp::blob(hash.clone(), data.clone()));
                    file.overwritten = Some(hash.clone());
                    (hash, *mode)
                });
                // (With no head, under the session's own id: on no path,
                // but its content is kept.)
                let node_id = from.last().cloned().unwrap_or_else(|| id.to_string());
                ops.push(StoreOp::RecordChange {
                    session_id: id.to_string(),
                    node_id,
                    call_id: "edited-by-hand".into(),
                    path: path.clone(),
                    before: expected.flatten(),
                    after,
                    created_ms: crate::ids::now_ms(),
                });
                let batch = crate::journal::WriteBatch { ops };
                self.shared().writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
            }
            let p = PathBuf::from(&path);
            tokio::task::spawn_blocking(move || {
                crate::rewind::write_state(&p, target_data.as_ref().map(|(d, m)| (d.as_slice(), *m)))
            })
            .await
            .map_err(|e| EngineError::internal(e.to_string()))?
            .map_err(|e| EngineError::internal(format!("cannot restore {path}: {e}")))?;
        }
        if dry_run {
            result.diff = Some(diff);
        }
        Ok(())
    }

    pub async fn bookmark(
        &self,
        selector: &str,
        name: String,
        node: Option<&str>,
        delete: bool,
        client: ClientRef,
    ) -> Result<forge_proto::BookmarkResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let node = match node {
            Some(n) if !delete => Some(self.resolve_node(&handle.id, n).await?.1),
            _ => None,
        };
        handle.request(|reply| SessionCmd::Bookmark { name, node, delete, client, reply }).await
    }

    pub async fn delete_node(
        &self,
        selector: &str,
        node: &str,
        cascade: bool,
        client: ClientRef,
    ) -> Result<forge_proto::DeleteNodeResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::DeleteNode { node, cascade, client, reply }).await
    }

    pub async fn split(
        &self,
        selector: &str,
        node: &str,
        at: u64,
        client: ClientRef,
    ) -> Result<forge_proto::SplitResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::Split { node, at, client, reply }).await
    }

    /// A whole session as JSON lines (see [`crate::export`]).
    pub async fn export(&self, selector: &str) -> Result<Vec<serde_json::Value>, EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        crate::export::export(&self.shared().store, &row)
            .await?
            .into_iter()
            .map(|l| serde_json::to_value(l).map_err(|e| EngineError::internal(e.to_string())))
            .collect()
    }

    /// A session exported elsewhere, with its ids: refused if this store
    /// has the session, one of its nodes, or its name already.
    pub async fn import(
        &self,
        lines: Vec<serde_json::Value>,
        cwd: Option<String>,
        allow_broad_root: bool,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let lines = lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_value(l).map_err(|e| {
                    EngineError::new(ErrorKind::InvalidParams, format!("line {} of the export: {e}", i + 1))
                })
            })
            .collect::<Result<Vec<crate::export::Line>, _>>()?;
        let mut import = crate::export::plan_import(lines)?;
        if let Some(StoreOp::CreateSession { cwd: root, .. }) = import.ops.first_mut() {
            if let Some(new) = cwd {
                if !Path::new(&new).is_dir() {
                    return Err(EngineError::new(ErrorKind::InvalidParams, format!("{new} is not a directory")));
                }
                *root = new;
            }
            check_root(root, allow_broad_root).map_err(|e| {
                EngineError::new(
                    e.kind,
                    format!(
                        "{}; or import it into a directory of your choice: forgectl import FILE --cwd DIR",
                        e.message
                    ),
                )
            })?;
        }
        let store = &self.shared().store;
        let _names = self.inner.names.lock().await;
        if store.session(&import.id).await?.is_some() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!(
                    "session {} is here already (it was exported from this daemon, or imported before); remove it first (`forgectl session rm {}`) to import it again",
                    import.id, import.id
                ),
            ));
        }
        if let Some(name) = &import.name {
            self.check_name(name, None).await?;
        }
        let taken = store.existing_nodes(&import.nodes).await?;
        if let Some(node) = taken.first() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("{} of its messages are here already (node {node}, of another session)", taken.len()),
            ));
        }
        self.shared()
            .writer
            .write(WriteBatch { ops: import.ops })
            .await
            .map_err(|e| EngineError::blocked(&e.to_string()))?;
        self.session_info(&import.id).await
    }

    async fn check_name(&self, name: &str, owner: Option<&str>) -> Result<(), EngineError> {
        if !crate::ids::is_valid_name(name, MAX_NAME_LEN) {
            return Err(EngineError::new(
                ErrorKind::InvalidName,
                format!(
                    "\"{name}\" is not a valid session name: use up to {MAX_NAME_LEN} letters, digits, '-', '_' or '.', not starting with '-'"
                ),
            ));
        }
        match self.shared().store.name_owner(name).await? {
            Some(other) if Some(other.as_str()) != owner => Err(EngineError::new(
                ErrorKind::InvalidName,
                format!("the name \"{name}\" is taken by session {other}"),
            )),
            _ => Ok(()),
        }
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

    /// The models Forge knows, optionally of one provider.
    pub fn models(&self, provider: Option<&str>) -> Result<Vec<forge_proto::ModelInfo>, EngineError> {
        let provider = match provider {
            None => None,
            Some(p) => Some(ProviderKind::parse(p).ok_or_else(|| {
                EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("unknown provider \"{p}\"; use claude (or anthropic), openai or gemini"),
                )
            })?),
        };
        Ok(crate::catalog::list(&self.shared().config, provider)
            .into_iter()
            .map(|m| forge_proto::ModelInfo {
                name: m.name,
                provider: m.provider.as_str().to_string(),
                context_window: m.context_window,
                max_output_tokens: m.max_output_tokens,
                source: m.source.as_str().to_string(),
                price: m.price,
            })
            .collect())
    }

    /// The tools and what the approval policy does with each: the
    /// built-in ones and the configured MCP servers'.
    pub fn tools(&self) -> Vec<forge_proto::ToolInfo> {
        let policy = crate::tools::policy::ApprovalPolicy::for_tools(&self.shared().config.tools);
        self.shared()
            .tools
            .iter()
            .cloned()
            .chain(self.shared().mcp.tools(None))
            .map(|t| forge_proto::ToolInfo {
                name: t.name().to_string(),
                description: t.description().to_string(),
                risk: crate::store::rows::enum_str(&t.risk_level()),
                approval: policy.decide(t.as_ref(), None).word().to_string(),
            })
            .collect()
    }

    /// How commands are confined on this machine, as configured.
    pub fn sandbox_status(&self) -> forge_proto::SandboxStatus {
        use crate::tools::confine;
        let tools = &self.shared().config.tools;
        let settings = confine::Settings::from_config(tools.sandbox.as_ref());
        let support = confine::support();
        let totals = confine::totals();
        let limits = settings.limits();
        let (mode, reason) = match (settings.mode, support.missing()) {
            (confine::SandboxMode::PathsOnly, _) => (
                "paths-only",
                Some("[tools.sandbox] mode = \"paths-only\": commands are not confined and every one asks".to_string()),
            ),
            (confine::SandboxMode::Kernel, Some(why)) => ("unavailable", Some(format!("{why}; every command asks"))),
            (confine::SandboxMode::Kernel, None) => ("kernel", None),
        };
        forge_proto::SandboxStatus {
            mode: mode.into(),
            landlock_abi: support.landlock_abi,
            user_namespaces: support.user_namespaces,
            network: settings.network.word().into(),
            max_memory_mb: limits.memory_mb,
            max_processes: limits.processes,
            max_cpu_seconds: limits.cpu_seconds,
            processes_bounded: totals.pids,
            memory_bounded: totals.memory,
            totals: totals.how,
            reason,
        }
    }

    /// Runs the escape suite against the configured command sandbox.
    pub async fn sandbox_test(&self, socket: &std::path::Path) -> Result<forge_proto::SandboxReport, EngineError> {
        use crate::tools::confine;
        let settings = confine::Settings::from_config(self.shared().config.tools.sandbox.as_ref());
        let home = self.shared().db.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        let targets = confine::suite::Targets { socket: socket.to_path_buf(), forge_home: home };
        let rows = confine::suite::run_suite(&settings, &targets)
            .await
            .map_err(|e| EngineError::internal(format!("cannot prepare the escape suite: {e}")))?;
        let mut probes: Vec<forge_proto::SandboxProbe> = rows
            .into_iter()
            .map(|r| forge_proto::SandboxProbe {
                ok: r.passed(),
                probe: r.probe,
                expected: r.expected,
                outcome: r.outcome,
                detail: r.detail,
            })
            .collect();
        probes.push(crate::trust::probe(&self.shared().trust));
        Ok(forge_proto::SandboxReport { status: self.sandbox_status(), passed: probes.iter().all(|p| p.ok), probes })
    }

    /// The MCP servers (those `session` sees, if given).
    pub async fn mcp_list(&self, session: Option<&str>) -> Result<Vec<forge_proto::McpServerInfo>, EngineError> {
        let session = match session {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        Ok(self.shared().mcp.report(session.as_deref()).into_iter().map(mcp_info).collect())
    }

    /// Connects to an MCP server again now.
    pub async fn mcp_restart(
        &self,
        name: &str,
        session: Option<&str>,
    ) -> Result<forge_proto::McpServerInfo, EngineError> {
        self.check_running()?;
        let session = match session {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        self.shared()
            .mcp
            .restart(name, session.as_deref())
            .map(mcp_info)
            .map_err(|e| EngineError::new(ErrorKind::McpServerNotFound, e.to_string()))
    }

    /// Gives a session MCP servers of its own (an editor's, over ACP),
    /// replacing those it had; they live as long as the daemon.
    pub async fn set_session_mcp_servers(
        &self,
        selector: &str,
        servers: Vec<forge_proto::McpServerSpec>,
    ) -> Result<Vec<forge_proto::McpServerInfo>, EngineError> {
        self.check_running()?;
        let id = self.resolve(selector).await?;
        let config = mcp_config(servers)?;
        self.shared().mcp.set_session_servers(&id, config.servers);
        Ok(self.shared().mcp.report(Some(&id)).into_iter().filter(|r| r.session.is_some()).map(mcp_info).collect())
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
        let text = if options.continued { text } else { self.prompt_hooks(&handle, text, &client).await? };
        // Prefix matching: the same message again under the same node is
        // that node, answered anew (a sibling answer), not a copy.
        let same = match options.continued {
            true => Vec::new(),
            false => self.shared().store.user_messages_under_head(&handle.id, &text).await?,
        };
        let (n, continued) = (options.n.unwrap_or(1), options.continued);
        let files = self.files_lock(&handle.id).await;
        let _no_rewind = files.lock().await;
        handle.request(|reply| SessionCmd::Send { text, client, same, n, continued, reply }).await
    }

    /// Runs the `UserPromptSubmit` hooks on a message about to be sent:
    /// each run is journaled; a block or a hook error refuses the message
    /// (`hook_blocked`), and what the hooks (and the session's
    /// `SessionStart` hooks, for its first message) add is appended to it.
    async fn prompt_hooks(
        &self,
        handle: &SessionHandle,
        text: String,
        client: &ClientRef,
    ) -> Result<String, EngineError> {
        let mut added: Vec<String> = Vec::new();
        added.extend(self.inner.start_context.lock().unwrap_or_else(|p| p.into_inner()).remove(&handle.id));
        let config = &self.shared().config;
        if !config.hooks.hooks.is_empty() || config.hooks.import_claude {
            let row =
                self.shared().store.session(&handle.id).await?.ok_or_else(|| EngineError::not_found(&handle.id))?;
            let runs = self
                .run_session_hooks(
                    handle,
                    &row.cwd,
                    crate::hooks::HookEvent::UserPromptSubmit,
                    serde_json::json!({"prompt": text}),
                    Some(client.clone()),
                )
                .await?;
            for run in runs {
                if run.decision != crate::hooks::HookDecision::Allow {
                    return Err(EngineError::new(
                        ErrorKind::HookBlocked,
                        format!("the message was not sent: {}", run.says()),
                    ));
                }
                added.extend(run.context);
            }
        }
        Ok(if added.is_empty() { text } else { format!("{text}\n\n{}", added.join("\n")) })
    }

    /// The lock a rewind of session `id` holds (see `Inner::files`).
    async fn files_lock(&self, id: &str) -> Arc<Mutex<()>> {
        self.inner.files.lock().await.entry(id.to_string()).or_default().clone()
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

    /// Rows the journal has written since start (a cheap activity count).
    pub fn journal_rows_written(&self) -> u64 {
        self.shared().writer.stats().rows
    }

    pub fn journal_health(&self) -> (JournalHealth, Option<String>) {
        let h = self.shared().writer.health();
        (h.health, h.reason)
    }

    pub async fn journal_status(&self) -> Result<JournalStatus, EngineError> {
        let shared = self.shared();
        shared.writer.verify().await;
        let h = shared.writer.health();
        let st = shared.writer.stats();
        let (open_streams, events) = shared.store.journal_counts().await?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = shared.db_path().as_os_str().to_owned();
        wal.push("-wal");
        Ok(JournalStatus {
            health: h.health,
            reason: h.reason.map(|r| blocked_advice(&r, h.health)),
            since_ms: h.since_ms,
            durability: match shared.config.journal.durability {
                crate::config::Durability::Process => "process".into(),
                crate::config::Durability::Power => "power".into(),
            },
            transactions: st.transactions,
            batches: st.batches,
            rows: st.rows,
            failed_commits: st.failed_commits,
            largest_group: st.largest_group,
            last_commit_us: st.last_commit_us,
            open_streams,
            events,
            db_bytes: size(shared.db_path()),
            wal_bytes: size(Path::new(&wal)),
            path: shared.db_path().display().to_string(),
            restored: None,
        })
    }

    /// Tries to leave the blocked state (see `journal.reset`).
    pub async fn journal_reset(&self) -> Result<JournalStatus, EngineError> {
        let writer = &self.shared().writer;
        let mut restored = None;
        match writer.reset().await.map_err(|reason| EngineError::blocked(&reason))? {
            ResetOutcome::Healthy => {}
            ResetOutcome::Restored(note) => {
                // Readers move to the written-back file before the journal
                // says healthy (and sessions reload from it).
                self.shared().store.reopen().await?;
                writer.reset().await.map_err(|reason| EngineError::blocked(&reason))?;
                restored = Some(note);
            }
        }
        // Live sessions reload on the health change; one without an actor
        // recovers what the failure interrupted when it starts, as at
        // start-up.
        for id in self.shared().store.sessions_needing_attention().await? {
            self.handle(&id).await?;
        }
        let mut status = self.journal_status().await?;
        status.restored = restored;
        Ok(status)
    }

    pub async fn counts(&self) -> Result<(u32, u32), EngineError> {
        let total = self.shared().store.sessions().await?.len() as u32;
        let active = self
            .inner
            .sessions
            .lock()
            .await
            .values()
            .filter(|h| h.is_alive() && h.snapshot.borrow().state != OperationStateKind::Idle)
            .count() as u32;
        Ok((total, active))
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

fn mcp_info(r: forge_mcp::ServerReport) -> forge_proto::McpServerInfo {
    forge_proto::McpServerInfo {
        name: r.name,
        session_id: r.session,
        transport: r.transport.to_string(),
        target: r.target,
        state: r.state.to_string(),
        error: r.error,
        retry_in_seconds: r.retry_in_seconds,
        server_info: r.server_info,
        restarts: r.restarts,
        calls: r.calls,
        tools: r
            .tools
            .into_iter()
            .map(|t| forge_proto::McpToolInfo {
                name: t.name,
                remote_name: t.remote_name,
                description: t.description,
                read_only: t.read_only,
            })
            .collect(),
    }
}

/// The reason, with what to do about it when the journal is blocked.
fn blocked_advice(reason: &str, health: JournalHealth) -> String {
    if health == JournalHealth::Blocked {
        format!("{reason}. Nothing already acknowledged is lost. {}", crate::error::unblock_advice(reason))
    } else {
        reason.to_string()
    }
}

fn req_provider_matches_config(cfg: &ForgeConfig, provider: ProviderKind) -> bool {
    cfg.default_provider() == provider
}

pub use crate::session::subscription::{EventFeed, FeedItem};

/// Follows a session with `Stop` hooks: when a turn ends complete, the
/// hooks run; one that blocks sends the model on with its reason (at most
/// `MAX_STOP_CONTINUATIONS` times in a row, `stop_hook_active` telling
/// the hook it is one of those). Ends with the session's actor.
fn watch_stops(
    engine: Engine,
    id: String,
    cwd: String,
    events: tokio::sync::broadcast::Receiver<crate::session::PublishedEvent>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    // Boxed: it starts sessions, which start watchers.
    Box::pin(watch_stops_loop(engine, id, cwd, events))
}

async fn watch_stops_loop(
    engine: Engine,
    id: String,
    cwd: String,
    mut events: tokio::sync::broadcast::Receiver<crate::session::PublishedEvent>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let mut chained = 0u32;
    loop {
        let ev = match events.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev.json) else { continue };
        if v["kind"] != "turn_finished" {
            continue;
        }
        if v["status"] != "complete" {
            chained = 0;
            continue;
        }
        match engine.stop_hooks(&id, &cwd, chained > 0).await {
            Some(reason) if chained < MAX_STOP_CONTINUATIONS => {
                chained += 1;
                let text = format!("[Stop hook] {reason}");
                let hook = ClientRef { id: 0, name: "hook".into(), kind: forge_proto::ClientKind::Other };
                if let Err(e) = engine.send(&id, text, hook).await {
                    tracing::warn!(session = %id, error = %e, "a Stop hook's continuation was not sent");
                }
            }
            _ => chained = 0,
        }
    }
}

/// Refuses a session directory too broad to work in, unless the user
/// means it.
fn check_root(cwd: &str, allow_broad_root: bool) -> Result<(), EngineError> {
    if allow_broad_root {
        return Ok(());
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    match crate::tools::roots::too_broad(Path::new(cwd), home.as_deref()) {
        Some(why) => Err(EngineError::new(ErrorKind::BroadRoot, crate::tools::roots::refusal(cwd, &why))),
        None => Ok(()),
    }
}

/// Servers given on the wire (an editor's, a project's `.mcp.json`),
/// checked as `[[mcp.servers]]` entries are.
pub(crate) fn mcp_config(servers: Vec<forge_proto::McpServerSpec>) -> Result<forge_mcp::McpConfig, EngineError> {
    let servers = servers
        .into_iter()
        .map(|s| forge_mcp::McpServerConfig {
            name: s.name,
            command: s.command,
            args: s.args,
            env: s.env,
            url: s.url,
            headers: s.headers,
            ..Default::default()
        })
        .collect();
    let config = forge_mcp::McpConfig { servers };
    config.validate().map_err(|e| EngineError::new(ErrorKind::InvalidParams, e))?;
    Ok(config)
}
