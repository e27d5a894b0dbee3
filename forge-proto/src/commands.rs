//! What a session offers a user besides its conversation: the commands
//! it takes (`commands.list`) and the plan the model keeps
//! (`session.plan`, `plan_updated`).

use serde::{Deserialize, Serialize};

/// A command of one's own (`commands.list`): `/name args` sent to the
/// session becomes its prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandInfo {
    /// Without the slash (`review`, `git:log` for a file in a subfolder).
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// From the front matter: the model that answers the turn the command
    /// starts (one of the session's provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// From the front matter: the calls that run without asking in the
    /// turn the command starts (`Bash(git add:*)`, `Read`, `server__tool`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// `user` or `project` (a Markdown file), or `mcp` (an MCP server's
    /// prompt, named `server:prompt`).
    pub source: String,
}

/// One step of the model's plan (`update_plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanStep {
    pub step: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// `session.plan`: the session's plan as the model last updated it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanInfo {
    pub session_id: String,
    #[serde(default)]
    pub steps: Vec<PlanStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The seq of its `plan_updated` (absent: the model made no plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}
