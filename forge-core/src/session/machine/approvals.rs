//! Approvals in the tool loop: which calls of a batch run at once, ask a
//! user, or are refused (the approval policy, the session's own rules),
//! the pending approval as journaled and restored after a restart, and a
//! user's answer.

use forge_proto::params::AnswerParams;
use forge_proto::{ApprovalCall, ApprovalDecision, ApprovalResult, ClientRef, ErrorKind, EventKind};

use super::state::OperationState;
use super::state::ToolLoop;
use super::tools::sandbox_for;
use super::{OnDurable, Session};
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::tools::ToolError;
use crate::tools::policy::{ApprovalPolicy, Decision};

impl Session {
    /// `[tools.approval]` with the session's own rules on top.
    pub(super) fn policy(&self) -> ApprovalPolicy {
        ApprovalPolicy::for_tools(&self.config.tools)
            .for_session(self.row.approval.mode.as_deref(), &self.row.approval.always)
            .with_grants(self.tool_grants())
            .with_reversible_edits(
                self.row
                    .git
                    .as_ref()
                    .filter(|_| !self.config.git.ask_for_edits.unwrap_or(false))
                    .map(|g| std::path::PathBuf::from(&g.worktree)),
            )
            .with_run_later_dir(self.git_hooks.clone())
    }

    /// Changes the session's approval rules: its own mode (`Some("")`
    /// drops it), tools allowed always from now on, or none (`clear`).
    pub(super) fn on_approval_rules(
        &mut self,
        mode: Option<String>,
        allow: Vec<String>,
        clear: bool,
        client: Option<ClientRef>,
    ) -> Result<forge_proto::ApprovalRules, EngineError> {
        let mut rules = self.row.approval.clone();
        if let Some(mode) = mode {
            let mode = mode.trim().to_string();
            if mode.is_empty() {
                rules.mode = None;
            } else if crate::tools::policy::parse_mode(&mode).is_none() {
                return Err(EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("approval mode \"{mode}\" is not one of default, prompt, permissive (auto), strict"),
                ));
            } else {
                rules.mode = Some(mode);
            }
        }
        if clear {
            rules.always.clear();
        }
        for tool in allow {
            if !rules.always.contains(&tool) {
                rules.always.push(tool);
            }
        }
        self.set_rules(rules, client);
        Ok(self.rules())
    }

    pub(super) fn set_rules(&mut self, rules: crate::store::rows::SessionApproval, client: Option<ClientRef>) {
        if rules == self.row.approval {
            return;
        }
        self.pipeline.op(StoreOp::SetApproval {
            session_id: self.row.id.clone(),
            approval: serde_json::to_string(&rules).unwrap_or_else(|_| "{}".into()),
        });
        self.pipeline.event(
            client,
            EventKind::ApprovalRulesChanged { mode: rules.mode.clone(), always_allow: rules.always.clone() },
        );
        self.row.approval = rules;
    }

    pub(super) fn rules(&self) -> forge_proto::ApprovalRules {
        forge_proto::ApprovalRules {
            session_id: self.row.id.clone(),
            mode: self.row.approval.mode.clone(),
            always_allow: self.row.approval.always.clone(),
        }
    }

    /// Applies the approval policy to a planned batch: denied calls become
    /// error results; the calls that need a decision are returned.
    pub(super) fn apply_policy(&self, l: &mut ToolLoop) -> Vec<ApprovalCall> {
        let policy = self.policy();
        let mut asks = Vec::new();
        for call in l.pending.iter_mut() {
            let Ok((tool, args)) = &call.action else { continue };
            match policy.decide(tool.as_ref(), Some(args)) {
                Decision::Run => {}
                Decision::Deny(reason) => {
                    call.action = Err(ToolError::ExecutionFailed {
                        tool: call.name.clone(),
                        message: format!("denied: {reason}"),
                    });
                }
                Decision::Ask => asks.push(ApprovalCall {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: args.to_string(),
                    risk: format!("{:?}", tool.risk_level()).to_lowercase(),
                    summary: tool.approval_summary(args, &sandbox_for(&self.row, &self.config)),
                }),
            }
        }
        asks
    }

    /// After a restart: the batch waited for a decision, and still does.
    pub(super) fn restore_pending_approval(&mut self, message_id: String, approval_id: String) {
        let Some((_, calls)) = self.last_tool_calls() else { return };
        self.start_tool_loop(message_id, 0, calls);
        // start_tool_loop queued a fresh request; keep the original id
        // instead, so answers given to it still apply.
        self.pipeline.discard_last_event_if(|k| matches!(k, EventKind::ApprovalRequested { .. }));
        if let OperationState::ToolLoop(l) = &mut self.state
            && let Some(a) = &mut l.approval
        {
            a.approval_id = approval_id;
            // Durable already: shown at once.
            l.approval_seq = 0;
        }
        // Made before the stop, or not: found again by its key, not twice.
        self.checkpoint_awaiting();
    }

    /// `approval_requested` for an approval of the session's own that
    /// holds no tool call (the budget, held files): the seq it will have.
    pub(super) fn ask_own(&mut self, approval: &forge_proto::PendingApproval) -> u64 {
        let calls = approval.calls.clone();
        let event = EventKind::ApprovalRequested { approval_id: approval.approval_id.clone(), calls, helper: None };
        let index = self.pipeline.event(None, event);
        self.pipeline.seq_of_outbox_index(index)
    }

    /// A client's answer to the pending approval.
    pub(super) fn on_approval(
        &mut self,
        params: AnswerParams,
        client: ClientRef,
    ) -> Result<ApprovalResult, EngineError> {
        let AnswerParams { decision, approval_id, call_ids, indices, always, .. } = params;
        let not_pending = || {
            EngineError::new(
                ErrorKind::ApprovalNotPending,
                "nothing to approve in this session (it may have been answered already; `forgectl approvals` lists what waits)",
            )
        };
        if matches!(self.state, OperationState::AwaitingBudget { .. }) {
            return self.on_budget_answer(decision, approval_id, call_ids, indices, client);
        }
        if matches!(self.state, OperationState::AwaitingHeld(_)) {
            return self.on_held_answer(decision, approval_id, (call_ids, indices), client);
        }
        if self.is_family_budget(approval_id.as_deref()) {
            let approved = super::budget::approves(decision, call_ids, indices);
            return Ok(self.on_family_budget_answer(approved, client));
        }
        let OperationState::ToolLoop(l) = &mut self.state else { return Err(not_pending()) };
        let Some(pending) = &l.approval else { return Err(not_pending()) };
        if approval_id.as_ref().is_some_and(|id| *id != pending.approval_id) {
            return Err(not_pending());
        }
        let all: Vec<String> = pending.calls.iter().map(|c| c.call_id.clone()).collect();
        let approved = selected(&all, decision, (call_ids, indices))?;
        let denied: Vec<String> = all.iter().filter(|c| !approved.contains(c)).cloned().collect();
        for call in l.pending.iter_mut() {
            if denied.contains(&call.id) {
                call.action =
                    Err(ToolError::ExecutionFailed { tool: call.name.clone(), message: "denied by the user".into() });
            }
        }
        let approval_id = pending.approval_id.clone();
        // "Allow always": the approved calls' tools run without asking in
        // this session from now on.
        let remember: Vec<String> = if always {
            pending.calls.iter().filter(|c| approved.contains(&c.call_id)).map(|c| c.name.clone()).collect()
        } else {
            Vec::new()
        };
        l.approval = None;
        self.note_resolution(&approved, &denied);
        self.pipeline.event(
            Some(client.clone()),
            EventKind::ApprovalResolved {
                approval_id: approval_id.clone(),
                approved: approved.clone(),
                denied: denied.clone(),
            },
        );
        if !remember.is_empty() {
            let mut rules = self.row.approval.clone();
            for tool in remember {
                if !rules.always.contains(&tool) {
                    rules.always.push(tool);
                }
            }
            self.set_rules(rules, Some(client));
        }
        self.checkpoint_answer(&approval_id, &approved, &denied);
        self.pipeline.effect(OnDurable::NextTool);
        Ok(ApprovalResult { session_id: self.row.id.clone(), approval_id, approved, denied })
    }
}

/// The calls of `all` a decision approves: every one, none, or those
/// chosen by id or by 1-based index (an unknown one refused, by name).
pub(super) fn selected(
    all: &[String],
    decision: ApprovalDecision,
    (call_ids, indices): (Option<Vec<String>>, Option<Vec<u32>>),
) -> Result<Vec<String>, EngineError> {
    match decision {
        ApprovalDecision::ApproveAll => Ok(all.to_vec()),
        ApprovalDecision::DenyAll => Ok(Vec::new()),
        ApprovalDecision::ApproveSelected => {
            let mut chosen = call_ids.unwrap_or_default();
            for i in indices.unwrap_or_default() {
                let id = all.get((i as usize).wrapping_sub(1)).ok_or_else(|| {
                    EngineError::new(
                        ErrorKind::InvalidParams,
                        format!("there is no call #{i}; the approval has {}", all.len()),
                    )
                })?;
                chosen.push(id.clone());
            }
            if let Some(bad) = chosen.iter().find(|c| !all.contains(c)) {
                return Err(EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("`{bad}` is not a call of this approval"),
                ));
            }
            Ok(all.iter().filter(|c| chosen.contains(c)).cloned().collect())
        }
    }
}
