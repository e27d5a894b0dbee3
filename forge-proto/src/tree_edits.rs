//! What the methods that change a session's tree answer: a rewind (each
//! file's step and what became of it), an edit, a delete, a split, a
//! bookmark.

use serde::{Deserialize, Serialize};

/// What a rewind is to leave in one file: content (by SHA-256) and mode,
/// or no file (`hash` absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RewindStep {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default)]
    pub mode: u32,
}

/// A file a rewind (or a checkout with `restore_files`) put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RestoredFile {
    pub path: String,
    /// `restore` (new content), `create` (it had been deleted),
    /// `delete` (it had been created), or `kept` (left as it is: `note`
    /// says why).
    pub action: String,
    /// It had changed outside Forge since Forge changed it.
    #[serde(default)]
    pub conflict: bool,
    /// With `force`: the blob (SHA-256) keeping what was overwritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwritten: Option<String>,
    /// Why a file was `kept` (its recorded content held a secret, which
    /// Forge never stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `session.rewind`, and the files of `session.checkout` with
/// `restore_files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RewindResult {
    pub session_id: String,
    /// The node rewound to (absent: before the first message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub files: Vec<RestoredFile>,
    /// Files whose state at the target is unknown (a tool call there was
    /// interrupted before its result was recorded): left as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    pub dry_run: bool,
    /// With `dry_run`: the unified diff the rewind would apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The conversation moved too (not with `files_only`).
    pub conversation: bool,
    /// Files past the first 2,000 listed in `files` (the files a rewind
    /// cannot restore first), left out so that the answer stays small;
    /// their count is here. A dry run's `diff` stops at 4 MiB, saying so.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `session.edit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EditResult {
    pub session_id: String,
    pub node_id: String,
    /// The edited message: `node_id` itself when edited in place.
    pub new_node_id: String,
    pub in_place: bool,
    /// A turn was started to answer the edited user message.
    pub answering: bool,
}

/// `session.delete_node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeleteNodeResult {
    pub session_id: String,
    pub deleted: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

/// `session.split`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SplitResult {
    pub session_id: String,
    pub node_id: String,
    pub new_node_id: String,
}

/// `session.bookmark`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BookmarkResult {
    pub session_id: String,
    pub name: String,
    /// Where it points now (absent once deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}
