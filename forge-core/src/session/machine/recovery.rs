//! Recovery: what a session left unfinished when the daemon stopped (or
//! the store failed), as the shell read it from the store ([`Unfinished`]),
//! turned into history and state. A stream journal entry that is not
//! committed becomes a history message with a badge, exactly once: the
//! node and the journal commit are one batch.
//!
//! | journal state | history status | badge |
//! |---|---|---|
//! | open (never sealed) | `interrupted` | `incomplete` |
//! | sealed complete | `complete` | `complete` |
//! | sealed error | `error` | `errored` |
//! | sealed cancelled | `cancelled` | `complete` (all that was asked for) |

use std::collections::HashSet;

use forge_proto::{ClientRef, EventKind, MessageStatus, RecoveryBadge, RecoveryCall, ToolCallRecord, Usage};

use super::Session;
use super::answer::Answer;
use super::state::OperationState;
use crate::provider::{ChatMessage, ChatRole};
use crate::store::{QueuedRow, SessionRow, StreamRow};

/// What the store holds for a session (read by the shell).
pub(crate) struct Durable {
    pub row: SessionRow,
    pub queue: Vec<QueuedRow>,
    /// The conversation on the current path.
    pub path: Vec<ChatMessage>,
    pub unfinished: Unfinished,
    /// Tokens and cost of the session's provider responses so far.
    pub spent: forge_proto::UsageTotal,
    /// The session's summaries.
    pub summaries: Vec<crate::context::Summary>,
    /// Which summary requests send (see `Session::in_force`).
    pub in_force: Option<Option<String>>,
    /// Calls interrupted after recording file changes (see
    /// `Session::interrupted_changes`).
    pub interrupted_changes: std::collections::HashMap<String, String>,
    /// A rewind the daemon stopped during (its intent without its end).
    pub rewind: Option<super::rewind::RewindIntent>,
    /// A command the daemon died during: its call, and what it had left
    /// that git would run, undone at load (see `crash_guard.rs`).
    pub guarded: Option<(String, Vec<forge_proto::GitUndone>)>,
    /// Git mode: the worktree's `core.hooksPath` (as `Refresh` has it).
    pub git_hooks: Option<String>,
}

/// What the session left unfinished, as the store shows it.
pub(crate) enum Unfinished {
    Nothing,
    /// Stream journal entries never committed, with what they streamed.
    Streams(Vec<RecoveredStream>),
    /// A summary was being written, for this turn (or asked for while
    /// idle): summarize again.
    Summarizing {
        message_id: Option<String>,
    },
    /// Git mode: the turn ended, and its commit is not journaled.
    Commit {
        message_id: String,
        status: forge_proto::MessageStatus,
    },
    /// The turn's first request waited for MCP servers still starting.
    AwaitingTools {
        message_id: String,
    },
    /// Parse-only: the turn waits for results a client supplies.
    AwaitingToolResults {
        message_id: String,
    },
    /// The turn's tool batch waited for this approval.
    PendingApproval {
        message_id: String,
        approval_id: String,
    },
    /// The turn was in its tool calls: `started` had `tool_running`;
    /// `announced` when the newest tool event is the `tool_recovery` notice.
    ToolCalls {
        message_id: String,
        started: HashSet<String>,
        announced: bool,
    },
}

/// An uncommitted stream and its persisted deltas.
pub(crate) struct RecoveredStream {
    pub row: StreamRow,
    pub text: String,
    pub tool_calls: Vec<ToolCallRecord>,
}

/// Why a session recovers what it did not finish: the words its
/// interrupted answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecoveryCause {
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

impl Session {
    pub(super) fn recover(&mut self, unfinished: Unfinished, cause: RecoveryCause) {
        // What the unfinished turn's commands wrote is no longer known.
        if !matches!(unfinished, Unfinished::Nothing) {
            self.run_later = super::git_held::RunLaterWritten::Unknown;
        }
        match unfinished {
            Unfinished::Nothing => {}
            Unfinished::Streams(streams) => {
                for stream in streams {
                    self.recover_stream(stream, cause);
                }
                // Git mode: the recovered turn is committed once its end is
                // durable, as a live one is (`[interrupted]` when it was cut).
                if self.row.git.is_some() && self.finished_turn.is_some() {
                    self.state = OperationState::Finishing;
                    self.pipeline.effect(super::OnDurable::TurnDone);
                }
            }
            Unfinished::AwaitingTools { message_id } => self.restore_tools_wait(message_id),
            Unfinished::Commit { message_id, status } => self.restore_commit(message_id, status),
            Unfinished::AwaitingToolResults { message_id } => {
                if let Some((calls, _)) = self.last_tool_calls() {
                    self.state = OperationState::AwaitingToolResults { message_id, iteration: 0, pending: calls };
                }
            }
            Unfinished::Summarizing { message_id: Some(message_id) } => self.proceed_turn(message_id, None, 0),
            Unfinished::Summarizing { message_id: None } => {
                if let Err(e) = self.summarize_now() {
                    // Nothing left to summarize (or no model): say the
                    // summary asked for will not come.
                    self.pipeline.event(None, EventKind::SummarizationFailed { error: e.message });
                }
            }
            Unfinished::PendingApproval { message_id, approval_id }
                if approval_id.starts_with(super::budget::BUDGET_APPROVAL) =>
            {
                self.restore_budget_wait(message_id, approval_id);
            }
            Unfinished::PendingApproval { message_id, approval_id } => {
                self.restore_pending_approval(message_id, approval_id);
            }
            Unfinished::ToolCalls { message_id, started, announced } => {
                self.recover_tool_loop(message_id, &started, announced);
            }
        }
    }

    /// The tool calls of the path's last answer that asked for any, less
    /// those answered since, and all of them.
    pub(super) fn last_tool_calls(&self) -> Option<(Vec<ToolCallRecord>, Vec<ToolCallRecord>)> {
        let i = self.path.iter().rposition(|m| m.role == ChatRole::Assistant && !m.tool_calls.is_empty())?;
        let answered: HashSet<&str> =
            self.path[i + 1..].iter().filter_map(|m| m.tool_result.as_ref().map(|(id, _)| id.as_str())).collect();
        let all = &self.path[i].tool_calls;
        Some((all.iter().filter(|c| !answered.contains(c.id.as_str())).cloned().collect(), all.clone()))
    }

    /// A turn that was in its tool calls when the daemon stopped: the
    /// session waits in `ToolRecovery` for a client's decision. Completed
    /// calls keep their journaled results; nothing runs by itself.
    fn recover_tool_loop(&mut self, message_id: String, started: &HashSet<String>, announced: bool) {
        let calls: Vec<RecoveryCall> = self
            .last_tool_calls()
            .map(|(unanswered, _)| unanswered)
            .unwrap_or_default()
            .into_iter()
            .map(|c| RecoveryCall {
                interrupted: started.contains(&c.id),
                call_id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        tracing::info!(session = %self.row.id, unfinished = calls.len(), "a turn was interrupted in its tool calls: waiting for a decision");
        if !announced {
            self.pipeline.event(Some(ClientRef::daemon()), EventKind::ToolRecovery { calls: calls.clone() });
        }
        self.state = OperationState::ToolRecovery { message_id, calls };
    }

    fn recover_stream(&mut self, stream: RecoveredStream, cause: RecoveryCause) {
        let RecoveredStream { row: stream, text, tool_calls } = stream;
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
            reasoning: stream.reasoning.as_deref().and_then(|r| serde_json::from_str(r).ok()).unwrap_or_default(),
            error_kind,
            error,
            recovered: Some(badge),
            finishes_turn: true,
            citations: Vec::new(),
        });
    }
}
