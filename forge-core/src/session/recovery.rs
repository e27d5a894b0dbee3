//! Stream recovery: a stream journal entry that is not committed belongs to
//! a turn the daemon did not finish (it died, or the store failed). Its
//! persisted deltas become a history message with a badge, exactly once:
//! the node and the journal commit are one transaction.
//!
//! | journal state | history status | badge |
//! |---|---|---|
//! | open (never sealed) | `interrupted` | `incomplete` |
//! | sealed complete | `complete` | `complete` |
//! | sealed error | `error` | `errored` |
//! | sealed cancelled | `cancelled` | `complete` (all that was asked for) |

use forge_proto::{EventKind, MessageStatus, RecoveryBadge, SessionEvent, ToolCallRecord, Usage};

use super::actor::SessionActor;
use super::turn::Answer;
use crate::error::EngineError;
use crate::store::StreamRow;

impl SessionActor {
    pub(super) async fn recover_streams(&mut self) -> Result<(), EngineError> {
        let streams = self.shared.store.open_streams(&self.row.id).await?;
        let recovered_a_stream = !streams.is_empty();
        for stream in streams {
            self.recover_stream(stream).await?;
        }
        if !recovered_a_stream && let Some(message_id) = self.shared.store.unfinished_turn(&self.row.id).await? {
            match self.pending_approval_id().await? {
                Some(approval_id) => self.restore_pending_approval(message_id, approval_id),
                None => self.recover_tool_loop(message_id),
            }
        }
        Ok(())
    }

    /// The id of an approval requested and not yet answered.
    async fn pending_approval_id(&self) -> Result<Option<String>, EngineError> {
        let store = &self.shared.store;
        let requested = store.last_seq_of_kind(&self.row.id, "approval_requested").await?;
        let resolved = store.last_seq_of_kind(&self.row.id, "approval_resolved").await?;
        if requested == 0 || resolved > requested {
            return Ok(None);
        }
        let page = store.events_after(&self.row.id, requested - 1, 1).await?;
        Ok(page.first().and_then(|(_, body)| match serde_json::from_str::<SessionEvent>(body).ok()?.kind {
            EventKind::ApprovalRequested { approval_id, .. } => Some(approval_id),
            _ => None,
        }))
    }

    /// A turn that was running its tools when the daemon stopped: tool
    /// calls without a result get one saying they were interrupted (they
    /// are not re-run behind the user's back), and the turn ends.
    fn recover_tool_loop(&mut self, message_id: String) {
        let last_calls = self
            .path
            .iter()
            .rposition(|m| m.role == crate::provider::ChatRole::Assistant && !m.tool_calls.is_empty());
        let mut unanswered = Vec::new();
        if let Some(i) = last_calls {
            let answered: std::collections::HashSet<&str> = self.path[i + 1..]
                .iter()
                .filter_map(|m| m.tool_result.as_ref().map(|(id, _)| id.as_str()))
                .collect();
            unanswered = self.path[i]
                .tool_calls
                .iter()
                .filter(|c| !answered.contains(c.id.as_str()))
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect();
        }
        tracing::info!(session = %self.row.id, unanswered = unanswered.len(), "recovering a turn interrupted while tools ran");
        self.close_interrupted_tool_turn(message_id, unanswered);
    }

    async fn recover_stream(&mut self, stream: StreamRow) -> Result<(), EngineError> {
        let (text, tool_calls) = self.streamed_text(&stream).await?;
        let (status, badge, error) = match (stream.state.as_str(), stream.outcome) {
            ("sealed", Some(MessageStatus::Complete)) => (MessageStatus::Complete, RecoveryBadge::Complete, None),
            ("sealed", Some(MessageStatus::Cancelled)) => {
                (MessageStatus::Cancelled, RecoveryBadge::Complete, stream.error.clone())
            }
            ("sealed", Some(_)) => (MessageStatus::Error, RecoveryBadge::Errored, stream.error.clone()),
            _ => (
                MessageStatus::Interrupted,
                RecoveryBadge::Incomplete,
                Some("forged stopped while this answer was streaming; what was received before is kept".to_string()),
            ),
        };
        tracing::info!(
            session = %self.row.id, stream = %stream.stream_id, chars = text.len(), ?badge,
            "recovering a stream the daemon did not finish"
        );
        let usage: Option<Usage> = stream.usage.as_deref().and_then(|u| serde_json::from_str(u).ok());
        let error_kind = match status {
            MessageStatus::Complete => None,
            _ => stream.error_kind.clone().or(Some("interrupted".into())),
        };
        self.commit_answer(Answer {
            stream_id: stream.stream_id,
            message_id: stream.message_id,
            text,
            tool_calls,
            status,
            provider: stream.provider,
            model: stream.model,
            usage,
            stop_reason: stream.stop_reason,
            error_kind,
            error,
            recovered: Some(badge),
            finishes_turn: true,
        });
        Ok(())
    }

    /// The stream's text and tool calls: its persisted deltas, in order.
    /// They follow the stream's `turn_started`; the next turn's events (if
    /// any) end them.
    async fn streamed_text(&self, stream: &StreamRow) -> Result<(String, Vec<ToolCallRecord>), EngineError> {
        let store = &self.shared.store;
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut after = stream.first_seq;
        loop {
            let page = store.events_after(&self.row.id, after, 1000).await?;
            let Some((last, _)) = page.last() else { break };
            after = *last;
            for (_, body) in &page {
                let Ok(ev) = serde_json::from_str::<SessionEvent>(body) else { continue };
                match ev.kind {
                    EventKind::TextDelta { text: t } => text.push_str(&t),
                    EventKind::TurnStarted { .. }
                    | EventKind::TurnFinished { .. }
                    | EventKind::ToolRunning { .. }
                    | EventKind::ToolResult { .. } => return Ok((text, calls)),
                    other => super::state::fold_tool_call(&mut calls, &other),
                }
            }
        }
        Ok((text, calls))
    }
}
