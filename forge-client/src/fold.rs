//! The one reading of a session's events that every client shares: the TUI
//! transcript, `forgectl attach`/`send` and the ACP bridge feed each event
//! to a [`Fold`] and draw what it says. The fold keeps what follows from
//! the events (the session's state, who waits on whom, which streamed call a
//! fragment belongs to, when an answer is another answer to the same
//! message, when the session has settled) and words the events that are
//! notices, so two clients on one session say the same thing.
//!
//! Drawing stays with each client: the TUI makes items, `forgectl` lines,
//! the bridge `session/update`s.

mod words;

use forge_proto::{
    ApprovalCall, EventKind, OperationStateKind, RecoveryCall, SessionEvent, SessionInfo, ToolCallRecord, Usage,
    UsageTotal,
};

pub use words::{first_line, recovery_line};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// An event in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: Level,
    pub text: String,
    /// Routine (an allowing hook, a usage report): a log such as `attach`
    /// shows it, a conversation view may leave it out.
    pub routine: bool,
}

/// A call of the answer being streamed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Call {
    pub call_id: String,
    pub name: String,
    /// The arguments as streamed so far (whole once the answer is a node).
    pub args: String,
}

/// An approval that waits for an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    pub approval_id: String,
    pub calls: Vec<ApprovalCall>,
}

/// What one event meant, beyond the event itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Seen {
    /// The event in words, when it is a notice rather than conversation.
    pub notice: Option<Notice>,
    /// `turn_started` of a message that was shown as queued.
    pub was_queued: bool,
    /// This event opens another answer to the same message (`n` > 1).
    pub sibling: bool,
    /// `tool_call_args`: the call the fragment belongs to.
    pub call_id: Option<String>,
    /// `assistant_node`: the answer's calls, their arguments now whole.
    pub calls: Vec<Call>,
    /// The event ended some work and nothing runs, waits in the queue or
    /// is being rewound any more.
    pub settled: bool,
}

/// A session as its events tell it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fold {
    /// The last event applied: older ones (a replay overlapping what was
    /// seen) are skipped.
    pub last_seq: u64,
    /// None until an event says (following from live).
    pub state: Option<OperationStateKind>,
    pub name: Option<String>,
    pub cwd: String,
    pub provider: String,
    pub model: String,
    pub approval: Option<PendingApproval>,
    /// Approvals asked while `approval` waits (helper agents ask at the
    /// same time): each becomes `approval` in turn.
    pub approvals_behind: Vec<PendingApproval>,
    pub recovery: Option<Vec<RecoveryCall>>,
    pub awaiting_results: Option<Vec<ToolCallRecord>>,
    pub last_usage: Option<Usage>,
    /// The session's tokens and estimated cost, as of the last `usage`.
    pub spent: Option<UsageTotal>,
    /// The provider request waits to be tried again: in words.
    pub retrying: Option<String>,
    /// The message whose turn runs.
    pub running: Option<String>,
    /// The model's plan as last updated (`plan_updated`), and its note.
    pub plan: Vec<forge_proto::PlanStep>,
    pub plan_note: Option<String>,
    /// Messages queued while followed, by id.
    pub queued: Vec<String>,
    /// Messages already queued when following began (from `session.show`):
    /// the next turns that start are theirs.
    pub queued_before: u64,
    pub rewinding: bool,
    /// A summary a client asked for (`forgectl summarize`) is being
    /// written: no turn waits for it, so its end settles the session.
    pub summarizing: bool,
    /// A cancel was asked for and the turn has not ended yet.
    pub cancelling: bool,
    /// The log has a `head_moved`: replaying it does not give the path,
    /// which is read from the store instead.
    pub head_moved: bool,
    /// The node of the last answer of the running turn.
    pub answer_node: Option<String>,
    /// Calls of the answer being streamed, by index.
    calls: Vec<Option<Call>>,
}

impl Fold {
    /// The session as `session.show` says it is, for following it from
    /// the next event on (`from_seq` = `last_seq + 1`) without a replay.
    pub fn joined(info: &SessionInfo) -> Fold {
        let state = info.state;
        use OperationStateKind as K;
        let summary = matches!(
            state,
            K::Summarizing | K::SummarizationRetry | K::SummarizingWithQueued | K::SummarizationRetryWithQueued
        );
        Fold {
            last_seq: info.last_seq,
            state: Some(state),
            name: info.name.clone(),
            cwd: info.cwd.clone(),
            provider: info.provider.clone(),
            model: info.model.clone(),
            spent: info.usage.clone(),
            // Its id is not known; only that one runs.
            running: (!matches!(state, OperationStateKind::Idle | OperationStateKind::Rewinding) && !summary)
                .then(String::new),
            queued_before: u64::from(info.queued_messages),
            rewinding: state == OperationStateKind::Rewinding,
            // Whether a turn waits for a summary is not in `session.show`:
            // taken as one a client asked for, whose end settles the
            // session (a turn that goes on after it is not followed).
            summarizing: summary,
            ..Fold::default()
        }
    }

    /// Nothing runs, waits in the queue, is being rewound or summarized.
    pub fn idle(&self) -> bool {
        self.running.is_none()
            && !self.rewinding
            && !self.summarizing
            && self.queued.is_empty()
            && self.queued_before == 0
    }

    /// Applies one event; None when it is older than what was applied.
    pub fn apply(&mut self, ev: &SessionEvent) -> Option<Seen> {
        if ev.seq <= self.last_seq {
            return None;
        }
        self.last_seq = ev.seq;
        let who = ev.client.as_ref().map(|c| c.name.as_str());
        let mut seen = Seen { notice: words::notice(&ev.kind, who), ..Seen::default() };
        // Output, or the turn's end, means the retry is over.
        if !matches!(ev.kind, EventKind::Retrying { .. } | EventKind::CancelRequested {}) {
            self.retrying = None;
        }
        match &ev.kind {
            EventKind::SessionCreated { name, cwd, provider, model, .. } => {
                self.name = name.clone();
                self.cwd = cwd.clone();
                self.provider = provider.clone();
                self.model = model.clone();
                self.state = Some(OperationStateKind::Idle);
            }
            EventKind::SessionRenamed { name } => self.name = name.clone(),
            EventKind::SessionConfigured { provider, model, .. } => {
                self.provider = provider.clone();
                self.model = model.clone();
            }
            EventKind::HeadMoved { .. } => self.head_moved = true,
            EventKind::RewindStarted { .. } => self.rewinding = true,
            EventKind::FilesRestored { .. } => {
                self.rewinding = false;
                seen.settled = self.idle();
            }
            EventKind::PlanUpdated { steps, note } => {
                self.plan = steps.clone();
                self.plan_note = note.clone();
            }
            EventKind::MessageQueued { message_id, .. } | EventKind::SteerQueued { message_id, .. } => {
                self.queued.push(message_id.clone())
            }
            // A steer joined the running turn: no longer waiting.
            EventKind::SteerApplied { message_id, .. } => {
                if let Some(i) = self.queued.iter().position(|id| id == message_id) {
                    self.queued.remove(i);
                    seen.was_queued = true;
                }
            }
            EventKind::QueueCleared { .. } => {
                self.queued.clear();
                self.queued_before = 0;
            }
            EventKind::TurnStarted { message_id, provider, model, .. } => {
                match self.queued.iter().position(|id| id == message_id) {
                    Some(i) => {
                        self.queued.remove(i);
                        seen.was_queued = true;
                    }
                    None => self.queued_before = self.queued_before.saturating_sub(1),
                }
                self.running = Some(message_id.clone());
                self.provider = provider.clone();
                self.model = model.clone();
                self.cancelling = false;
                self.answer_node = None;
                self.calls.clear();
                self.state = Some(OperationStateKind::Streaming);
            }
            EventKind::StreamResumed { .. } => {
                self.calls.clear();
                self.state = Some(OperationStateKind::Streaming);
            }
            EventKind::ProviderRequest { iteration: 0, attempt: 1, .. } if self.answer_node.is_some() => {
                seen.sibling = true;
                seen.notice = Some(Notice {
                    level: Level::Info,
                    text: "another answer to the same message (a sibling branch):".into(),
                    routine: false,
                });
                self.calls.clear();
            }
            EventKind::ToolCallStarted { index, call_id, name } => {
                let at = *index as usize;
                if self.calls.len() <= at {
                    self.calls.resize(at + 1, None);
                }
                self.calls[at] = Some(Call { call_id: call_id.clone(), name: name.clone(), args: String::new() });
            }
            EventKind::ToolCallArgs { index, fragment } => {
                if let Some(Some(call)) = self.calls.get_mut(*index as usize) {
                    call.args.push_str(fragment);
                    seen.call_id = Some(call.call_id.clone());
                }
            }
            EventKind::AssistantNode { node_id, .. } => {
                self.answer_node = Some(node_id.clone());
                seen.calls = std::mem::take(&mut self.calls).into_iter().flatten().collect();
            }
            EventKind::ApprovalRequested { approval_id, calls, .. } => {
                let asked = PendingApproval { approval_id: approval_id.clone(), calls: calls.clone() };
                match &self.approval {
                    Some(a) if a.approval_id != *approval_id => self.approvals_behind.push(asked),
                    _ => self.approval = Some(asked),
                }
                self.state = Some(OperationStateKind::AwaitingApproval);
            }
            EventKind::ApprovalResolved { approval_id, .. } => {
                self.approvals_behind.retain(|a| a.approval_id != *approval_id);
                if self.approval.as_ref().is_none_or(|a| a.approval_id == *approval_id) {
                    self.approval = (!self.approvals_behind.is_empty()).then(|| self.approvals_behind.remove(0));
                }
                self.state = Some(match self.approval {
                    Some(_) => OperationStateKind::AwaitingApproval,
                    None => OperationStateKind::ExecutingTools,
                });
            }
            EventKind::ToolRecovery { calls } => {
                self.recovery = Some(calls.clone());
                self.state = Some(OperationStateKind::ToolRecovery);
            }
            EventKind::AwaitingToolResults { calls } => {
                self.awaiting_results = Some(calls.clone());
                self.state = Some(OperationStateKind::AwaitingToolResults);
            }
            EventKind::ToolRunning { .. } => self.state = Some(OperationStateKind::ExecutingTools),
            EventKind::ToolResult { call_id, .. } => {
                if let Some(calls) = &mut self.awaiting_results {
                    calls.retain(|c| &c.id != call_id);
                    if calls.is_empty() {
                        // Every result is in: the turn goes on.
                        self.awaiting_results = None;
                        self.state = Some(OperationStateKind::ExecutingTools);
                    }
                }
            }
            EventKind::Retrying { attempt, max_attempts, delay_ms, reason, .. } => {
                self.retrying = Some(crate::retrying_line(*attempt, *max_attempts, *delay_ms, reason));
            }
            EventKind::CancelRequested {} => self.cancelling = true,
            EventKind::Usage { session, .. } => self.spent = Some(session.clone()),
            EventKind::SummarizationStarted { message_id, .. } => {
                self.summarizing = message_id.is_none();
                self.state = Some(OperationStateKind::Summarizing);
            }
            EventKind::SummarizationRetry { .. } => self.state = Some(OperationStateKind::SummarizationRetry),
            EventKind::SummarizationDone { .. } | EventKind::SummarizationFailed { .. } => {
                // A turn's summary: its stream starts now; one a client
                // asked for: the session is done with it.
                let asked = std::mem::take(&mut self.summarizing);
                let turn = self.running.is_some();
                self.state = Some(if turn { OperationStateKind::Streaming } else { OperationStateKind::Idle });
                seen.settled = asked && self.idle();
            }
            EventKind::TurnFinished { usage, .. } => {
                self.last_usage = usage.clone().or(self.last_usage.take());
                self.approval = None;
                self.approvals_behind.clear();
                self.recovery = None;
                self.awaiting_results = None;
                self.running = None;
                self.cancelling = false;
                self.calls.clear();
                self.state = Some(OperationStateKind::Idle);
                seen.settled = self.idle();
            }
            _ => {}
        }
        Some(seen)
    }

    /// Someone has to decide before the session goes on (an approval, a
    /// recovery, tool results in parse-only mode, a store that cannot be
    /// written) and no cancel is on its way.
    pub fn waiting(&self) -> bool {
        use OperationStateKind as K;
        !self.cancelling
            && matches!(
                self.state,
                Some(K::AwaitingApproval | K::ToolRecovery | K::AwaitingToolResults | K::PersistenceBlocked)
            )
    }
}

#[cfg(test)]
mod tests;
