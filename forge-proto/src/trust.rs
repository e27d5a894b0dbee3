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

/// A project's own tools (`.forge/tools/*.toml`), each with its approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectTools {
    /// The project the approvals are kept for (a git repository's top, the
    /// user's one for a git session's worktree; else the folder).
    pub project: String,
    /// Where the tool files were read (`<dir>/.forge/tools`).
    pub dir: String,
    #[serde(default)]
    pub tools: Vec<ProjectTool>,
}

/// One tool file and its approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectTool {
    /// Relative to the project's top (`.forge/tools/test.toml`).
    pub file: String,
    /// SHA-256 of the file's content: what an approval names.
    pub sha256: String,
    /// `approved` (offered to the model, runs confined without asking);
    /// `unapproved`; `changed` (approved once, but the file changed since:
    /// not offered until approved again); `invalid` (see `error`).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The command template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The arguments' JSON schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Value>,
    /// Why the file declares no tool (`invalid`), or why an approved one is
    /// not offered (its name is taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the user approved this content (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_ms: Option<i64>,
    /// The project files its command names (a script, an interpreter's
    /// script argument), relative to the project's top: the approval
    /// covers their content too (`sha256` includes it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
}
