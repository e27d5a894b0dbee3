//! A session's history as `session.history` gives it, and what a message
//! carries beside its text (shared with the node the store keeps).

use serde::{Deserialize, Serialize};

use crate::types::{ClientRef, MessageStatus, RecoveryBadge, Role, ToolCallRecord, ToolResultInfo};
use crate::usage::Usage;

/// What a message carries beside its text: who made it and how, what it
/// cost, what it called or answers, what it shows. One type for the
/// history clients read and the node the store keeps (which adds what
/// only requests need).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageMeta {
    /// What hooks added to a user message for the model (`UserPromptSubmit`
    /// output, and `SessionStart` output on the first message), and the
    /// instruction an `output_schema` adds, between `<output-schema>`
    /// marks (`context_parts` tells them apart): sent with it, never part
    /// of `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the message was recovered from the stream journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<RecoveryBadge>,
    /// Tool calls the assistant made in this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    /// For `role: tool`: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResultInfo>,
    /// Images the message carries (the model saw them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::images::ImageInfo>,
    /// The sources an answer cites (it searched the web).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<crate::web::Citation>,
}

/// Marks, inside a message's `context`, the instruction an
/// `output_schema` adds (the rest is what hooks added).
pub const OUTPUT_SCHEMA_OPEN: &str = "<output-schema>";
pub const OUTPUT_SCHEMA_CLOSE: &str = "</output-schema>";

impl MessageMeta {
    /// What was added to a user message, by its source: what hooks added,
    /// and the instruction its output schema added (each `None` if none).
    pub fn context_parts(&self) -> (Option<&str>, Option<&str>) {
        let Some(context) = self.context.as_deref() else { return (None, None) };
        fn some(s: &str) -> Option<&str> {
            Some(s.trim()).filter(|s| !s.is_empty())
        }
        match context.split_once(OUTPUT_SCHEMA_OPEN) {
            Some((hooks, rest)) => {
                let schema = rest.split_once(OUTPUT_SCHEMA_CLOSE).map_or(rest, |(s, _)| s);
                (some(hooks), some(schema))
            }
            None => (some(context), None),
        }
    }
}

/// One node of the session's history path, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryMessage {
    pub id: String,
    pub parent_id: Option<String>,
    pub role: Role,
    /// As the user typed it (for a user message).
    pub text: String,
    pub status: MessageStatus,
    pub created_ms: i64,
    #[serde(flatten)]
    pub meta: MessageMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryResult {
    pub session_id: String,
    pub head: Option<String>,
    pub messages: Vec<HistoryMessage>,
}
