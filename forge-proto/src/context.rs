//! `session.context`: what the next request of a session holds against
//! the model's window, and the repository map its system prompt carries.

use serde::{Deserialize, Serialize};

use crate::history::HistoryMessage;
use crate::types::SummaryInfo;

/// `session.context`: how much of the model's context the session uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextInfo {
    pub session_id: String,
    pub provider: String,
    pub model: String,
    /// Messages on the session's path (what the next request sends).
    pub messages: u64,
    pub chars: u64,
    /// The next request's input (system prompt, tools, messages): an
    /// estimate, calibrated by the counts the provider reported.
    pub estimated_tokens: u64,
    /// The model's context window, when Forge knows it.
    pub context_window: Option<u64>,
    /// Of the window, the tokens kept free for the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_tokens: Option<u64>,
    /// Whether Context Infinity is on (`[context] infinity`).
    #[serde(default)]
    pub infinity: bool,
    /// The summary the next request sends in place of the path's first
    /// `summarized_messages` messages (they stay in history), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_id: Option<String>,
    #[serde(default)]
    pub summarized_messages: u64,
    /// The session's summaries, oldest first (`N` for `span` counts from 1).
    #[serde(default)]
    pub summaries: Vec<SummaryInfo>,
    /// With `span: N`: the original messages the N-th summary stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_messages: Option<Vec<HistoryMessage>>,
    /// Tokens the provider reported for the last request, when known.
    pub last_input_tokens: Option<u64>,
    /// The system prompt every request of the session carries, when asked
    /// for (`system: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The project instruction files (AGENTS.md, ...) the system prompt
    /// holds, farthest first.
    #[serde(default)]
    pub instruction_files: Vec<String>,
    /// The tools requests offer the model, by name.
    #[serde(default)]
    pub tools_offered: Vec<String>,
    /// Tools left out of requests because their definitions would take
    /// too much of a small window (the core ones are kept).
    #[serde(default)]
    pub tools_withheld: Vec<String>,
    /// With `repo: true`: the repository map the system prompt holds
    /// (`[context] repo_summaries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_map: Option<RepoMapInfo>,
    /// The session's active files: their whole text goes with every
    /// request (counted in `estimated_tokens`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_files: Vec<crate::active_files::ActiveFile>,
}

/// A repository's map: its files, each with a one-line summary a cheap
/// model wrote, kept by content hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepoMapInfo {
    /// Whether maps are on (`[context] repo_summaries = true`).
    pub enabled: bool,
    /// The repository's top (the session's git top, else its folder).
    pub root: String,
    /// `off`, `not_built`, `building` (summaries being written; the map
    /// holds what is ready), `ready` or `failed` (see `error`).
    pub state: String,
    /// Files in the repository (not ignored), and of them those the map
    /// shows within `budget_tokens`.
    pub files: u64,
    pub shown: u64,
    /// Shown files with a summary, and those still waiting for one.
    pub summarized: u64,
    pub waiting: u64,
    /// The map's size, and the most it may take (`[context]
    /// repo_map_tokens`).
    pub tokens: u64,
    pub budget_tokens: u64,
    /// The model that writes the summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The map as the system prompt holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}
