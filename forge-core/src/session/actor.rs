//! The session's shell: one task per live session, carrying out what its
//! [`Session`] machine decides. Shaped like rust-analyzer's main loop:
//! [`SessionActor::next_event`] waits for the next input, most urgent
//! first; [`SessionActor::handle`] gives it to the machine and carries out
//! the effects it hands back. This is the only place a session does I/O:
//! the journal, its followers, the provider request, tool tasks, timers
//! and store reads.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use forge_proto::{JournalHealth, OperationStateKind};
use futures::{FutureExt, StreamExt};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use super::machine::{
    Effect, Event, FileAfter, MAX_INCOMING_EVENTS_PER_TICK, RecoveryCause, Session, Timer, ToolEnd, ToolRun,
};
use super::{COMMAND_QUEUE, SessionCmd, SessionHandle, Snapshot, load};
use crate::engine::Shared;
use crate::error::EngineError;
use crate::hooks::HookRun;
use crate::instructions::ProjectInstructions;
use crate::journal::{HealthState, JournalAck, PersistedProof, WriteBatch};
use crate::provider::{ProviderError, ProviderEvent, ProviderStream};
use crate::store::SessionRow;
use crate::tools::{ToolError, ToolOutput};

/// Subscribers may fall this many events behind before they are told they
/// lagged and re-read from the store.
const BROADCAST_CAPACITY: usize = 1024;

/// Output pieces buffered between a running tool and the session; a tool
/// that outruns it loses live pieces, never its result.
const TOOL_OUTPUT_CHANNEL: usize = 256;

/// How long after an inline write the writer is asked to move it into
/// SQLite (well after the event reached every client).
const APPLY_DELTAS_AFTER: Duration = Duration::from_millis(2);

/// A session quiet this long commits its next batch itself if the journal
/// writer is idle (see `write`).
const QUIET_FOR_INLINE_COMMIT: Duration = Duration::from_micros(800);

pub(crate) struct SessionActor {
    shared: Arc<Shared>,
    session: Session,
    /// The session's system prompt before the project instructions.
    template: String,
    /// The project instruction files the prompt holds, to notice changes.
    instructions: ProjectInstructions,
    /// The MCP servers' state the session's tools were taken from.
    tools_version: u64,
    /// The machine's effects, carried out in order (kept to reuse).
    effects: Vec<Effect>,
    /// Events effects brought back, handled before the next wake-up.
    brought_back: VecDeque<Event>,
    commands: mpsc::Receiver<SessionCmd>,
    acks_tx: mpsc::Sender<JournalAck>,
    acks: mpsc::Receiver<JournalAck>,
    health: watch::Receiver<HealthState>,
    events: super::live::Publisher,
    snapshot: watch::Sender<Snapshot>,
    /// The provider request of the stream in progress, polled here.
    request: Option<Request>,
    tool: Option<RunningTool>,
    /// The session's roots as last scanned around a command (see
    /// `snapshot.rs`).
    baseline: Arc<std::sync::Mutex<crate::snapshot::Manifest>>,
    timers: Timers,
    /// When the last batch was handed to the journal.
    last_batch_at: Instant,
    /// When to have the writer move this session's inline-acked events
    /// from its delta log into SQLite: shortly after, not while the event
    /// is still on its way to clients. One timer, set when a write goes
    /// inline and it is not already running.
    apply_deltas_at: Pin<Box<tokio::time::Sleep>>,
    apply_deltas_armed: bool,
}

/// What wakes the shell: one at a time, never stored, so its size does
/// not matter.
#[allow(clippy::large_enum_variant)]
enum Wake {
    /// Something for the session.
    Event(Event),
    /// Time to have the writer move the delta log into SQLite.
    ApplyDeltas,
}

/// A tool call running in its own task.
/// A tool task's end: its result, the files it changed, the hooks run.
type ToolOutcome = (Result<String, ToolError>, Vec<FileAfter>, Vec<HookRun>);

struct RunningTool {
    task: JoinHandle<ToolOutcome>,
    output: mpsc::Receiver<ToolOutput>,
}

/// The `PreToolUse` and `PostToolUse` hooks of one call.
struct ToolHooks {
    pre: Vec<crate::hooks::Hook>,
    post: Vec<crate::hooks::Hook>,
    session_id: String,
    cwd: String,
}

/// The provider's stream. The mutex is never locked (the shell has `&mut`):
/// it only makes the shell `Sync`.
struct Request(std::sync::Mutex<ProviderStream>);

impl SessionActor {
    /// Loads a session from the store, recovers what it left unfinished,
    /// and starts its task.
    pub(crate) async fn spawn(shared: Arc<Shared>, row: SessionRow) -> Result<SessionHandle, EngineError> {
        let (tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let snap = Snapshot { state: OperationStateKind::Idle, queued: 0, last_seq: row.last_seq, approval: None };
        let (snapshot, snapshot_rx) = watch::channel(snap);
        let handle = SessionHandle {
            id: row.id.clone(),
            tx,
            events: events.downgrade(),
            taps: Arc::default(),
            snapshot: snapshot_rx,
            attached: Arc::new(AtomicU32::new(0)),
        };
        let health = shared.writer.watch_health();
        let journal = health.borrow().clone();
        let blocked = journal.health == JournalHealth::Blocked;
        let durable = load::durable(&shared, row.clone(), !blocked).await?;
        // One batch in flight at a time: room for its ack and a stray one.
        let (acks_tx, acks) = mpsc::channel(4);
        let env = crate::prompt::PromptEnv::detect(&row.cwd, &shared.config, &shared.tools, crate::ids::now_ms());
        let template = shared.prompt.render(&env);
        let instructions = ProjectInstructions::load(Path::new(&row.cwd), &shared.config);
        let system_prompt: Arc<str> = format!("{template}{}", instructions.text).into();
        let tools_version = shared.mcp.version();
        let tools = shared.tools_for(&row.id);
        let mut session = Session::new(shared.config.clone(), tools, row, system_prompt);
        session.set_instruction_files(instructions.files());
        let mut actor = SessionActor {
            session,
            template,
            instructions,
            tools_version,
            shared,
            effects: Vec::new(),
            brought_back: VecDeque::new(),
            commands,
            acks_tx,
            acks,
            health,
            events: super::live::Publisher { events, taps: handle.taps.clone() },
            snapshot,
            request: None,
            tool: None,
            baseline: Default::default(),
            timers: Timers::default(),
            last_batch_at: Instant::now(),
            apply_deltas_at: Box::pin(tokio::time::sleep(APPLY_DELTAS_AFTER)),
            apply_deltas_armed: false,
        };
        if blocked {
            actor.handle(Event::Health(journal)).await;
        }
        actor.handle(Event::Loaded { durable: Ok(Box::new(durable)), cause: RecoveryCause::Restart }).await;
        // Recovery is durable before anyone can read this session.
        actor.settle().await;
        // Whoever looks next sees the recovered state, not the initial Idle.
        actor.publish_snapshot();
        tokio::spawn(actor.run());
        Ok(handle)
    }

    async fn run(mut self) {
        loop {
            self.publish_snapshot();
            if self.session.is_done() {
                break;
            }
            match self.next_event().await {
                Wake::Event(event) => {
                    // A new turn sends the project's instructions as they are now.
                    // and the MCP servers' tools as they are now.
                    if matches!(event, Event::Command(super::SessionCmd::Send { .. })) {
                        self.refresh_instructions().await;
                        self.refresh_tools();
                    }
                    self.handle(event).await
                }
                Wake::ApplyDeltas => {
                    self.apply_deltas_armed = false;
                    self.shared.writer.apply_soon();
                }
            }
        }
        for reply in self.session.into_shutdown_replies() {
            let _ = reply.send(());
        }
    }

    /// Waits for the next thing to happen, most urgent first: durable
    /// entries to apply, journal acks and health, commands, timers (the
    /// session's, and the shell's own for the delta log), then the running
    /// tool and the provider.
    async fn next_event(&mut self) -> Wake {
        if self.session.has_work_to_apply() {
            return Wake::Event(Event::Apply);
        }
        let event = tokio::select! {
            biased;
            Some(ack) = self.acks.recv() => Event::Ack(ack),
            Ok(()) = self.health.changed() => Event::Health(self.health.borrow_and_update().clone()),
            cmd = self.commands.recv(), if !self.session.is_exiting() => match cmd {
                Some(cmd) => Event::Command(cmd),
                None => Event::Orphaned,
            },
            timer = self.timers.next() => Event::Timer(timer),
            () = &mut self.apply_deltas_at, if self.apply_deltas_armed => return Wake::ApplyDeltas,
            event = tool_event(&mut self.tool) => event,
            first = next_provider_event(&mut self.request) => Event::Provider(self.burst(first)),
        };
        Wake::Event(event)
    }

    /// Gives `event` to the session and carries out its effects, and the
    /// events those bring back at once (an inline write's ack, a store
    /// read), until none is left.
    async fn handle(&mut self, event: Event) {
        let mut event = Some(event);
        while let Some(next) = event.take().or_else(|| self.brought_back.pop_front()) {
            let mut effects = std::mem::take(&mut self.effects);
            self.session.handle(next, &mut effects);
            for effect in effects.drain(..) {
                if let Some(back) = self.execute(effect).await {
                    self.brought_back.push_back(back);
                }
            }
            self.effects = effects;
        }
    }

    /// Takes the MCP servers' tools again if they changed.
    fn refresh_tools(&mut self) {
        let version = self.shared.mcp.version();
        if version != self.tools_version {
            self.tools_version = version;
            self.session.set_tools(self.shared.tools_for(self.session.id()));
        }
    }

    /// Reads the project instruction files again if they changed since the
    /// prompt was made; the session gets the new prompt before the turn.
    async fn refresh_instructions(&mut self) {
        let cwd = PathBuf::from(self.session.cwd());
        if !self.instructions.changed(&cwd, &self.shared.config) {
            return;
        }
        self.instructions = ProjectInstructions::load(&cwd, &self.shared.config);
        let prompt: Arc<str> = format!("{}{}", self.template, self.instructions.text).into();
        let files = self.instructions.files();
        self.handle(Event::SystemPrompt { prompt, instruction_files: files }).await;
    }

    /// Carries out one effect; some bring an event back at once.
    async fn execute(&mut self, effect: Effect) -> Option<Event> {
        match effect {
            Effect::Write { seq, batch } => return self.write(seq, batch).await,
            Effect::Publish { seq, json, proof } => self.publish(seq, json, &proof),
            Effect::StartRequest(request) => {
                let (settings, request) = *request;
                let stream = self.shared.providers.stream(settings, request);
                self.request = Some(Request(std::sync::Mutex::new(stream)));
            }
            Effect::StopRequest => self.request = None,
            Effect::RunTool(mut run) => {
                // `recall` searches the store, which the machine never sees.
                if run.tool.name() == "recall" {
                    run.ctx.library = Some(Arc::new(crate::librarian::SessionLibrary {
                        store: self.shared.store.clone(),
                        session: self.session.id().to_string(),
                    }));
                }
                let recorder = Recorder {
                    writer: self.shared.writer.clone(),
                    session_id: self.session.id().to_string(),
                    baseline: self.baseline.clone(),
                };
                // One call at a time; a task left over would only leak.
                // Read now: a project's Claude settings may have changed.
                let cwd = run.ctx.sandbox.cwd();
                let trusted = self.shared.trust.state(cwd).trusted();
                let (set, problems) = crate::hooks::HookSet::for_session(&self.shared.config.hooks, cwd, trusted);
                for p in problems {
                    tracing::warn!(session = self.session.id(), "hooks: {p}");
                }
                let name = run.tool.name().to_string();
                let hooks = ToolHooks {
                    pre: set.matching(crate::hooks::HookEvent::PreToolUse, Some(&name)),
                    post: set.matching(crate::hooks::HookEvent::PostToolUse, Some(&name)),
                    session_id: self.session.id().to_string(),
                    cwd: run.ctx.sandbox.cwd().display().to_string(),
                };
                if let Some(old) = self.tool.replace(spawn_tool(*run, recorder, hooks)) {
                    old.task.abort();
                }
            }
            Effect::StopTool => {
                if let Some(tool) = self.tool.take() {
                    tool.task.abort();
                }
            }
            Effect::Reply(answer) => answer.send(),
            Effect::Arm(timer, after) => self.timers.arm(timer, after),
            Effect::ReadHistory { head, then } => {
                let history = load::history(&self.shared.store, head.as_deref()).await;
                return Some(Event::HistoryRead { history, then });
            }
            Effect::ReadTree { then } => {
                let forest = self
                    .shared
                    .store
                    .tree(self.session.id())
                    .await
                    .map(|rows| Box::new(crate::forest::Forest::new(rows)))
                    .map_err(EngineError::from);
                return Some(Event::TreeRead { forest, then });
            }
            Effect::Reload { row, cause } => {
                self.shared.writer.sync().await;
                let durable = load::durable(&self.shared, *row, true).await.map(Box::new);
                return Some(Event::Loaded { durable, cause });
            }
        }
        None
    }

    /// Writes everything pending and applies it (at start-up).
    async fn settle(&mut self) {
        loop {
            if self.session.has_work_to_apply() {
                self.handle(Event::Apply).await;
                continue;
            }
            if !self.session.has_in_flight() {
                break;
            }
            match self.acks.recv().await {
                Some(ack) => self.handle(Event::Ack(ack)).await,
                None => break,
            }
        }
    }

    /// Hands a batch to the journal. After a pause, latency matters more
    /// than batching: it is committed here if the writer is idle, saving
    /// two thread wake-ups, and its ack comes back at once. A steady
    /// stream goes through the writer thread instead, which commits while
    /// the session parses and folds what arrives meanwhile into one batch.
    async fn write(&mut self, seq: u64, batch: WriteBatch) -> Option<Event> {
        tracing::trace!(session = %self.session.id(), batch = seq, ops = batch.ops.len(), "journal write");
        let now = Instant::now();
        let quiet = now.duration_since(self.last_batch_at) >= QUIET_FOR_INLINE_COMMIT;
        self.last_batch_at = now;
        let batch = if quiet {
            match self.shared.writer.try_write_inline(seq, batch) {
                Ok(ack) => {
                    if !self.apply_deltas_armed {
                        self.apply_deltas_armed = true;
                        self.apply_deltas_at.as_mut().reset(tokio::time::Instant::now() + APPLY_DELTAS_AFTER);
                    }
                    return Some(Event::Ack(ack));
                }
                Err(batch) => batch,
            }
        } else {
            batch
        };
        self.shared.writer.submit(seq, batch, &self.acks_tx).await;
        None
    }

    /// Shows an event to subscribers. Demands the writer's proof that the
    /// event is durable: nothing reaches a client before it is on disk.
    fn publish(&self, seq: u64, json: Arc<str>, _proof: &PersistedProof) {
        self.events.publish(seq, json);
    }

    fn publish_snapshot(&self) {
        let snap = self.session.snapshot();
        self.snapshot.send_if_modified(|old| {
            if *old != snap {
                *old = snap;
                true
            } else {
                false
            }
        });
    }

    /// The provider events that are ready after `first`, up to the burst
    /// limit: commands and acks are never stuck behind a flood of deltas.
    fn burst(&mut self, first: Option<ProviderEvent>) -> Vec<ProviderEvent> {
        let ended = || ProviderEvent::Error(ProviderError::internal("the provider stream ended without a result"));
        let Some(first) = first else {
            self.request = None;
            return vec![ended()];
        };
        let last = |ev: &ProviderEvent| matches!(ev, ProviderEvent::Done | ProviderEvent::Error(_));
        let mut burst = vec![first];
        let Some(Request(stream)) = self.request.as_mut() else { return burst };
        let stream = stream.get_mut().unwrap_or_else(|p| p.into_inner());
        while burst.len() < MAX_INCOMING_EVENTS_PER_TICK && !burst.last().is_some_and(last) {
            match stream.next().now_or_never() {
                Some(Some(ev)) => burst.push(ev),
                Some(None) => {
                    burst.push(ended());
                    self.request = None;
                    break;
                }
                None => break,
            }
        }
        burst
    }
}

/// The provider stream's next event (`None`: it ended).
async fn next_provider_event(request: &mut Option<Request>) -> Option<ProviderEvent> {
    match request {
        Some(Request(stream)) => stream.get_mut().unwrap_or_else(|p| p.into_inner()).next().await,
        None => std::future::pending().await,
    }
}

/// Where a tool call's file changes are recorded.
struct Recorder {
    writer: crate::journal::JournalWriter,
    session_id: String,
    baseline: Arc<std::sync::Mutex<crate::snapshot::Manifest>>,
}

/// Most content stored in one write while scanning.
const SCAN_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Scans the roots (reusing `known` where files did not change), every
/// content read stored durably before this returns.
async fn scan_and_store(
    recorder: &Recorder,
    sandbox: &crate::tools::Sandbox,
    known: crate::snapshot::Manifest,
) -> Result<crate::snapshot::Manifest, ScanFailure> {
    let writer = recorder.writer.clone();
    let sandbox = sandbox.clone();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut batch: Vec<crate::journal::StoreOp> = Vec::new();
        let mut bytes = 0;
        let mut failed: Option<String> = None;
        let flush = |batch: &mut Vec<crate::journal::StoreOp>, failed: &mut Option<String>| {
            if batch.is_empty() || failed.is_some() {
                return;
            }
            let ops = std::mem::take(batch);
            if let Err(e) = rt.block_on(writer.write(WriteBatch { ops })) {
                *failed = Some(e.to_string());
            }
        };
        let skip = |p: &Path| sandbox.is_denied(p);
        let scanned = crate::snapshot::scan(sandbox.roots(), &known, &skip, &mut |hash, data| {
            bytes += data.len();
            batch.extend(crate::journal::StoreOp::blob(hash, data));
            if bytes > SCAN_BATCH_BYTES {
                bytes = 0;
                flush(&mut batch, &mut failed);
            }
        });
        flush(&mut batch, &mut failed);
        match (failed, scanned) {
            (Some(e), _) => Err(ScanFailure::Store(e)),
            (None, Err(e)) => Err(ScanFailure::TooBig(e)),
            (None, Ok(manifest)) => Ok(manifest),
        }
    })
    .await
    .map_err(|e| ScanFailure::Store(e.to_string()))?
}

/// Why the roots could not be recorded around a command.
enum ScanFailure {
    /// The store refused the contents: the command is not run.
    Store(String),
    /// Too much to record: the command runs, unrecorded.
    TooBig(crate::snapshot::ScanError),
}

impl std::fmt::Display for ScanFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanFailure::Store(e) => write!(f, "{e}"),
            ScanFailure::TooBig(e) => write!(f, "{e}"),
        }
    }
}

/// Records what a command changed under the roots: each changed file's
/// state before (durably, now) and after (with the result).
async fn record_scanned(
    recorder: &Recorder,
    sandbox: &crate::tools::Sandbox,
    before: crate::snapshot::Manifest,
    node_id: &str,
    call_id: &str,
) -> Result<Vec<FileAfter>, String> {
    let after = scan_and_store(recorder, sandbox, before.clone()).await.map_err(|e| e.to_string())?;
    let changed = crate::snapshot::changed(&before, &after);
    let ops: Vec<crate::journal::StoreOp> = changed
        .iter()
        .map(|p| crate::journal::StoreOp::BeginChange {
            session_id: recorder.session_id.clone(),
            node_id: node_id.to_string(),
            call_id: call_id.to_string(),
            path: p.display().to_string(),
            before: before.state(p),
            created_ms: crate::ids::now_ms(),
        })
        .collect();
    if !ops.is_empty() {
        recorder.writer.write(WriteBatch { ops }).await.map_err(|e| e.to_string())?;
    }
    let out = changed
        .iter()
        .map(|p| FileAfter { path: p.display().to_string(), after: after.state(p), data: None })
        .collect();
    *recorder.baseline.lock().unwrap_or_else(|p| p.into_inner()) = after;
    Ok(out)
}

/// Starts a tool call in its own task, with its timeout. The files it
/// touches are recorded first (durably: a crash during the call leaves
/// their content before it), and read again after it.
fn spawn_tool(run: ToolRun, recorder: Recorder, hooks: ToolHooks) -> RunningTool {
    let ToolRun { tool, args, record, mut ctx, timeout } = run;
    let (output_tx, output) = mpsc::channel(TOOL_OUTPUT_CHANNEL);
    ctx.output = Some(output_tx);
    let task = tokio::spawn(async move {
        use crate::hooks::{HookDecision, HookEvent};
        let name = tool.name().to_string();
        let mut runs: Vec<HookRun> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let tool_input = args.clone();
        let hook_input = |event: HookEvent, extra: serde_json::Value| {
            crate::hooks::input(event, &hooks.session_id, &hooks.cwd, extra)
        };
        for hook in &hooks.pre {
            let input =
                hook_input(HookEvent::PreToolUse, serde_json::json!({"tool_name": name, "tool_input": tool_input}));
            let r = crate::hooks::run(hook, &input, &ctx.sandbox, Some(&name)).await;
            let (decision, says, context) = (r.decision, r.says(), r.context.clone());
            runs.push(r);
            // A block, and a hook that failed or hung, both stop the call.
            if decision != HookDecision::Allow {
                let message = format!("not run: {says}");
                return (Err(ToolError::ExecutionFailed { tool: name, message }), Vec::new(), runs);
            }
            notes.extend(context);
        }
        let touched: Vec<(String, std::path::PathBuf)> = match &record {
            Some(_) => tool
                .touches(&args)
                .iter()
                .filter_map(|p| ctx.sandbox.resolve(p).ok())
                .map(|p| (p.display().to_string(), p))
                .collect(),
            None => Vec::new(),
        };
        if let (Some((node_id, call_id)), false) = (&record, touched.is_empty())
            && let Err(e) = record_before(&recorder, node_id, call_id, &touched).await
        {
            let message = format!("not run: the files it would change could not be recorded for rewind ({e})");
            return (Err(ToolError::ExecutionFailed { tool: tool.name().into(), message }), Vec::new(), runs);
        }
        // A command may change anything under the roots: scan before.
        let scanned = match &record {
            Some(_) if tool.changes_files_anywhere() => {
                let known = recorder.baseline.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match scan_and_store(&recorder, &ctx.sandbox, known).await {
                    Ok(m) => Some(m),
                    Err(ScanFailure::TooBig(e)) => {
                        tracing::warn!(error = %e, "a command's file changes are not recorded for rewind");
                        None
                    }
                    Err(e) => {
                        let message =
                            format!("not run: the files under the roots could not be recorded for rewind ({e})");
                        return (
                            Err(ToolError::ExecutionFailed { tool: tool.name().into(), message }),
                            Vec::new(),
                            runs,
                        );
                    }
                }
            }
            _ => None,
        };
        // A tool that stops itself on time is given a moment more to say
        // what it stopped.
        let outer = if tool.stops_on_time() { timeout + std::time::Duration::from_secs(15) } else { timeout };
        let mut result = match tokio::time::timeout(outer, tool.execute(args, &ctx)).await {
            Ok(r) => r,
            Err(_) => Err(ToolError::Timeout { tool: tool.name().into(), elapsed: timeout }),
        };
        crash_point(tool.name());
        for hook in &hooks.post {
            let response = match &result {
                Ok(text) => serde_json::json!({"output": text, "is_error": false}),
                Err(e) => serde_json::json!({"output": e.to_string(), "is_error": true}),
            };
            let input = hook_input(
                HookEvent::PostToolUse,
                serde_json::json!({"tool_name": name, "tool_input": tool_input, "tool_response": response}),
            );
            let r = crate::hooks::run(hook, &input, &ctx.sandbox, Some(&name)).await;
            if r.decision != HookDecision::Allow {
                notes.push(r.says());
            }
            notes.extend(r.context.clone());
            runs.push(r);
        }
        if !notes.is_empty() {
            let tail = format!("\n--- hooks ---\n{}", notes.join("\n"));
            result = match result {
                Ok(text) => Ok(text + &tail),
                Err(e) => Err(ToolError::ExecutionFailed { tool: name.clone(), message: format!("{e}{tail}") }),
            };
        }
        let mut after: Vec<FileAfter> = tokio::task::spawn_blocking(move || {
            touched
                .into_iter()
                .filter_map(|(path, p)| {
                    let state = crate::rewind::read_state(&p).ok()?;
                    let after = state.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
                    Some(FileAfter { path, after, data: state.map(|(data, _)| data) })
                })
                .collect()
        })
        .await
        .unwrap_or_default();
        if let (Some(before), Some((node_id, call_id))) = (scanned, &record) {
            match record_scanned(&recorder, &ctx.sandbox, before, node_id, call_id).await {
                Ok(changes) => after.extend(changes),
                Err(e) => tracing::warn!(error = %e, "what a command changed could not be recorded for rewind"),
            }
        }
        (result, after, runs)
    });
    RunningTool { task, output }
}

/// Crash tests: with `FORGE_CRASH_AFTER_TOOL=NAME` in the daemon's
/// environment, the process kills itself (SIGKILL) the moment a call of
/// tool NAME has done its work, before its result is recorded: what a
/// `kill -9` at the worst moment leaves, made deterministic.
fn crash_point(tool: &str) {
    static AFTER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AFTER.get_or_init(|| std::env::var("FORGE_CRASH_AFTER_TOOL").ok()).as_deref() == Some(tool) {
        tracing::error!(tool, "FORGE_CRASH_AFTER_TOOL: killing the daemon now");
        // SAFETY: kill(2) on this very process; nothing is touched after.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// The content of the files a call is about to change, made durable
/// before it runs.
async fn record_before(
    recorder: &Recorder,
    node_id: &str,
    call_id: &str,
    touched: &[(String, std::path::PathBuf)],
) -> Result<(), String> {
    let paths = touched.to_vec();
    let states = tokio::task::spawn_blocking(move || {
        paths.into_iter().map(|(shown, p)| (shown, crate::rewind::read_state(&p))).collect::<Vec<_>>()
    })
    .await
    .map_err(|e| e.to_string())?;
    let mut ops = Vec::new();
    for (path, state) in states {
        let state = state.map_err(|e| format!("{path}: {e}"))?;
        let before = state.map(|(data, mode)| {
            let hash = crate::rewind::hash(&data);
            ops.extend(crate::journal::StoreOp::blob(hash.clone(), data));
            (hash, mode)
        });
        ops.push(crate::journal::StoreOp::BeginChange {
            session_id: recorder.session_id.clone(),
            node_id: node_id.to_string(),
            call_id: call_id.to_string(),
            path,
            before,
            created_ms: crate::ids::now_ms(),
        });
    }
    recorder.writer.write(crate::journal::WriteBatch { ops }).await.map(|_| ()).map_err(|e| e.to_string())
}

/// The running tool's next output piece, or its end (output first, so
/// nothing it printed comes after its result).
async fn tool_event(tool: &mut Option<RunningTool>) -> Event {
    let Some(running) = tool.as_mut() else { return std::future::pending().await };
    let done = tokio::select! {
        biased;
        Some(out) = running.output.recv() => return Event::ToolOutput(out),
        done = &mut running.task => done,
    };
    let mut rest = Vec::new();
    if let Some(mut running) = tool.take() {
        while let Ok(out) = running.output.try_recv() {
            rest.push(out);
        }
    }
    let (end, changes, hooks) = match done {
        Ok((result, changes, hooks)) => (ToolEnd::Finished(result), changes, hooks),
        Err(e) if e.is_panic() => (ToolEnd::Panicked, Vec::new(), Vec::new()),
        Err(_) => (ToolEnd::Stopped, Vec::new(), Vec::new()),
    };
    Event::ToolDone { rest, end, changes, hooks }
}

/// The session's armed timers, one sleep for the earliest.
struct Timers {
    armed: Vec<(Timer, tokio::time::Instant)>,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Default for Timers {
    fn default() -> Self {
        Timers { armed: Vec::new(), sleep: Box::pin(tokio::time::sleep(Duration::ZERO)) }
    }
}

impl Timers {
    fn arm(&mut self, timer: Timer, after: Duration) {
        self.armed.retain(|(t, _)| *t != timer);
        self.armed.push((timer, tokio::time::Instant::now() + after));
        self.reset();
    }

    fn reset(&mut self) {
        if let Some(at) = self.armed.iter().map(|(_, at)| *at).min() {
            self.sleep.as_mut().reset(at);
        }
    }

    /// The next timer to fire (never, while none is armed).
    async fn next(&mut self) -> Timer {
        if self.armed.is_empty() {
            return std::future::pending().await;
        }
        (&mut self.sleep).await;
        let now = tokio::time::Instant::now();
        let due = self.armed.iter().position(|(_, at)| *at <= now).unwrap_or(0);
        let (timer, _) = self.armed.remove(due);
        self.reset();
        timer
    }
}
