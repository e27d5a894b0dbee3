//! The session's shell: one task per live session, carrying out what its
//! [`Session`] machine decides. Shaped like rust-analyzer's main loop:
//! [`SessionActor::next_event`] waits for the next input, most urgent
//! first; [`SessionActor::handle`] gives it to the machine and carries out
//! the effects it hands back. This is the only place a session does I/O:
//! the journal, its followers, the provider request, tool tasks, timers
//! and store reads.

use std::collections::VecDeque;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use forge_proto::{JournalHealth, OperationStateKind};
use futures::{FutureExt, StreamExt};
use tokio::sync::{broadcast, mpsc, watch};

use super::machine::call::JobOutcome;
use super::machine::{Effect, Event, MAX_INCOMING_EVENTS_PER_TICK, RecoveryCause, Session, Timer};
use super::tool_task::{Recorder, RunningTool, spawn_tool, tool_event};

mod jobs;
mod refresh;
use super::{COMMAND_QUEUE, SessionCmd, SessionHandle, Snapshot, load};
use crate::error::EngineError;
use crate::instructions::ProjectInstructions;
use crate::journal::{HealthState, JournalAck, PersistedProof, WriteBatch};
use crate::provider::{ProviderError, ProviderEvent, ProviderStream};
use crate::shared::Shared;
use crate::store::SessionRow;
use refresh::hooks_for;

/// Subscribers may fall this many events behind before they are told they
/// lagged and re-read from the store.
const BROADCAST_CAPACITY: usize = 1024;

/// How long after an inline write the writer is asked to move it into
/// SQLite (well after the event reached every client).
const APPLY_DELTAS_AFTER: Duration = Duration::from_millis(2);

/// A session quiet this long commits its next batch itself if the journal
/// writer is idle (see `write`).
const QUIET_FOR_INLINE_COMMIT: Duration = Duration::from_micros(800);

pub(crate) struct SessionActor {
    shared: Arc<Shared>,
    /// Where what concerns helper agents goes; the engine routes it.
    helpers: mpsc::UnboundedSender<super::machine::HelperOut>,
    session: Session,
    /// The session's system prompt before the project instructions.
    template: String,
    /// The project instruction files the prompt holds, to notice changes.
    instructions: ProjectInstructions,
    /// The MCP servers' state the session's tools were taken from.
    tools_version: u64,
    /// The digest of the project tools the session offers.
    project_tools: String,
    /// The agent types the `task` tool offers, in a word (`agents::key`).
    agents: String,
    /// The repository map the prompt holds (`[context] repo_summaries`).
    repo_map: Option<Arc<str>>,
    /// The images of the last request's messages, base64, by hash (read
    /// from the store once, not once per request of a tool loop).
    images: std::collections::HashMap<String, Arc<str>>,
    /// How many clients follow the session (for its info).
    attached: Arc<AtomicU32>,
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
    /// Hooks and a call's records, running in their own tasks.
    jobs: futures::stream::FuturesUnordered<Pin<Box<dyn std::future::Future<Output = Event> + Send>>>,
    /// The session's record of its roots, kept up to date around
    /// commands (see `snapshot/`).
    tracker: Arc<std::sync::Mutex<crate::snapshot::Tracker>>,
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

/// The provider's stream. The mutex is never locked (the shell has `&mut`):
/// it only makes the shell `Sync`.
struct Request(std::sync::Mutex<ProviderStream>);

impl SessionActor {
    /// Loads a session from the store, recovers what it left unfinished,
    /// and starts its task.
    pub(crate) async fn spawn(
        shared: Arc<Shared>,
        helpers: mpsc::UnboundedSender<super::machine::HelperOut>,
        row: SessionRow,
    ) -> Result<SessionHandle, EngineError> {
        let (tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let snap = Snapshot { state: OperationStateKind::Idle, queued: 0, last_seq: row.last_seq, approval: None };
        let (snapshot, snapshot_rx) = watch::channel(snap);
        let handle = SessionHandle {
            id: row.id.clone(),
            tx,
            events: events.downgrade(),
            taps: Arc::default(),
            recent: Arc::default(),
            snapshot: snapshot_rx,
            attached: Arc::new(AtomicU32::new(0)),
        };
        let tracker = Arc::new(std::sync::Mutex::new(
            crate::snapshot::Tracker::new(&row.id, Path::new(&row.cwd))
                .with_budget(shared.config.store.max_blob_bytes()),
        ));
        shared.trackers.register(&tracker);
        let health = shared.writer.watch_health();
        let journal = health.borrow().clone();
        let blocked = journal.health == JournalHealth::Blocked;
        let durable = load::durable(&shared, row.clone(), !blocked).await?;
        // One batch in flight at a time: room for its ack and a stray one.
        let (acks_tx, acks) = mpsc::channel(4);
        let env = crate::prompt::PromptEnv::detect(
            &row.cwd,
            &row.provider,
            &shared.config,
            &shared.tools,
            shared.clock.now_ms(),
        );
        let template = shared.prompt.render(&env) + &crate::agents::helper_prompt(row.helper.as_ref());
        let instructions = ProjectInstructions::load(Path::new(&row.cwd), &shared.config);
        let repo_map = shared.repo_map(Path::new(&row.cwd), &row.id, &row.provider, &row.model);
        let system_prompt: Arc<str> =
            format!("{template}{}{}", instructions.text, repo_map.as_deref().unwrap_or("")).into();
        let tools_version = shared.mcp.version();
        let (tools, project_tools) = shared.tools_for(&row.id, Path::new(&row.cwd));
        let agents: Arc<[crate::agents::AgentType]> =
            crate::agents::load(Path::new(&row.cwd), shared.trust.trusts(Path::new(&row.cwd))).into();
        let tools = shared.with_helpers(tools, row.helper.as_ref(), &agents);
        let hooks = hooks_for(&shared, &row.id, Path::new(&row.cwd));
        let row_cwd = row.cwd.clone();
        let mut session = Session::new(shared.config.clone(), tools, row, system_prompt, shared.clock.clone());
        session.set_instruction_files(instructions.files());
        session.set_hooks(hooks);
        session.set_agents(agents);
        let mut actor = SessionActor {
            session,
            template,
            instructions,
            tools_version,
            project_tools,
            agents: crate::agents::key(Path::new(&row_cwd), shared.trust.trusts(Path::new(&row_cwd))),
            repo_map,
            images: Default::default(),
            shared,
            helpers,
            attached: handle.attached.clone(),
            effects: Vec::new(),
            brought_back: VecDeque::new(),
            commands,
            acks_tx,
            acks,
            health,
            events: super::live::Publisher { events, taps: handle.taps.clone(), recent: handle.recent.clone() },
            snapshot,
            request: None,
            tool: None,
            jobs: Default::default(),
            tracker,
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
                Wake::Event(event) => self.handle(event).await,
                Wake::ApplyDeltas => {
                    self.apply_deltas_armed = false;
                    self.shared.writer.apply_soon();
                }
            }
        }
        if self.session.is_removed() {
            // The ref that kept git's blobs for its rewind records goes
            // with the session.
            self.tracker.lock().unwrap_or_else(|p| p.into_inner()).drop_refs();
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
            Some(event) = self.jobs.next(), if !self.jobs.is_empty() => event,
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

    /// Carries out one effect; some bring an event back at once.
    async fn execute(&mut self, effect: Effect) -> Option<Event> {
        match effect {
            Effect::Write { seq, batch } => return self.write(seq, batch).await,
            Effect::Publish { seq, json, proof } => self.publish(seq, json, &proof),
            Effect::StartRequest(request) => {
                let (settings, mut request) = *request;
                self.fill_images(&mut request).await;
                request.read_active_files();
                let stream = self.shared.providers.stream(settings, request);
                self.request = Some(Request(std::sync::Mutex::new(stream)));
            }
            Effect::StopRequest => self.request = None,
            Effect::RunTool(mut run) => {
                if run.library {
                    run.ctx.library = Some(Arc::new(crate::librarian::SessionLibrary {
                        store: self.shared.store.clone(),
                        session: self.session.id().to_string(),
                    }));
                }
                // One call at a time; a task left over would only leak.
                if let Some(old) = self.tool.replace(spawn_tool(*run)) {
                    old.task.abort();
                }
            }
            effect @ (Effect::RunHooks(_)
            | Effect::RecordBefore(_)
            | Effect::RecordAfter(_)
            | Effect::PlanRewind(_)
            | Effect::RestoreFiles(_)
            | Effect::PrepareInput(_)
            | Effect::WaitForTools { .. }
            | Effect::MoveBranch(_)
            | Effect::CommitTurn(_)) => self.start_job(effect),
            Effect::CheckFiles(job) => {
                let id = job.job;
                let (checked, then) = job.run();
                return Some(Event::JobDone { job: id, outcome: JobOutcome::FilesChecked(checked, then) });
            }
            Effect::StopTool => {
                if let Some(tool) = self.tool.take() {
                    tool.task.abort();
                    // Dropped now: its command is told to stop before what
                    // it changed is read.
                    let _ = tool.task.await;
                }
            }
            Effect::Helper(out) => {
                // The engine is gone only when the daemon stops.
                let _ = self.helpers.send(*out);
            }
            Effect::Reply(answer) => answer.send(),
            Effect::Answer(answer) => self.answer(*answer).await,
            Effect::ClaimName { name, client, reply } => {
                let claim = super::answers::claim_name(&self.shared, name, self.session.id()).await;
                return Some(Event::NameClaimed { claim, client, reply });
            }
            Effect::Arm(timer, after) => self.timers.arm(timer, after),
            Effect::ReadHistory { head, then } => {
                let history = load::history(&self.shared.store, head.as_deref()).await;
                return Some(Event::HistoryRead { history, then });
            }
            Effect::ReadTree { then } => {
                let store = &self.shared.store;
                let id = self.session.id();
                let forest = match (store.tree(id).await, store.bookmarks(id).await) {
                    (Ok(rows), Ok(bookmarks)) => {
                        Ok(Box::new(crate::forest::Forest::new(rows).with_bookmarks(bookmarks)))
                    }
                    (Err(e), _) | (_, Err(e)) => Err(EngineError::from(e)),
                };
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

    /// Completes an answer from the store.
    async fn answer(&mut self, answer: super::machine::Answer) {
        match answer {
            super::machine::Answer::Info { reply, claim } => {
                let live = (self.session.snapshot(), self.attached.load(std::sync::atomic::Ordering::Relaxed));
                let info = super::answers::full_info(&self.shared, self.session.id(), Some((&live.0, live.1))).await;
                reply.send(info);
                // The name is the session's in the store by now.
                drop(claim);
            }
            super::machine::Answer::Context { info, span, repo, reply } => {
                let row = self.session.row();
                reply.send(super::answers::full_context(&self.shared, row, info, span, repo).await);
            }
        }
    }

    fn recorder(&self) -> Recorder {
        let guard_file = super::crash_guard::path(&self.shared.db, self.session.id());
        Recorder { writer: self.shared.writer.clone(), tracker: self.tracker.clone(), guard_file }
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
