//! One tool call's stages, each a state of the running call that the
//! machine moves on from when the shell reports back:
//!
//! 1. `PreHooks`: its `PreToolUse` hooks run; a block or a failed hook is
//!    the call's (error) result, and it never runs.
//! 2. `RecordingBefore`: the files it may change are read for rewind (a
//!    command's roots scanned); their contents go through the journal
//!    and the call runs only once they are durable (`Recorded`).
//! 3. `Running`: the shell runs it under its timeout.
//! 4. `RecordingAfter`: what it changed is read (and what it left in a
//!    nested repository that git would run undone, before any hook of the
//!    user's could run git there).
//! 5. `PostHooks`: its `PostToolUse` hooks run; what they say is added to
//!    the result, written with what it changed.
//!
//! A cancel at any stage answers the call at once; a stage that reports
//! back afterwards is recognised by its job id and dropped.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::state::{Before, CallStage, OperationState, PlannedCall, Ready};
use super::{Effect, FileAfter, OnDurable, Session, ToolEnd, ToolRun};
use crate::hooks::{HookDecision, HookEvent, HookRun};
use crate::journal::StoreOp;
use crate::tools::{ToolCtx, ToolError, ToolOutput};
use forge_proto::GitUndone;

/// The most live output of one call shown to clients and journaled.
const LIVE_OUTPUT_MAX: usize = 8 * 1024 * 1024;

/// For the shell: read the files a call may change, before it runs.
pub(crate) struct RecordBefore {
    pub job: u64,
    pub session_id: String,
    pub node_id: String,
    pub call_id: String,
    pub touched: Vec<(String, PathBuf)>,
    /// Scan the roots too (a command may change anything under them).
    pub scan: bool,
    pub sandbox: crate::tools::Sandbox,
}

/// For the shell: read what a call changed.
pub(crate) struct RecordAfter {
    pub job: u64,
    pub session_id: String,
    pub node_id: String,
    pub call_id: String,
    pub before: Before,
    pub sandbox: crate::tools::Sandbox,
    /// The call was stopped: read once its command has ended (see
    /// `settle.rs`).
    pub stopped: bool,
}

/// What the shell reports of a job.
pub(crate) enum JobOutcome {
    Hooks(Vec<HookRun>),
    /// The ops recording the files before (contents and `BeginChange`),
    /// and the scan; or why they could not be recorded.
    RecordedBefore(Result<(Vec<StoreOp>, bool), String>),
    /// The ops recording what a scanned command changed, and each changed
    /// file's state after.
    RecordedAfter {
        /// What the command left that git would run, undone.
        undone: Vec<GitUndone>,
        ops: Vec<StoreOp>,
        changes: Vec<FileAfter>,
        /// Roots under which what the command changed was not recorded,
        /// and why (ignored files not watched, the record failed).
        unrecorded: Vec<(String, crate::rewind::Unrecorded)>,
    },
    /// What a rewind does to the files.
    RewindPlanned(Result<Vec<super::rewind_plan::FileFacts>, crate::error::EngineError>),
    /// A rewind's files were written: the first `done`, and why it
    /// stopped there if it did.
    FilesRestored {
        done: usize,
        error: Option<String>,
    },
    /// The wait for MCP servers is over: the tools offered now (`None`:
    /// keep those the session has), and the servers still starting.
    ToolsStarted {
        tools: Option<std::sync::Arc<crate::tools::ToolRegistry>>,
        not_started: Vec<String>,
    },
    /// Git mode: the turn's commit, or why it could not be made, and what
    /// writing its message cost.
    Committed {
        result: Result<forge_git::Committed, String>,
        usage: Option<super::git_commit::MessageUsage>,
    },
    /// Git mode: the commit waits for a user's word on these files (see
    /// `git_held.rs`); nothing was committed.
    Held {
        commit: Box<forge_git::TurnCommit>,
        files: Vec<forge_git::HeldFile>,
        usage: Option<super::git_commit::MessageUsage>,
    },
    /// A message, prepared (see `input.rs`).
    InputPrepared(Box<super::input::Prepared>),
    /// Files checked for `session.context_files`, and the command.
    FilesChecked(crate::tools::builtin::update_context::Checked, Box<super::active_files::Pending>),
    /// Git mode: where a checkout moved the branch (`None`: the node has
    /// no commit, or its commit is the tip already).
    BranchMoved(Result<Option<forge_git::Moved>, crate::error::EngineError>),
}

impl Session {
    /// A job the shell ran for this session came back.
    pub(super) fn on_job_done(&mut self, job: u64, outcome: JobOutcome) {
        match outcome {
            JobOutcome::Hooks(runs) => self.on_hooks_ran(job, runs),
            JobOutcome::RewindPlanned(plan) => self.on_rewind_planned(job, plan),
            JobOutcome::FilesRestored { done, error } => self.on_files_restored(job, done, error),
            JobOutcome::ToolsStarted { tools, not_started } => self.on_tools_started(job, tools, not_started),
            JobOutcome::InputPrepared(prepared) => self.on_input_prepared(job, *prepared),
            JobOutcome::FilesChecked(checked, then) => self.on_files_checked(checked, *then),
            JobOutcome::Committed { result, usage } => self.on_committed(job, result, usage),
            JobOutcome::Held { commit, files, usage } => self.on_held(job, *commit, files, usage),
            JobOutcome::BranchMoved(result) => self.on_branch_moved(job, result),
            other if self.tool_stage_job() == Some(job) => self.call_stage_done(other),
            other if self.settles(job) => self.on_settled(job, other),
            _ => tracing::debug!(session = %self.row.id, job, "a call no longer running reported back: dropped"),
        }
    }

    /// The job the running call waits for.
    pub(super) fn tool_stage_job(&self) -> Option<u64> {
        let OperationState::ToolLoop(l) = &self.state else { return None };
        match l.running.as_ref()?.stage {
            CallStage::PreHooks { job, .. }
            | CallStage::RecordingBefore { job, .. }
            | CallStage::PostHooks { job, .. }
            | CallStage::RecordingAfter { job, .. } => Some(job),
            _ => None,
        }
    }

    /// Takes the running call's stage, leaving `Moving`.
    fn take_stage(&mut self) -> Option<CallStage> {
        let OperationState::ToolLoop(l) = &mut self.state else { return None };
        let running = l.running.as_mut()?;
        Some(std::mem::replace(&mut running.stage, CallStage::Moving))
    }

    fn set_stage(&mut self, stage: CallStage) {
        if let OperationState::ToolLoop(l) = &mut self.state
            && let Some(running) = l.running.as_mut()
        {
            running.stage = stage;
        }
    }

    /// (node, call id, tool name) of the running call.
    fn running_ids(&self) -> Option<(String, String, String)> {
        let OperationState::ToolLoop(l) = &self.state else { return None };
        l.running.as_ref().map(|r| (r.node_id.clone(), r.id.clone(), r.name.clone()))
    }

    /// `tool_running` is durable: the call's stages begin.
    pub(super) fn run_tool(&mut self, call: PlannedCall) {
        // Cancelled meanwhile: the call has its result already.
        let Some((_, call_id, name)) = self.running_ids() else { return };
        if call_id != call.id {
            return;
        }
        let Ok(ready) = call.action else { return };
        let pre = self.hooks.matching(HookEvent::PreToolUse, Some(&name));
        if pre.is_empty() {
            return self.record_before(ready, Vec::new());
        }
        let extra = json!({"tool_name": name, "tool_input": ready.1});
        let job = self.run_hooks(pre, HookEvent::PreToolUse, extra, Some(name));
        self.set_stage(CallStage::PreHooks { job, ready });
    }

    /// The hooks of the running call ran.
    pub(super) fn tool_hooks_ran(&mut self, runs: Vec<HookRun>) {
        for run in &runs {
            self.journal_hook(run, None);
        }
        match self.take_stage() {
            Some(CallStage::PreHooks { ready, .. }) => {
                // A block stops the call (a fail_closed hook's error is one);
                // other errors are shown to the user and passed over.
                if let Some(r) = runs.iter().find(|r| r.decision == HookDecision::Block) {
                    let message = format!("not run: {}", r.says());
                    let tool = ready.0.name().to_string();
                    return self.finish_call(Err(ToolError::ExecutionFailed { tool, message }), Vec::new());
                }
                let notes = runs.into_iter().filter_map(|r| r.context).collect();
                self.record_before(ready, notes);
            }
            Some(CallStage::PostHooks { result, mut notes, changes, .. }) => {
                for r in runs {
                    // The model hears of blocks; errors are the user's.
                    if r.decision == HookDecision::Block {
                        notes.push(r.says());
                    }
                    notes.extend(r.context);
                }
                let name = self.running_ids().map(|(_, _, n)| n).unwrap_or_default();
                self.finish_call(with_notes(result, &notes, &name), changes);
            }
            Some(other) => self.set_stage(other),
            None => {}
        }
    }

    /// Has what the call may change read for rewind, or runs it.
    fn record_before(&mut self, ready: Ready, notes: Vec<String>) {
        let Some((node_id, call_id, _)) = self.running_ids() else { return };
        let sandbox = super::tools::sandbox_for(&self.row, &self.config);
        let touched: Vec<(String, PathBuf)> = ready
            .0
            .touches(&ready.1)
            .iter()
            .filter_map(|p| sandbox.resolve(p).ok())
            .map(|p| (crate::rewind::path_text(&p), p))
            .collect();
        let scan = ready.0.changes_files_anywhere();
        if touched.is_empty() && !scan {
            return self.launch(ready, notes, Before::default());
        }
        let job = self.new_job();
        self.out.push(Effect::RecordBefore(Box::new(RecordBefore {
            job,
            session_id: self.row.id.clone(),
            node_id,
            call_id,
            touched: touched.clone(),
            scan,
            sandbox,
        })));
        self.set_stage(CallStage::RecordingBefore { job, ready, notes, touched });
    }

    fn call_stage_done(&mut self, outcome: JobOutcome) {
        match (self.take_stage(), outcome) {
            (Some(CallStage::RecordingBefore { ready, notes, touched, .. }), JobOutcome::RecordedBefore(recorded)) => {
                match recorded {
                    Err(e) => {
                        let tool = ready.0.name().to_string();
                        self.finish_call(
                            Err(ToolError::ExecutionFailed { tool, message: format!("not run: {e}") }),
                            Vec::new(),
                        )
                    }
                    Ok((ops, scanned)) => {
                        let before = Before { touched, scanned };
                        if ops.is_empty() {
                            return self.launch(ready, notes, before);
                        }
                        // Durable before the call may change anything: a crash
                        // while it runs leaves the contents it started from.
                        for op in ops {
                            self.pipeline.op(op);
                        }
                        self.set_stage(CallStage::Recorded { ready, notes, before });
                        self.pipeline.effect(OnDurable::Launch);
                    }
                }
            }
            (
                Some(CallStage::RecordingAfter { result, notes, scanned, .. }),
                JobOutcome::RecordedAfter { ops, changes, undone, unrecorded },
            ) => {
                for op in ops {
                    self.pipeline.op(op);
                }
                if !scanned {
                    self.note_run_later(&changes);
                }
                if let Some((node_id, call_id, _)) = self.running_ids() {
                    self.mark_unrecorded(&node_id, &call_id, unrecorded);
                }
                let result = self.say_undone(result, undone);
                self.post_hooks(result, notes, changes);
            }
            (Some(stage), _) => self.set_stage(stage),
            (None, _) => {}
        }
    }

    /// The call's records are durable: run it.
    pub(super) fn launch_recorded(&mut self) {
        match self.take_stage() {
            Some(CallStage::Recorded { ready, notes, before }) => self.launch(ready, notes, before),
            Some(other) => self.set_stage(other),
            None => {}
        }
    }

    fn launch(&mut self, (tool, args): Ready, notes: Vec<String>, before: Before) {
        let Some((_, call_id, _)) = self.running_ids() else { return };
        let timeout = super::tools::timeout_for(tool.as_ref(), &self.config);
        let ctx = ToolCtx {
            sandbox: super::tools::sandbox_for(&self.row, &self.config),
            call_id,
            limits: self.tool_limits(),
            output: None,
            file_hashes: self.file_hashes.clone(),
            about: (tool.name() == "introspect").then(|| Arc::new(self.introspection())),
            library: None,
            timeout: Some(timeout),
            images: None,
        };
        // `recall` searches the store's facts, which only the shell reaches.
        let library = tool.name() == "recall";
        self.out.push(Effect::RunTool(Box::new(ToolRun { tool, args, ctx, timeout, library })));
        self.set_stage(CallStage::Running { notes, before });
    }

    /// Live output of the running call, shown to clients as it comes
    /// (journaled like everything else; consecutive pieces merge), up to
    /// `LIVE_OUTPUT_MAX`: a command printing hundreds of megabytes would
    /// otherwise fill the store with what nobody reads (its result keeps
    /// what the model is given either way).
    pub(super) fn on_tool_output(&mut self, out: ToolOutput) {
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        let Some(r) = &mut l.running else { return };
        if r.live_bytes >= LIVE_OUTPUT_MAX {
            return;
        }
        r.live_bytes += out.text.len();
        let call_id = r.id.clone();
        let mut text = r.scrubber(out.stream).push(&out.text);
        if r.live_bytes >= LIVE_OUTPUT_MAX {
            text.push_str(&format!(
                "\n[forge: more than {} MiB of live output; the rest is not shown (the command runs on, and its result keeps what the model is given)]\n",
                LIVE_OUTPUT_MAX / (1024 * 1024)
            ));
        }
        if !text.is_empty() {
            self.pipeline.tool_output(call_id, out.stream, text);
        }
    }

    /// The call ran: what it changed, then its `PostToolUse` hooks.
    pub(super) fn on_tool_done(&mut self, end: ToolEnd) {
        let Some(CallStage::Running { notes, before }) = self.take_stage() else { return };
        let Some((_, _, name)) = self.running_ids() else { return };
        let stopped = |message: &str| ToolError::ExecutionFailed { tool: name.clone(), message: message.into() };
        let result = match end {
            ToolEnd::Finished(result) => result,
            ToolEnd::Panicked => Err(stopped("the tool panicked")),
            ToolEnd::Stopped => Err(stopped("the tool was stopped")),
        };
        self.record_after(result, notes, before);
    }

    /// What the call changed is known: its `PostToolUse` hooks run.
    fn post_hooks(&mut self, result: Result<String, ToolError>, notes: Vec<String>, changes: Vec<FileAfter>) {
        let Some((_, _, name)) = self.running_ids() else { return };
        let post = self.hooks.matching(HookEvent::PostToolUse, Some(&name));
        if post.is_empty() {
            return self.finish_call(with_notes(result, &notes, &name), changes);
        }
        let input = self.state_args().unwrap_or(Value::Null);
        let response = match &result {
            Ok(text) => json!({"output": text, "is_error": false}),
            Err(e) => json!({"output": e.to_string(), "is_error": true}),
        };
        let extra = json!({"tool_name": name, "tool_input": input, "tool_response": response});
        let job = self.run_hooks(post, HookEvent::PostToolUse, extra, Some(name));
        self.set_stage(CallStage::PostHooks { job, result, notes, changes });
    }

    /// The running call's arguments, for its `PostToolUse` hooks.
    fn state_args(&self) -> Option<Value> {
        let OperationState::ToolLoop(l) = &self.state else { return None };
        l.running.as_ref().map(|r| r.args.clone())
    }

    fn record_after(&mut self, result: Result<String, ToolError>, notes: Vec<String>, before: Before) {
        if before.touched.is_empty() && !before.scanned {
            return self.post_hooks(result, notes, Vec::new());
        }
        let Some((node_id, call_id, _)) = self.running_ids() else { return };
        let job = self.new_job();
        let scanned = before.scanned;
        self.out.push(Effect::RecordAfter(Box::new(RecordAfter {
            job,
            session_id: self.row.id.clone(),
            node_id,
            call_id,
            before,
            sandbox: super::tools::sandbox_for(&self.row, &self.config),
            stopped: false,
        })));
        self.set_stage(CallStage::RecordingAfter { job, result, notes, scanned });
    }

    /// What the command left that git would have run, undone: said to
    /// every client and, with the result, to the model.
    fn say_undone(&mut self, result: Result<String, ToolError>, undone: Vec<GitUndone>) -> Result<String, ToolError> {
        let Some((_, call_id, name)) = self.running_ids() else { return result };
        if undone.is_empty() {
            return result;
        }
        let lines: Vec<String> = undone.iter().map(|u| format!("- {}: {}", u.path, u.what)).collect();
        self.pipeline.event(None, forge_proto::EventKind::GitSettingsUndone { call_id, undone });
        let tail = format!(
            "\n--- sandbox ---\nThe command left git settings or hooks that would run programs outside the sandbox \
             when the user runs git there; they were undone:\n{}",
            lines.join("\n")
        );
        match result {
            Ok(text) => Ok(text + &tail),
            Err(e) => Err(ToolError::ExecutionFailed { tool: name, message: format!("{e}{tail}") }),
        }
    }

    /// The call is done: its output held back, the files it changed and
    /// its result are written, and the next call waits for them.
    fn finish_call(&mut self, result: Result<String, ToolError>, changes: Vec<FileAfter>) {
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        let Some(mut running) = l.running.take() else { return };
        // What the scrubbers held back, before the result.
        for stream in ["stdout", "stderr"] {
            let rest = running.scrubber(stream).finish();
            if !rest.is_empty() {
                self.pipeline.tool_output(running.id.clone(), stream, rest);
            }
        }
        // Active files it deleted leave the list.
        let gone: Vec<String> = changes.iter().filter(|c| c.after.is_none()).map(|c| c.path.clone()).collect();
        if let Some(event) = self.take_gone(&gone) {
            self.pipeline.event(None, event);
        }
        // What the call left in the files it touched, with its result.
        self.end_changes(&running.node_id, changes);
        let result = match running.name.as_str() {
            "update_context" => self.on_update_context(result),
            _ => result,
        };
        // The model's plan, for every client to show.
        if running.name == "update_plan"
            && result.is_ok()
            && let Ok(crate::tools::builtin::update_plan::Plan { steps, note }) =
                crate::tools::builtin::update_plan::parse_plan(&running.args)
        {
            let steps = steps.into_iter().map(|(step, status)| forge_proto::PlanStep { step, status }).collect();
            self.pipeline.event(None, forge_proto::EventKind::PlanUpdated { steps, note });
        }
        // Images the result carries, for a model that sees them.
        let mut images = Vec::with_capacity(running.images.len());
        if self.model_info().is_some_and(|m| m.vision) {
            for (info, data) in std::mem::take(&mut running.images) {
                self.pipeline.op(StoreOp::PutBlob { hash: info.hash.clone(), data });
                images.push(info);
            }
        }
        self.record_result(&running.id, &running.name, result, Some(running.node_id), images);
    }
}

/// The plan the model last gave on `path` (its newest `update_plan` call),
/// in words, for a summary to keep.
pub(super) fn plan_in_words(path: &[crate::provider::ChatMessage]) -> Option<String> {
    let args = path.iter().rev().flat_map(|m| m.tool_calls.iter().rev()).find(|c| c.name == "update_plan")?;
    let args: Value = serde_json::from_str(&args.arguments).ok()?;
    let crate::tools::builtin::update_plan::Plan { steps, note } =
        crate::tools::builtin::update_plan::parse_plan(&args).ok()?;
    let mut text = String::from("The plan as last updated (update_plan):");
    for (step, status) in steps {
        text.push_str(&format!("\n- [{status}] {step}"));
    }
    if let Some(note) = note {
        text.push_str(&format!("\n({note})"));
    }
    Some(text)
}

/// The result with what hooks said about it.
fn with_notes(result: Result<String, ToolError>, notes: &[String], tool: &str) -> Result<String, ToolError> {
    if notes.is_empty() {
        return result;
    }
    let tail = format!("\n--- hooks ---\n{}", notes.join("\n"));
    match result {
        Ok(text) => Ok(text + &tail),
        Err(e) => Err(ToolError::ExecutionFailed { tool: tool.to_string(), message: format!("{e}{tail}") }),
    }
}

#[cfg(test)]
mod plan_tests {
    use crate::provider::ChatMessage;
    use forge_proto::ToolCallRecord;

    #[test]
    fn the_newest_plan_on_the_path_is_put_in_words_for_a_summary() {
        let call = |args: &str| {
            let mut m = ChatMessage::user("");
            m.role = crate::provider::ChatRole::Assistant;
            m.tool_calls = vec![ToolCallRecord { id: "c".into(), name: "update_plan".into(), arguments: args.into() }];
            m
        };
        let old = call(r#"{"plan":[{"step":"old","status":"pending"}]}"#);
        let new = call(
            r#"{"plan":[{"step":"a","status":"completed"},{"step":"b","status":"in_progress"}],"explanation":"why"}"#,
        );
        let words = super::plan_in_words(&[old, new]).unwrap_or_default();
        assert_eq!(words, "The plan as last updated (update_plan):\n- [completed] a\n- [in_progress] b\n(why)");
        assert_eq!(super::plan_in_words(&[ChatMessage::user("hi")]), None);
    }
}
