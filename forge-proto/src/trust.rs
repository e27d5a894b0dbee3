//! Workspace trust on the wire: a folder's own hooks and MCP servers run
//! only once the user trusts it, as its files are then.

use serde::{Deserialize, Serialize};

/// A folder's trust now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FolderTrust {
    /// The folder (absolute, as recorded).
    pub dir: String,
    /// `trusted`; `untrusted` (what it provides is ignored); `changed`
    /// (trusted once, but its files changed since: ignored until trusted
    /// again); or `nothing` (it provides nothing that runs code).
    pub state: String,
    /// What the folder provides that runs code, in words
    /// (`hooks in .claude/settings.json (2 event(s))`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<String>,
    /// When the user trusted it (ms since the epoch), if they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_ms: Option<i64>,
}
