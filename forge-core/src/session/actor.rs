//! The session actor: one task per live session, the only place its state
//! changes. Shaped like rust-analyzer's main loop: one `select!` over its
//! inputs (journal acks, journal health, commands, provider events), one
//! handler each, and a bounded amount of work per tick.
//!
//! Everything that happens goes through the [`Pipeline`]: ingested into the
//! outbox, written as a numbered batch, applied and published only with the
//! writer's [`PersistedProof`](crate::journal::PersistedProof).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use forge_proto::{CancelResult, ClientRef, ErrorKind, EventKind, JournalHealth, OperationStateKind, SendResult};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use super::pipeline::{AckOutcome, Entry, MAX_PERSISTED_APPLIES_PER_TICK, Persisted, Pipeline};
use super::recovery::RecoveryCause;
use super::state::OperationState;
use super::{COMMAND_QUEUE, SessionCmd, SessionHandle, Snapshot};
use crate::engine::Shared;
use crate::error::EngineError;
use crate::ids::new_id;
use crate::journal::{HealthState, JournalAck, PersistedProof, StoreOp};
use crate::provider::{ChatMessage, ProviderEvent};
use crate::store::{QueuedRow, SessionRow};

/// Provider events handled before the actor looks at its other inputs again.
pub(super) const MAX_INCOMING_EVENTS_PER_TICK: usize = 256;
/// Subscribers may fall this many events behind before they are told they
/// lagged and re-read from the store.
const BROADCAST_CAPACITY: usize = 1024;

/// A caller waiting for the answer to its command, given once the batch
/// that carries the command's effects is durable (or failed). One type for
/// every command: a command's reply is made where the command is handled.
pub(super) struct Responder(Box<dyn FnOnce(Outcome<'_>) + Send + Sync>);

/// How a batch ended, for its responders: the session seqs its events got
/// (by outbox index), or the error that stopped it.
type Outcome<'a> = Result<&'a [Option<u64>], EngineError>;

impl Responder {
    /// Answers `reply` with `value` once the batch is durable.
    pub(super) fn with<T: Send + Sync + 'static>(reply: oneshot::Sender<Result<T, EngineError>>, value: T) -> Self {
        Responder(Box::new(move |outcome| drop(reply.send(outcome.map(|_| value)))))
    }

    /// Answers `reply` with what `make` builds from the session seqs the
    /// batch's events got (by outbox index), once it is durable.
    pub(super) fn from_seqs<T: Send + Sync + 'static>(
        reply: oneshot::Sender<Result<T, EngineError>>,
        make: impl FnOnce(&[Option<u64>]) -> T + Send + Sync + 'static,
    ) -> Self {
        Responder(Box::new(move |outcome| drop(reply.send(outcome.map(make)))))
    }

    fn answer(self, outcome: Outcome<'_>) {
        (self.0)(outcome)
    }
}

/// Something to do once a batch is durable.
pub(super) enum Effect {
    /// Answer a command's caller.
    Reply(Responder),
    /// The finished turn is durable: go idle and start the next queued one.
    TurnDone,
    /// The session's removal is durable: stop.
    Removed,
    /// The last tool step is durable: take the next one.
    NextTool,
    /// `tool_running` for this call is durable: run it.
    RunTool(super::tools::PlannedCall),
}

impl Effect {
    fn fail(self, err: &EngineError) {
        if let Effect::Reply(responder) = self {
            responder.answer(Err(err.clone()));
        }
    }
}

enum Exit {
    Removed,
    Shutdown(Vec<oneshot::Sender<()>>),
}

pub(crate) struct SessionActor {
    pub(super) shared: Arc<Shared>,
    pub(super) row: SessionRow,
    /// The conversation on the current path, as sent to the provider.
    pub(super) path: Vec<ChatMessage>,
    pub(super) state: OperationState,
    pub(super) queue: VecDeque<QueuedRow>,
    pub(super) pipeline: Pipeline<Effect>,
    acks_tx: mpsc::Sender<JournalAck>,
    acks: mpsc::Receiver<JournalAck>,
    health: watch::Receiver<HealthState>,
    events: super::live::Publisher,
    snapshot: watch::Sender<Snapshot>,
    commands: mpsc::Receiver<SessionCmd>,
    pub(super) provider_rx: Option<mpsc::Receiver<ProviderEvent>>,
    /// What the model last read or wrote of each file (stale-file checks).
    pub(super) file_hashes: crate::tools::FileHashes,
    /// The provider request feeding `provider_rx`, polled in the select.
    pub(super) provider: Option<super::turn::ProviderFuture>,
    exit: Option<Exit>,
    /// When the last batch was handed to the journal.
    last_batch_at: std::time::Instant,
    /// When to have the writer move this session's inline-acked events
    /// from its delta log into SQLite: shortly after, not while the event
    /// is still on its way to clients. One timer, reset when armed, so no
    /// timer is made per loop turn.
    apply_deltas_at: std::pin::Pin<Box<tokio::time::Sleep>>,
    apply_deltas_armed: bool,
    /// `path` was let go of while the session was quiet (see
    /// `release_history`); it is read again before the next command.
    history_released: bool,
    /// When a quiet session lets go of its history.
    release_at: std::pin::Pin<Box<tokio::time::Sleep>>,
    release_armed: bool,
}

/// How long after an inline write the writer is asked to move it into
/// SQLite (well after the event reached every client).
const APPLY_DELTAS_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

/// A session with nothing to do lets go of its history after this long
/// (it is read again from the store for the next command).
const RELEASE_HISTORY_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// A session quiet this long commits its next batch itself if the journal
/// writer is idle (see `flush`).
const QUIET_FOR_INLINE_COMMIT: std::time::Duration = std::time::Duration::from_micros(800);

impl SessionActor {
    /// Loads a session from the store, recovers an interrupted stream, and
    /// starts its actor.
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
        // One batch in flight at a time: room for its ack and a stray one.
        let (acks_tx, acks) = mpsc::channel(4);
        let health = shared.writer.watch_health();
        let mut actor = SessionActor {
            pipeline: Pipeline::new(row.id.clone(), row.last_seq),
            shared,
            row,
            path: Vec::new(),
            state: OperationState::Idle,
            queue: VecDeque::new(),
            acks_tx,
            acks,
            last_batch_at: std::time::Instant::now(),
            apply_deltas_at: Box::pin(tokio::time::sleep(APPLY_DELTAS_AFTER)),
            apply_deltas_armed: false,
            history_released: false,
            release_at: Box::pin(tokio::time::sleep(RELEASE_HISTORY_AFTER)),
            release_armed: false,
            health,
            events: super::live::Publisher { events, taps: handle.taps.clone() },
            snapshot,
            commands,
            provider_rx: None,
            file_hashes: Default::default(),
            provider: None,
            exit: None,
        };
        actor.load().await?;
        if actor.health.borrow().health == JournalHealth::Blocked {
            let reason = actor.health.borrow().reason.clone().unwrap_or_default();
            actor.state = OperationState::PersistenceBlocked { reason };
        } else {
            actor.recover_streams(RecoveryCause::Restart).await?;
            // Recovery is durable before anyone can read this session.
            actor.settle().await;
        }
        // Whoever looks next sees the recovered state, not the initial Idle.
        actor.publish_snapshot();
        tokio::spawn(actor.run());
        Ok(handle)
    }

    /// (Re)reads the durable state: row, history path, queue.
    async fn load(&mut self) -> Result<(), EngineError> {
        let store = &self.shared.store;
        if let Some(row) = store.session(&self.row.id).await? {
            self.row = row;
        }
        self.queue = store.queued(&self.row.id).await?.into();
        self.read_history().await?;
        self.pipeline.reload(self.row.last_seq);
        Ok(())
    }

    /// Nothing running, waiting or being written: the history is not
    /// needed until the next command.
    fn is_quiet(&self) -> bool {
        matches!(self.state, OperationState::Idle)
            && self.queue.is_empty()
            && self.pipeline.is_idle()
            && self.provider.is_none()
            && self.exit.is_none()
    }

    /// Lets go of the conversation held for the next request: a daemon
    /// that has streamed for hours must not keep every session's whole
    /// history in memory. The store has it.
    fn release_history(&mut self) {
        if self.history_released || !self.is_quiet() {
            return;
        }
        self.path = Vec::new();
        self.history_released = true;
        tracing::debug!(session = %self.row.id, "quiet: released the history held in memory");
    }

    /// Reads the history again if it was released (nodes never go through
    /// the delta log, so SQLite has every one).
    async fn reload_history(&mut self) -> Result<(), EngineError> {
        if self.history_released {
            self.read_history().await?;
        }
        Ok(())
    }

    /// The conversation on the current path, from the store.
    async fn read_history(&mut self) -> Result<(), EngineError> {
        let nodes = match &self.row.head_id {
            Some(head) => self.shared.store.path_to(head).await?,
            None => Vec::new(),
        };
        self.path = nodes.iter().filter_map(super::turn::chat_message).collect();
        self.history_released = false;
        Ok(())
    }

    async fn run(mut self) {
        self.start_next_queued();
        loop {
            self.flush().await;
            self.publish_snapshot();
            if !self.release_armed && !self.history_released && self.is_quiet() {
                self.release_at.as_mut().reset(tokio::time::Instant::now() + RELEASE_HISTORY_AFTER);
                self.release_armed = true;
            }
            let blocked = matches!(self.state, OperationState::PersistenceBlocked { .. });
            // Blocked, nothing more can be written: exit without waiting.
            if self.exit.is_some() && (self.pipeline.is_idle() || blocked) {
                break;
            }
            if self.pipeline.has_work_to_apply() {
                self.apply_persisted();
                continue;
            }
            let event = self.next_event().await;
            self.handle(event).await;
        }
        if let Some(Exit::Shutdown(replies)) = self.exit.take() {
            for r in replies {
                let _ = r.send(());
            }
        }
    }

    /// Waits for the next thing to happen, most urgent first: journal acks
    /// and health, then commands, then timers, tools and the provider.
    async fn next_event(&mut self) -> Event {
        tokio::select! {
            biased;
            Some(ack) = self.acks.recv() => Event::Ack(ack),
            Ok(()) = self.health.changed() => Event::Health(self.health.borrow_and_update().clone()),
            cmd = self.commands.recv(), if self.exit.is_none() => Event::Command(cmd),
            () = &mut self.release_at, if self.release_armed => Event::ReleaseHistory,
            () = poll_request(&mut self.provider) => Event::RequestEnded,
            () = &mut self.apply_deltas_at, if self.apply_deltas_armed => Event::ApplyDeltas,
            ev = tool_event(&mut self.state) => Event::Tool(ev),
            ev = recv_provider(&mut self.provider_rx) => Event::Provider(ev),
        }
    }

    /// What each event does: the one place the loop dispatches.
    async fn handle(&mut self, event: Event) {
        match event {
            Event::Ack(ack) => self.on_ack(ack),
            Event::Health(state) => self.on_health(state).await,
            Event::Command(Some(cmd)) if cmd.needs_history() => match self.reload_history().await {
                Ok(()) => self.on_command(cmd),
                Err(e) => self.refuse(cmd, e),
            },
            Event::Command(Some(cmd)) => self.on_command(cmd),
            Event::Command(None) => self.begin_shutdown(None),
            Event::ReleaseHistory => {
                self.release_armed = false;
                self.release_history();
            }
            Event::RequestEnded => self.provider = None,
            Event::ApplyDeltas => {
                self.apply_deltas_armed = false;
                self.shared.writer.apply_soon();
            }
            Event::Tool(ToolEvent::Output(out)) => self.on_tool_output(out),
            Event::Tool(ToolEvent::Done(done)) => self.on_tool_done(done),
            Event::Provider(ev) => {
                self.on_provider(ev);
                // Drain a bounded burst, so commands and acks are never
                // stuck behind a flood of deltas.
                for _ in 1..MAX_INCOMING_EVENTS_PER_TICK {
                    let Some(rx) = self.provider_rx.as_mut() else { break };
                    match rx.try_recv() {
                        Ok(ev) => self.on_provider(Some(ev)),
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => {
                            self.on_provider(None);
                            break;
                        }
                    }
                }
            }
        }
    }

    fn publish_snapshot(&self) {
        let approval = match &self.state {
            OperationState::ToolLoop(l) => l.approval.clone(),
            _ => None,
        };
        let snap = Snapshot {
            state: self.state.kind(),
            queued: self.queue.len() as u32,
            last_seq: self.pipeline.applied_seq(),
            approval,
        };
        self.snapshot.send_if_modified(|old| {
            if *old != snap {
                *old = snap;
                true
            } else {
                false
            }
        });
    }

    /// Writes everything pending and applies it (start-up, recovery).
    async fn settle(&mut self) {
        loop {
            self.flush().await;
            while self.pipeline.has_work_to_apply() {
                self.apply_persisted();
            }
            if !self.pipeline.has_in_flight() {
                break;
            }
            match self.acks.recv().await {
                Some(ack) => self.on_ack(ack),
                None => break,
            }
        }
    }

    // ----- journal -----

    /// Sends the outbox to the writer if no write is in flight.
    async fn flush(&mut self) {
        if matches!(self.state, OperationState::PersistenceBlocked { .. }) {
            return;
        }
        let Some((seq, batch)) = self.pipeline.take_batch() else { return };
        tracing::trace!(session = %self.row.id, batch = seq, ops = batch.ops.len(), "journal write");
        // After a pause, latency matters more than batching: commit here if
        // the writer is idle, saving two thread wake-ups. A steady stream
        // goes through the writer thread instead, which commits while this
        // actor parses and folds what arrives meanwhile into one batch.
        let now = std::time::Instant::now();
        let quiet = now.duration_since(self.last_batch_at) >= QUIET_FOR_INLINE_COMMIT;
        self.last_batch_at = now;
        let batch = if quiet {
            match self.shared.writer.try_write_inline(seq, batch) {
                Ok(ack) => {
                    if !self.apply_deltas_armed {
                        self.apply_deltas_armed = true;
                        self.apply_deltas_at.as_mut().reset(tokio::time::Instant::now() + APPLY_DELTAS_AFTER);
                    }
                    return self.on_ack(ack);
                }
                Err(batch) => batch,
            }
        } else {
            batch
        };
        self.shared.writer.submit(seq, batch, &self.acks_tx).await;
    }

    fn on_ack(&mut self, ack: JournalAck) {
        tracing::trace!(session = %self.row.id, batch = ack.seq, ok = ack.result.is_ok(), "journal ack");
        match self.pipeline.on_ack(ack) {
            Ok(AckOutcome::Persisted) => {}
            Ok(AckOutcome::Failed { reason, effects }) => {
                let err = EngineError::blocked(&reason);
                for e in effects {
                    e.fail(&err);
                }
                self.block(reason);
            }
            Err(violation) => {
                tracing::error!(session = %self.row.id, %violation, "journal invariant violated");
                self.block(format!("internal invariant violated: {violation}"));
            }
        }
    }

    /// Applies durable entries, within the per-tick budget.
    fn apply_persisted(&mut self) {
        for _ in 0..MAX_PERSISTED_APPLIES_PER_TICK {
            if let Some((seqs, effects)) = self.pipeline.next_effects() {
                for e in effects {
                    self.run_effect(e, &seqs);
                }
                continue;
            }
            match self.pipeline.next_persisted() {
                Some(Ok(p)) => self.apply(p),
                Some(Err(violation)) => {
                    tracing::error!(session = %self.row.id, %violation, "journal invariant violated");
                    self.block(format!("internal invariant violated: {violation}"));
                    return;
                }
                None => break,
            }
        }
    }

    /// One durable entry: update the state it concerns, then publish it.
    fn apply(&mut self, p: Persisted) {
        if let Entry::Seal { info, .. } = &p.entry {
            self.on_sealed(info.clone());
            return;
        }
        if let (Entry::Event { kind, .. }, OperationState::Streaming(s)) = (&p.entry, &mut self.state) {
            match kind {
                EventKind::TextDelta { text } => s.text.push_str(text),
                other => super::state::fold_tool_call(&mut s.tool_calls, other),
            }
        }
        if let (Some(seq), Some(json)) = (p.seq, p.json) {
            self.publish(seq, json, &p.proof);
        }
    }

    /// Shows an event to subscribers. Demands the writer's proof that the
    /// event is durable: nothing reaches a client before it is on disk.
    fn publish(&mut self, seq: u64, json: Arc<str>, _proof: &PersistedProof) {
        self.row.last_seq = seq;
        self.events.publish(seq, json);
    }

    fn run_effect(&mut self, effect: Effect, seqs: &[Option<u64>]) {
        match effect {
            Effect::Reply(responder) => responder.answer(Ok(seqs)),
            Effect::TurnDone => {
                if matches!(self.state, OperationState::Finishing) {
                    self.state = OperationState::Idle;
                }
                self.start_next_queued();
            }
            Effect::Removed => self.exit = Some(Exit::Removed),
            Effect::NextTool => self.next_tool(),
            Effect::RunTool(call) => self.run_tool(call),
        }
    }

    async fn on_health(&mut self, state: HealthState) {
        match (&self.state, state.health) {
            (OperationState::PersistenceBlocked { .. }, JournalHealth::Healthy) => {
                // The store is writable again: start over from what is
                // durable, recovering the stream the failure interrupted.
                tracing::info!(session = %self.row.id, "journal healthy again: reloading the session");
                self.state = OperationState::Idle;
                if let Err(e) = self.reload_after_block().await {
                    self.block(format!("reloading after a reset failed: {e}"));
                }
            }
            (OperationState::PersistenceBlocked { .. }, _) => {}
            (_, JournalHealth::Blocked) => {
                self.block(state.reason.unwrap_or_else(|| "the store cannot be written".into()));
            }
            _ => {}
        }
    }

    async fn reload_after_block(&mut self) -> Result<(), EngineError> {
        self.shared.writer.sync().await;
        self.load().await?;
        self.recover_streams(RecoveryCause::StoreFailure).await?;
        self.settle().await;
        self.start_next_queued();
        Ok(())
    }

    /// Fail closed: stop all work, refuse new work, tell every waiter.
    fn block(&mut self, reason: String) {
        if matches!(self.state, OperationState::PersistenceBlocked { .. }) {
            return;
        }
        tracing::error!(session = %self.row.id, %reason, "session blocked: persistence failed");
        if let Some(stream) = self.state.take_stream() {
            drop(stream);
        }
        if let OperationState::ToolLoop(l) = &mut self.state
            && let Some(r) = l.running.take()
        {
            r.task.abort();
        }
        self.provider = None;
        self.provider_rx = None;
        let err = EngineError::blocked(&reason);
        for effect in self.pipeline.abandon() {
            effect.fail(&err);
        }
        self.state = OperationState::PersistenceBlocked { reason };
    }

    /// What `session.context` reports: the path's size against the model's window.
    fn context_info(&self) -> forge_proto::ContextInfo {
        let chars: usize = self
            .path
            .iter()
            .map(|m| {
                m.text.chars().count() + m.tool_calls.iter().map(|c| c.arguments.len() + c.name.len()).sum::<usize>()
            })
            .sum();
        forge_proto::ContextInfo {
            session_id: self.row.id.clone(),
            provider: self.row.provider.clone(),
            model: self.row.model.clone(),
            messages: self.path.len() as u64,
            chars: chars as u64,
            estimated_tokens: chars.div_ceil(4) as u64,
            context_window: crate::provider::context_window(&self.row.model),
            last_input_tokens: None,
        }
    }

    // ----- commands -----

    fn on_command(&mut self, cmd: SessionCmd) {
        if let OperationState::PersistenceBlocked { reason } = &self.state {
            let err = EngineError::blocked(reason);
            self.refuse(cmd, err);
            return;
        }
        self.run_command(cmd);
    }

    /// Answers `cmd` with `err` instead of doing it (a context query is
    /// still answered).
    fn refuse(&mut self, cmd: SessionCmd, err: EngineError) {
        match cmd {
            SessionCmd::Send { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::Cancel { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::Rename { reply, .. } | SessionCmd::Remove { reply } => drop(reply.send(Err(err))),
            SessionCmd::Configure { reply, .. } | SessionCmd::Clear { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::Context { reply } => drop(reply.send(Ok(self.context_info()))),
            SessionCmd::Approve { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::Recover { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::ToolResult { reply, .. } => drop(reply.send(Err(err))),
            SessionCmd::Shutdown { reply } => self.exit = Some(Exit::Shutdown(vec![reply])),
        }
    }

    fn run_command(&mut self, cmd: SessionCmd) {
        match cmd {
            SessionCmd::Send { text, client, reply } => self.on_send(text, client, reply),
            SessionCmd::Cancel { client, drop_queued, reply } => self.on_cancel(client, drop_queued, reply),
            SessionCmd::Rename { name, client, reply } => {
                self.row.name = name.clone();
                self.pipeline.op(StoreOp::RenameSession { id: self.row.id.clone(), name: name.clone() });
                self.pipeline.event(Some(client), EventKind::SessionRenamed { name });
                self.pipeline.effect(Effect::Reply(Responder::with(reply, ())));
            }
            SessionCmd::Configure { provider, model, client, reply } => {
                self.row.provider = provider.clone();
                self.row.model = model.clone();
                self.pipeline.op(StoreOp::SetModel {
                    session_id: self.row.id.clone(),
                    provider: provider.clone(),
                    model: model.clone(),
                });
                self.pipeline.event(Some(client), EventKind::SessionConfigured { provider, model });
                self.pipeline.effect(Effect::Reply(Responder::with(reply, ())));
            }
            SessionCmd::Clear { client, reply } => {
                if matches!(self.state, OperationState::Idle) {
                    self.path.clear();
                    self.row.head_id = None;
                    self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: None });
                    self.pipeline.event(Some(client), EventKind::HistoryCleared {});
                    self.pipeline.effect(Effect::Reply(Responder::with(reply, ())));
                } else {
                    let _ = reply.send(Err(EngineError::new(
                        ErrorKind::SessionBusy,
                        format!("session {} is running a turn; cancel it first, then clear", self.row.id),
                    )));
                }
            }
            SessionCmd::Context { reply } => drop(reply.send(Ok(self.context_info()))),
            SessionCmd::Remove { reply } => {
                if matches!(self.state, OperationState::Idle) {
                    self.pipeline.op(StoreOp::RemoveSession { id: self.row.id.clone() });
                    self.pipeline.effect(Effect::Reply(Responder::with(reply, ())));
                    self.pipeline.effect(Effect::Removed);
                } else {
                    let _ = reply.send(Err(EngineError::new(
                        ErrorKind::SessionBusy,
                        format!(
                            "session {} is running a turn; cancel it first (`forgectl cancel {}`)",
                            self.row.id, self.row.id
                        ),
                    )));
                }
            }
            SessionCmd::Approve { decision, approval_id, call_ids, indices, client, reply } => {
                match self.on_approval(decision, approval_id, call_ids, indices, client) {
                    Ok(result) => self.pipeline.effect(Effect::Reply(Responder::with(reply, result))),
                    Err(e) => drop(reply.send(Err(e))),
                }
            }
            SessionCmd::ToolResult { call_id, output, is_error, client, reply } => {
                match self.on_tool_result(call_id, output, is_error, client) {
                    Ok(result) => self.pipeline.effect(Effect::Reply(Responder::with(reply, result))),
                    Err(e) => drop(reply.send(Err(e))),
                }
            }
            SessionCmd::Recover { action, client, reply } => match self.on_recover(action, Some(client)) {
                Ok(result) => self.pipeline.effect(Effect::Reply(Responder::with(reply, result))),
                Err(e) => drop(reply.send(Err(e))),
            },
            SessionCmd::Shutdown { reply } => self.begin_shutdown(Some(reply)),
        }
    }

    fn begin_shutdown(&mut self, reply: Option<oneshot::Sender<()>>) {
        const REASON: &str = "cancelled because forged shut down";
        // A batch waiting for approval runs nothing: it stays pending and is
        // restored when the daemon starts again.
        let awaiting = matches!(&self.state, OperationState::ToolLoop(l) if l.awaiting_approval());
        if !self.cancel_stream(None, Some(REASON)) && !awaiting {
            self.cancel_tools(None, Some(REASON));
        }
        match &mut self.exit {
            Some(Exit::Shutdown(replies)) => replies.extend(reply),
            _ => self.exit = Some(Exit::Shutdown(reply.into_iter().collect())),
        }
    }

    fn on_send(&mut self, text: String, client: ClientRef, reply: oneshot::Sender<Result<SendResult, EngineError>>) {
        if text.trim().is_empty() {
            let _ = reply.send(Err(EngineError::new(ErrorKind::InvalidParams, "the message is empty")));
            return;
        }
        if let Err(e) = self.provider_settings().and_then(|s| s.check_ready().map_err(EngineError::from)) {
            let _ = reply.send(Err(e));
            return;
        }
        let message_id = new_id("m");
        if matches!(self.state, OperationState::Idle) {
            let event_index = self.start_turn(message_id.clone(), text, client);
            self.pipeline.effect(self.send_reply(reply, message_id, None, event_index));
            return;
        }
        let position = self.queue.len() as u32 + 1;
        let created_ms = crate::ids::now_ms();
        self.queue.push_back(QueuedRow {
            session_id: self.row.id.clone(),
            message_id: message_id.clone(),
            text: text.clone(),
            client: Some(client.clone()),
            created_ms,
        });
        self.pipeline.op(StoreOp::QueuePush {
            session_id: self.row.id.clone(),
            message_id: message_id.clone(),
            text: text.clone(),
            client: Some(client.clone()),
            created_ms,
        });
        let event_index = self
            .pipeline
            .event(Some(client), EventKind::MessageQueued { message_id: message_id.clone(), text, position });
        self.pipeline.effect(self.send_reply(reply, message_id, Some(position), event_index));
    }

    /// The answer to `session.send`: the seq of the event it reported
    /// (`turn_started` or `message_queued`) is known once the batch is cut.
    fn send_reply(
        &self,
        reply: oneshot::Sender<Result<SendResult, EngineError>>,
        message_id: String,
        queue_position: Option<u32>,
        event_index: usize,
    ) -> Effect {
        let session_id = self.row.id.clone();
        Effect::Reply(Responder::from_seqs(reply, move |seqs| SendResult {
            session_id,
            message_id,
            seq: seqs.get(event_index).copied().flatten().unwrap_or(0),
            queued: queue_position.is_some(),
            queue_position,
        }))
    }

    fn on_cancel(
        &mut self,
        client: ClientRef,
        drop_queued: bool,
        reply: oneshot::Sender<Result<CancelResult, EngineError>>,
    ) {
        let mut dropped = 0;
        if drop_queued && !self.queue.is_empty() {
            dropped = self.queue.len() as u32;
            self.queue.clear();
            self.pipeline.op(StoreOp::QueueClear { session_id: self.row.id.clone() });
            self.pipeline.event(Some(client.clone()), EventKind::QueueCleared { dropped });
        }
        let cancelled = self.cancel_stream(Some(client.clone()), None)
            || self.cancel_tools(Some(client.clone()), None)
            || (matches!(self.state, OperationState::ToolRecovery { .. })
                && self.on_recover(forge_proto::RecoverAction::Discard, Some(client)).is_ok());
        let result = CancelResult { session_id: self.row.id.clone(), cancelled, dropped_queued: dropped };
        self.pipeline.effect(Effect::Reply(Responder::with(reply, result)));
    }

    pub(super) fn start_next_queued(&mut self) {
        if !matches!(self.state, OperationState::Idle) || self.exit.is_some() {
            return;
        }
        if let Some(q) = self.queue.pop_front() {
            self.pipeline
                .op(StoreOp::QueueRemove { session_id: self.row.id.clone(), message_id: q.message_id.clone() });
            let client = q.client.unwrap_or_else(ClientRef::daemon);
            self.start_turn(q.message_id, q.text, client);
        }
    }
}

/// What a session's loop waits for, one at a time (see `next_event`).
enum Event {
    /// The journal answered a batch.
    Ack(JournalAck),
    /// The journal's health changed.
    Health(HealthState),
    /// A client's command; `None` once every handle is gone.
    Command(Option<SessionCmd>),
    /// Quiet long enough to let go of the history.
    ReleaseHistory,
    /// The provider request (its HTTP exchange) ended.
    RequestEnded,
    /// Time to have the writer move the delta log into SQLite.
    ApplyDeltas,
    Tool(ToolEvent),
    /// The first of a burst of provider events (`None`: the stream ended).
    Provider(Option<ProviderEvent>),
}

enum ToolEvent {
    Output(crate::tools::ToolOutput),
    Done(Result<Result<String, crate::tools::ToolError>, tokio::task::JoinError>),
}

/// The running tool's next output piece, or its end (output first, so
/// nothing it printed comes after its result).
async fn tool_event(state: &mut OperationState) -> ToolEvent {
    let OperationState::ToolLoop(l) = state else { return std::future::pending().await };
    let Some(r) = l.running.as_mut() else { return std::future::pending().await };
    tokio::select! {
        biased;
        Some(out) = r.output.recv() => ToolEvent::Output(out),
        done = &mut r.task => ToolEvent::Done(done),
    }
}

/// Drives the provider request; completes when it has sent its last event.
async fn poll_request(fut: &mut Option<super::turn::ProviderFuture>) {
    match fut {
        Some(f) => f.get_mut().unwrap_or_else(|p| p.into_inner()).as_mut().await,
        None => std::future::pending().await,
    }
}

async fn recv_provider(rx: &mut Option<mpsc::Receiver<ProviderEvent>>) -> Option<ProviderEvent> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
