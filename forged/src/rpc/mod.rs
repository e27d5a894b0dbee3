//! RPC dispatch: one [`ConnServer`] per connection implements the API trait
//! from forge-proto, so each connection knows who its client is. The
//! methods themselves live by area: [`session`] and [`daemon`].

mod daemon;
mod session;

pub(crate) use session::{event_text, item_text};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use forge_core::{Engine, EngineError};
use forge_proto::api::{ForgeApiServer, RpcResult};
use forge_proto::error::rpc_error;
use forge_proto::{
    CancelResult, ClientInfo, ClientRef, DaemonStatus, HelloResult, HistoryResult, JournalStatus, RemoveResult,
    SendResult, SessionEvent, SessionInfo,
};
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
}

impl Daemon {
    pub fn new(engine: Engine, socket: PathBuf, home: PathBuf) -> Self {
        Self {
            engine,
            started: Instant::now(),
            socket,
            home,
            shutdown: CancellationToken::new(),
            connections: Connections::default(),
            uploads: Default::default(),
        }
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
}

impl ConnServer {
    pub fn new(daemon: Arc<Daemon>, conn: Arc<ConnState>) -> Self {
        Self { daemon, conn }
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

#[jsonrpsee::core::async_trait]
impl ForgeApiServer for ConnServer {
    async fn hello(&self, protocol_version: u32, client: ClientInfo) -> RpcResult<HelloResult> {
        daemon::hello(self, protocol_version, client)
    }

    async fn session_create(
        &self,
        name: Option<String>,
        cwd: Option<String>,
        provider: Option<String>,
        model: Option<String>,
        allow_broad_root: Option<bool>,
    ) -> RpcResult<SessionInfo> {
        session::create(
            self,
            forge_core::CreateSession {
                name,
                cwd,
                provider,
                model,
                allow_broad_root: allow_broad_root.unwrap_or(false),
            },
        )
        .await
    }

    async fn session_list(&self) -> RpcResult<Vec<SessionInfo>> {
        self.engine().list_sessions().await.map_err(to_rpc)
    }

    async fn session_show(&self, session: String) -> RpcResult<SessionInfo> {
        self.engine().show(&session).await.map_err(to_rpc)
    }

    async fn session_rename(&self, session: String, name: Option<String>) -> RpcResult<SessionInfo> {
        self.engine().rename(&session, name, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_configure(
        &self,
        session: String,
        provider: Option<String>,
        model: Option<String>,
    ) -> RpcResult<SessionInfo> {
        self.engine().configure(&session, provider, model, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_clear(&self, session: String) -> RpcResult<SessionInfo> {
        self.engine().clear(&session, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_context(
        &self,
        session: String,
        system: Option<bool>,
        span: Option<u32>,
    ) -> RpcResult<forge_proto::ContextInfo> {
        self.engine().context(&session, system.unwrap_or(false), span).await.map_err(to_rpc)
    }

    async fn models_list(&self, provider: Option<String>) -> RpcResult<Vec<forge_proto::ModelInfo>> {
        self.engine().models(provider.as_deref()).map_err(to_rpc)
    }

    async fn session_summarize(&self, session: String) -> RpcResult<forge_proto::SummarizeResult> {
        self.engine().summarize(&session).await.map_err(to_rpc)
    }

    async fn session_export(&self, session: String, offset: Option<u64>) -> RpcResult<forge_proto::ExportResult> {
        let lines = self.engine().export(&session).await.map_err(to_rpc)?;
        Ok(session::export_page(lines, offset.unwrap_or(0)))
    }

    async fn session_import(
        &self,
        lines: Vec<serde_json::Value>,
        upload: Option<String>,
        more: Option<bool>,
        cwd: Option<String>,
        allow_broad_root: Option<bool>,
    ) -> RpcResult<forge_proto::ImportResult> {
        let lines = match self.daemon.uploads.add(upload, lines, more.unwrap_or(false)).map_err(to_rpc)? {
            session::Upload::Kept { upload, received } => {
                return Ok(forge_proto::ImportResult { upload: Some(upload), received, session: None });
            }
            session::Upload::Complete(lines) => lines,
        };
        let received = lines.len() as u64;
        let info = self.engine().import(lines, cwd, allow_broad_root.unwrap_or(false)).await.map_err(to_rpc)?;
        Ok(forge_proto::ImportResult { upload: None, received, session: Some(info) })
    }

    async fn session_recall(
        &self,
        session: String,
        query: String,
        limit: Option<u32>,
    ) -> RpcResult<forge_proto::RecallResult> {
        self.engine().recall(&session, &query, limit).await.map_err(to_rpc)
    }

    async fn usage_report(
        &self,
        session: Option<String>,
        since_ms: Option<i64>,
    ) -> RpcResult<forge_proto::UsageReport> {
        self.engine().usage(session.as_deref(), since_ms).await.map_err(to_rpc)
    }

    async fn tools_list(&self) -> RpcResult<Vec<forge_proto::ToolInfo>> {
        Ok(self.engine().tools())
    }

    async fn mcp_list(&self, session: Option<String>) -> RpcResult<Vec<forge_proto::McpServerInfo>> {
        self.engine().mcp_list(session.as_deref()).await.map_err(to_rpc)
    }

    async fn mcp_restart(&self, name: String, session: Option<String>) -> RpcResult<forge_proto::McpServerInfo> {
        self.engine().mcp_restart(&name, session.as_deref()).await.map_err(to_rpc)
    }

    async fn session_remove(&self, session: String) -> RpcResult<RemoveResult> {
        let session_id = self.engine().remove(&session).await.map_err(to_rpc)?;
        Ok(RemoveResult { session_id })
    }

    async fn session_send(
        &self,
        session: String,
        text: Option<String>,
        n: Option<u32>,
        continued: Option<bool>,
    ) -> RpcResult<SendResult> {
        let options = forge_core::SendOptions { n, continued: continued.unwrap_or(false) };
        self.engine().send_with(&session, text.unwrap_or_default(), options, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_cancel(&self, session: String, drop_queued: Option<bool>) -> RpcResult<CancelResult> {
        self.engine().cancel(&session, drop_queued.unwrap_or(false), self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_tool_result(
        &self,
        session: String,
        call_id: String,
        output: String,
        is_error: Option<bool>,
    ) -> RpcResult<forge_proto::ToolResultAccepted> {
        self.engine()
            .tool_result(&session, call_id, output, is_error.unwrap_or(false), self.client_ref())
            .await
            .map_err(to_rpc)
    }

    async fn session_recover(
        &self,
        session: String,
        action: forge_proto::RecoverAction,
    ) -> RpcResult<forge_proto::RecoverResult> {
        self.engine().recover(&session, action, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_tree(&self, session: String) -> RpcResult<forge_proto::TreeInfo> {
        self.engine().tree(&session).await.map_err(to_rpc)
    }

    async fn session_branches(&self, session: String) -> RpcResult<Vec<forge_proto::BranchInfo>> {
        self.engine().branches(&session).await.map_err(to_rpc)
    }

    async fn session_checkout(&self, session: String, node: String) -> RpcResult<SessionInfo> {
        self.engine().checkout(&session, &node, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_rewind(
        &self,
        session: String,
        node: Option<String>,
        files_only: Option<bool>,
        conversation_only: Option<bool>,
        dry_run: Option<bool>,
        force: Option<bool>,
    ) -> RpcResult<forge_proto::RewindResult> {
        let (files_only, conversation_only) = (files_only.unwrap_or(false), conversation_only.unwrap_or(false));
        if files_only && conversation_only {
            return Err(rpc_error(
                forge_proto::ErrorKind::InvalidParams,
                "files_only and conversation_only exclude each other",
            ));
        }
        self.engine()
            .rewind(
                &session,
                node.as_deref(),
                !conversation_only,
                !files_only,
                dry_run.unwrap_or(false),
                force.unwrap_or(false),
                self.client_ref(),
            )
            .await
            .map_err(to_rpc)
    }

    async fn session_edit(&self, session: String, node: String, text: String) -> RpcResult<forge_proto::EditResult> {
        self.engine().edit(&session, &node, text, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_fork(
        &self,
        session: String,
        node: Option<String>,
        name: Option<String>,
        restore_files: Option<bool>,
        force: Option<bool>,
    ) -> RpcResult<SessionInfo> {
        let files = (restore_files.unwrap_or(false), force.unwrap_or(false));
        self.engine().fork(&session, node.as_deref(), name, files, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_bookmark(
        &self,
        session: String,
        name: String,
        node: Option<String>,
        delete: Option<bool>,
    ) -> RpcResult<forge_proto::BookmarkResult> {
        self.engine()
            .bookmark(&session, name, node.as_deref(), delete.unwrap_or(false), self.client_ref())
            .await
            .map_err(to_rpc)
    }

    async fn session_delete_node(
        &self,
        session: String,
        node: String,
        cascade: Option<bool>,
    ) -> RpcResult<forge_proto::DeleteNodeResult> {
        self.engine().delete_node(&session, &node, cascade.unwrap_or(true), self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_split(&self, session: String, node: String, at: u64) -> RpcResult<forge_proto::SplitResult> {
        self.engine().split(&session, &node, at, self.client_ref()).await.map_err(to_rpc)
    }

    async fn session_history(&self, session: String) -> RpcResult<HistoryResult> {
        self.engine().history(&session).await.map_err(to_rpc)
    }

    async fn session_events(
        &self,
        session: String,
        after_seq: Option<u64>,
        limit: Option<u32>,
    ) -> RpcResult<Vec<SessionEvent>> {
        session::events(self, session, after_seq, limit).await
    }

    async fn session_subscribe(
        &self,
        pending: PendingSubscriptionSink,
        session: String,
        from_seq: Option<u64>,
    ) -> SubscriptionResult {
        session::subscribe(self, pending, session, from_seq).await
    }

    async fn approval_list(&self) -> RpcResult<Vec<forge_proto::PendingApproval>> {
        Ok(self.engine().approvals().await)
    }

    async fn approval_answer(
        &self,
        session: String,
        decision: forge_proto::ApprovalDecision,
        approval_id: Option<String>,
        call_ids: Option<Vec<String>>,
        indices: Option<Vec<u32>>,
        always: Option<bool>,
    ) -> RpcResult<forge_proto::ApprovalResult> {
        self.engine()
            .answer_approval(
                &session,
                decision,
                approval_id,
                call_ids,
                indices,
                always == Some(true),
                self.client_ref(),
            )
            .await
            .map_err(to_rpc)
    }

    async fn session_approval_rules(
        &self,
        session: String,
        mode: Option<String>,
        allow: Option<Vec<String>>,
        clear: Option<bool>,
    ) -> RpcResult<forge_proto::ApprovalRules> {
        self.engine()
            .approval_rules(&session, mode, allow.unwrap_or_default(), clear == Some(true), self.client_ref())
            .await
            .map_err(to_rpc)
    }

    async fn session_set_mcp_servers(
        &self,
        session: String,
        servers: Vec<forge_proto::McpServerSpec>,
    ) -> RpcResult<Vec<forge_proto::McpServerInfo>> {
        self.engine().set_session_mcp_servers(&session, servers).await.map_err(to_rpc)
    }

    async fn sandbox_test(&self) -> RpcResult<forge_proto::SandboxReport> {
        tracing::info!(client = self.conn.id, "sandbox.test called");
        self.engine().sandbox_test(&self.daemon.socket).await.map_err(to_rpc)
    }

    async fn trust_list(&self) -> RpcResult<Vec<forge_proto::FolderTrust>> {
        Ok(self.engine().trust_list())
    }

    async fn trust_show(&self, dir: String) -> RpcResult<forge_proto::FolderTrust> {
        self.engine().trust_show(&dir).map_err(to_rpc)
    }

    async fn trust_add(&self, dir: String) -> RpcResult<forge_proto::FolderTrust> {
        tracing::info!(client = self.conn.id, dir, "trust.add called");
        self.engine().trust_add(&dir).map_err(to_rpc)
    }

    async fn trust_revoke(&self, dir: String) -> RpcResult<forge_proto::FolderTrust> {
        self.engine().trust_revoke(&dir).map_err(to_rpc)
    }

    async fn journal_status(&self) -> RpcResult<JournalStatus> {
        self.engine().journal_status().await.map_err(to_rpc)
    }

    async fn journal_reset(&self) -> RpcResult<JournalStatus> {
        tracing::info!(client = self.conn.id, "journal.reset called");
        self.engine().journal_reset().await.map_err(to_rpc)
    }

    async fn daemon_status(&self) -> RpcResult<DaemonStatus> {
        daemon::status(self).await
    }

    async fn daemon_shutdown(&self) -> RpcResult<()> {
        tracing::info!(client = self.conn.id, "daemon.shutdown called");
        // Answer first; the listener stops on the token right after.
        let token = self.daemon.shutdown_token();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            token.cancel();
        });
        Ok(())
    }
}
