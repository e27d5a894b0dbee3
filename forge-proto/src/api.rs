//! The JSON-RPC API, defined once. `forged` implements [`ForgeApiServer`];
//! Rust clients call through [`ForgeApiClient`]. Method names read
//! `<area>.<verb>`; params are passed by name (a JSON object).
//!
//! A session argument (`session`) accepts a full id, a unique id prefix, or
//! the session's name.

#[cfg_attr(not(feature = "server"), allow(unused_imports))]
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::proc_macros::rpc;
use jsonrpsee::types::ErrorObjectOwned;

// The subscription's item type is named only on the client side.
#[cfg_attr(not(feature = "client"), allow(unused_imports))]
use crate::events::{SessionEvent, SubscriptionItem};
use crate::trust::FolderTrust;
use crate::types::*;

pub type RpcResult<T> = Result<T, ErrorObjectOwned>;

#[cfg_attr(all(feature = "server", feature = "client"), rpc(server, client))]
#[cfg_attr(all(feature = "server", not(feature = "client")), rpc(server))]
#[cfg_attr(all(feature = "client", not(feature = "server")), rpc(client))]
pub trait ForgeApi {
    /// Handshake: the client states the protocol version it speaks and who it
    /// is. Events caused by this connection carry that identity.
    #[method(name = "hello", param_kind = map)]
    async fn hello(&self, protocol_version: u32, client: ClientInfo) -> RpcResult<HelloResult>;

    #[method(name = "session.create", param_kind = map)]
    /// `allow_broad_root`: the user means it when `cwd` is `/`, the home
    /// directory itself or a system directory (refused otherwise, error
    /// kind `broad_root`).
    async fn session_create(
        &self,
        name: Option<String>,
        cwd: Option<String>,
        provider: Option<String>,
        model: Option<String>,
        allow_broad_root: Option<bool>,
    ) -> RpcResult<SessionInfo>;

    #[method(name = "session.list", param_kind = map)]
    async fn session_list(&self) -> RpcResult<Vec<SessionInfo>>;

    #[method(name = "session.show", param_kind = map)]
    async fn session_show(&self, session: String) -> RpcResult<SessionInfo>;

    /// Sets or clears (`name: null`) a session's name.
    #[method(name = "session.rename", param_kind = map)]
    async fn session_rename(&self, session: String, name: Option<String>) -> RpcResult<SessionInfo>;

    /// Removes a session and its history. Refused while a turn runs.
    #[method(name = "session.remove", param_kind = map)]
    async fn session_remove(&self, session: String) -> RpcResult<RemoveResult>;

    /// Sends a user message. Starts a turn, or queues the message when one is
    /// running (the result says so). Answers once the message is persisted.
    /// `n` > 1 asks for that many sibling answers (tools off only);
    /// `continue` (no `text`) answers what the session holds now.
    #[method(name = "session.send", param_kind = map)]
    async fn session_send(
        &self,
        session: String,
        text: Option<String>,
        n: Option<u32>,
        #[argument(rename = "continue")] continued: Option<bool>,
    ) -> RpcResult<SendResult>;

    /// Switches the session's provider and/or model for its next requests.
    /// A provider alone takes that provider's default model.
    #[method(name = "session.configure", param_kind = map)]
    async fn session_configure(
        &self,
        session: String,
        provider: Option<String>,
        model: Option<String>,
    ) -> RpcResult<SessionInfo>;

    /// Starts the conversation afresh (refused while a turn runs). Nothing
    /// is deleted: earlier messages stay in the store.
    #[method(name = "session.clear", param_kind = map)]
    async fn session_clear(&self, session: String) -> RpcResult<SessionInfo>;

    /// How much of the model's context window the session's path uses;
    /// `system: true` adds the system prompt its requests carry; `span: N`
    /// the original messages the session's N-th summary stands for.
    #[method(name = "session.context", param_kind = map)]
    async fn session_context(&self, session: String, system: Option<bool>, span: Option<u32>)
    -> RpcResult<ContextInfo>;

    /// Summarizes the conversation up to its newest exchange now (Context
    /// Infinity's summary, asked for). Refused while a turn runs, or when
    /// there is nothing before the newest exchange.
    #[method(name = "session.summarize", param_kind = map)]
    async fn session_summarize(&self, session: String) -> RpcResult<SummarizeResult>;

    /// Searches the facts kept from the session's summarized spans (what
    /// the model's `recall` tool searches); each hit cites its message.
    #[method(name = "session.recall", param_kind = map)]
    async fn session_recall(&self, session: String, query: String, limit: Option<u32>) -> RpcResult<RecallResult>;

    /// A whole session as JSON lines: the session, every node of its tree,
    /// bookmarks, Librarian facts and the event log (`forgectl export`).
    /// Long sessions come in pages: ask again from `next` until it is absent.
    #[method(name = "session.export", param_kind = map)]
    async fn session_export(&self, session: String, offset: Option<u64>) -> RpcResult<ExportResult>;

    /// A session exported elsewhere, with its ids (`forgectl import`);
    /// refused if this daemon has it, one of its nodes, or its name. Long
    /// exports go in pieces: `more: true` keeps them (under the `upload`
    /// the first answer names) until the last piece. `cwd` re-roots the
    /// session in another directory (given with the last piece); a broad
    /// one (`/`, the home directory, a system directory) is refused unless
    /// `allow_broad_root`.
    #[method(name = "session.import", param_kind = map)]
    async fn session_import(
        &self,
        lines: Vec<serde_json::Value>,
        upload: Option<String>,
        more: Option<bool>,
        cwd: Option<String>,
        allow_broad_root: Option<bool>,
    ) -> RpcResult<ImportResult>;

    /// The models Forge knows (built in and from `[[models]]`), optionally
    /// of one provider.
    #[method(name = "models.list", param_kind = map)]
    async fn models_list(&self, provider: Option<String>) -> RpcResult<Vec<ModelInfo>>;

    /// Tokens and estimated cost per session, working directory and model;
    /// of one session, and from a time on (Unix ms), if given.
    #[method(name = "usage.report", param_kind = map)]
    async fn usage_report(&self, session: Option<String>, since_ms: Option<i64>) -> RpcResult<UsageReport>;

    /// The tools the model may call, with their risk and approval rule.
    #[method(name = "tools.list", param_kind = map)]
    async fn tools_list(&self) -> RpcResult<Vec<ToolInfo>>;

    /// The MCP servers (config.toml's, and those editors gave sessions):
    /// state, last error, tools and calls made. With `session`, the ones
    /// that session sees.
    #[method(name = "mcp.list", param_kind = map)]
    async fn mcp_list(&self, session: Option<String>) -> RpcResult<Vec<McpServerInfo>>;

    /// Connects to an MCP server again now (a stdio server is stopped and
    /// started; a failed one's backoff is skipped).
    #[method(name = "mcp.restart", param_kind = map)]
    async fn mcp_restart(&self, name: String, session: Option<String>) -> RpcResult<McpServerInfo>;

    /// Runs the escape suite against the command sandbox of the
    /// configuration in force: each probe is a command run as
    /// `run_command` runs one, trying a way out (writes outside the roots
    /// by every path, secrets, the network, the daemon's socket, resource
    /// limits, leftover processes, setuid). Takes some seconds.
    #[method(name = "sandbox.test", param_kind = map)]
    async fn sandbox_test(&self) -> RpcResult<SandboxReport>;

    /// The folders the user trusts, each with its state now (a trusted
    /// folder whose files changed is `changed`).
    #[method(name = "trust.list", param_kind = map)]
    async fn trust_list(&self) -> RpcResult<Vec<FolderTrust>>;

    /// A folder's trust: what it provides that runs code (its Claude
    /// settings' hooks, `.mcp.json`'s servers) and whether Forge honours it.
    #[method(name = "trust.show", param_kind = map)]
    async fn trust_show(&self, dir: String) -> RpcResult<FolderTrust>;

    /// Trusts a folder as its files are now: its own hooks and MCP servers
    /// are honoured from the next session (or tool call) on.
    #[method(name = "trust.add", param_kind = map)]
    async fn trust_add(&self, dir: String) -> RpcResult<FolderTrust>;

    /// Stops trusting a folder.
    #[method(name = "trust.revoke", param_kind = map)]
    async fn trust_revoke(&self, dir: String) -> RpcResult<FolderTrust>;

    /// Cancels the running turn; the partial answer is kept, marked
    /// cancelled. With `drop_queued`, queued messages are dropped too.
    #[method(name = "session.cancel", param_kind = map)]
    async fn session_cancel(&self, session: String, drop_queued: Option<bool>) -> RpcResult<CancelResult>;

    /// Answers a session in `tool_recovery`: `resume` re-runs calls that
    /// never started and read-only ones, answers interrupted side-effecting
    /// calls with an error (never re-run behind the user's back), and
    /// continues the turn; `discard` answers all of them as discarded and
    /// ends the turn.
    #[method(name = "session.recover", param_kind = map)]
    async fn session_recover(&self, session: String, action: RecoverAction) -> RpcResult<RecoverResult>;

    /// Parse-only mode: the result of one tool call the model made. When
    /// every call of the answer has one, the model continues the turn.
    #[method(name = "session.tool_result", param_kind = map)]
    async fn session_tool_result(
        &self,
        session: String,
        call_id: String,
        output: String,
        is_error: Option<bool>,
    ) -> RpcResult<ToolResultAccepted>;

    /// Every node of the session's tree (its own, and the path it shares
    /// with the session it was forked from), with the head and bookmarks.
    #[method(name = "session.tree", param_kind = map)]
    async fn session_tree(&self, session: String) -> RpcResult<TreeInfo>;

    /// The leaves of the session's tree: where each branch ends.
    #[method(name = "session.branches", param_kind = map)]
    async fn session_branches(&self, session: String) -> RpcResult<Vec<BranchInfo>>;

    /// Moves the session's head to a node of its tree (refused while a
    /// turn runs). Nothing is deleted: the branch left stays in the tree.
    #[method(name = "session.checkout", param_kind = map)]
    async fn session_checkout(&self, session: String, node: String) -> RpcResult<SessionInfo>;

    /// Puts the files tools changed after `node` back as they were there,
    /// and moves the head to it (the abandoned branch stays in the tree).
    /// Without `node`: the last turn (undo). `files_only` leaves the
    /// conversation, `conversation_only` the files; `dry_run` changes
    /// nothing and returns the diff; `force` overwrites files changed
    /// outside Forge since (otherwise `rewind_conflict`).
    #[method(name = "session.rewind", param_kind = map)]
    async fn session_rewind(
        &self,
        session: String,
        node: Option<String>,
        files_only: Option<bool>,
        conversation_only: Option<bool>,
        dry_run: Option<bool>,
        force: Option<bool>,
    ) -> RpcResult<RewindResult>;

    /// Edits a message: in place when nothing replies to it, else as a new
    /// sibling branch (the original stays). The head moves to it, and an
    /// edited user message is answered.
    #[method(name = "session.edit", param_kind = map)]
    async fn session_edit(&self, session: String, node: String, text: String) -> RpcResult<EditResult>;

    /// A new session sharing this one's path up to `node` (default: the
    /// head), without copying it; with `restore_files`, the files tools
    /// changed after `node` are put back as they were there (`force`: even
    /// files changed outside Forge since).
    #[method(name = "session.fork", param_kind = map)]
    async fn session_fork(
        &self,
        session: String,
        node: Option<String>,
        name: Option<String>,
        restore_files: Option<bool>,
        force: Option<bool>,
    ) -> RpcResult<SessionInfo>;

    /// Sets a bookmark on `node` (default: the head), or deletes it.
    #[method(name = "session.bookmark", param_kind = map)]
    async fn session_bookmark(
        &self,
        session: String,
        name: String,
        node: Option<String>,
        delete: Option<bool>,
    ) -> RpcResult<BookmarkResult>;

    /// Deletes a node: with `cascade` (default) and everything under it,
    /// else its children hang from its parent instead.
    #[method(name = "session.delete_node", param_kind = map)]
    async fn session_delete_node(
        &self,
        session: String,
        node: String,
        cascade: Option<bool>,
    ) -> RpcResult<DeleteNodeResult>;

    /// Cuts a message in two at character `at`.
    #[method(name = "session.split", param_kind = map)]
    async fn session_split(&self, session: String, node: String, at: u64) -> RpcResult<SplitResult>;

    /// The messages on the session's current history path, oldest first.
    #[method(name = "session.history", param_kind = map)]
    async fn session_history(&self, session: String) -> RpcResult<HistoryResult>;

    /// Stored events with `seq > after_seq` (default 0), at most `limit`
    /// (default and maximum 10000). For clients that poll over plain HTTP.
    #[method(name = "session.events", param_kind = map)]
    async fn session_events(
        &self,
        session: String,
        after_seq: Option<u64>,
        limit: Option<u32>,
    ) -> RpcResult<Vec<SessionEvent>>;

    /// Follow a session: replays stored events with `seq >= from_seq`
    /// (default: none, live only), then live events, with no gap and no
    /// duplicate. WebSocket only.
    #[subscription(name = "session.subscribe" => "session.event", unsubscribe = "session.unsubscribe", item = SubscriptionItem, param_kind = map)]
    async fn session_subscribe(&self, session: String, from_seq: Option<u64>) -> SubscriptionResult;

    /// Every pending approval across all sessions (one inbox).
    #[method(name = "approval.list", param_kind = map)]
    async fn approval_list(&self) -> RpcResult<Vec<PendingApproval>>;

    /// Answers a session's pending approval. The first valid answer wins;
    /// later ones get `approval_not_pending`. `approval_id`, when given,
    /// must match the pending one (so a stale answer cannot approve a newer
    /// request).
    #[method(name = "approval.answer", param_kind = map)]
    async fn approval_answer(
        &self,
        session: String,
        decision: ApprovalDecision,
        approval_id: Option<String>,
        call_ids: Option<Vec<String>>,
        indices: Option<Vec<u32>>,
        always: Option<bool>,
    ) -> RpcResult<ApprovalResult>;

    /// A session's own approval rules: `mode` (`default`, `permissive`,
    /// `strict`; `""` drops it) replaces `[tools.approval] mode` for it;
    /// `allow` adds tools that run without asking in it (`clear` first
    /// forgets those allowed before). Without params: the rules as they are.
    #[method(name = "session.approval_rules", param_kind = map)]
    async fn session_approval_rules(
        &self,
        session: String,
        mode: Option<String>,
        allow: Option<Vec<String>>,
        clear: Option<bool>,
    ) -> RpcResult<ApprovalRules>;

    /// Gives a session MCP servers of its own (an editor's), replacing any
    /// it had: their tools are offered in this session only. They run
    /// until the daemon stops.
    #[method(name = "session.set_mcp_servers", param_kind = map)]
    async fn session_set_mcp_servers(
        &self,
        session: String,
        servers: Vec<McpServerSpec>,
    ) -> RpcResult<Vec<McpServerInfo>>;

    /// The journal writer's health and statistics.
    #[method(name = "journal.status", param_kind = map)]
    async fn journal_status(&self) -> RpcResult<JournalStatus>;

    /// After a store failure is fixed (disk space freed, permissions
    /// restored), proves the store writable and returns to healthy; sessions
    /// then recover what the failure interrupted. Fails, still blocked, with
    /// the reason if the store is still not writable.
    #[method(name = "journal.reset", param_kind = map)]
    async fn journal_reset(&self) -> RpcResult<JournalStatus>;

    #[method(name = "daemon.status", param_kind = map)]
    async fn daemon_status(&self) -> RpcResult<DaemonStatus>;

    /// Stops the daemon gracefully: running turns are cancelled and the store
    /// is left consistent. Answers before stopping.
    #[method(name = "daemon.shutdown", param_kind = map)]
    async fn daemon_shutdown(&self) -> RpcResult<()>;
}
