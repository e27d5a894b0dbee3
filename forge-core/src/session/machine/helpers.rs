//! Helper agents as transitions of the machine. A `task` call of a tool
//! batch starts a helper: the call is announced (`tool_running`) and the
//! daemon asked to start its session (`HelperOut::Start`); the batch goes
//! on with its next call, so several helpers run at once. The helper's
//! session reports back through the daemon (`HelperIn`): started, the
//! approvals it waits on (shown to this session's clients, whose answers
//! are handed to the helper), and done, whose answer is the call's
//! result. The batch ends when every call, helpers included, has one.
//! Cancelling the batch cancels its helpers.
//!
//! In a helper's own session the same module reports its turns' ends and
//! its pending approvals to the parent, and takes the task up again when
//! the parent resumes a batch a restart interrupted.

use forge_proto::methods::SessionRequest;
use forge_proto::params::{AnswerParams, SendParams};
use forge_proto::{ClientRef, EventKind, MessageStatus, PendingApproval, RecoverAction};
use serde_json::Value;

use super::state::{HelperCall, OperationState};
use super::{Effect, OnDurable, Session};
use crate::provider::ChatRole;
use crate::session::{Reply, SessionCmd};
use crate::tools::ToolError;

/// What the machine asks of the daemon for helpers (`Effect::Helper`).
pub(crate) enum HelperOut {
    /// Start the helper of a `task` call (or, after a restart, take up
    /// the one the call started before).
    Start(HelperStart),
    /// A helper's turn ended: tell its parent.
    Done { parent: String, report: HelperIn },
    /// A helper waits on an approval, or no longer does: tell its parent.
    Approval { parent: String, report: HelperIn },
    /// Cancel a helper's turn.
    Cancel { child: String },
    /// Hand a command (an approval's answer) to a helper.
    Forward { child: String, cmd: Box<SessionCmd> },
    /// News for another session of the family (a parent, or a helper
    /// waiting on the family's budget).
    Report { to: String, report: HelperIn },
}

/// A `task` call to start a helper for.
pub(crate) struct HelperStart {
    pub parent: String,
    pub call_id: String,
    pub description: String,
    pub prompt: String,
    /// The helper's session as this machine decided it, or why there is
    /// none (an agent type the folder lacks).
    pub create: Result<Box<NewHelper>, String>,
    /// The batch was resumed after a restart: the helper this call
    /// started before (for the same answer), if any, goes on.
    pub resume: bool,
    /// The answer (node) whose call it is.
    pub answer: Option<String>,
    /// This start's own mark (the call's result node): news of an older
    /// start for a call of the same id is not taken for this one's.
    pub nonce: String,
}

/// A helper's new session: in its parent's directory, with its parent's
/// provider and approval rules, the model its agent type names (else its
/// parent's), never a git session.
pub(crate) struct NewHelper {
    pub spec: crate::store::HelperSpec,
    pub cwd: String,
    pub provider: String,
    pub model: String,
    pub approval: crate::store::rows::SessionApproval,
}

/// What the daemon tells a session about helpers (`SessionCmd::Helper`).
pub(crate) enum HelperIn {
    /// The call's helper runs as session `child`.
    Started { call_id: String, nonce: String, child: String, agent: String, description: String },
    /// The call's helper could not be started.
    Failed { call_id: String, nonce: String, error: String },
    /// The call's helper ended its turn: its answer, or why it has none;
    /// what the turn cost, and what of it was not yet counted (`Spent`).
    Done {
        call_id: String,
        child: String,
        status: MessageStatus,
        answer: Result<String, String>,
        cost_usd: f64,
        uncounted_usd: f64,
    },
    /// A helper (or one of its own) spent this much: the family's cost
    /// is counted, as it goes, by every session above it.
    Spent { cost_usd: f64 },
    /// Session `asker` of the family is about to ask its model, a request
    /// whose worst case costs `reserve_usd`: its root session says whether
    /// the family's budget allows it (see `state/reservations.rs`).
    BudgetAsk { asker: String, reserve_usd: f64 },
    /// Session `asker`'s request (or turn) ended: its reservation goes.
    Settled { asker: String },
    /// The root's word: go on, or stop (why).
    Budget { go: Result<(), String> },
    /// The helper (or one of its own) waits on this approval.
    Asked { call_id: String, child: String, approval: PendingApproval },
    /// The approval is answered (or withdrawn).
    Resolved { child: String, approval_id: String, approved: Vec<String>, denied: Vec<String> },
    /// For a helper's own session: go on with the task.
    Resume,
}

/// A helper session's own state: what it told its parent.
#[derive(Default)]
pub(crate) struct AsHelper {
    /// The approval last shown to the parent as pending.
    mirrored: Option<String>,
    /// The cost at the start of the task (or load): what the parent is
    /// shown as the task's cost is counted from it.
    cost_base: Option<f64>,
    /// How the last approval was answered (for the parent's record).
    resolution: Option<(Vec<String>, Vec<String>)>,
    /// What the session had cost when it last reported.
    reported_cost: Option<f64>,
    /// Why the turn being finished failed, if it did.
    pub(super) turn_error: Option<String>,
    /// Cancelled (its parent's batch ended) before its task came: the
    /// task, arriving late, is refused.
    cancelled_before_task: bool,
}

impl Session {
    /// How deep this session is among helpers (0: a user's session).
    fn helper_depth(&self) -> u32 {
        self.row.helper.as_ref().map_or(0, |h| h.of.depth)
    }

    /// A `task` call of the batch: its helper is asked for and the batch
    /// goes on with its next call.
    pub(super) fn start_helper(&mut self, id: String, name: String, args: Value) {
        let max = self.config.tools.task.as_ref().and_then(|t| t.max_per_batch);
        let max = max.unwrap_or(crate::tools::config::TaskConfig::DEFAULT_MAX_PER_BATCH) as usize;
        let (running, resume) = match &self.state {
            OperationState::ToolLoop(l) => (l.helpers.running.len(), l.helpers.resumed),
            _ => return,
        };
        let args = match serde_json::from_value::<crate::agents::TaskArgs>(args) {
            _ if running >= max => {
                Err(format!("not run: at most {max} helpers run at once for one answer ([tools.task] max_per_batch)"))
            }
            Ok(a) if a.prompt.trim().is_empty() => Err("`prompt` is empty: say what the helper is to do".to_string()),
            Ok(a) => Ok(a),
            Err(e) => Err(format!("the arguments are not a task: {e}")),
        };
        let args = match args {
            Ok(a) => a,
            Err(message) => {
                return self.record_result(&id, &name, Err(ToolError::BadArgs { message }), None, Vec::new());
            }
        };
        self.pipeline.event(None, EventKind::ToolRunning { call_id: id.clone(), name: name.clone() });
        let node_id = self.clock.new_id("m");
        // The answer that made the call (the newest one on the path with it).
        let answer = self
            .path
            .iter()
            .rev()
            .find(|m| m.role == ChatRole::Assistant && m.tool_calls.iter().any(|c| c.id == id))
            .and_then(|m| m.node.clone());
        if let OperationState::ToolLoop(l) = &mut self.state {
            l.helpers.running.push(HelperCall { call_id: id.clone(), name, child: None, node_id: node_id.clone() });
        }
        let description = args.description.trim().to_string();
        let description = if description.is_empty() { "a task".into() } else { description };
        let depth = self.helper_depth() + 1;
        let max_depth = self.config.tools.task.as_ref().and_then(|t| t.max_depth);
        let max_depth = max_depth.unwrap_or(crate::tools::config::TaskConfig::DEFAULT_MAX_DEPTH);
        if depth > max_depth {
            let why = format!("helpers may be {max_depth} deep at most ([tools.task] max_depth)");
            return self.helper_ended(&id, None, Err(why), 0.0);
        }
        let agent = args.subagent_type.filter(|a| !a.trim().is_empty());
        let create = self.new_helper(&id, &description, agent.as_deref(), depth, answer.clone());
        // A helper this call started before a restart goes on whatever the
        // folder offers now; a new one needs its agent type.
        if let (Err(why), false) = (&create, resume) {
            return self.helper_ended(&id, None, Err(why.clone()), 0.0);
        }
        let start = HelperStart {
            parent: self.row.id.clone(),
            call_id: id,
            description,
            prompt: args.prompt,
            create,
            resume,
            answer,
            nonce: node_id,
        };
        // Started once its `tool_running` is durable, as any call is run.
        self.pipeline.effect(OnDurable::Helper(Box::new(HelperOut::Start(start))));
        self.pipeline.effect(OnDurable::NextTool);
    }

    /// The session a `task` call's helper gets: its agent type (the
    /// general-purpose one if none is named) among those the folder
    /// offers, and the model that type names.
    fn new_helper(
        &self,
        call_id: &str,
        description: &str,
        agent: Option<&str>,
        depth: u32,
        answer: Option<String>,
    ) -> Result<Box<NewHelper>, String> {
        let name = agent.unwrap_or(crate::agents::GENERAL_PURPOSE);
        let agent = self.agents.iter().find(|a| a.info.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.agents.iter().map(|a| a.info.name.as_str()).collect();
            format!("there is no agent type \"{name}\"; the types are: {}", names.join(", "))
        })?;
        let model = crate::agents::model_for(&agent.info, &self.row.provider).unwrap_or_else(|| self.row.model.clone());
        let spec = crate::store::HelperSpec {
            of: forge_proto::HelperOf {
                parent: self.row.id.clone(),
                call_id: call_id.to_string(),
                description: description.to_string(),
                agent: agent.info.name.clone(),
                depth,
                answer,
            },
            tools: agent.info.tools.clone(),
            instructions: agent.instructions.clone(),
            // What the parent's commands may read, its helper's may.
            read_also: super::git_dir_of(&self.row)
                .map(|d| d.display().to_string())
                .into_iter()
                .chain(self.row.helper.iter().flat_map(|h| h.read_also.clone()))
                .collect(),
        };
        Ok(Box::new(NewHelper {
            spec,
            cwd: self.row.cwd.clone(),
            provider: self.row.provider.clone(),
            model,
            approval: self.row.approval.clone(),
        }))
    }

    pub(super) fn on_helper(&mut self, report: HelperIn) {
        match report {
            HelperIn::Started { call_id, nonce, child, agent, description } => {
                let call = self.helper_call(&call_id).filter(|h| h.child.is_none() && h.node_id == nonce);
                match call {
                    Some(h) => {
                        h.child = Some(child.clone());
                        let event = EventKind::HelperStarted { call_id, helper: child, description, agent };
                        self.pipeline.event(None, event);
                    }
                    // The batch is over (cancelled): the helper is not needed.
                    None => self.out.push(Effect::Helper(Box::new(HelperOut::Cancel { child }))),
                }
            }
            HelperIn::Failed { call_id, nonce, error } => {
                if self.helper_call(&call_id).is_some_and(|h| h.node_id == nonce) {
                    self.helper_ended(&call_id, None, Err(error), 0.0);
                }
            }
            HelperIn::Done { call_id, child, status, answer, cost_usd, uncounted_usd } => {
                if self.helper_call(&call_id).is_some_and(|h| h.child.as_deref() == Some(child.as_str())) {
                    self.pipeline.event(
                        None,
                        EventKind::HelperFinished { call_id: call_id.clone(), helper: child.clone(), status, cost_usd },
                    );
                    self.helper_ended(&call_id, Some(child), answer, uncounted_usd);
                }
            }
            HelperIn::Spent { cost_usd } => {
                self.spent.cost_usd += cost_usd;
                self.report_spend();
            }
            HelperIn::BudgetAsk { asker, reserve_usd } => self.on_budget_ask(asker, reserve_usd),
            HelperIn::Settled { asker } => self.on_settled_request(asker),
            HelperIn::Budget { go } => self.on_family_budget(go),
            HelperIn::Asked { call_id, child, approval } => {
                let OperationState::ToolLoop(l) = &mut self.state else { return };
                if !l.helpers.running.iter().any(|h| h.call_id == call_id) {
                    return;
                }
                self.pipeline.event(
                    None,
                    EventKind::ApprovalRequested {
                        approval_id: approval.approval_id.clone(),
                        calls: approval.calls.clone(),
                        helper: Some(approval.session_id.clone()),
                    },
                );
                l.helpers.asks.push((child, approval));
            }
            HelperIn::Resolved { child, approval_id, approved, denied } => {
                let OperationState::ToolLoop(l) = &mut self.state else { return };
                let before = l.helpers.asks.len();
                l.helpers.asks.retain(|(c, a)| !(*c == child && a.approval_id == approval_id));
                if l.helpers.asks.len() < before {
                    self.pipeline.event(None, EventKind::ApprovalResolved { approval_id, approved, denied });
                }
            }
            HelperIn::Resume => self.resume_as_helper(),
        }
    }

    fn helper_call(&mut self, call_id: &str) -> Option<&mut HelperCall> {
        let OperationState::ToolLoop(l) = &mut self.state else { return None };
        l.helpers.running.iter_mut().find(|h| h.call_id == call_id)
    }

    /// A helper's call gets its result; the batch goes on.
    fn helper_ended(&mut self, call_id: &str, child: Option<String>, answer: Result<String, String>, cost: f64) {
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        let Some(i) = l.helpers.running.iter().position(|h| h.call_id == call_id) else { return };
        let call = l.helpers.running.remove(i);
        let withdrawn: Vec<String> = l
            .helpers
            .asks
            .iter()
            .filter(|(c, _)| Some(c) == child.as_ref())
            .map(|(_, a)| a.approval_id.clone())
            .collect();
        l.helpers.asks.retain(|(c, _)| Some(c) != child.as_ref());
        let mut withdrawn = withdrawn;
        withdrawn.extend(l.helpers.stop_waiting(child.as_deref()));
        for approval_id in withdrawn {
            let event = EventKind::ApprovalResolved { approval_id, approved: Vec::new(), denied: Vec::new() };
            self.pipeline.event(None, event);
        }
        // Its cost is this session's too (budgets included); most of it
        // was counted as it was spent.
        self.spent.cost_usd += cost;
        let (output, is_error) = match answer {
            Ok(text) => (text, false),
            Err(why) => (format!("error: {why}"), true),
        };
        let output = crate::tools::truncate_output(output, self.tool_limits().output_bytes);
        self.write_result_as(Some(call.node_id), (&call.call_id, &call.name), output, is_error, None, Vec::new());
        self.pipeline.effect(OnDurable::NextTool);
        // Its reservation went with it: others of the family may go.
        self.admit_waiting();
    }

    /// The answer to an approval a helper waits on goes to the helper;
    /// `None` when the answer is this session's own.
    pub(super) fn forward_answer(
        &mut self,
        params: AnswerParams,
        client: ClientRef,
        reply: Reply<Value>,
    ) -> Option<(AnswerParams, ClientRef, Reply<Value>)> {
        if self.is_family_budget(params.approval_id.as_deref()) {
            return Some((params, client, reply));
        }
        let OperationState::ToolLoop(l) = &self.state else { return Some((params, client, reply)) };
        let child = match &params.approval_id {
            Some(id) if l.approval.as_ref().is_some_and(|a| a.approval_id == *id) => None,
            Some(id) => l.helpers.asks.iter().find(|(_, a)| a.approval_id == *id).map(|(c, _)| c.clone()),
            None if l.approval.is_some() => None,
            None => l.helpers.asks.first().map(|(c, _)| c.clone()),
        };
        let Some(child) = child else { return Some((params, client, reply)) };
        let mut params = params;
        params.session = child.clone();
        let cmd = SessionCmd::Request { request: SessionRequest::Answer(params), client, reply };
        self.out.push(Effect::Helper(Box::new(HelperOut::Forward { child, cmd: Box::new(cmd) })));
        None
    }

    /// Cancelling the batch cancels its helpers; their calls get the
    /// cancelled result.
    pub(super) fn cancel_helpers(&mut self, cancelled: &str) {
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        let helpers = std::mem::take(&mut l.helpers);
        for (_, a) in helpers.asks {
            let event =
                EventKind::ApprovalResolved { approval_id: a.approval_id, approved: Vec::new(), denied: Vec::new() };
            self.pipeline.event(None, event);
        }
        for h in helpers.running {
            if let Some(child) = h.child {
                self.out.push(Effect::Helper(Box::new(HelperOut::Cancel { child })));
            }
            self.write_result_as(Some(h.node_id), (&h.call_id, &h.name), cancelled.to_string(), true, None, Vec::new());
        }
    }

    // ----- in a helper's own session -----

    /// A helper's turn ended (it is idle now): its parent gets its answer.
    pub(super) fn report_to_parent(&mut self, status: Option<MessageStatus>) {
        let Some(spec) = &self.row.helper else { return };
        let status = status.unwrap_or(MessageStatus::Complete);
        let id = self.row.id.clone();
        let last = self.path.last().filter(|m| m.role == ChatRole::Assistant && m.tool_calls.is_empty());
        let text = last.map(|m| m.text.trim().to_string()).unwrap_or_default();
        let answer = match status {
            MessageStatus::Complete if !text.is_empty() => Ok(text),
            MessageStatus::Complete => Ok(format!("(the helper, session {id}, ended without a final answer)")),
            other => {
                let why = self.as_helper.turn_error.take().unwrap_or_else(|| format!("{other:?}").to_lowercase());
                let partial = if text.is_empty() { String::new() } else { format!("\n\nWhat it had written:\n{text}") };
                Err(format!(
                    "the helper's turn ended without an answer ({why}); its session {id} keeps its work (`forgectl attach {id}`){partial}"
                ))
            }
        };
        let cost = self.spent.cost_usd - self.as_helper.cost_base.unwrap_or(0.0);
        let uncounted = self.spent.cost_usd - self.as_helper.reported_cost.unwrap_or(0.0);
        self.as_helper.reported_cost = Some(self.spent.cost_usd);
        self.as_helper.cost_base = Some(self.spent.cost_usd);
        let report = HelperIn::Done {
            call_id: spec.of.call_id.clone(),
            child: id,
            status,
            answer,
            cost_usd: cost.max(0.0),
            uncounted_usd: uncounted.max(0.0),
        };
        let parent = spec.of.parent.clone();
        // Whatever it had reserved against the family's budget goes.
        self.settle_request();
        self.out.push(Effect::Helper(Box::new(HelperOut::Done { parent, report })));
    }

    /// What the session had cost when it was loaded: its parent counted
    /// it already.
    pub(super) fn helper_loaded(&mut self) {
        self.as_helper.reported_cost = Some(self.spent.cost_usd);
        self.as_helper.cost_base = Some(self.spent.cost_usd);
    }

    /// After a response: what a helper spent is counted at once by its
    /// parent (which hands it up in turn), so the family's root knows
    /// the family's cost before any of its requests.
    pub(super) fn report_spend(&mut self) {
        let Some(spec) = &self.row.helper else { return };
        let cost = self.spent.cost_usd - self.as_helper.reported_cost.unwrap_or(0.0);
        if cost <= 0.0 {
            return;
        }
        self.as_helper.reported_cost = Some(self.spent.cost_usd);
        let to = spec.of.parent.clone();
        self.out.push(Effect::Helper(Box::new(HelperOut::Report { to, report: HelperIn::Spent { cost_usd: cost } })));
    }

    /// A cancel before the helper has any message: its parent's batch
    /// ended while the helper was being made.
    pub(super) fn note_cancel_before_task(&mut self) {
        if self.row.helper.is_some() && self.row.head_id.is_none() && matches!(self.state, OperationState::Idle) {
            self.as_helper.cancelled_before_task = true;
        }
    }

    /// The task of a helper cancelled before it came is not run.
    pub(super) fn helper_cancelled_before_its_task(&self) -> Option<crate::error::EngineError> {
        self.as_helper.cancelled_before_task.then(|| {
            crate::error::EngineError::new(
                forge_proto::ErrorKind::InvalidParams,
                "this helper agent was cancelled with its parent's tool batch before its task came",
            )
        })
    }

    /// The answer to the approval it waited on (for the parent's record).
    pub(super) fn note_resolution(&mut self, approved: &[String], denied: &[String]) {
        if self.row.helper.is_some() {
            self.as_helper.resolution = Some((approved.to_vec(), denied.to_vec()));
        }
    }

    /// After each event: the parent is told of an approval this helper
    /// came to wait on, or no longer waits on.
    pub(super) fn mirror_approval(&mut self) {
        let Some(spec) = &self.row.helper else { return };
        let now: Option<PendingApproval> = match &self.state {
            OperationState::ToolLoop(l) => {
                l.approval.clone().or_else(|| l.helpers.asks.first().map(|(_, a)| a.clone()))
            }
            OperationState::AwaitingBudget { approval, .. } => Some(approval.clone()),
            OperationState::AwaitingHeld(w) => Some(w.approval.clone()),
            _ => None,
        };
        if now.as_ref().map(|a| &a.approval_id) == self.as_helper.mirrored.as_ref() {
            return;
        }
        let (parent, call_id, child) = (spec.of.parent.clone(), spec.of.call_id.clone(), self.row.id.clone());
        if let Some(approval_id) = self.as_helper.mirrored.take() {
            let (approved, denied) = self.as_helper.resolution.take().unwrap_or_default();
            let report = HelperIn::Resolved { child: child.clone(), approval_id, approved, denied };
            self.out.push(Effect::Helper(Box::new(HelperOut::Approval { parent: parent.clone(), report })));
        }
        if let Some(approval) = now {
            self.as_helper.mirrored = Some(approval.approval_id.clone());
            let report = HelperIn::Asked { call_id, child, approval };
            self.out.push(Effect::Helper(Box::new(HelperOut::Approval { parent, report })));
        }
    }

    /// The parent took up a batch a restart interrupted: the helper goes
    /// on with its task (or, if it had answered, says its answer again).
    fn resume_as_helper(&mut self) {
        if self.row.helper.is_none() {
            return;
        }
        // The parent may have dropped what it was told before it resumed:
        // a pending approval is told again (after this event).
        self.as_helper.mirrored = None;
        self.as_helper.resolution = None;
        match &self.state {
            OperationState::Idle => {
                let answered = self.path.last().is_some_and(|m| {
                    m.role == ChatRole::Assistant
                        && m.tool_calls.is_empty()
                        && ![MessageStatus::Interrupted, MessageStatus::Cancelled, MessageStatus::Error]
                            .into_iter()
                            .filter_map(super::history::interruption_note)
                            .any(|note| m.text.ends_with(note))
                });
                if answered {
                    self.report_to_parent(Some(MessageStatus::Complete));
                    return;
                }
                let params = SendParams { session: self.row.id.clone(), continued: true, ..Default::default() };
                self.on_input(params, ClientRef::daemon(), Reply::nobody());
            }
            OperationState::ToolRecovery { .. } => {
                if let Err(e) = self.on_recover(RecoverAction::Resume, None) {
                    tracing::warn!(session = %self.row.id, error = %e.message, "a helper could not resume its tools");
                }
            }
            // Running: it reports when its turn ends.
            _ => {}
        }
    }
}
