//! RPC dispatch: one [`ConnServer`] per connection implements the API trait
//! from forge-proto, so each connection knows who its client is. The
//! methods themselves live by area: [`session`] and [`daemon`].

mod daemon;
mod session;
mod web;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use forge_core::{Engine, EngineError};
use forge_proto::calls::*;
use forge_proto::error::rpc_error;
use forge_proto::methods::{ForgeServer, RpcResult, SessionRequest};
use forge_proto::params::*;
use forge_proto::*;
use jsonrpsee::PendingSubscriptionSink;
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::types::ErrorObjectOwned;
use tokio_util::sync::CancellationToken;

use crate::conn::{ConnState, Connections};

/// State shared by every connection.
pub struct Daemon {
    pub engine: Engine,
    pub started: Instant,
    pub socket: PathBuf,
    pub home: PathBuf,
    shutdown: CancellationToken,
    pub connections: Connections,
    /// `session.import` pieces waiting for the last one.
    pub uploads: session::Uploads,
    /// `[daemon]` as configured: where TCP listeners get their token.
    pub daemon_config: forge_core::daemon_config::DaemonConfig,
    /// Starts the web client's listener, once connections are served.
    starter: std::sync::OnceLock<crate::web::Starter>,
    /// The TCP listeners running, if any (the web client's among them).
    listening: tokio::sync::Mutex<Option<Arc<crate::web::Listening>>>,
}

impl Daemon {
    pub fn new(
        engine: Engine,
        socket: PathBuf,
        home: PathBuf,
        daemon_config: forge_core::daemon_config::DaemonConfig,
    ) -> Self {
        Self {
            engine,
            started: Instant::now(),
            socket,
            home,
            shutdown: CancellationToken::new(),
            connections: Connections::default(),
            uploads: Default::default(),
            daemon_config,
            starter: Default::default(),
            listening: Default::default(),
        }
    }

    /// Connections are served: the web client's listener may start;
    /// `listening` those running.
    pub(crate) async fn serving(&self, starter: crate::web::Starter, listening: Option<Arc<crate::web::Listening>>) {
        let _ = self.starter.set(starter);
        *self.listening.lock().await = listening;
    }

    /// The TCP listeners running, if any.
    pub(crate) async fn listening(&self) -> Option<Arc<crate::web::Listening>> {
        self.listening.lock().await.clone()
    }

    /// Makes sure a listener serves the web client (`listen`, or any
    /// running one; else one on loopback), remembered for restarts.
    pub(crate) async fn web_listener(&self, listen: Option<&str>) -> anyhow::Result<Arc<crate::web::Listening>> {
        let starter = self.starter.get().ok_or_else(|| anyhow::anyhow!("forged is not serving yet"))?;
        let mut listening = self.listening.lock().await;
        let started = starter(listen.map(str::to_string)).await?;
        *listening = Some(started.clone());
        Ok(started)
    }

    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    pub fn connections(&self) -> u32 {
        self.connections.count()
    }
}

pub struct ConnServer {
    daemon: Arc<Daemon>,
    conn: Arc<ConnState>,
    /// Cancels its token once the last handle on the connection's methods
    /// is gone (its WebSocket included): the connection has ended.
    _gone: Option<Arc<tokio_util::sync::DropGuard>>,
}

impl ConnServer {
    pub fn new(daemon: Arc<Daemon>, conn: Arc<ConnState>) -> Self {
        Self { daemon, conn, _gone: None }
    }

    /// The same, cancelling `gone` once its methods are no longer held.
    pub fn ending(daemon: Arc<Daemon>, conn: Arc<ConnState>, gone: CancellationToken) -> Self {
        Self { daemon, conn, _gone: Some(Arc::new(gone.drop_guard())) }
    }

    /// The identity events caused by this connection carry.
    fn client_ref(&self) -> ClientRef {
        let guard = self.conn.client.lock().unwrap_or_else(|p| p.into_inner());
        match &*guard {
            Some(info) => ClientRef { id: self.conn.id, name: info.name.clone(), kind: info.kind },
            None => ClientRef::anonymous(self.conn.id),
        }
    }

    pub(crate) fn conn_id(&self) -> u64 {
        self.conn.id
    }

    pub(crate) fn conn(&self) -> &Arc<ConnState> {
        &self.conn
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.daemon.engine
    }
}

pub(crate) fn to_rpc(e: EngineError) -> ErrorObjectOwned {
    rpc_error(e.kind, e.message)
}

/// Each method of the table ([`forge_proto::methods`]): a session's
/// command hands its params to the engine as they are, with the client
/// that sent it.
impl ForgeServer for ConnServer {
    async fn hello(&self, p: HelloParams) -> RpcResult<HelloResult> {
        daemon::hello(self, p)
    }

    async fn session_create(&self, p: CreateParams) -> RpcResult<SessionInfo> {
        self.engine().create_session(p, self.client_ref()).await.map_err(to_rpc)
    }

    async fn git_log(&self, p: GitLogParams) -> RpcResult<GitLog> {
        self.engine().git_log(p).await.map_err(to_rpc)
    }

    async fn git_show(&self, p: GitShowParams) -> RpcResult<GitShown> {
        self.engine().git_show(p).await.map_err(to_rpc)
    }

    async fn git_diff(&self, p: GitDiffParams) -> RpcResult<GitDiff> {
        self.engine().git_diff(p).await.map_err(to_rpc)
    }

    async fn git_merge(&self, p: GitMergeParams) -> RpcResult<forge_proto::GitMerged> {
        self.engine().git_merge(p).await.map_err(to_rpc)
    }

    async fn session_list(&self, _: NoParams) -> RpcResult<Vec<SessionInfo>> {
        self.engine().list_sessions().await.map_err(to_rpc)
    }

    async fn commands_list(&self, p: SessionRef) -> RpcResult<Vec<CommandInfo>> {
        self.engine().commands(&p.session).await.map_err(to_rpc)
    }

    async fn session_plan(&self, p: SessionRef) -> RpcResult<PlanInfo> {
        self.engine().plan(&p.session).await.map_err(to_rpc)
    }

    async fn session_show(&self, p: SessionRef) -> RpcResult<SessionInfo> {
        self.engine().show(&p.session).await.map_err(to_rpc)
    }

    async fn session_remove(&self, p: SessionRef) -> RpcResult<RemoveResult> {
        let session_id = self.engine().remove(p).await.map_err(to_rpc)?;
        Ok(RemoveResult { session_id })
    }

    async fn session_recall(&self, p: RecallParams) -> RpcResult<RecallResult> {
        self.engine().recall(&p.session, &p.query, p.limit).await.map_err(to_rpc)
    }

    async fn session_export(&self, p: ExportParams) -> RpcResult<ExportResult> {
        let lines = self.engine().export(&p.session).await.map_err(to_rpc)?;
        Ok(session::export_page(lines, p.offset))
    }

    async fn session_import(&self, p: ImportParams) -> RpcResult<ImportResult> {
        let lines = match self.daemon.uploads.add(p.upload, p.lines, p.more).map_err(to_rpc)? {
            session::Upload::Kept { upload, received } => {
                return Ok(ImportResult { upload: Some(upload), received, session: None });
            }
            session::Upload::Complete(lines) => lines,
        };
        let received = lines.len() as u64;
        let info = self.engine().import(lines, p.cwd, p.allow_broad_root).await.map_err(to_rpc)?;
        Ok(ImportResult { upload: None, received, session: Some(info) })
    }

    async fn models_list(&self, p: ModelsParams) -> RpcResult<Vec<ModelInfo>> {
        self.engine().models(p.provider.as_deref()).map_err(to_rpc)
    }

    async fn usage_report(&self, p: UsageParams) -> RpcResult<UsageReport> {
        self.engine().usage(p.session.as_deref(), p.since_ms).await.map_err(to_rpc)
    }

    async fn tools_list(&self, _: NoParams) -> RpcResult<Vec<ToolInfo>> {
        Ok(self.engine().tools())
    }

    async fn mcp_list(&self, p: McpListParams) -> RpcResult<Vec<McpServerInfo>> {
        self.engine().mcp_list(p.session.as_deref()).await.map_err(to_rpc)
    }

    async fn mcp_restart(&self, p: McpRestartParams) -> RpcResult<McpServerInfo> {
        self.engine().mcp_restart(&p.name, p.session.as_deref()).await.map_err(to_rpc)
    }

    async fn mcp_resources(&self, p: McpListParams) -> RpcResult<Vec<McpResourceInfo>> {
        self.engine().mcp_resources(p.session.as_deref()).await.map_err(to_rpc)
    }

    async fn images_get(&self, p: ImageGetParams) -> RpcResult<ImageData> {
        self.engine().images_get(p).await.map_err(to_rpc)
    }

    async fn session_file(&self, p: SessionFileParams) -> RpcResult<SessionFile> {
        self.engine().session_file(p).await.map_err(to_rpc)
    }

    async fn images_put(&self, p: ImagePutParams) -> RpcResult<ImageInfo> {
        self.engine().images_put(p).await.map_err(to_rpc)
    }

    async fn sandbox_test(&self, _: NoParams) -> RpcResult<SandboxReport> {
        tracing::info!(client = self.conn.id, "sandbox.test called");
        self.engine().sandbox_test(&self.daemon.socket).await.map_err(to_rpc)
    }

    async fn trust_list(&self, _: NoParams) -> RpcResult<Vec<FolderTrust>> {
        Ok(self.engine().trust_list())
    }

    async fn trust_show(&self, p: DirParams) -> RpcResult<FolderTrust> {
        self.engine().trust_show(&p.dir).map_err(to_rpc)
    }

    async fn trust_add(&self, p: DirParams) -> RpcResult<FolderTrust> {
        tracing::info!(client = self.conn.id, dir = p.dir, "trust.add called");
        self.engine().trust_add(&p.dir).map_err(to_rpc)
    }

    async fn trust_revoke(&self, p: DirParams) -> RpcResult<FolderTrust> {
        self.engine().trust_revoke(&p.dir).map_err(to_rpc)
    }

    async fn tools_project(&self, p: DirParams) -> RpcResult<ProjectTools> {
        self.engine().tools_project(&p.dir).map_err(to_rpc)
    }

    async fn tools_approve(&self, p: ApproveToolsParams) -> RpcResult<ProjectTools> {
        tracing::info!(client = self.conn.id, dir = p.dir, "tools.approve called");
        self.engine().tools_approve(p).map_err(to_rpc)
    }

    async fn tools_revoke(&self, p: RevokeToolsParams) -> RpcResult<ProjectTools> {
        self.engine().tools_revoke(p).map_err(to_rpc)
    }

    async fn session_tree(&self, p: SessionRef) -> RpcResult<TreeInfo> {
        self.engine().tree(&p.session).await.map_err(to_rpc)
    }

    async fn session_branches(&self, p: SessionRef) -> RpcResult<Vec<BranchInfo>> {
        self.engine().branches(&p.session).await.map_err(to_rpc)
    }

    async fn session_fork(&self, p: ForkParams) -> RpcResult<SessionInfo> {
        self.engine().fork(p, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_history(&self, p: SessionRef) -> RpcResult<HistoryResult> {
        self.engine().history(&p.session).await.map_err(to_rpc)
    }

    async fn session_events(&self, p: EventsParams) -> RpcResult<Vec<SessionEvent>> {
        session::events(self, p).await
    }

    async fn approval_list(&self, _: NoParams) -> RpcResult<Vec<PendingApproval>> {
        Ok(self.engine().approvals().await)
    }

    async fn session_set_mcp_servers(&self, p: SetMcpServersParams) -> RpcResult<Vec<McpServerInfo>> {
        self.engine().set_session_mcp_servers(&p.session, p.servers).await.map_err(to_rpc)
    }

    async fn journal_status(&self, _: NoParams) -> RpcResult<JournalStatus> {
        self.engine().journal_status().await.map_err(to_rpc)
    }

    async fn store_status(&self, _: NoParams) -> RpcResult<forge_proto::StoreStatus> {
        self.engine().store_status().await.map_err(to_rpc)
    }

    async fn store_gc(&self, _: NoParams) -> RpcResult<forge_proto::StoreGcResult> {
        tracing::info!(client = self.conn.id, "store.gc called");
        self.engine().store_gc().await.map_err(to_rpc)
    }

    async fn journal_reset(&self, _: NoParams) -> RpcResult<JournalStatus> {
        tracing::info!(client = self.conn.id, "journal.reset called");
        self.engine().journal_reset().await.map_err(to_rpc)
    }

    async fn daemon_status(&self, _: NoParams) -> RpcResult<DaemonStatus> {
        daemon::status(self).await
    }

    async fn web_pair(&self, p: forge_proto::params::WebPairParams) -> RpcResult<forge_proto::web::WebPairing> {
        web::pair(self, p).await
    }

    async fn web_devices(&self, _: NoParams) -> RpcResult<Vec<forge_proto::web::WebDevice>> {
        web::devices(self).await
    }

    async fn web_revoke(&self, p: forge_proto::params::WebRevokeParams) -> RpcResult<Vec<String>> {
        web::revoke(self, p).await
    }

    async fn web_render(&self, p: forge_proto::params::WebRenderParams) -> RpcResult<Vec<String>> {
        let rendered =
            tokio::task::spawn_blocking(move || p.texts.iter().map(|t| crate::web::render::markdown(t)).collect());
        rendered.await.map_err(|e| rpc_error(ErrorKind::Internal, format!("rendering failed: {e}")))
    }

    async fn daemon_shutdown(&self, _: NoParams) -> RpcResult<()> {
        tracing::info!(client = self.conn.id, "daemon.shutdown called");
        // A store deleted on disk is written back first; if it cannot be,
        // the daemon keeps running rather than lose it.
        self.engine().safe_to_stop().await.map_err(to_rpc)?;
        // Answer first; the listener stops on the token right after.
        let token = self.daemon.shutdown_token();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            token.cancel();
        });
        Ok(())
    }

    async fn session_request(&self, request: SessionRequest) -> RpcResult<serde_json::Value> {
        self.engine().request(request, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_subscribe(&self, pending: PendingSubscriptionSink, p: SubscribeParams) -> SubscriptionResult {
        session::subscribe(self, pending, p).await
    }
}
