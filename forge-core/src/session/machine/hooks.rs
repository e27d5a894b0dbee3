//! Hooks as the machine runs them. A hook is a command the user set for a
//! point of the session (see [`crate::hooks`]); the machine decides which
//! hooks run and what their verdict does, and the shell only runs them
//! (`Effect::RunHooks`, answered by `Event::JobDone`). Every run is
//! journaled (`hook_ran`) before what it decided takes effect.
//!
//! - `UserPromptSubmit`: a message waits (in order, behind earlier ones)
//!   while its hooks run; a block refuses it, what they add goes with it.
//! - `SessionStart`: what they add goes with the session's first message.
//! - `Stop`: after a turn ended complete, before the session is idle; a
//!   block sends the model on with its reason (a few times in a row).
//! - `PreToolUse` / `PostToolUse`: stages of a tool call (see `tools.rs`).

use forge_proto::{ClientRef, ErrorKind, EventKind, MessageStatus, SendResult};
use serde_json::{Value, json};

use super::commands::SendArgs;
use super::state::OperationState;
use super::{Effect, OnDurable, ReadyReply, Responder, Session};
use crate::error::EngineError;
use crate::hooks::{Hook, HookDecision, HookEvent, HookRun};
use crate::session::Reply;

/// Turns `Stop` hooks may extend one after the other.
pub(super) const MAX_STOP_CONTINUATIONS: u32 = 3;

/// Hooks for the shell to run, in order; with `stop_at_first`, none after
/// the first that does not allow.
pub(crate) struct HookJob {
    pub job: u64,
    pub hooks: Vec<Hook>,
    pub input: Value,
    pub tool: Option<String>,
    pub stop_at_first: bool,
    pub sandbox: crate::tools::Sandbox,
}

/// A message whose `UserPromptSubmit` hooks run (the first) or wait.
pub(super) struct Submission {
    /// The hooks' job, once they run.
    pub job: Option<u64>,
    pub args: SendArgs,
    pub reply: Reply<SendResult>,
}

/// The `SessionStart` hooks of a new session, running.
pub(super) struct Starting {
    pub job: u64,
    pub reply: Reply<()>,
}

impl Session {
    /// A new job id (jobs that come back after their purpose is gone are
    /// recognised by it and dropped).
    pub(super) fn new_job(&mut self) -> u64 {
        self.next_job += 1;
        self.next_job
    }

    /// Asks the shell to run `hooks`; their runs come back as `job`.
    pub(super) fn run_hooks(&mut self, hooks: Vec<Hook>, event: HookEvent, extra: Value, tool: Option<String>) -> u64 {
        let job = self.new_job();
        let input = crate::hooks::input(event, &self.row.id, &self.row.cwd, extra);
        self.out.push(Effect::RunHooks(Box::new(HookJob {
            job,
            hooks,
            input,
            tool,
            stop_at_first: event != HookEvent::PostToolUse,
            sandbox: super::tools::sandbox_for(&self.row, &self.config),
        })));
        job
    }

    /// Hooks ran for `job`: journaled, then what they decided is done.
    pub(super) fn on_hooks_ran(&mut self, job: u64, runs: Vec<HookRun>) {
        if self.submissions.front().is_some_and(|s| s.job == Some(job)) {
            return self.prompt_hooks_ran(runs);
        }
        if self.starting.as_ref().is_some_and(|s| s.job == job) {
            return self.start_hooks_ran(runs);
        }
        if matches!(self.state, OperationState::StopHooks { job: j } if j == job) {
            return self.stop_hooks_ran(runs);
        }
        if self.tool_stage_job() == Some(job) {
            return self.tool_hooks_ran(runs);
        }
        tracing::debug!(session = %self.row.id, job, "hooks of a call or message no longer waiting: dropped");
    }

    /// A hook ran: journaled, with what it decided.
    pub(super) fn journal_hook(&mut self, run: &HookRun, client: Option<ClientRef>) {
        let decision = match run.decision {
            HookDecision::Allow => "allow",
            HookDecision::Block => "block",
            HookDecision::Error => "error",
        };
        self.pipeline.event(
            client,
            EventKind::HookRan {
                event: run.event.as_str().into(),
                command: crate::redact::scrub(&run.command).into_owned(),
                tool: run.tool.clone(),
                decision: decision.into(),
                reason: run.reason.clone(),
                exit_code: run.exit_code,
                duration_ms: run.duration_ms,
            },
        );
    }

    // ----- UserPromptSubmit -----

    /// A message to send once its `UserPromptSubmit` hooks allow it (and
    /// every message submitted before it went on).
    pub(super) fn submit(&mut self, args: SendArgs, reply: Reply<SendResult>) {
        let hooked = !args.continued && !self.hooks.matching(HookEvent::UserPromptSubmit, None).is_empty();
        if !hooked && self.submissions.is_empty() {
            return self.accept_send(args, reply, Vec::new());
        }
        self.submissions.push_back(Submission { job: None, args, reply });
        self.next_submission();
    }

    /// Starts the hooks of the first waiting message; messages without
    /// hooks go on at once.
    fn next_submission(&mut self) {
        while let Some(first) = self.submissions.front() {
            if first.job.is_some() {
                return;
            }
            let hooks = match first.args.continued {
                true => Vec::new(),
                false => self.hooks.matching(HookEvent::UserPromptSubmit, None),
            };
            if hooks.is_empty() {
                if let Some(s) = self.submissions.pop_front() {
                    self.accept_later(s.args, s.reply, Vec::new());
                }
                continue;
            }
            let prompt = first.args.text.clone();
            let job = self.run_hooks(hooks, HookEvent::UserPromptSubmit, json!({"prompt": prompt}), None);
            if let Some(first) = self.submissions.front_mut() {
                first.job = Some(job);
            }
            return;
        }
    }

    fn prompt_hooks_ran(&mut self, runs: Vec<HookRun>) {
        let Some(s) = self.submissions.pop_front() else { return };
        let client = Some(s.args.client.clone());
        for run in &runs {
            self.journal_hook(run, client.clone());
        }
        // A hook's error is shown (journaled) and passed over; only a block
        // (or a fail_closed hook's error, made one) refuses the message.
        match runs.iter().find(|r| r.decision == HookDecision::Block) {
            Some(blocked) => {
                let err =
                    EngineError::new(ErrorKind::HookBlocked, format!("the message was not sent: {}", blocked.says()));
                self.out.push(Effect::Reply(ReadyReply::now(s.reply, Err(err))));
            }
            None => {
                let added = runs.into_iter().filter_map(|r| r.context).collect();
                self.accept_later(s.args, s.reply, added);
            }
        }
        self.next_submission();
    }

    /// Messages whose hooks had not ended when the session stopped.
    pub(super) fn drop_submissions(&mut self, why: &str) {
        for s in std::mem::take(&mut self.submissions) {
            let err = EngineError::new(ErrorKind::ShuttingDown, format!("the message was not sent: {why}"));
            self.out.push(Effect::Reply(ReadyReply::now(s.reply, Err(err))));
        }
    }

    // ----- SessionStart -----

    /// `SessionStart` hooks of a new session: answered once their runs
    /// are durable.
    pub(super) fn on_start(&mut self, reply: Reply<()>) {
        let hooks = self.hooks.matching(HookEvent::SessionStart, None);
        if hooks.is_empty() {
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Ok(()))));
        }
        let job = self.run_hooks(hooks, HookEvent::SessionStart, json!({"source": "startup"}), None);
        self.starting = Some(Starting { job, reply });
    }

    fn start_hooks_ran(&mut self, runs: Vec<HookRun>) {
        let Some(s) = self.starting.take() else { return };
        for run in &runs {
            self.journal_hook(run, None);
        }
        let added: Vec<String> = runs.into_iter().filter_map(|r| r.context).collect();
        if !added.is_empty() {
            self.start_context = Some(added.join("\n"));
        }
        self.pipeline.effect(OnDurable::Reply(Responder::with(s.reply, ())));
    }

    // ----- Stop -----

    /// A turn is over and durable: its `Stop` hooks run before the
    /// session is idle (true), if it ended complete and any are set.
    pub(super) fn stop_hooks(&mut self, status: Option<MessageStatus>) -> bool {
        if status != Some(MessageStatus::Complete) {
            self.stop_chain = 0;
            return false;
        }
        let hooks = self.hooks.matching(HookEvent::Stop, None);
        if hooks.is_empty() || self.exit.is_some() {
            return false;
        }
        let active = self.stop_chain > 0;
        let job = self.run_hooks(hooks, HookEvent::Stop, json!({"stop_hook_active": active}), None);
        self.state = OperationState::StopHooks { job };
        true
    }

    /// The `Stop` hooks ran: one that blocks (and does not say `continue:
    /// false`) sends the model on with its reason, `stop_hook_active`
    /// telling the next run it is one of those.
    fn stop_hooks_ran(&mut self, runs: Vec<HookRun>) {
        for run in &runs {
            self.journal_hook(run, None);
        }
        self.state = OperationState::Idle;
        let go_on = runs.last().filter(|r| r.decision == HookDecision::Block && !r.halt);
        match go_on {
            Some(last) if self.stop_chain < MAX_STOP_CONTINUATIONS => {
                self.stop_chain += 1;
                let reason = last.reason.clone().unwrap_or_else(|| "a Stop hook asked to go on".into());
                let hook = ClientRef { id: 0, name: "hook".into(), kind: forge_proto::ClientKind::Other };
                let args = SendArgs {
                    text: format!("[Stop hook] {reason}"),
                    client: hook,
                    same: Vec::new(),
                    n: 1,
                    continued: false,
                    output_schema: None,
                    grants: Default::default(),
                    images: Vec::new(),
                };
                self.on_send(args, Reply::nobody());
            }
            _ => {
                self.stop_chain = 0;
                // The turn is over: a helper's parent gets its answer.
                self.report_to_parent(Some(MessageStatus::Complete));
            }
        }
        self.start_next_queued();
    }

    /// Cancels a turn's `Stop` hooks: the session is idle at once.
    pub(super) fn cancel_stop_hooks(&mut self) -> bool {
        if !matches!(self.state, OperationState::StopHooks { .. }) {
            return false;
        }
        self.state = OperationState::Idle;
        self.stop_chain = 0;
        self.report_to_parent(Some(MessageStatus::Complete));
        self.start_next_queued();
        true
    }
}
