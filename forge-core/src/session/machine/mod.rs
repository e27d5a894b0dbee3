//! The session as a state machine, free of I/O.
//!
//! A [`Session`] owns everything about one session that changes: its row,
//! the conversation path, the operation state, the queue and the journal
//! pipeline. The shell ([`super::actor`]) feeds it one [`Event`] at a time
//! through [`Session::handle`] and carries out the [`Effect`]s it hands
//! back: write a batch, publish a durable event, start or stop the provider
//! request, run or stop a tool, answer a caller, arm a timer, read the
//! store. Nothing here awaits, spawns, or touches a socket or the store, so
//! the tests (`tests.rs`) drive whole turns by feeding events. (The one
//! exception is the tools' own synchronous checks made while planning a
//! call: the sandbox resolving the working directory, and the diff an
//! `apply_patch` approval shows, which reads the files it would change.)
//!
//! Everything that happens goes through the [`Pipeline`]: ingested into the
//! outbox, cut into a numbered batch (`Effect::Write`), and applied and
//! published only with the writer's [`PersistedProof`] from its ack.
//!
//! - [`journal`]: batches, acks, applying what is durable, blocking.
//! - [`commands`]: what each client command does.
//! - [`turn`]: a turn's stream, from the user message to the answer.
//! - [`tools`]: the tool loop of a turn, approvals included.
//! - [`call`]: one tool call's stages; [`hooks`]: hooks as transitions.
//! - [`rewind`]: files put back, as the `Rewinding` state.
//! - [`recovery`]: what the store says was left unfinished.

mod active_files;
mod answer;
mod approvals;
mod budget;
pub(crate) mod call;
mod commands;
pub(crate) mod fork;
mod grants;
mod helpers;
pub(crate) use grants::TurnGrants;
pub(crate) use helpers::{HelperIn, HelperOut, HelperStart, NewHelper};
mod git_checkpoint;
pub(crate) mod git_commit;
pub(crate) mod git_held;
mod git_state;
mod history;
pub(crate) mod hooks;
mod images;
pub(crate) mod input;
mod journal;
mod mcp_wait;
mod model_params;
pub(crate) mod pipeline;
mod recovery;
mod replies;
mod requests;
mod retry;
pub(crate) mod rewind;
pub(crate) mod rewind_plan;
mod schema;
mod settle;
pub(crate) mod state;
mod steer;
mod summarize;
#[cfg(test)]
mod tests;
mod tool_offer;
mod tools;
mod tree;
mod turn;
mod web_search;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use forge_proto::OperationStateKind;
use tokio::sync::oneshot;

use self::pipeline::Pipeline;
use self::state::OperationState;
use super::{SessionCmd, Snapshot};
use crate::config::ForgeConfig;
use crate::error::EngineError;
use crate::journal::{HealthState, JournalAck, PersistedProof, WriteBatch};
use crate::provider::{ChatMessage, ChatRequest, ProviderEvent, ProviderSettings};
use crate::store::{QueuedRow, SessionRow};
use crate::tools::{ToolCtx, ToolError, ToolExecutor, ToolOutput, ToolRegistry};

pub(crate) use commands::check_session_name;
pub(crate) use history::chat_message;
pub(crate) use recovery::{Durable, RecoveredStream, RecoveryCause, Unfinished};
use replies::Responder;
pub(crate) use replies::{Answer, NameClaim, ReadyReply};
pub(crate) use state::fold_tool_call;
pub(crate) use tools::{git_dir_of, sandbox_for};

/// Provider events a burst may hold (see `Event::Provider`): the shell
/// takes no more before it looks at its other inputs again.
pub(crate) const MAX_INCOMING_EVENTS_PER_TICK: usize = 256;

/// A session with nothing to do lets go of its history after this long
/// (it is read again from the store for the next command).
const RELEASE_HISTORY_AFTER: Duration = Duration::from_secs(10);

/// Everything that can happen to a session, one at a time.
pub(crate) enum Event {
    /// A client's command.
    Command(SessionCmd),
    /// The history was read again for this command (after `Effect::ReadHistory`).
    HistoryRead { history: Result<Vec<ChatMessage>, EngineError>, then: SessionCmd },
    /// The session's tree, read for this tree command (after `Effect::ReadTree`).
    TreeRead { forest: Result<Box<crate::forest::Forest>, EngineError>, then: SessionCmd },
    /// The name a rename asked for, claimed or refused (after
    /// `Effect::ClaimName`).
    NameClaimed {
        claim: Result<NameClaim, EngineError>,
        client: forge_proto::ClientRef,
        reply: super::Reply<forge_proto::SessionInfo>,
    },
    /// Every handle is gone: shut down.
    Orphaned,
    /// The journal answered the batch in flight.
    Ack(JournalAck),
    /// The journal's health changed.
    Health(HealthState),
    /// Apply durable entries, a bounded number (while `has_work_to_apply`).
    Apply,
    /// Provider events as they came, in order (at most
    /// [`MAX_INCOMING_EVENTS_PER_TICK`]).
    Provider(Vec<ProviderEvent>),
    /// A piece of the running tool's output.
    ToolOutput(ToolOutput),
    /// The running tool ended; `rest` is output it left in the buffer.
    ToolDone { rest: Vec<ToolOutput>, end: ToolEnd, images: Vec<(forge_proto::ImageInfo, Vec<u8>)> },
    /// A job the shell ran (hooks, a tool call's records) is done.
    JobDone { job: u64, outcome: call::JobOutcome },
    /// A timer armed with `Effect::Arm` fired.
    Timer(Timer),
    /// What the store holds for this session (at start, and after `Effect::Reload`).
    Loaded { durable: Result<Box<Durable>, EngineError>, cause: RecoveryCause },
}

/// What the shell read again before a message (see `input.rs`).
pub(crate) struct Refresh {
    /// The system prompt and its instruction files, if the files changed.
    pub prompt: Option<(Arc<str>, Vec<String>)>,
    /// The tools, if an MCP server's changed.
    pub tools: Option<Arc<ToolRegistry>>,
    /// The agent types a `task` call may name, if they changed.
    pub agents: Option<Arc<[crate::agents::AgentType]>>,
    /// The hooks in force now (a project's settings may have changed).
    pub hooks: crate::hooks::HookSet,
    /// The MCP servers still starting, whose tools the turn waits for.
    pub starting: Vec<String>,
    /// The active files as they are now: their size, `None` when gone.
    pub active: Vec<(String, Option<u64>)>,
    /// Git mode: `core.hooksPath` inside the worktree, if set.
    pub git_hooks: Option<String>,
}

/// How a tool's run ended.
pub(crate) enum ToolEnd {
    Finished(Result<String, ToolError>),
    Panicked,
    /// Its task was stopped from outside.
    Stopped,
}

/// Something for the shell to do, in the order given.
pub(crate) enum Effect {
    /// Write this batch; its ack comes back as `Event::Ack`.
    Write { seq: u64, batch: WriteBatch },
    /// Show a durable event to followers. The proof says it is on disk.
    Publish { seq: u64, json: Arc<str>, proof: Arc<PersistedProof> },
    /// Start the provider request for the stream just opened; its events
    /// come back as `Event::Provider`.
    StartRequest(Box<(ProviderSettings, ChatRequest)>),
    /// Drop the provider request: the stream is sealed.
    StopRequest,
    /// Run a tool call; its output and end come back as `Event::ToolOutput`
    /// and `Event::ToolDone`.
    RunTool(Box<ToolRun>),
    /// Stop the running tool: its result is decided already.
    StopTool,
    /// Run hooks; their runs come back as `Event::JobDone`.
    RunHooks(Box<hooks::HookJob>),
    /// Record the files a call may change; back as `Event::JobDone`.
    RecordBefore(Box<call::RecordBefore>),
    /// Read what a call changed; back as `Event::JobDone`.
    RecordAfter(Box<call::RecordAfter>),
    /// Work out what a rewind does to the files; back as `Event::JobDone`.
    PlanRewind(Box<rewind::PlanRewind>),
    /// Write a rewind's files; back as `Event::JobDone`.
    RestoreFiles(Box<rewind::RestoreFiles>),
    /// Check files to make active; back as `Event::JobDone`.
    CheckFiles(Box<active_files::CheckJob>),
    /// Prepare a message (see `input.rs`); back as `Event::JobDone`.
    PrepareInput(Box<input::InputJob>),
    /// Git mode: write a finished turn's commit; back as `Event::JobDone`.
    CommitTurn(Box<git_commit::CommitJob>),
    /// Git mode: move the branch to a node's commit; back as `Event::JobDone`.
    MoveBranch(Box<git_commit::MoveJob>),
    /// Wait until the session's MCP servers are started, at most `limit`;
    /// back as `Event::JobDone` with the tools offered then.
    WaitForTools { job: u64, limit: Duration },
    /// Start, report to, cancel or hand a command to a helper agent's
    /// session (the daemon routes it).
    Helper(Box<HelperOut>),
    /// Answer a caller.
    Reply(ReadyReply),
    /// Answer a caller with what the store adds to the machine's answer
    /// (`session/answers.rs`).
    Answer(Box<Answer>),
    /// Check that no other session has the name, holding the daemon's
    /// name lock; back as `Event::NameClaimed`.
    ClaimName { name: Option<String>, client: forge_proto::ClientRef, reply: super::Reply<forge_proto::SessionInfo> },
    /// Send `Event::Timer` after this long (arming it again moves it).
    Arm(Timer, Duration),
    /// Read the history up to `head` from the store, then handle the
    /// command (`Event::HistoryRead`).
    ReadHistory { head: Option<String>, then: SessionCmd },
    /// Read the session's tree, then handle the tree command
    /// (`Event::TreeRead`).
    ReadTree { then: SessionCmd },
    /// Read the durable state again, the journal being writable after a
    /// block (`Event::Loaded`); `row` is the session as last known.
    Reload { row: Box<SessionRow>, cause: RecoveryCause },
}

/// The session's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Quiet long enough to let go of the history.
    ReleaseHistory,
    /// Time to try the provider request again.
    Retry,
    /// Time to try the summary request again.
    SummaryRetry,
}

/// What a file holds after a tool call (see `ToolRun::record`): its path
/// as recorded, its state (hash and mode, `None`: absent), and its content
/// when the blob store does not have it yet.
pub(crate) struct FileAfter {
    pub path: String,
    pub after: crate::rewind::FileState,
    pub data: Option<Vec<u8>>,
}

/// A tool call to run, with everything it runs with.
pub(crate) struct ToolRun {
    pub tool: Arc<dyn ToolExecutor>,
    pub args: serde_json::Value,
    /// The shell adds the output channel.
    pub ctx: ToolCtx,
    pub timeout: Duration,
    /// The shell gives the call the session's library (the store's
    /// facts, see `librarian.rs`).
    pub library: bool,
}

/// What to do once a batch is durable: the continuations the pipeline
/// keeps with the batch.
enum OnDurable {
    /// Answer a command's caller.
    Reply(Responder),
    /// Answer a command's caller with the session's info as it is then.
    Info(super::Reply<forge_proto::SessionInfo>, Option<NameClaim>),
    /// The finished turn is durable: go idle and start the next queued one.
    TurnDone,
    /// Recovery is durable: start the next queued message, if idle.
    StartQueued,
    /// The session's removal is durable: stop.
    Removed,
    /// The last tool step is durable: take the next one.
    NextTool,
    /// `tool_running` for this call is durable: run it.
    RunTool(state::PlannedCall),
    /// The running call's records are durable: run it.
    Launch,
    /// A rewind's intent is durable: move the files.
    Restore,
    /// What a helper needs is durable: ask the daemon for it.
    Helper(Box<HelperOut>),
}

/// `session.send` with `n` > 1: the answers still to ask for, and the
/// sibling answers given so far (the last one given is on the path).
struct Completions {
    left: u32,
    answers: Vec<String>,
}

enum Exit {
    Removed,
    Shutdown(Vec<oneshot::Sender<()>>),
}

/// Whether the conversation is in memory.
enum History {
    /// Held; `release_armed` once the quiet timer runs.
    Held { release_armed: bool },
    /// Let go of while quiet; read again before the next command.
    Released,
}

pub(crate) struct Session {
    config: Arc<ForgeConfig>,
    tools: Arc<ToolRegistry>,
    row: SessionRow,
    /// The conversation on the current path, as sent to the provider.
    path: Vec<ChatMessage>,
    history: History,
    state: OperationState,
    queue: VecDeque<QueuedRow>,
    /// Text for the running turn (`session.steer`), joined at its next
    /// safe point (see `steer.rs`).
    steers: VecDeque<QueuedRow>,
    /// The running turn's answer must validate against a schema.
    schema: Option<schema::SchemaTurn>,
    /// What the running turn's command grants it (see `grants.rs`).
    grants: grants::TurnGrants,
    pipeline: Pipeline<OnDurable>,
    /// What the model last read or wrote of each file (stale-file checks).
    file_hashes: crate::tools::FileHashes,
    exit: Option<Exit>,
    /// The system prompt, rendered when the session started: the same
    /// bytes on every request, so prompt caches hit.
    system_prompt: Arc<str>,
    /// The project instruction files in the system prompt.
    instruction_files: Vec<String>,
    /// The bytes the tool definitions add to every request (they do not
    /// change during a session), for sizing its output.
    tools_bytes: usize,
    /// The model's window is too small for every tool definition: only
    /// the core tools are offered (see `size_tools`).
    core_tools_only: bool,
    /// Why the history could not be read for the command being handled.
    unreadable: Option<EngineError>,
    /// Tokens and estimated cost of the session's responses so far.
    spent: forge_proto::UsageTotal,
    /// Token estimates, calibrated by what the provider counts.
    estimator: crate::context::TokenEstimator,
    /// Fallbacks taken and model notices given (see `model_params.rs`).
    models: model_params::ModelChoice,
    /// The session's summaries (what requests send in place of spans).
    summaries: Vec<crate::context::Summary>,
    /// Which summary requests use: the newest that applies (`None`), or,
    /// after a switch to a larger window restored spans, the one chosen
    /// then (`Some(None)`: the original messages).
    in_force: Option<Option<String>>,
    /// The input tokens the provider counted for the last request.
    last_input_tokens: Option<u64>,
    /// Calls a crash interrupted after they recorded file changes: call id
    /// to the node their result is to be.
    interrupted_changes: std::collections::HashMap<String, String>,
    /// That request, to size the next one from its count.
    anchor: Option<crate::context::Anchor>,
    /// What the session had cost when a user last confirmed going past
    /// its budget (see `budget.rs`).
    budget_confirmed_at: Option<f64>,
    /// A helper's next request was allowed by its family's root (see
    /// `budget.rs`): it is made without asking again.
    family_go: bool,
    /// A user denied the family's budget approval during this batch: the
    /// turn's next request does not ask again, it ends.
    family_denied: bool,
    /// The running turn asks for several answers (`session.send` `n`).
    completions: Option<Completions>,
    /// Messages on their way in (see `input.rs`).
    inputs: input::Inputs,
    /// The hooks in force (read again before each message).
    hooks: crate::hooks::HookSet,
    /// Git mode: the worktree's `core.hooksPath` (read with the hooks).
    git_hooks: Option<String>,
    /// The agent types a `task` call may name (read with the tools).
    agents: Arc<[crate::agents::AgentType]>,
    /// MCP servers still starting when the last message came (the turn
    /// it begins waits for them).
    mcp_starting: Vec<String>,
    /// Messages whose `UserPromptSubmit` hooks run (the first) or wait.
    submissions: VecDeque<hooks::Submission>,
    /// A new session's `SessionStart` hooks, running.
    starting: Option<hooks::Starting>,
    /// What `SessionStart` hooks added, for the first message.
    start_context: Option<String>,
    /// Stop hooks sent the model on this many times in a row.
    stop_chain: u32,
    /// How the turn being finished ended (for its `Stop` hooks).
    finished: Option<forge_proto::MessageStatus>,
    /// The user message that started it (git mode commits it).
    finished_turn: Option<String>,
    /// Files the running turn's commands wrote that run later (git mode).
    run_later: git_held::RunLaterWritten,
    /// The last job id given out.
    next_job: u64,
    /// Stopped calls whose changes are being read (see `settle.rs`).
    settling: Vec<settle::Settling>,
    /// A helper agent's session: what it told its parent.
    as_helper: helpers::AsHelper,
    /// Effects of the event being handled.
    out: Vec<Effect>,
    /// The time and the ids of what the session writes.
    clock: crate::ids::Clock,
}

impl Session {
    /// A session as its row says, before its durable state is loaded
    /// (`Event::Loaded`).
    pub(crate) fn new(
        config: Arc<ForgeConfig>,
        tools: Arc<ToolRegistry>,
        row: SessionRow,
        system_prompt: Arc<str>,
        clock: crate::ids::Clock,
    ) -> Self {
        let margin = config.context.estimate_margin_percent.unwrap_or(crate::context::DEFAULT_ESTIMATE_MARGIN);
        let mut session = Session {
            config,
            tools,
            pipeline: Pipeline::new(row.id.clone(), row.last_seq),
            row,
            path: Vec::new(),
            history: History::Held { release_armed: false },
            state: OperationState::Idle,
            queue: VecDeque::new(),
            steers: VecDeque::new(),
            schema: None,
            grants: Default::default(),
            file_hashes: Default::default(),
            exit: None,
            system_prompt,
            instruction_files: Vec::new(),
            tools_bytes: 0,
            core_tools_only: false,
            unreadable: None,
            spent: Default::default(),
            estimator: crate::context::TokenEstimator::with_margin(margin),
            models: Default::default(),
            summaries: Vec::new(),
            in_force: None,
            last_input_tokens: None,
            interrupted_changes: Default::default(),
            anchor: None,
            budget_confirmed_at: None,
            family_go: false,
            family_denied: false,
            completions: None,
            inputs: Default::default(),
            hooks: Default::default(),
            git_hooks: None,
            agents: Arc::from(Vec::new()),
            mcp_starting: Vec::new(),
            submissions: VecDeque::new(),
            starting: None,
            start_context: None,
            stop_chain: 0,
            finished: None,
            finished_turn: None,
            run_later: Default::default(),
            next_job: 0,
            settling: Vec::new(),
            as_helper: Default::default(),
            out: Vec::new(),
            clock,
        };
        session.size_tools();
        session
    }

    /// What each event does: the one place the session dispatches. The
    /// effects are appended to `effects`, for the shell to carry out.
    pub(crate) fn handle(&mut self, event: Event, effects: &mut Vec<Effect>) {
        match event {
            Event::Command(cmd) => self.take_command(cmd),
            Event::HistoryRead { history, then } => {
                match history {
                    Ok(path) => {
                        self.path = path;
                        self.history = History::Held { release_armed: false };
                    }
                    Err(e) => self.unreadable = Some(e),
                }
                self.on_command(then);
                self.unreadable = None;
            }
            Event::TreeRead { forest, then } => self.on_tree_read(forest, then),
            Event::NameClaimed { claim, client, reply } => match (claim, self.admit(reply, commands::Access::Write)) {
                (_, None) => {}
                (Ok(claim), Some(reply)) => self.on_rename(claim, client, reply),
                (Err(e), Some(reply)) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
            },
            Event::Orphaned => self.begin_shutdown(None),
            Event::Ack(ack) => self.on_ack(ack),
            Event::Health(state) => self.on_health(state),
            Event::Apply => self.apply_persisted(),
            Event::Provider(burst) => {
                for ev in burst {
                    self.on_provider(ev);
                }
            }
            Event::ToolOutput(out) => self.on_tool_output(out),
            Event::ToolDone { rest, end, images } => {
                // Output still buffered comes before the result.
                for out in rest {
                    self.on_tool_output(out);
                }
                if let state::OperationState::ToolLoop(l) = &mut self.state
                    && let Some(r) = &mut l.running
                {
                    r.images = images;
                }
                self.on_tool_done(end);
            }
            Event::JobDone { job, outcome } => self.on_job_done(job, outcome),
            Event::Timer(Timer::ReleaseHistory) => self.release_history(),
            Event::Timer(Timer::Retry) => self.retry_request(),
            Event::Timer(Timer::SummaryRetry) => self.retry_summary(),
            Event::Loaded { durable, cause } => self.on_loaded(durable, cause),
        }
        self.mirror_approval();
        self.cut_batch();
        self.arm_release();
        effects.append(&mut self.out);
    }

    /// A command, once the history it may need is held. Stopping needs
    /// none: a daemon shutting down does not read every quiet session's
    /// back from the store.
    fn take_command(&mut self, cmd: SessionCmd) {
        if matches!(self.history, History::Released) && !matches!(cmd, SessionCmd::Shutdown { .. }) {
            return self.out.push(Effect::ReadHistory { head: self.row.head_id.clone(), then: cmd });
        }
        self.on_command(cmd);
    }

    /// The agent types a `task` call may name from now on.
    pub(crate) fn set_agents(&mut self, agents: Arc<[crate::agents::AgentType]>) {
        self.agents = agents;
    }

    /// The hooks in force from now on.
    pub(crate) fn set_hooks(&mut self, hooks: crate::hooks::HookSet) {
        self.hooks = hooks;
    }

    /// What list and show report without asking the session.
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: match self.state.kind() {
                OperationStateKind::Summarizing if !self.queue.is_empty() => OperationStateKind::SummarizingWithQueued,
                OperationStateKind::SummarizationRetry if !self.queue.is_empty() => {
                    OperationStateKind::SummarizationRetryWithQueued
                }
                kind => kind,
            },
            queued: (self.queue.len() + self.steers.len()) as u32,
            last_seq: self.pipeline.applied_seq(),
            approval: match &self.state {
                OperationState::ToolLoop(l) if self.pipeline.applied_seq() >= l.approval_seq => l
                    .approval
                    .clone()
                    .or_else(|| l.helpers.budget.as_ref().map(|(a, _)| a.clone()))
                    .or_else(|| l.helpers.asks.first().map(|(_, a)| a.clone())),
                OperationState::AwaitingBudget { approval, approval_seq, .. }
                    if self.pipeline.applied_seq() >= *approval_seq =>
                {
                    Some(approval.clone())
                }
                OperationState::AwaitingHeld(w) if self.pipeline.applied_seq() >= w.approval_seq => {
                    Some(w.approval.clone())
                }
                _ => None,
            },
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.row.id
    }

    /// The session's provider and model.
    pub(crate) fn provider_model(&self) -> (&str, &str) {
        (&self.row.provider, &self.row.model)
    }

    /// How it runs, if it is a helper agent's session.
    pub(crate) fn helper(&self) -> Option<&crate::store::HelperSpec> {
        self.row.helper.as_ref()
    }

    /// The session's row as the machine keeps it.
    pub(crate) fn row(&self) -> &SessionRow {
        &self.row
    }

    pub(crate) fn cwd(&self) -> &str {
        &self.row.cwd
    }

    /// Its active files as they are now: their size, `None` when gone.
    pub(crate) fn active_files_now(&self) -> Vec<(String, Option<u64>)> {
        let paths: Vec<String> = self.row.active_files.iter().map(|f| f.path.clone()).collect();
        active_files::sizes(&self.row.cwd, &paths)
    }

    pub(crate) fn set_instruction_files(&mut self, files: Vec<String>) {
        self.instruction_files = files;
    }

    /// Durable entries wait to be applied (`Event::Apply`).
    pub(crate) fn has_work_to_apply(&self) -> bool {
        self.pipeline.has_work_to_apply()
    }

    /// A batch is written and not yet acknowledged.
    pub(crate) fn has_in_flight(&self) -> bool {
        self.pipeline.has_in_flight()
    }

    /// Asked to stop: no more commands are taken.
    pub(crate) fn is_exiting(&self) -> bool {
        self.exit.is_some()
    }

    /// Asked to stop and done: everything is durable (or can never be).
    pub(crate) fn is_done(&self) -> bool {
        self.exit.is_some() && ((self.pipeline.is_idle() && !self.is_settling()) || self.is_blocked())
    }

    /// Stopped because it was removed (its records gone).
    pub(crate) fn is_removed(&self) -> bool {
        matches!(self.exit, Some(Exit::Removed))
    }

    /// Who waits for the session to have stopped.
    pub(crate) fn into_shutdown_replies(self) -> Vec<oneshot::Sender<()>> {
        match self.exit {
            Some(Exit::Shutdown(replies)) => replies,
            _ => Vec::new(),
        }
    }

    fn is_blocked(&self) -> bool {
        matches!(self.state, OperationState::PersistenceBlocked { .. })
    }

    // ----- history held in memory -----

    /// Nothing running, waiting or being written: the history is not
    /// needed until the next command.
    fn is_quiet(&self) -> bool {
        matches!(self.state, OperationState::Idle)
            && self.queue.is_empty()
            && self.steers.is_empty()
            && self.submissions.is_empty()
            && self.inputs.is_idle()
            && self.starting.is_none()
            && self.pipeline.is_idle()
            && !self.is_settling()
            && self.exit.is_none()
    }

    /// Arms the quiet timer once the session has nothing to do.
    fn arm_release(&mut self) {
        if let History::Held { release_armed: false } = self.history
            && self.is_quiet()
        {
            self.history = History::Held { release_armed: true };
            self.out.push(Effect::Arm(Timer::ReleaseHistory, RELEASE_HISTORY_AFTER));
        }
    }

    /// Lets go of the conversation held for the next request: a daemon
    /// that has streamed for hours must not keep every session's whole
    /// history in memory. The store has it.
    fn release_history(&mut self) {
        if !matches!(self.history, History::Held { .. }) {
            return;
        }
        if !self.is_quiet() {
            self.history = History::Held { release_armed: false };
            return;
        }
        self.path = Vec::new();
        self.history = History::Released;
        tracing::debug!(session = %self.row.id, "quiet: released the history held in memory");
    }
}
