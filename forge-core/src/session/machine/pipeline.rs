//! The two-phase event pipeline of a session, free of I/O so it can be
//! tested exhaustively.
//!
//! Ingest: what happens (provider deltas, control events, store operations)
//! becomes [`Entry`]s in the outbox. Deltas received while a write is in
//! flight merge into the outbox's last delta (natural batching). When no
//! write is in flight, the outbox becomes one numbered batch.
//!
//! Apply: an ack `{ seq, result }` for the batch in flight turns its entries
//! into [`Persisted`] envelopes carrying the batch's [`PersistedProof`]; only
//! those are applied and published, at most [`MAX_PERSISTED_APPLIES_PER_TICK`]
//! per tick. Session seqs and stream seqs must come back monotonic and
//! contiguous; anything else is an [`InvariantViolation`] and the session
//! blocks rather than guess.

use std::collections::VecDeque;
use std::sync::Arc;

use forge_proto::{ClientRef, EventKind, MessageStatus, SessionEvent};

use crate::journal::{JournalAck, PersistedProof, StoreOp, WriteBatch};

/// Persisted envelopes applied before the actor looks at its inputs again.
pub const MAX_PERSISTED_APPLIES_PER_TICK: usize = 512;

/// A provider event as taken in, numbered within its stream (1, 2, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedEvent<E> {
    pub seq: u64,
    pub event: E,
}

/// A span of stream seqs an entry covers (merged deltas cover several).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSpan {
    pub first: u64,
    pub last: u64,
}

/// How a stream ended, as sealed in the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct SealInfo {
    pub outcome: MessageStatus,
    pub error: Option<(forge_proto::ErrorKind, String)>,
}

/// One thing waiting to be written.
// Nearly every entry is an event: boxing it would cost an allocation per
// streamed delta to save space on the rare others.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A client-visible session event; gets a session seq when written.
    Event { client: Option<ClientRef>, kind: EventKind, span: Option<StreamSpan> },
    /// The end of a stream: no event of its own (the history batch that
    /// follows carries `turn_finished`), but a stream seq.
    Seal { span: StreamSpan, info: SealInfo },
}

struct Outbox<F> {
    entries: Vec<Entry>,
    ops: Vec<StoreOp>,
    effects: Vec<F>,
}

impl<F> Default for Outbox<F> {
    fn default() -> Self {
        Self { entries: Vec::new(), ops: Vec::new(), effects: Vec::new() }
    }
}

impl<F> Outbox<F> {
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.ops.is_empty() && self.effects.is_empty()
    }
}

struct InFlight<F> {
    batch_seq: u64,
    seqs: Vec<Option<u64>>,
    /// (session seq for events, entry, its JSON for events)
    entries: Vec<(Option<u64>, Entry, Option<Arc<str>>)>,
    effects: Vec<F>,
}

/// A durable entry: only these may be applied.
#[derive(Debug)]
pub struct Persisted {
    /// Session seq, for events.
    pub seq: Option<u64>,
    pub entry: Entry,
    /// The event as clients receive it, for events.
    pub json: Option<Arc<str>>,
    pub proof: Arc<PersistedProof>,
}

/// What went wrong when an invariant broke. The session blocks on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantViolation {
    #[error("journal ack for batch {got} while batch {expected:?} was in flight")]
    UnexpectedAck { got: u64, expected: Option<u64> },
    #[error("event seq {got} applied after {last}: not contiguous")]
    SessionSeqGap { got: u64, last: u64 },
    #[error("stream seq {got} applied after {last}: not contiguous")]
    StreamSeqGap { got: u64, last: u64 },
}

/// What an ack did.
pub enum AckOutcome<F> {
    /// Durable: the entries wait in the apply queue; these effects run once
    /// they are applied.
    Persisted,
    /// The write failed: nothing of the batch was applied. The effects are
    /// handed back so their waiters can be told.
    Failed { reason: String, effects: Vec<F> },
}

pub struct Pipeline<F> {
    session_id: String,
    next_seq: u64,
    applied_seq: u64,
    next_batch: u64,
    stream_received: u64,
    stream_applied: u64,
    outbox: Outbox<F>,
    in_flight: Option<InFlight<F>>,
    to_apply: VecDeque<Persisted>,
    /// Effects of persisted batches, run when their entries are applied:
    /// (number of `to_apply` entries still ahead of them, the batch's
    /// session seqs by outbox index, effects).
    pending_effects: VecDeque<(usize, Vec<Option<u64>>, Vec<F>)>,
}

impl<F> Pipeline<F> {
    /// A pipeline whose last durable event is `last_seq`.
    pub fn new(session_id: String, last_seq: u64) -> Self {
        Self {
            session_id,
            next_seq: last_seq + 1,
            applied_seq: last_seq,
            next_batch: 1,
            stream_received: 0,
            stream_applied: 0,
            outbox: Outbox::default(),
            in_flight: None,
            to_apply: VecDeque::new(),
            pending_effects: VecDeque::new(),
        }
    }

    /// The last applied (durable and published) session seq.
    pub fn applied_seq(&self) -> u64 {
        self.applied_seq
    }

    pub fn has_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Nothing waits to be written, acknowledged or applied.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_none()
            && self.outbox.is_empty()
            && self.to_apply.is_empty()
            && self.pending_effects.is_empty()
    }

    pub fn has_work_to_apply(&self) -> bool {
        !self.to_apply.is_empty() || self.pending_effects.front().is_some_and(|(n, _, _)| *n == 0)
    }

    /// Starts numbering a new stream from 1.
    pub fn begin_stream(&mut self) {
        self.stream_received = 0;
        self.stream_applied = 0;
    }

    /// Queues a client-visible event. Returns its index in the outbox.
    pub fn event(&mut self, client: Option<ClientRef>, kind: EventKind) -> usize {
        self.outbox.entries.push(Entry::Event { client, kind, span: None });
        self.outbox.entries.len() - 1
    }

    /// Takes in a stream delta (text, thinking, tool-call start or
    /// arguments), merging text, thinking and arguments into the
    /// outbox's last delta of the same kind when that is not written yet.
    pub fn delta(&mut self, kind: EventKind) -> ReceivedEvent<()> {
        self.stream_received += 1;
        let seq = self.stream_received;
        if let Some(Entry::Event { client: None, kind: last, span: Some(span) }) = self.outbox.entries.last_mut() {
            match (last, &kind) {
                (EventKind::TextDelta { text: a }, EventKind::TextDelta { text: b })
                | (EventKind::ThinkingDelta { text: a }, EventKind::ThinkingDelta { text: b }) => {
                    a.push_str(b);
                    span.last = seq;
                    return ReceivedEvent { seq, event: () };
                }
                (
                    EventKind::ToolCallArgs { index: i, fragment: a },
                    EventKind::ToolCallArgs { index: j, fragment: b },
                ) if i == j => {
                    a.push_str(b);
                    span.last = seq;
                    return ReceivedEvent { seq, event: () };
                }
                _ => {}
            }
        }
        self.outbox.entries.push(Entry::Event { client: None, kind, span: Some(StreamSpan { first: seq, last: seq }) });
        ReceivedEvent { seq, event: () }
    }

    /// Takes in the end of the stream.
    pub fn seal(&mut self, info: SealInfo) -> ReceivedEvent<()> {
        self.stream_received += 1;
        let seq = self.stream_received;
        self.outbox.entries.push(Entry::Seal { span: StreamSpan { first: seq, last: seq }, info });
        ReceivedEvent { seq, event: () }
    }

    /// The session seq the outbox event at `index` will get when written.
    pub fn seq_of_outbox_index(&self, index: usize) -> u64 {
        let before = self.outbox.entries[..index.min(self.outbox.entries.len())]
            .iter()
            .filter(|e| matches!(e, Entry::Event { .. }))
            .count();
        self.next_seq + before as u64
    }

    /// Queues a piece of a running tool's output, merged into the outbox's
    /// last piece of the same call and stream while that is unwritten (up
    /// to `MAX_PIECE` bytes: a flood makes many pieces, not one huge event).
    pub fn tool_output(&mut self, call_id: String, stream: &str, text: String) {
        const MAX_PIECE: usize = 64 * 1024;
        if let Some(Entry::Event { kind: EventKind::ToolOutput { call_id: c, stream: s, text: t }, .. }) =
            self.outbox.entries.last_mut()
            && *c == call_id
            && s == stream
            && t.len() + text.len() <= MAX_PIECE
        {
            t.push_str(&text);
            return;
        }
        self.event(None, EventKind::ToolOutput { call_id, stream: stream.to_string(), text });
    }

    /// Drops the outbox's last entry if it is an event matching `pred`
    /// (not yet written, so it never existed).
    pub fn discard_last_event_if(&mut self, pred: impl Fn(&EventKind) -> bool) {
        if let Some(Entry::Event { kind, .. }) = self.outbox.entries.last()
            && pred(kind)
        {
            self.outbox.entries.pop();
        }
    }

    pub fn op(&mut self, op: StoreOp) {
        self.outbox.ops.push(op);
    }

    pub fn effect(&mut self, effect: F) {
        self.outbox.effects.push(effect);
    }

    /// Entries waiting in the outbox (bounded by merging: see tests).
    #[cfg(test)]
    pub fn outbox_len(&self) -> usize {
        self.outbox.entries.len()
    }

    /// The outbox as the next batch, if no write is in flight, its events
    /// stamped `ts_ms`. Session seqs are assigned here, so a failed write
    /// never leaves a gap.
    pub fn take_batch(&mut self, ts_ms: i64) -> Option<(u64, WriteBatch)> {
        if self.in_flight.is_some() || self.outbox.is_empty() {
            return None;
        }
        let outbox = std::mem::take(&mut self.outbox);
        let mut ops = Vec::with_capacity(outbox.entries.len() + outbox.ops.len());
        let mut entries = Vec::with_capacity(outbox.entries.len());
        let mut seqs = Vec::with_capacity(outbox.entries.len());
        for entry in outbox.entries {
            match &entry {
                Entry::Event { client, kind, .. } => {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    let event = SessionEvent {
                        session_id: self.session_id.clone(),
                        seq,
                        ts_ms,
                        client: client.clone(),
                        kind: kind.clone(),
                    };
                    let json = serde_json::to_string(&event).unwrap_or_default();
                    let json: Arc<str> = match crate::event_size::clamp(&json, crate::event_size::MAX_EVENT_BYTES) {
                        std::borrow::Cow::Borrowed(_) => json.into(),
                        std::borrow::Cow::Owned(cut) => cut.into(),
                    };
                    ops.push(StoreOp::AppendEvent {
                        session_id: self.session_id.clone(),
                        seq,
                        ts_ms,
                        kind: kind.name(),
                        body: json.clone(),
                    });
                    seqs.push(Some(seq));
                    entries.push((Some(seq), entry, Some(json)));
                }
                Entry::Seal { .. } => {
                    seqs.push(None);
                    entries.push((None, entry, None));
                }
            }
        }
        ops.extend(outbox.ops);
        let batch_seq = self.next_batch;
        self.next_batch += 1;
        self.in_flight = Some(InFlight { batch_seq, seqs, entries, effects: outbox.effects });
        Some((batch_seq, WriteBatch { ops }))
    }

    /// Handles the writer's ack.
    pub fn on_ack(&mut self, ack: JournalAck) -> Result<AckOutcome<F>, InvariantViolation> {
        let expected = self.in_flight.as_ref().map(|f| f.batch_seq);
        if expected != Some(ack.seq) {
            return Err(InvariantViolation::UnexpectedAck { got: ack.seq, expected });
        }
        let Some(flight) = self.in_flight.take() else {
            return Err(InvariantViolation::UnexpectedAck { got: ack.seq, expected });
        };
        match ack.result {
            Ok(proof) => {
                let proof = Arc::new(proof);
                for (seq, entry, json) in flight.entries {
                    self.to_apply.push_back(Persisted { seq, entry, json, proof: proof.clone() });
                }
                self.pending_effects.push_back((self.to_apply.len(), flight.seqs, flight.effects));
                Ok(AckOutcome::Persisted)
            }
            Err(e) => {
                // Nothing of this batch is applied: its seqs are free again.
                let first = flight.entries.iter().find_map(|(s, _, _)| *s);
                if let Some(first) = first {
                    self.next_seq = first;
                }
                Ok(AckOutcome::Failed { reason: e.to_string(), effects: flight.effects })
            }
        }
    }

    /// The next durable entry to apply, checked for contiguity. Effects
    /// whose batch is fully applied come out through `next_effects`.
    pub fn next_persisted(&mut self) -> Option<Result<Persisted, InvariantViolation>> {
        let p = self.to_apply.pop_front()?;
        for (ahead, _, _) in self.pending_effects.iter_mut() {
            *ahead = ahead.saturating_sub(1);
        }
        if let Some(seq) = p.seq {
            if seq != self.applied_seq + 1 {
                return Some(Err(InvariantViolation::SessionSeqGap { got: seq, last: self.applied_seq }));
            }
            self.applied_seq = seq;
        }
        let span = match &p.entry {
            Entry::Event { span, .. } => *span,
            Entry::Seal { span, .. } => Some(*span),
        };
        if let Some(span) = span {
            if span.first != self.stream_applied + 1 || span.last < span.first {
                return Some(Err(InvariantViolation::StreamSeqGap { got: span.first, last: self.stream_applied }));
            }
            self.stream_applied = span.last;
        }
        Some(Ok(p))
    }

    /// Effects of a batch whose entries are all applied, with the batch's
    /// session seqs by outbox index (what `event()` returned).
    pub fn next_effects(&mut self) -> Option<(Vec<Option<u64>>, Vec<F>)> {
        if self.pending_effects.front().is_some_and(|(ahead, _, _)| *ahead == 0) {
            return self.pending_effects.pop_front().map(|(_, seqs, e)| (seqs, e));
        }
        None
    }

    /// Drops everything not yet durable (after a failure), returning the
    /// effects that will never run. Applied state is untouched.
    pub fn abandon(&mut self) -> Vec<F> {
        let mut effects = std::mem::take(&mut self.outbox).effects;
        if let Some(flight) = self.in_flight.take() {
            effects.extend(flight.effects);
        }
        self.next_seq = self.applied_seq + 1 + self.to_apply.iter().filter(|p| p.seq.is_some()).count() as u64;
        effects
    }

    /// Restarts numbering after the durable state was reloaded.
    pub fn reload(&mut self, last_seq: u64) {
        self.next_seq = last_seq + 1;
        self.applied_seq = last_seq;
        self.in_flight = None;
        self.outbox = Outbox::default();
        self.to_apply.clear();
        self.pending_effects.clear();
    }
}

/// A new session's first batch: its row (`ops`) and its first events,
/// numbered from 1 by the same code that numbers every later batch of the
/// session, so creating and forking assign seqs the way a turn does. The
/// session's machine starts from the journal this batch leaves.
pub(crate) fn first_batch(
    session_id: &str,
    ops: Vec<StoreOp>,
    events: Vec<(Option<ClientRef>, EventKind)>,
    ts_ms: i64,
) -> WriteBatch {
    let mut pipeline: Pipeline<()> = Pipeline::new(session_id.to_string(), 0);
    for op in ops {
        pipeline.op(op);
    }
    for (client, kind) in events {
        pipeline.event(client, kind);
    }
    pipeline.take_batch(ts_ms).map(|(_, batch)| batch).unwrap_or(WriteBatch { ops: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::PersistError;
    use forge_proto::ErrorKind;
    use proptest::prelude::*;

    fn text(t: &str) -> EventKind {
        EventKind::TextDelta { text: t.to_string() }
    }

    fn ok(seq: u64) -> JournalAck {
        JournalAck { seq, result: Ok(PersistedProof::for_tests(seq)) }
    }

    fn failed(seq: u64) -> JournalAck {
        JournalAck { seq, result: Err(PersistError::Blocked("disk full".into())) }
    }

    fn drain(p: &mut Pipeline<u32>) -> Vec<Persisted> {
        let mut out = Vec::new();
        while let Some(r) = p.next_persisted() {
            out.push(r.unwrap_or_else(|v| panic!("{v}")));
        }
        out
    }

    /// A fork's first batch: its row, then `session_created` at seq 1 and
    /// `session_forked` at 2, numbered as any batch of a running session.
    #[test]
    fn a_new_sessions_first_events_are_numbered_from_one() {
        let ops = vec![StoreOp::ForkSession { id: "s2".into(), from: "s1".into(), node: "n".into() }];
        let events = vec![
            (None, EventKind::SessionRenamed { name: None }),
            (None, EventKind::SessionForked { from: "s1".into(), node: "n".into() }),
        ];
        let batch = first_batch("s2", ops, events, 7);
        let seqs: Vec<(u64, &str)> = batch
            .ops
            .iter()
            .filter_map(|op| match op {
                StoreOp::AppendEvent { seq, kind, ts_ms: 7, .. } => Some((*seq, *kind)),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, [(1, "session_renamed"), (2, "session_forked")]);
        assert!(batch.ops.iter().any(|op| matches!(op, StoreOp::ForkSession { .. })));
    }

    #[test]
    fn nothing_is_applicable_before_its_ack() {
        let mut p: Pipeline<u32> = Pipeline::new("s".into(), 0);
        p.begin_stream();
        p.delta(text("hello"));
        assert!(p.next_persisted().is_none());
        let (seq, batch) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        assert_eq!(batch.ops.len(), 1);
        assert!(p.next_persisted().is_none(), "written is not durable");
        assert!(matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted)));
        let applied = drain(&mut p);
        assert_eq!(applied.len(), 1);
        assert_eq!(applied[0].seq, Some(1));
    }

    #[test]
    fn an_unexpected_or_duplicate_ack_is_an_invariant_violation() {
        let mut p: Pipeline<u32> = Pipeline::new("s".into(), 0);
        p.event(None, text("a"));
        let (seq, _) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        assert!(matches!(p.on_ack(ok(seq + 1)), Err(InvariantViolation::UnexpectedAck { .. })));
        assert!(matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted)));
        assert!(matches!(p.on_ack(ok(seq)), Err(InvariantViolation::UnexpectedAck { expected: None, .. })));
    }

    #[test]
    fn a_flood_of_deltas_merges_while_a_write_is_in_flight_and_the_seal_follows_at_once() {
        let mut p: Pipeline<u32> = Pipeline::new("s".into(), 0);
        p.begin_stream();
        p.delta(text("first"));
        let (seq, _) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        for i in 0..100_000 {
            p.delta(text(&format!("{i} ")));
        }
        assert_eq!(p.outbox_len(), 1, "100,000 deltas are one pending entry");
        p.seal(SealInfo { outcome: MessageStatus::Cancelled, error: None });
        assert_eq!(p.outbox_len(), 2, "the cancel is the very next entry, not behind the flood");
        assert!(p.take_batch(0).is_none(), "one write in flight at a time");
        assert!(matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted)));
        drain(&mut p);
        let (seq, batch) = p.take_batch(0).unwrap_or_else(|| panic!("the next batch"));
        assert_eq!(batch.ops.len(), 1, "one delta row; the seal is an op added by the actor");
        assert!(matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted)));
        let applied = drain(&mut p);
        assert!(matches!(applied.last().map(|a| &a.entry), Some(Entry::Seal { .. })));
    }

    #[test]
    fn a_failed_write_applies_nothing_and_hands_back_its_effects() {
        let mut p: Pipeline<u32> = Pipeline::new("s".into(), 10);
        p.event(None, text("a"));
        p.effect(7);
        let (seq, _) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        match p.on_ack(failed(seq)) {
            Ok(AckOutcome::Failed { effects, reason }) => {
                assert_eq!(effects, vec![7]);
                assert!(reason.contains("disk full"));
            }
            _ => panic!("the failure is reported"),
        }
        assert!(p.next_persisted().is_none());
        assert_eq!(p.applied_seq(), 10);
        // The seq is free again: the next event gets 11, no gap.
        p.event(None, text("b"));
        let (seq, batch) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        match &batch.ops[0] {
            StoreOp::AppendEvent { seq, .. } => assert_eq!(*seq, 11),
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted)));
        assert_eq!(drain(&mut p)[0].seq, Some(11));
    }

    #[test]
    fn effects_run_after_their_batch_is_applied_with_its_seqs() {
        let mut p: Pipeline<u32> = Pipeline::new("s".into(), 0);
        let i = p.event(None, text("a"));
        p.effect(1);
        assert_eq!(p.seq_of_outbox_index(i), 1);
        let (seq, _) = p.take_batch(0).unwrap_or_else(|| panic!("a batch"));
        assert!(p.next_effects().is_none());
        let _ = p.on_ack(ok(seq));
        assert!(p.next_effects().is_none(), "not before the entries are applied");
        drain(&mut p);
        assert_eq!(p.next_effects(), Some((vec![Some(1)], vec![1])));
    }

    #[derive(Debug, Clone)]
    enum Step {
        Delta(String),
        Control,
        Cancel,
        NewStream,
        Write,
        AckOk,
        AckFail,
        Apply(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => "[a-z]{0,4}".prop_map(Step::Delta),
            1 => Just(Step::Control),
            1 => Just(Step::Cancel),
            1 => Just(Step::NewStream),
            3 => Just(Step::Write),
            3 => Just(Step::AckOk),
            1 => Just(Step::AckFail),
            3 => (1usize..8).prop_map(Step::Apply),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Over random interleavings of ingest, writes, acks (good and
        /// failed), cancels and applies: applied seqs stay monotonic and
        /// contiguous, applied text is exactly a prefix of what was taken
        /// in, and the outbox stays small however many deltas arrive.
        #[test]
        fn applied_sequence_stays_contiguous_and_queues_bounded(steps in proptest::collection::vec(step(), 1..300)) {
            let mut p: Pipeline<u32> = Pipeline::new("s".into(), 0);
            p.begin_stream();
            let mut sealed = false;
            let mut ingested = String::new();   // text of the current stream, in order
            let mut applied = String::new();
            let mut last_seq = 0u64;
            let mut in_flight: Option<u64> = None;
            let mut controls_since_take = 0usize;
            for s in steps {
                match s {
                    Step::Delta(t) if !sealed && !t.is_empty() => {
                        ingested.push_str(&t);
                        p.delta(text(&t));
                    }
                    Step::Delta(_) => {}
                    Step::Control => {
                        p.event(None, EventKind::CancelRequested {});
                        controls_since_take += 1;
                    }
                    Step::Cancel if !sealed => {
                        p.seal(SealInfo { outcome: MessageStatus::Cancelled, error: Some((ErrorKind::Internal, "x".into())) });
                        sealed = true;
                        controls_since_take += 1;
                    }
                    Step::Cancel => {}
                    Step::NewStream if sealed && p.is_idle() => {
                        p.begin_stream();
                        sealed = false;
                        ingested.clear();
                        applied.clear();
                    }
                    Step::NewStream => {}
                    Step::Write => {
                        if let Some((seq, _)) = p.take_batch(0) {
                            prop_assert!(in_flight.is_none());
                            in_flight = Some(seq);
                            controls_since_take = 0;
                        }
                    }
                    Step::AckOk => {
                        if let Some(seq) = in_flight.take() {
                            let persisted = matches!(p.on_ack(ok(seq)), Ok(AckOutcome::Persisted));
                            prop_assert!(persisted);
                        }
                    }
                    Step::AckFail => {
                        if let Some(seq) = in_flight.take() {
                            let failed_ack = matches!(p.on_ack(failed(seq)), Ok(AckOutcome::Failed { .. }));
                            prop_assert!(failed_ack);
                            // The actor blocks and later reloads from the store.
                            let _ = p.abandon();
                            p.reload(last_seq);
                            p.begin_stream();
                            sealed = false;
                            ingested.clear();
                            applied.clear();
                        }
                    }
                    Step::Apply(n) => {
                        for _ in 0..n {
                            let Some(r) = p.next_persisted() else { break };
                            let r = r.map_err(|v| TestCaseError::fail(v.to_string()))?;
                            if let Some(seq) = r.seq {
                                prop_assert_eq!(seq, last_seq + 1);
                                last_seq = seq;
                            }
                            if let Entry::Event { kind: EventKind::TextDelta { text }, .. } = &r.entry {
                                applied.push_str(text);
                            }
                            let _ = p.next_effects();
                        }
                    }
                }
                prop_assert!(ingested.starts_with(&applied), "applied text is a prefix of the ingested text");
                let len = p.outbox_len();
                prop_assert!(len <= 2 * controls_since_take + 2, "outbox has {} entries", len);
            }
        }
    }
}
