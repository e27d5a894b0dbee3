//! Params and results of the JSON-RPC methods, and the identities that
//! travel with them.

use serde::{Deserialize, Serialize};

pub use crate::usage::{Usage, UsageTotal};

pub use crate::calls::*;
pub use crate::tree_edits::*;

/// What kind of program a client is. Unknown kinds from newer clients are
/// accepted as `other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    Cli,
    Tui,
    Editor,
    Script,
    /// The web client `forged` serves.
    Browser,
    #[default]
    #[serde(other)]
    Other,
}

/// Who a client says it is, given in `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub kind: ClientKind,
}

/// A client as it appears in events it caused: its connection id (unique for
/// the daemon's lifetime) and what it said in `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientRef {
    pub id: u64,
    pub name: String,
    #[serde(default)]
    pub kind: ClientKind,
}

impl ClientRef {
    /// A connection that never said `hello` (e.g. a one-off `curl`).
    pub fn anonymous(id: u64) -> Self {
        Self { id, name: "anonymous".into(), kind: ClientKind::Other }
    }
    /// Actions the daemon takes on its own (recovery, shutdown).
    pub fn daemon() -> Self {
        Self { id: 0, name: "forged".into(), kind: ClientKind::Other }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub pid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HelloResult {
    pub protocol_version: u32,
    pub server: ServerInfo,
    /// This connection's id, as it appears in `client.id` of events it causes.
    pub client_id: u64,
}

/// The operation a session is in: the seeds' `OperationState`, as clients see
/// it. Every state exists on the wire from the start even where this version
/// never enters it, so clients written today handle tomorrow's daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStateKind {
    Idle,
    Streaming,
    AwaitingApproval,
    ExecutingTools,
    AwaitingToolResults,
    ToolRecovery,
    Summarizing,
    SummarizationRetry,
    /// Summarizing, with messages queued behind it (they go out, in
    /// order, once the summary lands).
    SummarizingWithQueued,
    SummarizationRetryWithQueued,
    PersistenceBlocked,
    /// A rewind is moving files (journaled first: a restart finishes it).
    Rewinding,
    #[serde(other)]
    Unknown,
}

impl OperationStateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Streaming => "streaming",
            Self::AwaitingApproval => "awaiting_approval",
            Self::ExecutingTools => "executing_tools",
            Self::AwaitingToolResults => "awaiting_tool_results",
            Self::ToolRecovery => "tool_recovery",
            Self::Summarizing => "summarizing",
            Self::SummarizationRetry => "summarization_retry",
            Self::SummarizingWithQueued => "summarizing_with_queued",
            Self::SummarizationRetryWithQueued => "summarization_retry_with_queued",
            Self::PersistenceBlocked => "persistence_blocked",
            Self::Rewinding => "rewinding",
            Self::Unknown => "unknown",
        }
    }

    /// What the session waits on in this state, in a word for `forgectl ps`.
    pub fn waiting_on(self) -> &'static str {
        match self {
            Self::Idle => "input",
            Self::Streaming => "provider",
            Self::AwaitingApproval => "approval",
            Self::ExecutingTools => "tools",
            Self::AwaitingToolResults => "tool_results",
            Self::ToolRecovery => "recovery_decision",
            Self::Summarizing
            | Self::SummarizationRetry
            | Self::SummarizingWithQueued
            | Self::SummarizationRetryWithQueued => "summary",
            Self::PersistenceBlocked => "journal_reset",
            Self::Rewinding => "files",
            Self::Unknown => "-",
        }
    }
}

/// A session as listed and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionInfo {
    pub id: String,
    pub name: Option<String>,
    pub cwd: String,
    pub provider: String,
    pub model: String,
    /// The session's own `temperature` and `top_p` (`session.configure`);
    /// absent ones come from the configuration.
    #[serde(flatten)]
    pub sampling: crate::Sampling,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub state: OperationStateKind,
    /// What the session waits on: `input`, `provider`, `approval`, ...
    pub waiting_on: String,
    /// Clients currently subscribed to the session's events.
    pub attached_clients: u32,
    /// Messages waiting to run after the current turn.
    pub queued_messages: u32,
    /// Number of messages on the session's current history path.
    pub message_count: u64,
    /// The last event sequence number persisted (0 if none).
    pub last_seq: u64,
    /// The history node the session points at (the newest message).
    pub head: Option<String>,
    /// Tokens and estimated cost of every provider response of the
    /// session (`session.show` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageTotal>,
    /// The session's own approval mode (`session.approval_rules`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// Tools allowed always in this session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always_allow: Vec<String>,
    /// What the session's folder provides that runs code and Forge
    /// ignores until the user trusts it (`session.create` only, when
    /// there is such a thing): clients say so once and may offer
    /// `trust.add`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<crate::FolderTrust>,
    /// The project's own tools (`.forge/tools/*.toml`) that are not
    /// offered because the user has not approved them as they are now
    /// (`session.create` only): clients say so once and point at
    /// `tools.approve`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_waiting: Vec<crate::ProjectTool>,
    /// Things the user should hear once, in words (`session.create`
    /// only): e.g. that guard hooks should set `fail_closed` since hook
    /// errors stopped blocking. Clients show each line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// Git mode: the session's branch and worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<crate::GitSession>,
    /// Files whose whole text goes with every request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_files: Vec<crate::ActiveFile>,
    /// A helper agent's session: whose, for which `task` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper: Option<crate::HelperOf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SendResult {
    pub session_id: String,
    /// Id the user message has (or will have, if queued) in the history.
    pub message_id: String,
    /// Seq of the event that recorded the message (`turn_started` or
    /// `message_queued`): subscribe from here to follow the turn.
    pub seq: u64,
    /// True when a turn was running: the message waits and runs next.
    pub queued: bool,
    /// 1-based place in the queue when queued.
    pub queue_position: Option<u32>,
    /// Git mode: the turn ends with its commit, `git_committed` (or
    /// `git_commit_failed`) after `turn_finished`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commits: bool,
}

/// `session.steer`: where the text went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SteerResult {
    pub session_id: String,
    /// Id the text has (or will have) in the history.
    pub message_id: String,
    /// Seq of the event that recorded it (`steer_queued`, or `turn_started`
    /// when no turn was running).
    pub seq: u64,
    /// No turn was running: the text started one, as a message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CancelResult {
    pub session_id: String,
    /// True if a running turn was cancelled.
    pub cancelled: bool,
    /// Queued messages dropped (only with `drop_queued`).
    pub dropped_queued: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    /// The result of a tool call, answering an assistant message.
    Tool,
    /// A summary of a span of the conversation: what requests send in
    /// place of the span once it no longer fits the model's window. It hangs
    /// off the span's last message, beside the path: the originals stay.
    Summary,
    #[serde(other)]
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Summary => "summary",
            Role::Other => "other",
        }
    }
}

/// `session.summarize`: a summary was started (follow the session for
/// `summarization_done`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummarizeResult {
    pub session_id: String,
    /// Messages the summary will stand for (from the path's start).
    pub messages: u64,
    pub tokens_before: u64,
}

/// A node of a session's tree, as `session.tree` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeNode {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub role: Role,
    /// The message's first words, on one line.
    pub preview: String,
    pub status: MessageStatus,
    pub created_ms: i64,
    /// Replies under it (summaries not counted).
    pub replies: u32,
    /// On the path to the head.
    pub on_path: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bookmarks: Vec<String>,
    /// Files changed right after this node, as recorded for rewind: on a
    /// tool result node what its call changed; on the head a forced rewind
    /// left, the hand edits it overwrote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// On a root: the digest of the system prompt it was sent under (a
    /// message sent again at the start under the same prompt is that root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

/// `session.tree`: every node of the session's tree, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeInfo {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    pub nodes: Vec<TreeNode>,
}

/// A leaf of the tree: where a branch ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BranchInfo {
    pub leaf: String,
    pub role: Role,
    pub preview: String,
    pub created_ms: i64,
    /// Messages from the root to the leaf.
    pub messages: u64,
    /// Where the branch leaves the head's path (its first node off the
    /// path), absent for the head's own branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverges_at: Option<String>,
    pub head: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bookmarks: Vec<String>,
}

/// A fact the Librarian kept when a span was summarized, found by
/// `session.recall`, and the message it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallHit {
    /// request, decision, file, command, error, name or summary.
    pub kind: String,
    pub fact: String,
    /// The history node the fact cites (`forgectl history` shows it).
    pub node_id: String,
    pub role: Role,
    /// The cited message around what matched.
    pub excerpt: String,
    /// The summary whose span held the message.
    pub summary_id: String,
    pub created_ms: i64,
}

/// `session.recall`: the best hits first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallResult {
    pub session_id: String,
    pub query: String,
    pub hits: Vec<RecallHit>,
}

/// A summary, as `session.context` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummaryInfo {
    pub summary_id: String,
    pub span: SummarySpan,
    pub text: String,
    pub created_ms: i64,
}

/// The span of the conversation a summary replaces in what is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummarySpan {
    /// The first and last history nodes of the span (on the session's path).
    pub first: String,
    pub last: String,
    /// Messages in the span.
    pub messages: u64,
    /// Estimated tokens of the span as it was sent, and of the summary.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// How an assistant message ended. User messages are always `complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Complete,
    Cancelled,
    Error,
    /// The daemon stopped while the message streamed; recovered from the log.
    Interrupted,
    #[serde(other)]
    Unknown,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
            Self::Unknown => "unknown",
        }
    }
}

impl Usage {
    /// Adds another response's tokens (a turn's, a session's totals).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.estimated |= other.estimated;
    }
}

/// How a message recovered after a daemon stop or a store failure ended, as
/// its badge shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryBadge {
    /// The provider had finished; only the bookkeeping was interrupted.
    Complete,
    /// The answer was cut off mid-stream; this is what arrived before.
    Incomplete,
    /// The provider had reported an error.
    Errored,
    #[serde(other)]
    Unknown,
}

/// A tool call the model made, as it streamed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    /// The JSON arguments exactly as streamed (may be invalid JSON if the
    /// stream was cut off).
    pub arguments: String,
}

/// What a tool-result message answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolResultInfo {
    pub call_id: String,
    pub name: String,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoveResult {
    pub session_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JournalHealth {
    Healthy,
    Degraded,
    Blocked,
    #[serde(other)]
    Unknown,
}

/// `journal.status`: the journal writer's health and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JournalStatus {
    pub health: JournalHealth,
    /// Why the journal is degraded or blocked, and what to do.
    pub reason: Option<String>,
    /// Since when the journal is in this health (Unix ms).
    pub since_ms: i64,
    /// `process` or `power`.
    pub durability: String,
    pub transactions: u64,
    pub batches: u64,
    pub rows: u64,
    pub failed_commits: u64,
    /// Most batches folded into one transaction so far (group commit).
    pub largest_group: u64,
    /// Duration of the last commit, in microseconds.
    pub last_commit_us: u64,
    /// Streams whose answer is not yet history (being streamed now).
    pub open_streams: u64,
    pub events: u64,
    /// Size of the database and its WAL, in bytes.
    pub db_bytes: u64,
    pub wal_bytes: u64,
    pub path: String,
    /// Set by `journal.reset` when it wrote back a database that had been
    /// deleted or replaced on disk: what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub protocol_version: u32,
    pub uptime_ms: u64,
    pub socket: String,
    pub home: String,
    pub sessions: u32,
    /// Sessions with a turn running.
    pub active_sessions: u32,
    /// Connections open right now.
    pub clients: u32,
    pub journal: JournalHealth,
    /// Why the journal is not healthy, if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_reason: Option<String>,
    /// How the commands the model runs are confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxStatus>,
}

/// `session.export`: the session's lines, in order (the first describes
/// the session; see docs/protocol.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExportResult {
    pub session_id: String,
    pub lines: Vec<serde_json::Value>,
    /// More lines follow: the `offset` to ask from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// `session.import`: a piece kept (`upload`, lines `received` so far), or,
/// after the last piece, the session imported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<String>,
    pub received: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionInfo>,
}
