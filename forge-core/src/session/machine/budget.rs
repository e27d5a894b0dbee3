//! `[app] session_budget_usd`: once a session has cost that much, its next
//! turn waits for a user to confirm, as an approval any client can answer
//! (one pseudo-call, `session_budget`). Confirmed, the session runs on
//! until it has spent another budget's worth; denied, the turn ends
//! without asking the model.
//!
//! A session's helpers spend its budget: each one's cost is counted by
//! the sessions above it as it is spent (`HelperIn::Spent`), and before
//! each of its requests a helper asks the family's root session
//! (`HelperIn::BudgetAsk`, handed up by any helper between). Past the
//! budget, the root shows one approval for the whole family while its
//! batch runs, and every helper that asks waits for that answer.

use forge_proto::{ApprovalCall, ApprovalDecision, ApprovalResult, ClientRef, ErrorKind, EventKind, MessageStatus};
use forge_proto::{PendingApproval, usd};

use super::helpers::{HelperIn, HelperOut};
use super::state::OperationState;
use super::{Effect, Session};
use crate::error::EngineError;

/// Budget approvals' ids start with this (recovery tells them from a
/// tool batch's by it).
pub(super) const BUDGET_APPROVAL: &str = "budget-";
/// The pseudo-call a budget approval asks about.
const CALL: &str = forge_proto::BUDGET_CALL;

impl Session {
    /// The budget in force, if the session has spent past it since the
    /// last confirmation.
    fn budget_reached(&self) -> Option<f64> {
        let budget = self.config.app.session_budget_usd.filter(|b| *b > 0.0)?;
        let from = self.budget_confirmed_at.unwrap_or(0.0);
        (self.spent.cost_usd - from >= budget).then_some(budget)
    }

    fn budget_approval(&self, approval_id: String, budget: f64) -> PendingApproval {
        let spent = self.spent.cost_usd;
        let args = serde_json::json!({"spent_usd": spent, "budget_usd": budget});
        PendingApproval {
            session_id: self.row.id.clone(),
            session_name: self.row.name.clone(),
            approval_id,
            calls: vec![ApprovalCall {
                call_id: CALL.into(),
                name: CALL.into(),
                arguments: args.to_string(),
                risk: "medium".into(),
                summary: format!(
                    "this session has cost about {}, past its budget of {} ([app] session_budget_usd): \
                     approve to go on (it asks again after another {}), deny to stop this turn",
                    usd(spent),
                    usd(budget),
                    usd(budget)
                ),
            }],
        }
    }

    /// Before each request of a turn (its first, and each after a tool
    /// batch, so one long turn cannot spend many budgets): over budget,
    /// the turn waits for a user (returns true) instead of asking the model.
    pub(super) fn wait_for_budget(&mut self, message_id: &str, iteration: u32) -> bool {
        if let Some(spec) = &self.row.helper
            && self.config.app.session_budget_usd.is_some_and(|b| b > 0.0)
        {
            // Asked already: the root said go.
            if std::mem::take(&mut self.family_go) {
                return false;
            }
            let (to, asker) = (spec.of.parent.clone(), self.row.id.clone());
            let reserve_usd = self.worst_case_usd();
            let report = HelperIn::BudgetAsk { asker, reserve_usd };
            self.out.push(Effect::Helper(Box::new(HelperOut::Report { to, report })));
            self.state = OperationState::AwaitingFamilyBudget { message_id: message_id.to_string(), iteration };
            return true;
        }
        let Some(budget) = self.budget_reached() else { return false };
        // The user stopped the family at this budget during the batch:
        // the turn ends as it would on this approval's denial.
        if std::mem::take(&mut self.family_denied) {
            self.state = OperationState::Finishing;
            let why = "the session is past its budget ([app] session_budget_usd) and the user stopped the turn";
            self.finish_tool_turn(
                message_id.to_string(),
                MessageStatus::Cancelled,
                Some(("budget_exceeded".into(), why.into())),
            );
            return true;
        }
        let approval = self.budget_approval(self.clock.new_id(BUDGET_APPROVAL), budget);
        let approval_seq = self.ask_own(&approval);
        self.state =
            OperationState::AwaitingBudget { message_id: message_id.to_string(), iteration, approval, approval_seq };
        true
    }

    /// After a restart: the turn waited for the budget, and still does.
    pub(super) fn restore_budget_wait(&mut self, message_id: String, approval_id: String) {
        let budget = self.config.app.session_budget_usd.unwrap_or_default();
        let approval = self.budget_approval(approval_id, budget);
        self.state = OperationState::AwaitingBudget { message_id, iteration: 0, approval, approval_seq: 0 };
    }

    /// A client's answer: go on with the turn, or end it.
    pub(super) fn on_budget_answer(
        &mut self,
        decision: ApprovalDecision,
        approval_id: Option<String>,
        call_ids: Option<Vec<String>>,
        indices: Option<Vec<u32>>,
        client: ClientRef,
    ) -> Result<ApprovalResult, EngineError> {
        let OperationState::AwaitingBudget { approval, .. } = &self.state else {
            return Err(EngineError::new(ErrorKind::ApprovalNotPending, "no budget confirmation is pending"));
        };
        if approval_id.as_ref().is_some_and(|id| *id != approval.approval_id) {
            return Err(EngineError::new(
                ErrorKind::ApprovalNotPending,
                "nothing to approve under that id (it may have been answered already; `forgectl approvals` lists what waits)",
            ));
        }
        let approved = approves(decision, call_ids, indices);
        let OperationState::AwaitingBudget { message_id, iteration, approval, .. } =
            std::mem::replace(&mut self.state, OperationState::Finishing)
        else {
            return Err(EngineError::new(ErrorKind::ApprovalNotPending, "no budget confirmation is pending"));
        };
        let (marker, yes, no) = self.resolve_budget(&approval.approval_id, approved, client);
        if approved {
            self.state = OperationState::Idle;
            self.proceed_turn(message_id, Some(marker), iteration);
        } else {
            self.finish_tool_turn(
                message_id,
                MessageStatus::Cancelled,
                Some((
                    "budget_exceeded".into(),
                    "the session is past its budget ([app] session_budget_usd) and the user stopped the turn".into(),
                )),
            );
        }
        Ok(ApprovalResult {
            session_id: self.row.id.clone(),
            approval_id: approval.approval_id,
            approved: yes,
            denied: no,
        })
    }

    /// A budget approval answered: `approval_resolved` (its outbox index
    /// returned, with the call approved or denied); approved, the next
    /// budget's worth counts from here.
    fn resolve_budget(
        &mut self,
        approval_id: &str,
        approved: bool,
        client: ClientRef,
    ) -> (usize, Vec<String>, Vec<String>) {
        let (yes, no) =
            if approved { (vec![CALL.to_string()], Vec::new()) } else { (Vec::new(), vec![CALL.to_string()]) };
        let event = EventKind::ApprovalResolved {
            approval_id: approval_id.to_string(),
            approved: yes.clone(),
            denied: no.clone(),
        };
        let marker = self.pipeline.event(Some(client), event);
        if approved {
            self.budget_confirmed_at = Some(self.spent.cost_usd);
        }
        (marker, yes, no)
    }

    /// `session.cancel` while the turn waits for the budget: it ends.
    pub(super) fn cancel_budget_wait(&mut self, client: ClientRef) -> bool {
        if matches!(self.state, OperationState::AwaitingFamilyBudget { .. }) {
            self.on_family_budget(Err("cancelled while it waited for its family's budget".into()));
            return true;
        }
        if !matches!(self.state, OperationState::AwaitingBudget { .. }) {
            return false;
        }
        self.on_budget_answer(ApprovalDecision::DenyAll, None, None, None, client).is_ok()
    }

    /// A session of the family asks before a request: a helper hands it
    /// up; the root answers now, or, past the budget during its batch,
    /// once a user has answered the family's one approval.
    pub(super) fn on_budget_ask(&mut self, asker: String, reserve_usd: f64) {
        if let Some(spec) = &self.row.helper {
            let to = spec.of.parent.clone();
            let report = HelperIn::BudgetAsk { asker, reserve_usd };
            self.out.push(Effect::Helper(Box::new(HelperOut::Report { to, report })));
            return;
        }
        if self.budget_reached().is_none()
            && let Some(room) = self.budget_room()
            && let OperationState::ToolLoop(l) = &mut self.state
        {
            // Under the budget: it goes if its worst case fits beside
            // the requests in flight, or none is; else it waits.
            if l.helpers.reserved.ask(asker.clone(), reserve_usd, room) {
                self.answer_family(asker, Ok(()));
            }
            return;
        }
        let Some(budget) = self.budget_reached() else { return self.answer_family(asker, Ok(())) };
        let fresh = self.budget_approval(self.clock.new_id(BUDGET_APPROVAL), budget);
        let OperationState::ToolLoop(l) = &mut self.state else {
            let why = format!(
                "its family is past the budget of session {} ([app] session_budget_usd); that session's next turn asks a user to go on",
                self.row.id
            );
            return self.answer_family(asker, Err(why));
        };
        if let Some((_, waiting)) = &mut l.helpers.budget {
            waiting.push(asker);
            return;
        }
        self.pipeline.event(
            None,
            EventKind::ApprovalRequested {
                approval_id: fresh.approval_id.clone(),
                calls: fresh.calls.clone(),
                helper: None,
            },
        );
        l.helpers.budget = Some((fresh, vec![asker]));
    }

    /// What is left of the budget's current worth (`None`: no budget).
    fn budget_room(&self) -> Option<f64> {
        let budget = self.config.app.session_budget_usd.filter(|b| *b > 0.0)?;
        Some(budget - (self.spent.cost_usd - self.budget_confirmed_at.unwrap_or(0.0)))
    }

    /// A family request's worst case: its input as estimated and all the
    /// output it may ask for (thinking included), at the model's prices
    /// (nothing where they are unknown).
    fn worst_case_usd(&self) -> f64 {
        let Some(model) = self.model_info() else { return 0.0 };
        let Some(price) = model.price else { return 0.0 };
        let sized = self.sized_view();
        let thinking = self.provider_settings().map(|s| s.options.thinking_tokens()).unwrap_or(0);
        let requested = self.requested_output().saturating_add(thinking);
        let output = crate::catalog::effective_max_output(requested, &model, sized.tokens);
        let usage =
            forge_proto::Usage { input_tokens: sized.tokens, output_tokens: u64::from(output), ..Default::default() };
        price.cost(&usage)
    }

    /// A helper's request (or turn) ended: its root releases what it had
    /// reserved.
    pub(super) fn settle_request(&mut self) {
        let Some(spec) = &self.row.helper else { return };
        if !self.config.app.session_budget_usd.is_some_and(|b| b > 0.0) {
            return;
        }
        let (to, asker) = (spec.of.parent.clone(), self.row.id.clone());
        self.out.push(Effect::Helper(Box::new(HelperOut::Report { to, report: HelperIn::Settled { asker } })));
    }

    /// A family member's request ended: handed up, or, at the root, its
    /// reservation released and those waiting let go as far as they fit.
    pub(super) fn on_settled_request(&mut self, asker: String) {
        if let Some(spec) = &self.row.helper {
            let to = spec.of.parent.clone();
            self.out.push(Effect::Helper(Box::new(HelperOut::Report { to, report: HelperIn::Settled { asker } })));
            return;
        }
        if let OperationState::ToolLoop(l) = &mut self.state {
            l.helpers.reserved.forget(&asker);
        }
        self.admit_waiting();
    }

    /// At the root: the family's waiting requests that fit go; past the
    /// budget, they wait for the family's one approval instead.
    pub(super) fn admit_waiting(&mut self) {
        let room = self.budget_room();
        let reached = self.budget_reached().is_some();
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        let Some(room) = room else { return };
        if reached {
            for (asker, reserve_usd) in l.helpers.reserved.take_waiting() {
                self.on_budget_ask(asker, reserve_usd);
            }
            return;
        }
        for asker in l.helpers.reserved.admit_waiting(room) {
            self.answer_family(asker, Ok(()));
        }
    }

    fn answer_family(&mut self, asker: String, go: Result<(), String>) {
        let report = HelperIn::Budget { go };
        self.out.push(Effect::Helper(Box::new(HelperOut::Report { to: asker, report })));
    }

    /// Whether `approval_id` (or, without one, the first pending) is the
    /// family's budget approval.
    pub(super) fn is_family_budget(&self, approval_id: Option<&str>) -> bool {
        let OperationState::ToolLoop(l) = &self.state else { return false };
        match (&l.helpers.budget, approval_id) {
            (Some((a, _)), Some(id)) => a.approval_id == id,
            (Some(_), None) => l.approval.is_none(),
            (None, _) => false,
        }
    }

    /// A client's answer to the family's budget approval.
    pub(super) fn on_family_budget_answer(&mut self, approved: bool, client: ClientRef) -> ApprovalResult {
        let taken = match &mut self.state {
            OperationState::ToolLoop(l) => l.helpers.budget.take(),
            _ => None,
        };
        let Some((approval, waiting)) = taken else {
            return ApprovalResult {
                session_id: self.row.id.clone(),
                approval_id: String::new(),
                approved: Vec::new(),
                denied: Vec::new(),
            };
        };
        let (_, yes, no) = self.resolve_budget(&approval.approval_id, approved, client);
        self.family_denied = !approved;
        for asker in waiting {
            let go = match approved {
                true => Ok(()),
                false => Err("its family is past its budget ([app] session_budget_usd) and the user stopped it".into()),
            };
            self.answer_family(asker, go);
        }
        ApprovalResult { session_id: self.row.id.clone(), approval_id: approval.approval_id, approved: yes, denied: no }
    }

    /// The root's word to a helper waiting before a request.
    pub(super) fn on_family_budget(&mut self, go: Result<(), String>) {
        // A word that comes late (the turn ended meanwhile) changes nothing.
        if !matches!(self.state, OperationState::AwaitingFamilyBudget { .. }) {
            return;
        }
        let OperationState::AwaitingFamilyBudget { message_id, iteration } =
            std::mem::replace(&mut self.state, OperationState::Finishing)
        else {
            return;
        };
        match go {
            Ok(()) => {
                self.family_go = true;
                self.state = OperationState::Idle;
                self.proceed_turn(message_id, None, iteration);
            }
            Err(why) => {
                self.finish_tool_turn(message_id, MessageStatus::Cancelled, Some(("budget_exceeded".into(), why)))
            }
        }
    }
}

/// Whether an answer approves a budget approval (its one call).
pub(super) fn approves(decision: ApprovalDecision, call_ids: Option<Vec<String>>, indices: Option<Vec<u32>>) -> bool {
    match decision {
        ApprovalDecision::ApproveAll => true,
        ApprovalDecision::DenyAll => false,
        ApprovalDecision::ApproveSelected => {
            call_ids.unwrap_or_default().iter().any(|c| c == CALL) || indices.unwrap_or_default().contains(&1)
        }
    }
}
