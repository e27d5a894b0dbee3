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

use forge_proto::{EventKind, MessageStatus, RecoveryBadge, RecoveryCall, SessionEvent, ToolCallRecord, Usage};

use super::actor::SessionActor;
use super::state::OperationState;
use super::turn::Answer;
use crate::error::EngineError;
use crate::store::StreamRow;

/// Why a session recovers what it did not finish: the words its
/// interrupted answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecoveryCause {
    /// forged stopped (or was killed) and started again.
    Restart,
    /// The store could not be written; a journal reset brought it back.
    StoreFailure,
}

impl RecoveryCause {
    fn interrupted_because(self) -> &'static str {
        match self {
            RecoveryCause::Restart => {
                "forged stopped while this answer was streaming; what was received before is kept"
            }
            RecoveryCause::StoreFailure => {
                "the store could not be written while this answer was streaming, so it was stopped; what was received before is kept"
            }
        }
    }
}

impl SessionActor {
    pub(super) async fn recover_streams(&mut self, cause: RecoveryCause) -> Result<(), EngineError> {
        let streams = self.shared.store.open_streams(&self.row.id).await?;
        let recovered_a_stream = !streams.is_empty();
        for stream in streams {
            self.recover_stream(stream, cause).await?;
        }
        if !recovered_a_stream && let Some(message_id) = self.shared.store.unfinished_turn(&self.row.id).await? {
            if self.awaiting_tool_results().await? {
                self.restore_awaiting_tool_results(message_id);
                return Ok(());
            }
            match self.pending_approval_id().await? {
                Some(approval_id) => self.restore_pending_approval(message_id, approval_id),
                None => self.recover_tool_loop(message_id).await?,
            }
        }
        Ok(())
    }

    /// Parse-only: the turn waits for results a client supplies.
    async fn awaiting_tool_results(&self) -> Result<bool, EngineError> {
        let store = &self.shared.store;
        let waiting = store.last_seq_of_kind(&self.row.id, "awaiting_tool_results").await?;
        let resumed = store.last_seq_of_kind(&self.row.id, "stream_resumed").await?;
        let started = store.last_seq_of_kind(&self.row.id, "turn_started").await?;
        Ok(waiting > resumed.max(started))
    }

    fn restore_awaiting_tool_results(&mut self, message_id: String) {
        let Some(i) =
            self.path.iter().rposition(|m| m.role == crate::provider::ChatRole::Assistant && !m.tool_calls.is_empty())
        else {
            return;
        };
        let answered: std::collections::HashSet<&str> =
            self.path[i + 1..].iter().filter_map(|m| m.tool_result.as_ref().map(|(id, _)| id.as_str())).collect();
        let pending = self.path[i].tool_calls.iter().filter(|c| !answered.contains(c.id.as_str())).cloned().collect();
        self.state = OperationState::AwaitingToolResults { message_id, iteration: 0, pending };
    }

    /// The id of an approval requested and not yet answered.
    async fn pending_approval_id(&self) -> Result<Option<String>, EngineError> {
        self.shared.writer.sync().await;
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

    /// A turn that was in its tool calls when the daemon stopped: the
    /// session waits in `ToolRecovery` for a client's decision. Completed
    /// calls keep their journaled results; nothing runs by itself.
    async fn recover_tool_loop(&mut self, message_id: String) -> Result<(), EngineError> {
        let last =
            self.path.iter().rposition(|m| m.role == crate::provider::ChatRole::Assistant && !m.tool_calls.is_empty());
        let mut calls = Vec::new();
        if let Some(i) = last {
            let answered: std::collections::HashSet<&str> =
                self.path[i + 1..].iter().filter_map(|m| m.tool_result.as_ref().map(|(id, _)| id.as_str())).collect();
            let started = self.started_tool_calls().await?;
            calls = self.path[i]
                .tool_calls
                .iter()
                .filter(|c| !answered.contains(c.id.as_str()))
                .map(|c| RecoveryCall {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    interrupted: started.contains(&c.id),
                })
                .collect();
        }
        tracing::info!(session = %self.row.id, unfinished = calls.len(), "a turn was interrupted in its tool calls: waiting for a decision");
        if !self.recovery_announced().await? {
            self.pipeline
                .event(Some(forge_proto::ClientRef::daemon()), EventKind::ToolRecovery { calls: calls.clone() });
        }
        self.state = OperationState::ToolRecovery { message_id, calls };
        Ok(())
    }

    /// Calls with `tool_running` since the turn's last answer.
    async fn started_tool_calls(&self) -> Result<std::collections::HashSet<String>, EngineError> {
        self.shared.writer.sync().await;
        let store = &self.shared.store;
        let from = store.last_seq_of_kind(&self.row.id, "turn_started").await?;
        let mut started = std::collections::HashSet::new();
        let mut after = from;
        loop {
            let page = store.events_after(&self.row.id, after, 1000).await?;
            let Some((last, _)) = page.last() else { break };
            after = *last;
            for (_, body) in &page {
                if let Ok(SessionEvent { kind: EventKind::ToolRunning { call_id, .. }, .. }) =
                    serde_json::from_str(body)
                {
                    started.insert(call_id);
                }
            }
        }
        Ok(started)
    }

    /// True if the newest tool event already is the `tool_recovery` notice
    /// (a second restart must not announce it again).
    async fn recovery_announced(&self) -> Result<bool, EngineError> {
        let store = &self.shared.store;
        let notice = store.last_seq_of_kind(&self.row.id, "tool_recovery").await?;
        let mut newest = 0;
        for kind in ["turn_started", "tool_running", "tool_result", "stream_resumed", "approval_resolved"] {
            newest = newest.max(store.last_seq_of_kind(&self.row.id, kind).await?);
        }
        Ok(notice > newest)
    }

    async fn recover_stream(&mut self, stream: StreamRow, cause: RecoveryCause) -> Result<(), EngineError> {
        self.shared.writer.sync().await;
        let (text, tool_calls) = self.streamed_text(&stream).await?;
        let (status, badge, error) = match (stream.state.as_str(), stream.outcome) {
            ("sealed", Some(MessageStatus::Complete)) => (MessageStatus::Complete, RecoveryBadge::Complete, None),
            ("sealed", Some(MessageStatus::Cancelled)) => {
                (MessageStatus::Cancelled, RecoveryBadge::Complete, stream.error.clone())
            }
            ("sealed", Some(_)) => (MessageStatus::Error, RecoveryBadge::Errored, stream.error.clone()),
            _ => (MessageStatus::Interrupted, RecoveryBadge::Incomplete, Some(cause.interrupted_because().to_string())),
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
