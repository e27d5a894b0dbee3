//! A tool batch's data: the calls planned, the one running and the stage
//! it is at (what `tools.rs` and `call.rs` move it through).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use forge_proto::PendingApproval;
use serde_json::Value;

use crate::tools::{ToolError, ToolExecutor};

pub(crate) struct PlannedCall {
    pub id: String,
    pub name: String,
    /// What to run, or why it will not run.
    pub action: Result<(Arc<dyn ToolExecutor>, Value), ToolError>,
}

pub(crate) struct ToolLoop {
    pub message_id: String,
    pub iteration: u32,
    pub pending: VecDeque<PlannedCall>,
    /// The call announced with `tool_running` (and, once that is durable,
    /// run by the shell): it gets a result whatever happens.
    /// (Boxed: the call's stage and records are most of a tool loop.)
    pub running: Option<Box<RunningCall>>,
    /// Set while the batch waits for a user's decision.
    pub approval: Option<PendingApproval>,
    /// The session seq of `approval_requested`: the approval is shown
    /// (in `ps`, `approval.list`) only once that is durable.
    pub approval_seq: u64,
    /// The batch's `task` calls whose helpers run (see `helpers.rs`).
    pub helpers: Helpers,
    /// Git mode: the commit of the work so far, in flight (its job), and
    /// the one to make after it: the batch's next call waits for them
    /// (see `git_checkpoint.rs`).
    pub checkpoint: Option<(u64, Box<Checkpoint>)>,
    pub next_checkpoint: Option<Box<Checkpoint>>,
}

/// Git mode: a commit of a turn's work so far, when it stops for the user
/// (`awaiting_approval`) or the user answers (`approved`, `denied`).
pub(crate) struct Checkpoint {
    pub reason: &'static str,
    pub approval_id: String,
    pub approved: Vec<String>,
    pub denied: Vec<String>,
}

/// A tool batch's helper agents.
#[derive(Default)]
pub(crate) struct Helpers {
    pub running: Vec<HelperCall>,
    /// Approvals they wait on, shown as this session's (by helper).
    pub asks: Vec<(String, PendingApproval)>,
    /// The batch was resumed after a restart: a call's helper from before
    /// goes on (a new batch's calls always get new helpers, whatever
    /// their ids: a local server may number calls alike in every answer).
    pub resumed: bool,
    /// The family is past this session's budget: the one approval its
    /// clients see, and the helpers (by session) whose next request waits
    /// for the answer.
    pub budget: Option<(PendingApproval, Vec<String>)>,
    /// The family's requests in flight and waiting, against the budget.
    pub reserved: super::Reservations,
}

impl Helpers {
    /// A helper's call ended: it waits on the family's budget no more; the
    /// approval goes (its id returned) when no helper waits on it.
    pub fn stop_waiting(&mut self, child: Option<&str>) -> Option<String> {
        if let Some(child) = child {
            self.reserved.forget(child);
        }
        let (_, waiting) = self.budget.as_mut()?;
        waiting.retain(|w| Some(w.as_str()) != child);
        if !waiting.is_empty() {
            return None;
        }
        self.budget.take().map(|(a, _)| a.approval_id)
    }
}

/// A `task` call whose helper runs.
pub(crate) struct HelperCall {
    pub call_id: String,
    pub name: String,
    /// Its session, once started.
    pub child: Option<String>,
    /// The node its result will be.
    pub node_id: String,
}

impl ToolLoop {
    pub fn awaiting_approval(&self) -> bool {
        self.approval.is_some()
    }
}

/// A call about to run: its tool and arguments.
pub(crate) type Ready = (Arc<dyn ToolExecutor>, Value);

/// What was recorded of a call's files before it ran.
#[derive(Default)]
pub(crate) struct Before {
    /// The files it names (as recorded, and resolved).
    pub touched: Vec<(String, PathBuf)>,
    /// The roots were recorded before a command (the session's tracker
    /// holds that record), so what it changed can be told after it.
    pub scanned: bool,
}

/// Where the running call is.
pub(crate) enum CallStage {
    /// `tool_running` is written; the call starts once it is durable.
    Announced,
    PreHooks {
        job: u64,
        ready: Ready,
    },
    RecordingBefore {
        job: u64,
        ready: Ready,
        notes: Vec<String>,
        touched: Vec<(String, PathBuf)>,
    },
    /// The records are written; it runs once they are durable.
    Recorded {
        ready: Ready,
        notes: Vec<String>,
        before: Before,
    },
    Running {
        notes: Vec<String>,
        before: Before,
    },
    /// What it changed is read (and what it left that git would run
    /// undone) before any hook of the user's runs after it.
    RecordingAfter {
        job: u64,
        result: Result<String, ToolError>,
        notes: Vec<String>,
        /// A command's (its roots scanned), not a file tool's.
        scanned: bool,
    },
    PostHooks {
        job: u64,
        result: Result<String, ToolError>,
        notes: Vec<String>,
        changes: Vec<super::super::FileAfter>,
    },
    /// Between two stages (never seen outside a transition).
    Moving,
}

/// The call in progress (see `Effect::RunTool`).
pub(crate) struct RunningCall {
    pub id: String,
    pub name: String,
    /// Its arguments (for its hooks).
    pub args: Value,
    pub stage: CallStage,
    /// The node its result will be (changes to files are recorded against
    /// it before the result exists).
    pub node_id: String,
    /// Its live output (stdout, stderr), scrubbed across the pieces it
    /// comes in.
    pub scrubbers: [crate::redact::StreamScrubber; 2],
    /// How much live output it has printed (past `LIVE_OUTPUT_MAX`, no
    /// more is shown or journaled).
    pub live_bytes: usize,
    /// Images its result carries (an MCP server's), with their bytes:
    /// written with the result.
    pub images: Vec<(forge_proto::ImageInfo, Vec<u8>)>,
}

impl RunningCall {
    pub(crate) fn scrubber(&mut self, stream: &str) -> &mut crate::redact::StreamScrubber {
        &mut self.scrubbers[usize::from(stream == "stderr")]
    }
}
