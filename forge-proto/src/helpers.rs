//! Helper agents: a session the model starts with the `task` tool, run
//! by the daemon as a session of its own (its own tree and journal) whose
//! final answer is the tool call's result.

use serde::{Deserialize, Serialize};

/// What makes a session a helper: whose, for which call, as what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HelperOf {
    /// The session whose `task` call started it.
    pub parent: String,
    /// That call's id.
    pub call_id: String,
    /// The call's short description (what `ps` shows).
    pub description: String,
    /// The agent type it runs as (`general-purpose` when none was asked).
    pub agent: String,
    /// 1 for a helper of a top-level session, 2 for a helper's helper...
    pub depth: u32,
    /// The parent's answer (node) that made the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// An agent type a `task` call may ask for: a Markdown file with front
/// matter (`name`, `description`, `tools`, `model`) whose body is the
/// helper's instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentInfo {
    pub name: String,
    pub description: String,
    /// The tools it may use (Forge's names); none given: every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The model it answers with; none: the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `builtin`, `user` or `project`.
    pub source: String,
    /// The file it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}
