//! The tool loop of a turn: after an answer with tool calls is durable,
//! each call is planned (unknown tools, bad or duplicate arguments become
//! error results the model sees), announced with `tool_running` before it
//! runs, executed in its own task with a timeout (a panic is an error
//! result, never a dead daemon), and its result is history with
//! `tool_result` before the next call starts. Then the model continues
//! the turn with the results in a new stream.
//!
//! The tool journal is this sequence of durable events and nodes: a call
//! with `tool_running` and no `tool_result` was interrupted.

use std::collections::HashSet;

use forge_proto::{
    ClientRef, ErrorKind, EventKind, MessageStatus, PendingApproval, RecoverAction, RecoverResult, RecoveryCall, Role,
    ToolCallRecord, ToolResultInfo,
};
use serde_json::Value;

use super::state::{CallStage, OperationState, PlannedCall, RunningCall, ToolLoop};
use super::{Effect, OnDurable, Session};
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::provider::ChatMessage;
use crate::store::rows::NodeMeta;
use crate::tools::{Sandbox, ToolError, ToolExecutor, truncate_output};

/// Tool batches one user turn may run before it is stopped.
const DEFAULT_MAX_ITERATIONS: u32 = 20;
pub(super) const DEFAULT_MAX_CALLS_PER_BATCH: usize = 16;
pub(super) const DEFAULT_MAX_ARGS_BYTES: usize = 256 * 1024;

impl Session {
    pub(super) fn max_iterations(&self) -> u32 {
        self.config.tools.max_tool_iterations_per_user_turn.unwrap_or(DEFAULT_MAX_ITERATIONS)
    }

    /// Plans the calls of a durable answer and starts the loop (or, in
    /// parse-only mode, waits for a client to supply the results).
    pub(super) fn start_tool_loop(&mut self, message_id: String, iteration: u32, calls: Vec<ToolCallRecord>) {
        if self.config.tools.mode == Some(crate::config::ToolMode::ParseOnly) {
            // The calls past the batch's limit are answered here, as when
            // Forge runs them; a client is asked for the others only.
            let max_calls = self.config.tools.max_tool_calls_per_batch.unwrap_or(DEFAULT_MAX_CALLS_PER_BATCH);
            let mut calls = calls;
            let over = calls.split_off(max_calls.min(calls.len()));
            for c in &over {
                let why =
                    format!("not run: at most {max_calls} tool calls per answer (tools.max_tool_calls_per_batch)");
                self.write_result(&c.id, &c.name, why, true, None);
            }
            if calls.is_empty() {
                self.state = OperationState::Finishing;
                let marker = self.pipeline.event(None, EventKind::StreamResumed { iteration: iteration + 1 });
                return self.proceed_turn(message_id, Some(marker), iteration + 1);
            }
            self.pipeline.event(None, EventKind::AwaitingToolResults { calls: calls.clone() });
            self.state = OperationState::AwaitingToolResults { message_id, iteration, pending: calls };
            return;
        }
        let mut seen = HashSet::new();
        let over_limit = iteration + 1 > self.max_iterations();
        let tools_cfg = &self.config.tools;
        let max_calls = tools_cfg.max_tool_calls_per_batch.unwrap_or(DEFAULT_MAX_CALLS_PER_BATCH);
        let max_args = tools_cfg.max_tool_args_bytes.unwrap_or(DEFAULT_MAX_ARGS_BYTES);
        // On a small window only the core tools are offered: the others
        // are not run either.
        let offered = self.tool_specs();
        let trimmed = self.config.tools.mode.unwrap_or_default() == crate::config::ToolMode::Enabled
            && offered.len() < self.tools.iter().count();
        let pending = calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let disabled = self.config.tools.mode == Some(crate::config::ToolMode::Disabled);
                let action = if disabled {
                    Err(ToolError::ExecutionFailed {
                        tool: c.name.clone(),
                        message: "tools are disabled ([tools] mode = \"disabled\")".into(),
                    })
                } else if over_limit {
                    Err(ToolError::ExecutionFailed {
                        tool: c.name.clone(),
                        message: format!(
                            "not run: this turn reached its limit of {} tool batches ([tools] max_tool_iterations)",
                            self.max_iterations()
                        ),
                    })
                } else if i >= max_calls {
                    Err(ToolError::ExecutionFailed {
                        tool: c.name.clone(),
                        message: format!(
                            "not run: at most {max_calls} tool calls per answer (tools.max_tool_calls_per_batch)"
                        ),
                    })
                } else if c.arguments.len() > max_args {
                    Err(ToolError::BadArgs {
                        message: format!(
                            "the arguments are {} bytes; the limit is {max_args} (tools.max_tool_args_bytes)",
                            c.arguments.len()
                        ),
                    })
                } else if !seen.insert(c.id.clone()) {
                    Err(ToolError::DuplicateToolCallId { id: c.id.clone() })
                } else {
                    match self.tools.get(&c.name) {
                        None => Err(ToolError::UnknownTool { name: c.name.clone() }),
                        Some(tool) if trimmed && !offered.iter().any(|o| o.name == tool.name()) => {
                            Err(ToolError::ExecutionFailed {
                                tool: c.name.clone(),
                                message: format!(
                                    "not offered with this model's small context window; use one of {}",
                                    offered.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ")
                                ),
                            })
                        }
                        Some(tool) => serde_json::from_str::<Value>(if c.arguments.trim().is_empty() {
                            "{}"
                        } else {
                            &c.arguments
                        })
                        .map_err(|e| ToolError::BadArgs { message: format!("the arguments are not JSON: {e}") })
                        .map(|args| (tool, args)),
                    }
                };
                PlannedCall { id: c.id, name: c.name, action }
            })
            .collect();
        let mut l = ToolLoop {
            message_id,
            iteration,
            pending,
            running: None,
            approval: None,
            approval_seq: 0,
            helpers: Default::default(),
            checkpoint: None,
            next_checkpoint: None,
        };
        let asks = self.apply_policy(&mut l);
        if asks.is_empty() {
            self.state = OperationState::ToolLoop(l);
            self.pipeline.effect(OnDurable::NextTool);
            return;
        }
        let approval_id = self.clock.new_id("a");
        let index = self.pipeline.event(
            None,
            EventKind::ApprovalRequested { approval_id: approval_id.clone(), calls: asks.clone(), helper: None },
        );
        l.approval_seq = self.pipeline.seq_of_outbox_index(index);
        l.approval = Some(PendingApproval {
            session_id: self.row.id.clone(),
            session_name: self.row.name.clone(),
            approval_id,
            calls: asks,
        });
        self.state = OperationState::ToolLoop(l);
    }

    /// The previous step is durable: run the next call, or continue the
    /// turn with the results.
    pub(super) fn next_tool(&mut self) {
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        // One call runs at a time (helpers run beside it): a second
        // `NextTool` (a helper's result) waits for it, and so does a
        // checkpoint commit in flight.
        if l.running.is_some() || l.checkpoint.is_some() {
            return;
        }
        match l.pending.pop_front() {
            Some(PlannedCall { id, name, action: Err(e) }) => self.record_result(&id, &name, Err(e), None, Vec::new()),
            Some(PlannedCall { id, name, action: Ok((tool, args)) }) if tool.starts_helper() => {
                self.start_helper(id, name, args)
            }
            Some(PlannedCall { id, name, action: Ok((tool, args)) }) => {
                self.pipeline.event(None, EventKind::ToolRunning { call_id: id.clone(), name: name.clone() });
                // In progress from now: a cancel before it runs still
                // answers it.
                l.running = Some(Box::new(RunningCall {
                    id: id.clone(),
                    name: name.clone(),
                    args: args.clone(),
                    stage: CallStage::Announced,
                    node_id: self.clock.new_id("m"),
                    scrubbers: Default::default(),
                    live_bytes: 0,
                    images: Vec::new(),
                }));
                self.pipeline.effect(OnDurable::RunTool(PlannedCall { id, name, action: Ok((tool, args)) }));
            }
            // The batch ends when its helpers have answered too.
            None if !l.helpers.running.is_empty() => {}
            None => {
                let (message_id, iteration) = (l.message_id.clone(), l.iteration);
                if iteration + 1 > self.max_iterations() {
                    self.finish_tool_turn(
                        message_id,
                        MessageStatus::Error,
                        Some((
                            "tool_iteration_limit_exceeded".into(),
                            format!(
                                "the turn reached its limit of {} tool batches ([tools] max_tool_iterations); send a message to let it go on",
                                self.max_iterations()
                            ),
                        )),
                    );
                    return;
                }
                // The turn's safe point: steers join here.
                self.apply_steers();
                let marker = self.pipeline.event(None, EventKind::StreamResumed { iteration: iteration + 1 });
                // Between tool batches too, a request that would not fit
                // waits for a summary of the turns before this one.
                self.proceed_turn(message_id, Some(marker), iteration + 1);
            }
        }
    }

    /// Writes a result as history and as `tool_result` (as node `node_id`
    /// if given); the next call waits until it is durable.
    pub(super) fn record_result(
        &mut self,
        call_id: &str,
        name: &str,
        result: Result<String, ToolError>,
        node_id: Option<String>,
        images: Vec<forge_proto::ImageInfo>,
    ) {
        // Scrubbed before it is cut: a secret cut in two would no longer
        // be recognized.
        let (output, is_error) = match result {
            Ok(out) => {
                (truncate_output(crate::redact::scrub(&out).into_owned(), self.tool_limits().output_bytes), false)
            }
            Err(e) => (format!("error: {e}"), true),
        };
        self.write_result_as(node_id, (call_id, name), output, is_error, None, images);
        self.pipeline.effect(OnDurable::NextTool);
    }

    /// Cancels the tool loop: the running call is stopped, it and the
    /// calls not run yet get "cancelled" results, and the turn ends.
    pub(super) fn cancel_tools(&mut self, client: Option<ClientRef>, reason: Option<&str>) -> bool {
        let OperationState::ToolLoop(l) = &mut self.state else { return false };
        let message_id = l.message_id.clone();
        l.approval = None;
        let running = l.running.take();
        if running.is_some() {
            self.out.push(Effect::StopTool);
        }
        let unanswered: Vec<(String, String)> = l.pending.drain(..).map(|c| (c.id, c.name)).collect();
        if let Some(client) = client {
            self.pipeline.event(Some(client), EventKind::CancelRequested {});
        }
        let cancelled = format!("error: {}", ToolError::Cancelled);
        self.cancel_helpers(&cancelled);
        // The stopped call's result is the node its file changes name;
        // what it changed is recorded all the same.
        if let Some(mut r) = running {
            self.settle_stopped(&mut r);
            self.write_result_as(Some(r.node_id), (&r.id, &r.name), cancelled.clone(), true, None, Vec::new());
        }
        self.answer_unrun(&unanswered, &cancelled, None);
        let error = reason.map(|r| ("shutting_down".to_string(), r.to_string()));
        self.finish_tool_turn(message_id, MessageStatus::Cancelled, error);
        true
    }

    /// Parse-only: a client's result for one call.
    pub(super) fn on_tool_result(
        &mut self,
        params: forge_proto::params::ToolResultParams,
        client: ClientRef,
    ) -> Result<forge_proto::ToolResultAccepted, EngineError> {
        let forge_proto::params::ToolResultParams { call_id, output, is_error, .. } = params;
        let OperationState::AwaitingToolResults { pending, .. } = &mut self.state else {
            return Err(EngineError::new(
                ErrorKind::SessionBusy,
                "the session is not waiting for tool results (`forgectl ps` shows its state)",
            ));
        };
        let Some(i) = pending.iter().position(|c| c.id == call_id) else {
            let ids: Vec<&str> = pending.iter().map(|c| c.id.as_str()).collect();
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("no pending tool call `{call_id}`; waiting for: {}", ids.join(", ")),
            ));
        };
        let call = pending.remove(i);
        let remaining: Vec<String> = pending.iter().map(|c| c.id.clone()).collect();
        self.write_result(
            &call.id,
            &call.name,
            truncate_output(output, self.tool_limits().output_bytes),
            is_error,
            Some(client),
        );
        if remaining.is_empty()
            && let OperationState::AwaitingToolResults { message_id, iteration, .. } =
                std::mem::replace(&mut self.state, OperationState::Finishing)
        {
            self.apply_steers();
            let marker = self.pipeline.event(None, EventKind::StreamResumed { iteration: iteration + 1 });
            self.proceed_turn(message_id, Some(marker), iteration + 1);
        }
        Ok(forge_proto::ToolResultAccepted { session_id: self.row.id.clone(), call_id, remaining })
    }

    /// A client's decision for a session in `ToolRecovery`.
    pub(super) fn on_recover(
        &mut self,
        action: RecoverAction,
        client: Option<ClientRef>,
    ) -> Result<RecoverResult, EngineError> {
        let OperationState::ToolRecovery { message_id, calls } = &self.state else {
            return Err(EngineError::new(
                ErrorKind::SessionBusy,
                "the session is not waiting for a recovery decision (`forgectl ps` shows its state)",
            ));
        };
        let (message_id, calls) = (message_id.clone(), calls.clone());
        // A tool not offered now (an MCP server still starting) counts as
        // side-effecting: an interrupted call to it is never re-run.
        let side_effecting = |name: &str| self.tools.get(name).is_none_or(|t| t.is_side_effecting());
        let (rerun, not_rerun): (Vec<RecoveryCall>, Vec<RecoveryCall>) = match action {
            RecoverAction::Discard => (Vec::new(), calls),
            RecoverAction::Resume => calls.into_iter().partition(|c| !(c.interrupted && side_effecting(&c.name))),
        };
        let result = RecoverResult {
            session_id: self.row.id.clone(),
            rerun: rerun.iter().map(|c| c.call_id.clone()).collect(),
            not_rerun: not_rerun.iter().map(|c| c.call_id.clone()).collect(),
        };
        let unrun: Vec<(String, String)> = not_rerun.iter().map(|c| (c.call_id.clone(), c.name.clone())).collect();
        self.mark_cut_short(&not_rerun);
        match action {
            RecoverAction::Discard => {
                self.answer_unrun(
                    &unrun,
                    "error: discarded: forged stopped during this tool call and the user chose not to run it",
                    client,
                );
                self.finish_tool_turn(
                    message_id,
                    MessageStatus::Interrupted,
                    Some(("interrupted".into(), "tool calls discarded after forged stopped".into())),
                );
            }
            RecoverAction::Resume => {
                self.answer_unrun(
                    &unrun,
                    "error: interrupted: forged stopped while this call ran; it may have partly happened and was not run again",
                    client,
                );
                let records = rerun
                    .into_iter()
                    .map(|c| ToolCallRecord { id: c.call_id, name: c.name, arguments: c.arguments })
                    .collect();
                self.start_tool_loop(message_id, 0, records);
                self.checkpoint_awaiting();
                if let OperationState::ToolLoop(l) = &mut self.state {
                    l.helpers.resumed = true;
                }
            }
        }
        Ok(result)
    }

    /// Error results for calls that will not run.
    fn answer_unrun(&mut self, calls: &[(String, String)], output: &str, client: Option<ClientRef>) {
        for (id, name) in calls {
            // A call interrupted by a crash may have recorded file changes
            // against the node its result was to be.
            let node = self.interrupted_changes.remove(id);
            self.write_result_as(node, (id, name), output.to_string(), true, client.clone(), Vec::new());
        }
    }

    /// A tool result becomes history (a `tool` node, the head moves) and a
    /// `tool_result` event, in the next batch.
    fn write_result(&mut self, call_id: &str, name: &str, output: String, is_error: bool, client: Option<ClientRef>) {
        self.write_result_as(None, (call_id, name), output, is_error, client, Vec::new())
    }

    pub(super) fn write_result_as(
        &mut self,
        node_id: Option<String>,
        (call_id, name): (&str, &str),
        output: String,
        is_error: bool,
        client: Option<ClientRef>,
        images: Vec<forge_proto::ImageInfo>,
    ) {
        let id = node_id.unwrap_or_else(|| self.clock.new_id("m"));
        // Nothing a tool printed carries a secret into the history.
        let output = crate::redact::scrub(&output).into_owned();
        let info = ToolResultInfo { call_id: call_id.into(), name: name.into(), is_error };
        self.pipeline.op(StoreOp::InsertNode {
            id: id.clone(),
            session_id: self.row.id.clone(),
            parent_id: self.row.head_id.clone(),
            role: Role::Tool,
            text: output.clone(),
            status: MessageStatus::Complete,
            created_ms: self.clock.now_ms(),
            meta: NodeMeta {
                message: forge_proto::MessageMeta {
                    tool_result: Some(info),
                    images: images.clone(),
                    ..Default::default()
                },
                ..Default::default()
            },
        });
        self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(id.clone()) });
        self.row.head_id = Some(id.clone());
        self.path.push(
            ChatMessage::tool_result(call_id, output.clone(), is_error).with_images(images).with_node(id.clone()),
        );
        self.pipeline.event(
            client.clone(),
            EventKind::ToolResult { call_id: call_id.into(), name: name.into(), is_error, output },
        );
        self.pipeline.event(
            client,
            EventKind::ToolResultNode { node_id: id, call_id: call_id.into(), name: name.into(), is_error },
        );
    }

    pub(super) fn finish_tool_turn(
        &mut self,
        message_id: String,
        status: MessageStatus,
        error: Option<(String, String)>,
    ) {
        self.state = OperationState::Finishing;
        self.finish_turn_event(
            None,
            EventKind::TurnFinished {
                message_id,
                assistant_id: None,
                status,
                stop_reason: None,
                usage: None,
                error_kind: error.as_ref().map(|(k, _)| k.clone()),
                error: error.map(|(_, m)| m),
                recovered: None,
            },
        );
        self.pipeline.effect(OnDurable::TurnDone);
    }
}

/// `[tools.timeouts]`: shell commands, file operations, everything else;
/// the tool's own default where the config says nothing.
pub(super) fn timeout_for(tool: &dyn ToolExecutor, config: &crate::config::ForgeConfig) -> std::time::Duration {
    if let Some(own) = tool.own_timeout() {
        return own;
    }
    let t = config.tools.timeouts.as_ref();
    let secs = match tool.name() {
        "run_command" => t.and_then(|t| t.shell_commands_seconds),
        "read_file" | "write_file" | "edit" | "delete_file" | "apply_patch" | "glob" | "search" => {
            t.and_then(|t| t.file_operations_seconds)
        }
        _ => None,
    }
    .or_else(|| t.and_then(|t| t.default_seconds));
    secs.map(std::time::Duration::from_secs).unwrap_or_else(|| tool.timeout())
}

/// The sandbox for a session's tools, from `[tools.sandbox]`.
pub(crate) fn sandbox_for(row: &crate::store::SessionRow, config: &crate::config::ForgeConfig) -> Sandbox {
    let mut sandbox = Sandbox::for_session(std::path::Path::new(&row.cwd), &config.tools);
    // A git session's worktree lives in the repository's git directory
    // (`<git dir>/forge/worktrees/<id>`), whose objects and refs `git`
    // in a command reads.
    if let Some(dir) = git_dir_of(row) {
        sandbox.read_also(dir);
    }
    // A helper reads what its parent reads.
    for dir in row.helper.iter().flat_map(|h| &h.read_also) {
        sandbox.read_also(std::path::PathBuf::from(dir));
    }
    sandbox
}

/// A git session's git directory, which its worktree lives in.
pub(crate) fn git_dir_of(row: &crate::store::SessionRow) -> Option<std::path::PathBuf> {
    row.git.as_ref().and_then(|g| std::path::Path::new(&g.worktree).ancestors().nth(3)).map(|d| d.to_path_buf())
}
