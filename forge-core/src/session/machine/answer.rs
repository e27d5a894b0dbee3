//! An answer made history: its assistant node (with what the provider
//! said of it: usage, reasoning, citations), the head's move, the stream
//! journal's commit and `turn_finished`, in one batch.

use forge_proto::{ClientRef, EventKind, MessageStatus, Role};

use super::Session;
use super::history::answer_text;
use crate::journal::StoreOp;
use crate::provider::ChatMessage;
use crate::store::rows::NodeMeta;

impl Session {
    /// Makes an answer history: the assistant node (if anything was said),
    /// the head move, the stream journal commit (prune) and `turn_finished`,
    /// all in the next batch, so they are durable together or not at all.
    /// Returns the answer's node and the outbox index of its
    /// `assistant_node`, if it has one.
    pub(super) fn commit_answer(&mut self, a: Answer) -> Option<(String, usize)> {
        // A recovered turn always leaves an answer, empty or not: history
        // then says it was interrupted, and so does the next request.
        let mut node_event = None;
        let assistant_id = if a.text.is_empty() && a.tool_calls.is_empty() && a.recovered.is_none() {
            None
        } else {
            let id = self.clock.new_id("m");
            let parent_id = self.row.head_id.clone();
            let calls = a.tool_calls.len() as u32;
            self.pipeline.op(StoreOp::InsertNode {
                id: id.clone(),
                session_id: self.row.id.clone(),
                parent_id: self.row.head_id.clone(),
                role: Role::Assistant,
                text: a.text.clone(),
                status: a.status,
                created_ms: self.clock.now_ms(),
                meta: NodeMeta {
                    message: forge_proto::MessageMeta {
                        provider: Some(a.provider),
                        model: Some(a.model),
                        usage: a.usage.clone(),
                        error: a.error.clone(),
                        recovered: a.recovered,
                        tool_calls: a.tool_calls.clone(),
                        citations: a.citations.clone(),
                        ..Default::default()
                    },
                    stop_reason: a.stop_reason.clone(),
                    reasoning: a.reasoning.clone(),
                    summary_of: None,
                    system_prompt: None,
                },
            });
            self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(id.clone()) });
            self.row.head_id = Some(id.clone());
            self.path.push(
                ChatMessage::assistant(answer_text(&a.text, a.status), a.tool_calls)
                    .with_reasoning(a.reasoning)
                    .with_node(id.clone()),
            );
            let event =
                EventKind::AssistantNode { node_id: id.clone(), parent_id, status: a.status, tool_calls: calls };
            node_event = Some((id.clone(), self.pipeline.event(None, event)));
            Some(id)
        };
        self.pipeline.op(StoreOp::StreamCommit { stream_id: a.stream_id });
        if !a.finishes_turn {
            return node_event;
        }
        // A recovered answer is the daemon's doing; a live one the model's.
        let client = a.recovered.map(|_| ClientRef::daemon());
        self.finish_turn_event(
            client,
            EventKind::TurnFinished {
                message_id: a.message_id,
                assistant_id,
                status: a.status,
                stop_reason: a.stop_reason,
                usage: a.usage,
                error_kind: a.error_kind,
                error: a.error,
                recovered: a.recovered,
            },
        );
        node_event
    }
}

/// An answer ready to become history, live or recovered.
pub(super) struct Answer {
    pub stream_id: String,
    pub message_id: String,
    pub text: String,
    pub tool_calls: Vec<forge_proto::ToolCallRecord>,
    pub status: MessageStatus,
    pub provider: String,
    pub model: String,
    pub usage: Option<forge_proto::Usage>,
    pub stop_reason: Option<String>,
    pub reasoning: Vec<crate::provider::Reasoning>,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub recovered: Option<forge_proto::RecoveryBadge>,
    /// False when tool calls continue the turn.
    pub finishes_turn: bool,
    pub citations: Vec<forge_proto::Citation>,
}
