//! A session's active files on the wire: files whose whole text goes with
//! every request (`session.context_files`, `active_files_changed`).

use serde::{Deserialize, Serialize};

/// A file whose whole text is in every request of a session (its active
/// files: the model's `update_context` tool, `session.context_files`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActiveFile {
    /// As given, relative to the session's directory when it is in it.
    pub path: String,
    /// Its size when last checked.
    pub bytes: u64,
}

/// A file that could not become active, and why (binary, too large, over
/// the context budget, outside the session's roots, missing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefusedFile {
    pub path: String,
    pub reason: String,
}

/// `session.context_files`: the active files now, and what changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextFilesResult {
    pub session_id: String,
    pub files: Vec<ActiveFile>,
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub removed: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedFile>,
}
