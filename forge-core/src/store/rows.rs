//! Rows as stored, and their conversion to wire types.

use forge_proto::{ClientRef, HistoryMessage, MessageStatus, Role, Usage};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::StoreError;

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub name: Option<String>,
    pub cwd: String,
    pub provider: String,
    pub model: String,
    /// The session's own `temperature` and `top_p`.
    pub sampling: forge_proto::Sampling,
    /// Files whose whole text goes with every request.
    pub active_files: Vec<forge_proto::ActiveFile>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub head_id: Option<String>,
    pub last_seq: u64,
    /// The session's own approval rules.
    pub approval: SessionApproval,
    /// Git mode: its branch and worktree.
    pub git: Option<forge_proto::GitSession>,
    /// A helper agent's session: whose, and how it runs.
    pub helper: Option<HelperSpec>,
}

/// How a helper agent's session runs (the `sessions.helper` column):
/// kept with the session so that it runs the same after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperSpec {
    pub of: forge_proto::HelperOf,
    /// The tools it may use (Forge's names; `None`: all but `task` past
    /// the depth limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The agent type's instructions, added to its system prompt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    /// What its commands may read beyond its directory, as its parent's
    /// may (a git session's git directory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_also: Vec<String>,
}

/// A session's approval rules on top of `[tools.approval]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionApproval {
    /// `default`, `permissive` or `strict` (or `auto`, `prompt`, `deny`),
    /// replacing the configured mode for this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Tools a user allowed always in this session (an editor's "allow
    /// always"): they run without asking, unless denylisted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<String>,
}

impl SessionRow {
    pub(super) fn from_row(r: &SqliteRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: r.try_get("id")?,
            name: r.try_get("name")?,
            cwd: r.try_get("cwd")?,
            provider: r.try_get("provider")?,
            model: r.try_get("model")?,
            sampling: r
                .try_get::<String, _>("sampling")
                .ok()
                .and_then(|j| serde_json::from_str(&j).ok())
                .unwrap_or_default(),
            active_files: r
                .try_get::<String, _>("active_files")
                .ok()
                .and_then(|j| serde_json::from_str(&j).ok())
                .unwrap_or_default(),
            created_ms: r.try_get("created_ms")?,
            updated_ms: r.try_get("updated_ms")?,
            head_id: r.try_get("head_id")?,
            last_seq: r.try_get::<i64, _>("last_seq")? as u64,
            // Rules that do not parse are no rules: the configured policy.
            approval: r
                .try_get::<String, _>("approval")
                .ok()
                .and_then(|j| serde_json::from_str(&j).ok())
                .unwrap_or_default(),
            git: r.try_get::<Option<String>, _>("git").ok().flatten().and_then(|j| serde_json::from_str(&j).ok()),
            helper: r.try_get::<Option<String>, _>("helper").ok().flatten().and_then(|j| serde_json::from_str(&j).ok()),
        })
    }
}

/// Per-node details that do not need their own column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// What clients see of it too (`session.history`).
    #[serde(flatten)]
    pub message: forge_proto::MessageMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Thinking signatures and reasoning items, sent back to the provider.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
    /// For a summary node: the span it replaces in requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_of: Option<forge_proto::SummarySpan>,
    /// For a root message: the digest of the system prompt it was sent
    /// under (a root is found again by its text and this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub id: String,
    pub session_id: String,
    pub parent_id: Option<String>,
    pub role: Role,
    pub text: String,
    pub status: MessageStatus,
    pub created_ms: i64,
    pub meta: NodeMeta,
}

pub(crate) fn parse_enum<T: for<'de> Deserialize<'de>>(s: &str) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| StoreError::Corrupt(format!("bad value {s:?}: {e}")))
}

pub(crate) fn enum_str<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// A fact the Librarian kept, and the node it cites.
#[derive(Debug, Clone)]
pub struct FactRow {
    pub kind: String,
    pub text: String,
    pub summary_id: String,
    pub node: NodeRow,
}

impl NodeRow {
    pub(super) fn from_row(r: &SqliteRow) -> Result<Self, StoreError> {
        let meta: String = r.try_get("meta")?;
        Ok(Self {
            id: r.try_get("id")?,
            session_id: r.try_get("session_id")?,
            parent_id: r.try_get("parent_id")?,
            role: parse_enum(&r.try_get::<String, _>("role")?)?,
            text: r.try_get("text")?,
            status: parse_enum(&r.try_get::<String, _>("status")?)?,
            created_ms: r.try_get("created_ms")?,
            meta: serde_json::from_str(&meta).map_err(|e| StoreError::Corrupt(format!("node meta: {e}")))?,
        })
    }

    pub fn to_history(&self) -> HistoryMessage {
        HistoryMessage {
            id: self.id.clone(),
            parent_id: self.parent_id.clone(),
            role: self.role,
            text: self.text.clone(),
            status: self.status,
            created_ms: self.created_ms,
            meta: self.meta.message.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueuedRow {
    pub session_id: String,
    pub message_id: String,
    pub text: String,
    /// What hooks added for the model (see `MessageMeta::context`).
    pub context: Option<String>,
    pub client: Option<ClientRef>,
    pub created_ms: i64,
    /// What its command grants its turn (JSON), if anything.
    pub grants: Option<String>,
    pub images: Vec<forge_proto::ImageInfo>,
}

impl QueuedRow {
    pub(super) fn from_row(r: &SqliteRow) -> Result<Self, StoreError> {
        let client: Option<String> = r.try_get("client")?;
        Ok(Self {
            session_id: r.try_get("session_id")?,
            message_id: r.try_get("message_id")?,
            text: r.try_get("text")?,
            context: r.try_get("context")?,
            client: client.and_then(|c| serde_json::from_str(&c).ok()),
            created_ms: r.try_get("created_ms")?,
            grants: r.try_get("grants")?,
            images: r
                .try_get::<Option<String>, _>("images")?
                .and_then(|j| serde_json::from_str(&j).ok())
                .unwrap_or_default(),
        })
    }
}

/// One provider response's usage, as reports read it.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub session_id: String,
    pub cwd: String,
    pub created_ms: i64,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
}

/// A stream journal entry not yet committed to history.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRow {
    pub stream_id: String,
    pub session_id: String,
    pub message_id: String,
    pub provider: String,
    pub model: String,
    pub first_seq: u64,
    /// `open` or `sealed`.
    pub state: String,
    pub outcome: Option<MessageStatus>,
    pub error: Option<String>,
    pub error_kind: Option<String>,
    pub stop_reason: Option<String>,
    pub usage: Option<String>,
    pub reasoning: Option<String>,
}

impl StreamRow {
    pub(super) fn from_row(r: &SqliteRow) -> Result<Self, StoreError> {
        let outcome: Option<String> = r.try_get("outcome")?;
        Ok(Self {
            stream_id: r.try_get("stream_id")?,
            session_id: r.try_get("session_id")?,
            message_id: r.try_get("message_id")?,
            provider: r.try_get("provider")?,
            model: r.try_get("model")?,
            first_seq: r.try_get::<i64, _>("first_seq")? as u64,
            state: r.try_get("state")?,
            outcome: outcome.map(|o| parse_enum(&o)).transpose()?,
            error: r.try_get("error")?,
            error_kind: r.try_get("error_kind")?,
            stop_reason: r.try_get("stop_reason")?,
            usage: r.try_get("usage")?,
            reasoning: r.try_get("reasoning")?,
        })
    }
}

/// How hard the store works to survive failures.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL with synchronous=NORMAL: survives any crash of forged, may lose
    /// the last transactions on power loss.
    #[default]
    Process,
    /// WAL with synchronous=FULL: also survives power loss, slower commits.
    Power,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// What the user asked or said.
    Request,
    /// A choice made, and often why.
    Decision,
    /// A file read, written or named.
    File,
    /// A command run, with how it ended.
    Command,
    /// An error met.
    Error,
    /// A name in backticks: a function, a crate, a flag.
    Name,
    /// A line of the summary itself.
    Summary,
}

/// A file's content (a blob's hash) and permission bits; `None`: absent.
pub type FileState = Option<(String, u32)>;

/// One recorded change of one file by one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The tool result node it belongs to.
    pub node_id: String,
    pub path: String,
    pub before: FileState,
    pub after: FileState,
    /// The tool's result was recorded (`after` is known).
    pub done: bool,
}

/// A user message identical to one being sent, under the same head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SameMessage {
    pub node: String,
    /// The node it hangs from (none: a root).
    pub under: Option<String>,
    /// For a root: the digest of the system prompt it was sent under.
    pub system_prompt: Option<String>,
}

/// What a provider needs to be sent back, exactly as it came, to continue
/// a conversation after an answer. Kept in the answer's history node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reasoning {
    /// An Anthropic `thinking` block and the signature that vouches for it.
    Thinking { thinking: String, signature: String },
    /// An Anthropic `redacted_thinking` block (encrypted by the provider).
    RedactedThinking { data: String },
    /// An OpenAI Responses reasoning item; with `store: false` its
    /// encrypted content is what carries the reasoning to the next request.
    OpenAiReasoning {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        summary: Vec<String>,
    },
    /// A Gemini `thoughtSignature`, on the part it came with: tool call
    /// number `call`, or the text when `None`.
    GeminiSignature {
        signature: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<usize>,
    },
    /// A Gemini part of a tool the API ran itself (`toolCall`,
    /// `toolResponse`: its Google Search), sent back as it came, before
    /// the answer's text.
    GeminiServerPart { part: serde_json::Value },
}
