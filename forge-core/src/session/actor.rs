//! The session actor: one task per live session, the only place its state
//! changes. Shaped like rust-analyzer's main loop: one `select!` over its
//! inputs (journal acks, commands, provider events), one handler each.
//!
//! Events are persisted before anyone sees them. The actor collects what
//! happens in an outbox; while one write is in flight, new text deltas are
//! merged into the outbox's last delta (natural batching: a slow stream is
//! written event by event, a flood costs one write per commit). When the
//! writer acknowledges a batch with a [`PersistedProof`], its events are
//! published and its effects (replies, state transitions) applied.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use forge_proto::{
    CancelResult, ClientRef, ErrorKind, EventKind, MessageStatus, Role, SendResult, SessionEvent, TurnStatus,
};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use super::state::{ActiveStream, OperationState};
use super::{COMMAND_QUEUE, PublishedEvent, SessionCmd, SessionHandle, Snapshot};
use crate::engine::Shared;
use crate::error::EngineError;
use crate::ids::{new_id, now_ms};
use crate::journal::{PersistError, PersistedProof, StoreOp, WriteAck, WriteBatch};
use crate::provider::{ChatMessage, ChatRequest, ChatRole, ProviderEvent, ProviderKind, ProviderSettings};
use crate::store::rows::NodeMeta;
use crate::store::{NodeRow, QueuedRow, SessionRow};

/// Provider events handled before the actor looks at its other inputs again.
const MAX_INCOMING_EVENTS_PER_TICK: usize = 256;
/// Provider events buffered between the provider task and the actor.
const PROVIDER_CHANNEL: usize = 1024;
/// Subscribers may fall this many events behind before they are told they
/// lagged and re-read from the store.
const BROADCAST_CAPACITY: usize = 1024;
const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// Something to do once a batch is durable.
enum Effect {
    ReplySend {
        reply: oneshot::Sender<Result<SendResult, EngineError>>,
        message_id: String,
        queue_position: Option<u32>,
        /// Index in the batch of the event whose seq the reply reports.
        event_index: usize,
        seq: u64,
    },
    ReplyCancel { reply: oneshot::Sender<Result<CancelResult, EngineError>>, result: CancelResult },
    ReplyUnit(oneshot::Sender<Result<(), EngineError>>),
    /// The finished turn is durable: go idle and start the next queued one.
    TurnDone,
    /// The session's removal is durable: stop.
    Removed,
}

#[derive(Default)]
struct Outbox {
    events: Vec<(Option<ClientRef>, EventKind)>,
    ops: Vec<StoreOp>,
    effects: Vec<Effect>,
}

impl Outbox {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.ops.is_empty() && self.effects.is_empty()
    }
}

struct InFlight {
    events: Vec<PublishedEvent>,
    effects: Vec<Effect>,
    ack: oneshot::Receiver<WriteAck>,
}

pub(crate) struct SessionActor {
    shared: Arc<Shared>,
    row: SessionRow,
    /// The conversation on the current path, as sent to the provider.
    path: Vec<ChatMessage>,
    state: OperationState,
    queue: VecDeque<QueuedRow>,
    next_seq: u64,
    outbox: Outbox,
    in_flight: Option<InFlight>,
    events: broadcast::Sender<PublishedEvent>,
    snapshot: watch::Sender<Snapshot>,
    commands: mpsc::Receiver<SessionCmd>,
    provider_rx: Option<mpsc::Receiver<ProviderEvent>>,
    /// Set when the actor should exit once its writes are durable.
    exit: Option<Exit>,
}

enum Exit {
    Removed,
    Shutdown(Vec<oneshot::Sender<()>>),
}

impl SessionActor {
    /// Loads a session from the store and starts its actor.
    pub(crate) async fn spawn(shared: Arc<Shared>, row: SessionRow) -> Result<SessionHandle, EngineError> {
        let nodes = match &row.head_id {
            Some(head) => shared.store.path_to(head).await?,
            None => Vec::new(),
        };
        let queue: VecDeque<QueuedRow> = shared.store.queued(&row.id).await?.into();
        let path = nodes.iter().filter_map(chat_message).collect();
        let (tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let snap = Snapshot { state: forge_proto::OperationStateKind::Idle, queued: queue.len() as u32, last_seq: row.last_seq };
        let (snapshot, snapshot_rx) = watch::channel(snap);
        let handle = SessionHandle {
            id: row.id.clone(),
            tx,
            events: events.downgrade(),
            snapshot: snapshot_rx,
            attached: Arc::new(AtomicU32::new(0)),
        };
        let mut actor = SessionActor {
            shared,
            next_seq: row.last_seq + 1,
            row,
            path,
            state: OperationState::Idle,
            queue,
            outbox: Outbox::default(),
            in_flight: None,
            events,
            snapshot,
            commands,
            provider_rx: None,
            exit: None,
        };
        actor.recover_interrupted_turn().await?;
        // Recovery is durable before anyone can read this session.
        actor.settle().await;
        tokio::spawn(actor.run());
        Ok(handle)
    }

    async fn run(mut self) {
        self.start_next_queued();
        loop {
            self.flush().await;
            self.publish_snapshot();
            if self.in_flight.is_none() && self.outbox.is_empty() && self.exit.is_some() {
                break;
            }
            let in_flight = self.in_flight.as_mut().map(|f| &mut f.ack);
            tokio::select! {
                biased;
                ack = async { match in_flight { Some(rx) => rx.await, None => std::future::pending().await } } => {
                    let ack = ack.unwrap_or(WriteAck { result: Err(PersistError::Blocked("the journal writer stopped".into())) });
                    self.on_ack(ack);
                }
                cmd = self.commands.recv(), if self.exit.is_none() => match cmd {
                    Some(cmd) => self.on_command(cmd),
                    None => self.begin_shutdown(None),
                },
                ev = recv_provider(&mut self.provider_rx) => {
                    self.on_provider(ev);
                    // Drain a bounded burst, so commands and acks are never
                    // stuck behind a flood of deltas.
                    for _ in 1..MAX_INCOMING_EVENTS_PER_TICK {
                        let Some(rx) = self.provider_rx.as_mut() else { break };
                        match rx.try_recv() {
                            Ok(ev) => self.on_provider(Some(ev)),
                            Err(mpsc::error::TryRecvError::Empty) => break,
                            Err(mpsc::error::TryRecvError::Disconnected) => { self.on_provider(None); break }
                        }
                    }
                }
            }
        }
        if let Some(Exit::Shutdown(replies)) = self.exit.take() {
            for r in replies {
                let _ = r.send(());
            }
        }
    }

    /// Writes everything pending and applies the acks.
    async fn settle(&mut self) {
        loop {
            self.flush().await;
            let Some(flight) = self.in_flight.as_mut() else { break };
            let ack = (&mut flight.ack)
                .await
                .unwrap_or(WriteAck { result: Err(PersistError::Blocked("the journal writer stopped".into())) });
            self.on_ack(ack);
        }
    }

    fn publish_snapshot(&self) {
        let snap = Snapshot {
            state: self.state.kind(),
            queued: self.queue.len() as u32,
            last_seq: self.next_seq - 1,
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

    // ----- the outbox and the journal -----

    fn emit(&mut self, client: Option<ClientRef>, kind: EventKind) -> usize {
        // Natural batching: merge into a delta that is not written yet.
        if let Some((last_client, last)) = self.outbox.events.last_mut()
            && *last_client == client
        {
            match (last, &kind) {
                (EventKind::TextDelta { text: a }, EventKind::TextDelta { text: b })
                | (EventKind::ThinkingDelta { text: a }, EventKind::ThinkingDelta { text: b }) => {
                    a.push_str(b);
                    return self.outbox.events.len() - 1;
                }
                _ => {}
            }
        }
        self.outbox.events.push((client, kind));
        self.outbox.events.len() - 1
    }

    /// Sends the outbox to the writer if no write is in flight.
    async fn flush(&mut self) {
        if self.in_flight.is_some() || self.outbox.is_empty() {
            return;
        }
        let outbox = std::mem::take(&mut self.outbox);
        let ts_ms = now_ms();
        let mut ops = Vec::with_capacity(outbox.events.len() + outbox.ops.len());
        let mut published = Vec::with_capacity(outbox.events.len());
        for (client, kind) in outbox.events {
            let seq = self.next_seq;
            self.next_seq += 1;
            let kind_name = event_kind_name(&kind);
            let event = SessionEvent { session_id: self.row.id.clone(), seq, ts_ms, client, kind };
            let json: Arc<str> = match serde_json::to_string(&event) {
                Ok(j) => j.into(),
                Err(e) => {
                    tracing::error!(error = %e, "cannot serialize an event");
                    continue;
                }
            };
            ops.push(StoreOp::AppendEvent {
                session_id: self.row.id.clone(),
                seq,
                ts_ms,
                kind: kind_name,
                body: json.clone(),
            });
            published.push(PublishedEvent { seq, json });
        }
        ops.extend(outbox.ops);
        let mut effects = outbox.effects;
        for e in &mut effects {
            if let Effect::ReplySend { event_index, seq, .. } = e {
                *seq = published.get(*event_index).map(|p| p.seq).unwrap_or(0);
            }
        }
        tracing::trace!(session = %self.row.id, events = published.len(), ops = ops.len(), "journal write");
        let ack = self.shared.writer.submit(WriteBatch { ops }).await;
        self.in_flight = Some(InFlight { events: published, effects, ack });
    }

    fn on_ack(&mut self, ack: WriteAck) {
        let Some(flight) = self.in_flight.take() else {
            tracing::error!(session = %self.row.id, "journal ack with no write in flight");
            self.block("journal acknowledged a write that was not in flight".into());
            return;
        };
        tracing::trace!(session = %self.row.id, ok = ack.result.is_ok(), "journal ack");
        match ack.result {
            Ok(proof) => self.apply_persisted(flight, &proof),
            Err(e) => {
                let reason = e.to_string();
                for effect in flight.effects {
                    fail_effect(effect, &EngineError::blocked(&reason));
                }
                self.block(reason);
            }
        }
    }

    /// Publishes a durable batch and applies its effects. Requires the proof.
    fn apply_persisted(&mut self, flight: InFlight, _proof: &PersistedProof) {
        for ev in flight.events {
            self.row.last_seq = ev.seq;
            // No subscriber is fine: the event is in the store.
            let _ = self.events.send(ev);
        }
        for effect in flight.effects {
            match effect {
                Effect::ReplySend { reply, message_id, queue_position, seq, .. } => {
                    let _ = reply.send(Ok(SendResult {
                        session_id: self.row.id.clone(),
                        message_id,
                        seq,
                        queued: queue_position.is_some(),
                        queue_position,
                    }));
                }
                Effect::ReplyCancel { reply, result } => {
                    let _ = reply.send(Ok(result));
                }
                Effect::ReplyUnit(reply) => {
                    let _ = reply.send(Ok(()));
                }
                Effect::TurnDone => {
                    if matches!(self.state, OperationState::Finishing) {
                        self.state = OperationState::Idle;
                    }
                    self.start_next_queued();
                }
                Effect::Removed => {
                    self.exit = Some(Exit::Removed);
                }
            }
        }
    }

    /// Fail closed: stop all work and refuse new work.
    fn block(&mut self, reason: String) {
        tracing::error!(session = %self.row.id, %reason, "session blocked: persistence failed");
        if let Some(stream) = self.state.take_stream() {
            drop(stream);
        }
        self.provider_rx = None;
        let err = EngineError::blocked(&reason);
        for effect in std::mem::take(&mut self.outbox).effects {
            fail_effect(effect, &err);
        }
        self.state = OperationState::PersistenceBlocked { reason };
    }

    // ----- commands -----

    fn on_command(&mut self, cmd: SessionCmd) {
        if let OperationState::PersistenceBlocked { reason } = &self.state {
            let err = EngineError::blocked(reason);
            match cmd {
                SessionCmd::Send { reply, .. } => drop(reply.send(Err(err))),
                SessionCmd::Cancel { reply, .. } => drop(reply.send(Err(err))),
                SessionCmd::Rename { reply, .. } | SessionCmd::Remove { reply } => drop(reply.send(Err(err))),
                SessionCmd::Shutdown { reply } => {
                    self.exit = Some(Exit::Shutdown(vec![reply]));
                }
            }
            return;
        }
        match cmd {
            SessionCmd::Send { text, client, reply } => self.on_send(text, client, reply),
            SessionCmd::Cancel { client, drop_queued, reply } => self.on_cancel(client, drop_queued, reply),
            SessionCmd::Rename { name, client, reply } => {
                self.row.name = name.clone();
                self.outbox.ops.push(StoreOp::RenameSession { id: self.row.id.clone(), name: name.clone() });
                self.emit(Some(client), EventKind::SessionRenamed { name });
                self.outbox.effects.push(Effect::ReplyUnit(reply));
            }
            SessionCmd::Remove { reply } => {
                if matches!(self.state, OperationState::Idle) {
                    self.outbox.ops.push(StoreOp::RemoveSession { id: self.row.id.clone() });
                    self.outbox.effects.push(Effect::ReplyUnit(reply));
                    self.outbox.effects.push(Effect::Removed);
                } else {
                    let _ = reply.send(Err(EngineError::new(
                        ErrorKind::SessionBusy,
                        format!("session {} is running a turn; cancel it first (`forgectl cancel {}`)", self.row.id, self.row.id),
                    )));
                }
            }
            SessionCmd::Shutdown { reply } => self.begin_shutdown(Some(reply)),
        }
    }

    fn begin_shutdown(&mut self, reply: Option<oneshot::Sender<()>>) {
        if matches!(self.state, OperationState::Streaming(_)) {
            self.finish_turn(
                TurnStatus::Cancelled,
                Some((ErrorKind::ShuttingDown, "cancelled because forged shut down".to_string())),
            );
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
        match self.state {
            OperationState::Idle => {
                let event_index = self.start_turn(message_id.clone(), text, client, false);
                self.outbox.effects.push(Effect::ReplySend {
                    reply,
                    message_id,
                    queue_position: None,
                    event_index,
                    seq: 0,
                });
            }
            OperationState::Streaming(_) | OperationState::Finishing => {
                let position = self.queue.len() as u32 + 1;
                let created_ms = now_ms();
                self.queue.push_back(QueuedRow {
                    session_id: self.row.id.clone(),
                    message_id: message_id.clone(),
                    text: text.clone(),
                    client: Some(client.clone()),
                    created_ms,
                });
                self.outbox.ops.push(StoreOp::QueuePush {
                    session_id: self.row.id.clone(),
                    message_id: message_id.clone(),
                    text: text.clone(),
                    client: Some(client.clone()),
                    created_ms,
                });
                let event_index = self.emit(
                    Some(client),
                    EventKind::MessageQueued { message_id: message_id.clone(), text, position },
                );
                self.outbox.effects.push(Effect::ReplySend {
                    reply,
                    message_id,
                    queue_position: Some(position),
                    event_index,
                    seq: 0,
                });
            }
            OperationState::PersistenceBlocked { .. } => {}
        }
    }

    fn on_cancel(
        &mut self,
        client: ClientRef,
        drop_queued: bool,
        reply: oneshot::Sender<Result<CancelResult, EngineError>>,
    ) {
        let cancelled = matches!(self.state, OperationState::Streaming(_));
        let mut dropped = 0;
        if drop_queued && !self.queue.is_empty() {
            dropped = self.queue.len() as u32;
            self.queue.clear();
            self.outbox.ops.push(StoreOp::QueueClear { session_id: self.row.id.clone() });
            self.emit(Some(client.clone()), EventKind::QueueCleared { dropped });
        }
        if cancelled {
            self.emit(Some(client), EventKind::CancelRequested {});
            self.finish_turn(TurnStatus::Cancelled, None);
        }
        let result = CancelResult { session_id: self.row.id.clone(), cancelled, dropped_queued: dropped };
        self.outbox.effects.push(Effect::ReplyCancel { reply, result });
    }

    // ----- turns -----

    fn provider_kind(&self) -> Result<ProviderKind, EngineError> {
        ProviderKind::parse(&self.row.provider).ok_or_else(|| {
            EngineError::new(ErrorKind::Config, format!("unknown provider \"{}\"", self.row.provider))
        })
    }

    fn provider_settings(&self) -> Result<ProviderSettings, EngineError> {
        Ok(ProviderSettings::resolve(self.provider_kind()?, &self.shared.config))
    }

    fn start_next_queued(&mut self) {
        if !matches!(self.state, OperationState::Idle) || self.exit.is_some() {
            return;
        }
        if let Some(q) = self.queue.pop_front() {
            self.outbox.ops.push(StoreOp::QueueRemove {
                session_id: self.row.id.clone(),
                message_id: q.message_id.clone(),
            });
            let client = q.client.unwrap_or_else(ClientRef::daemon);
            self.start_turn(q.message_id, q.text, client, true);
        }
    }

    /// Records the user message and starts streaming. Returns the index of
    /// the `turn_started` event in the outbox.
    fn start_turn(&mut self, message_id: String, text: String, client: ClientRef, _from_queue: bool) -> usize {
        let created_ms = now_ms();
        self.outbox.ops.push(StoreOp::InsertNode {
            id: message_id.clone(),
            session_id: self.row.id.clone(),
            parent_id: self.row.head_id.clone(),
            role: Role::User,
            text: text.clone(),
            status: MessageStatus::Complete,
            created_ms,
            meta: NodeMeta { client: Some(client.clone()), ..Default::default() },
        });
        self.outbox.ops.push(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(message_id.clone()) });
        self.row.head_id = Some(message_id.clone());
        self.path.push(ChatMessage { role: ChatRole::User, text: text.clone() });
        let index = self.emit(
            Some(client.clone()),
            EventKind::TurnStarted {
                message_id: message_id.clone(),
                text,
                provider: self.row.provider.clone(),
                model: self.row.model.clone(),
            },
        );
        let (tx, rx) = mpsc::channel(PROVIDER_CHANNEL);
        let request = ChatRequest {
            model: self.row.model.clone(),
            system: None,
            messages: self.path.clone(),
            max_output_tokens: self.shared.config.app.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        };
        let task = match self.provider_settings() {
            Ok(settings) => {
                let providers = self.shared.providers.clone();
                tokio::spawn(async move { providers.run(settings, request, tx).await }).abort_handle()
            }
            Err(e) => {
                let err = crate::provider::ProviderError::new(e.kind, e.message);
                tokio::spawn(async move { drop(tx.send(ProviderEvent::Error(err)).await) }).abort_handle()
            }
        };
        self.provider_rx = Some(rx);
        self.state = OperationState::Streaming(ActiveStream {
            message_id,
            provider: self.row.provider.clone(),
            model: self.row.model.clone(),
            client,
            text: String::new(),
            usage: None,
            stop_reason: None,
            task,
        });
        index
    }

    fn on_provider(&mut self, ev: Option<ProviderEvent>) {
        let OperationState::Streaming(stream) = &mut self.state else {
            // A late event from a cancelled stream.
            self.provider_rx = None;
            return;
        };
        tracing::trace!(session = %self.row.id, "provider event");
        match ev {
            Some(ProviderEvent::TextDelta(text)) => {
                stream.text.push_str(&text);
                self.emit(None, EventKind::TextDelta { text });
            }
            Some(ProviderEvent::ThinkingDelta(text)) => {
                self.emit(None, EventKind::ThinkingDelta { text });
            }
            Some(ProviderEvent::Usage(u)) => stream.usage = Some(u),
            Some(ProviderEvent::StopReason(r)) => stream.stop_reason = Some(r),
            Some(ProviderEvent::Done) => self.finish_turn(TurnStatus::Complete, None),
            Some(ProviderEvent::Error(e)) => self.finish_turn(TurnStatus::Error, Some((e.kind, e.message))),
            None => self.finish_turn(
                TurnStatus::Error,
                Some((ErrorKind::Internal, "the provider task ended without a result".into())),
            ),
        }
    }

    /// Ends the running turn: the answer so far becomes a history node with
    /// its status, and `turn_finished` is written with it.
    fn finish_turn(&mut self, status: TurnStatus, error: Option<(ErrorKind, String)>) {
        let Some(stream) = self.state.take_stream() else { return };
        self.provider_rx = None;
        let assistant_id = if stream.text.is_empty() {
            None
        } else {
            let id = new_id("m");
            self.outbox.ops.push(StoreOp::InsertNode {
                id: id.clone(),
                session_id: self.row.id.clone(),
                parent_id: self.row.head_id.clone(),
                role: Role::Assistant,
                text: stream.text.clone(),
                status,
                created_ms: now_ms(),
                meta: NodeMeta {
                    provider: Some(stream.provider.clone()),
                    model: Some(stream.model.clone()),
                    client: None,
                    usage: stream.usage.clone(),
                    error: error.as_ref().map(|(_, m)| m.clone()),
                    stop_reason: stream.stop_reason.clone(),
                },
            });
            self.outbox.ops.push(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(id.clone()) });
            self.row.head_id = Some(id.clone());
            self.path.push(ChatMessage { role: ChatRole::Assistant, text: stream.text });
            Some(id)
        };
        let _ = stream.client;
        self.emit(
            None,
            EventKind::TurnFinished {
                message_id: stream.message_id,
                assistant_id,
                status,
                stop_reason: stream.stop_reason,
                usage: stream.usage,
                error_kind: error.as_ref().map(|(k, _)| k.as_str().to_string()),
                error: error.map(|(_, m)| m),
            },
        );
        self.outbox.effects.push(Effect::TurnDone);
    }

    /// A turn that was streaming when the daemon died becomes a history
    /// message marked interrupted, built from the deltas in the event log
    /// (every one of them was persisted before any client saw it).
    async fn recover_interrupted_turn(&mut self) -> Result<(), EngineError> {
        let store = &self.shared.store;
        let started = store.last_seq_of_kind(&self.row.id, "turn_started").await?;
        let finished = store.last_seq_of_kind(&self.row.id, "turn_finished").await?;
        if started == 0 || finished > started {
            return Ok(());
        }
        let mut message_id = String::new();
        let mut text = String::new();
        let mut after = started - 1;
        loop {
            let batch = store.events_after(&self.row.id, after, 1000).await?;
            let Some((last, _)) = batch.last() else { break };
            after = *last;
            for (_, body) in &batch {
                let Ok(ev) = serde_json::from_str::<SessionEvent>(body) else { continue };
                match ev.kind {
                    EventKind::TurnStarted { message_id: m, .. } => message_id = m,
                    EventKind::TextDelta { text: t } => text.push_str(&t),
                    _ => {}
                }
            }
        }
        tracing::info!(session = %self.row.id, chars = text.len(), "recovering a turn interrupted by a daemon stop");
        self.state = OperationState::Streaming(ActiveStream {
            message_id,
            provider: self.row.provider.clone(),
            model: self.row.model.clone(),
            client: ClientRef::daemon(),
            text,
            usage: None,
            stop_reason: None,
            task: tokio::spawn(async {}).abort_handle(),
        });
        self.finish_turn(
            TurnStatus::Interrupted,
            Some((
                ErrorKind::Internal,
                "forged stopped while this answer was streaming; the part received before the stop was recovered".into(),
            )),
        );
        Ok(())
    }
}

async fn recv_provider(rx: &mut Option<mpsc::Receiver<ProviderEvent>>) -> Option<ProviderEvent> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn fail_effect(effect: Effect, err: &EngineError) {
    match effect {
        Effect::ReplySend { reply, .. } => drop(reply.send(Err(err.clone()))),
        Effect::ReplyCancel { reply, .. } => drop(reply.send(Err(err.clone()))),
        Effect::ReplyUnit(reply) => drop(reply.send(Err(err.clone()))),
        Effect::TurnDone | Effect::Removed => {}
    }
}

/// The history node as a message for the provider; empty text is skipped
/// (providers reject empty messages).
fn chat_message(n: &NodeRow) -> Option<ChatMessage> {
    if n.text.is_empty() {
        return None;
    }
    let role = match n.role {
        Role::User => ChatRole::User,
        Role::Assistant => ChatRole::Assistant,
        Role::Other => return None,
    };
    Some(ChatMessage { role, text: n.text.clone() })
}

pub(crate) fn event_kind_name(kind: &EventKind) -> &'static str {
    match kind {
        EventKind::SessionCreated { .. } => "session_created",
        EventKind::SessionRenamed { .. } => "session_renamed",
        EventKind::MessageQueued { .. } => "message_queued",
        EventKind::TurnStarted { .. } => "turn_started",
        EventKind::TextDelta { .. } => "text_delta",
        EventKind::ThinkingDelta { .. } => "thinking_delta",
        EventKind::CancelRequested {} => "cancel_requested",
        EventKind::TurnFinished { .. } => "turn_finished",
        EventKind::QueueCleared { .. } => "queue_cleared",
        EventKind::Unknown => "unknown",
    }
}
