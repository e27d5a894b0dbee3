//! The session's operation state (the seeds' `OperationState`). Each
//! variant holds exactly the data that state needs, so two streams at
//! once, or a tool loop without its calls, cannot be represented. The
//! data of each state lives here, beside it (`calls`, `rewinding`,
//! `summary`); what the machine does in each lives in its area's file.

mod branch_move;
mod calls;
mod held;
mod reservations;
mod rewinding;
mod summary;

pub(crate) use branch_move::{BranchMove, MoveReply};
pub(crate) use calls::{Before, CallStage, Checkpoint, HelperCall, PlannedCall, Ready, RunningCall, ToolLoop};
pub(crate) use held::HeldWait;
pub(crate) use reservations::Reservations;
pub(crate) use rewinding::{Forking, RewindStage, Rewinding};
pub(crate) use summary::SummaryJob;

use forge_proto::{OperationStateKind, ToolCallRecord, Usage};

/// A turn streaming from the provider.
pub(super) struct ActiveStream {
    /// The stream's journal entry.
    pub stream_id: String,
    /// The user message that started the turn.
    pub message_id: String,
    pub provider: String,
    pub model: String,
    /// Text applied so far: only durable deltas are in it.
    pub text: String,
    /// Tool calls applied so far, by their index in the answer.
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: Option<Usage>,
    pub stop_reason: Option<String>,
    /// Signed thinking and reasoning items, kept with the answer.
    pub reasoning: Vec<crate::provider::Reasoning>,
    /// The sources the answer cites (a web search), once each.
    pub citations: Vec<forge_proto::Citation>,
    /// The end is taken in (seal queued or written); nothing more is ingested.
    pub sealed: bool,
    /// 0 for the turn's first stream, then one more after each tool batch.
    pub iteration: u32,
    /// Anything was taken in from the provider: a failure is no longer
    /// retried (the partial answer is kept instead).
    pub output_seen: bool,
    /// The request's attempt, from 1; after a transient failure the
    /// stream waits for `Timer::Retry` and tries again.
    pub attempt: u32,
    pub waiting_to_retry: bool,
    /// The request's estimated input tokens, to calibrate the estimate
    /// with the count the provider reports.
    pub estimated_input: u64,
    /// What the request held, made an anchor once the provider counts it.
    pub sent: Option<crate::context::Anchor>,
    /// Bytes of text, thinking and tool arguments taken in: the estimate
    /// of the output when the provider counts nothing.
    pub output_bytes: usize,
}

pub(super) enum OperationState {
    Idle,
    Streaming(ActiveStream),
    /// Running the tool calls of the last answer, one at a time.
    ToolLoop(ToolLoop),
    /// Parse-only: a client supplies the results of these calls.
    AwaitingToolResults {
        message_id: String,
        iteration: u32,
        pending: Vec<forge_proto::ToolCallRecord>,
    },
    /// The daemon stopped during the tool calls; a client decides.
    ToolRecovery {
        message_id: String,
        calls: Vec<forge_proto::RecoveryCall>,
    },
    /// Between two steps: the answer and `turn_finished` are written but
    /// not yet durable (the next turn starts only then), or the answer's
    /// tool calls are about to be planned.
    Finishing,
    /// The session is past `[app] session_budget_usd`: the turn's user
    /// message is recorded, and the model is not asked until a user
    /// confirms (`approval` is what clients see and answer).
    AwaitingBudget {
        message_id: String,
        /// The request of the turn it waits before (0: its first; more:
        /// between two tool batches).
        iteration: u32,
        approval: forge_proto::PendingApproval,
        /// The seq of its `approval_requested`: shown once that is durable.
        approval_seq: u64,
    },
    /// A helper's turn waits, before a request, for its family's root
    /// session to say the family's budget allows it (see `budget.rs`).
    AwaitingFamilyBudget {
        message_id: String,
        iteration: u32,
    },
    /// The turn's user message is recorded, and its first request waits
    /// for MCP servers still starting (see `mcp_wait.rs`): `job` comes
    /// back when they are up or the wait is over.
    AwaitingTools {
        message_id: String,
        job: u64,
        since_ms: i64,
    },
    /// The request would not fit: the turn waits for a summary of the
    /// conversation's start.
    Summarizing(SummaryJob),
    /// The turn ended complete and is durable; its `Stop` hooks run
    /// (`job`) before the session is idle.
    StopHooks {
        job: u64,
    },
    /// Git mode: the turn ended and is durable; its commit is being
    /// written (`job`) before the session goes on (see `git_commit.rs`).
    Committing {
        job: u64,
        message_id: String,
        status: forge_proto::MessageStatus,
    },
    /// Git mode: the turn's commit waits for a user's word on files its
    /// commands wrote that run something later (see `git_held.rs`).
    AwaitingHeld(Box<HeldWait>),
    /// Git mode: a checkout waits for the session's branch to move to the
    /// node's commit before the head moves (see `git_commit.rs`).
    MovingBranch(Box<BranchMove>),
    /// A rewind moves files (see `rewind.rs`).
    Rewinding(Box<Rewinding>),
    /// The store cannot be written; all new work is refused until a reset.
    PersistenceBlocked {
        reason: String,
    },
}

impl OperationState {
    pub fn kind(&self) -> OperationStateKind {
        match self {
            Self::Idle => OperationStateKind::Idle,
            Self::Streaming(_)
            | Self::Finishing
            | Self::StopHooks { .. }
            | Self::AwaitingTools { .. }
            | Self::Committing { .. } => OperationStateKind::Streaming,
            Self::ToolLoop(l) if l.awaiting_approval() || !l.helpers.asks.is_empty() => {
                OperationStateKind::AwaitingApproval
            }
            Self::AwaitingBudget { .. } | Self::AwaitingFamilyBudget { .. } | Self::AwaitingHeld(_) => {
                OperationStateKind::AwaitingApproval
            }
            Self::Summarizing(job) if job.waiting => OperationStateKind::SummarizationRetry,
            Self::Summarizing(_) => OperationStateKind::Summarizing,
            Self::ToolLoop(_) => OperationStateKind::ExecutingTools,
            Self::ToolRecovery { .. } => OperationStateKind::ToolRecovery,
            Self::AwaitingToolResults { .. } => OperationStateKind::AwaitingToolResults,
            Self::PersistenceBlocked { .. } => OperationStateKind::PersistenceBlocked,
            Self::Rewinding(_) | Self::MovingBranch(_) => OperationStateKind::Rewinding,
        }
    }

    /// Leaves the streaming state for `Finishing`, returning the stream
    /// (its request was dropped when it was sealed).
    pub fn take_stream(&mut self) -> Option<ActiveStream> {
        match std::mem::replace(self, Self::Finishing) {
            Self::Streaming(s) => Some(s),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// Folds a durable tool-call event into the calls collected so far (used
/// for live streams and for recovery alike).
pub(crate) fn fold_tool_call(calls: &mut Vec<ToolCallRecord>, kind: &forge_proto::EventKind) {
    match kind {
        forge_proto::EventKind::ToolCallStarted { call_id, name, .. } => {
            calls.push(ToolCallRecord { id: call_id.clone(), name: name.clone(), arguments: String::new() });
        }
        forge_proto::EventKind::ToolCallArgs { index, fragment } => {
            if let Some(c) = calls.get_mut(*index as usize) {
                c.arguments.push_str(fragment);
            }
        }
        _ => {}
    }
}
