//! The session's side of the journal: batches cut from the pipeline's
//! outbox, the writer's acks, durable entries applied and published (only
//! with the writer's proof), the continuations kept with each batch, and
//! what happens when the store fails (blocked) and comes back (reloaded,
//! recovering what the failure interrupted).

use forge_proto::{EventKind, JournalHealth};

use super::pipeline::{AckOutcome, Entry, MAX_PERSISTED_APPLIES_PER_TICK, Persisted};
use super::state::{self, OperationState};
use super::{Answer, Durable, Effect, Exit, History, OnDurable, ReadyReply, RecoveryCause, Session};
use crate::error::EngineError;
use crate::journal::{HealthState, JournalAck};

impl Session {
    /// Cuts the outbox into the next batch if no write is in flight.
    pub(super) fn cut_batch(&mut self) {
        if self.is_blocked() {
            return;
        }
        if let Some((seq, batch)) = self.pipeline.take_batch(self.clock.now_ms()) {
            self.out.push(Effect::Write { seq, batch });
        }
    }

    pub(super) fn on_ack(&mut self, ack: JournalAck) {
        tracing::trace!(session = %self.row.id, batch = ack.seq, ok = ack.result.is_ok(), "journal ack");
        match self.pipeline.on_ack(ack) {
            Ok(AckOutcome::Persisted) => {}
            Ok(AckOutcome::Failed { reason, effects }) => {
                let err = EngineError::blocked(&reason);
                self.fail(effects, &err);
                self.block(reason);
            }
            Err(violation) => {
                tracing::error!(session = %self.row.id, %violation, "journal invariant violated");
                self.block(format!("internal invariant violated: {violation}"));
            }
        }
    }

    /// Applies durable entries, within the per-tick budget.
    pub(super) fn apply_persisted(&mut self) {
        for _ in 0..MAX_PERSISTED_APPLIES_PER_TICK {
            if let Some((seqs, continuations)) = self.pipeline.next_effects() {
                for c in continuations {
                    self.on_durable(c, &seqs);
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
    /// Only a [`Persisted`] envelope, which carries the writer's proof,
    /// can get here.
    pub(super) fn apply(&mut self, p: Persisted) {
        if let Entry::Seal { info, .. } = &p.entry {
            self.on_sealed(info.clone());
            return;
        }
        if let (Entry::Event { kind, .. }, OperationState::Streaming(s)) = (&p.entry, &mut self.state) {
            match kind {
                EventKind::TextDelta { text } => s.text.push_str(text),
                other => state::fold_tool_call(&mut s.tool_calls, other),
            }
        }
        if let (Some(seq), Some(json)) = (p.seq, p.json) {
            self.row.last_seq = seq;
            self.out.push(Effect::Publish { seq, json, proof: p.proof });
        }
    }

    pub(super) fn on_durable(&mut self, c: OnDurable, seqs: &[Option<u64>]) {
        match c {
            OnDurable::Reply(responder) => self.out.push(Effect::Reply(responder.answer(Ok(seqs)))),
            OnDurable::Info(reply, claim) => self.out.push(Effect::Answer(Box::new(Answer::Info { reply, claim }))),
            OnDurable::TurnDone => {
                self.completions = None;
                let finished = self.finished.take();
                if matches!(self.state, OperationState::Finishing) {
                    if self.commit_turn(finished) {
                        return;
                    }
                    if self.stop_hooks(finished) {
                        return;
                    }
                    self.state = OperationState::Idle;
                    self.report_to_parent(finished);
                }
                self.start_next_queued();
            }
            OnDurable::StartQueued => self.start_next_queued(),
            // Whoever asked it to shut down is still answered.
            OnDurable::Removed if self.exit.is_none() => self.exit = Some(Exit::Removed),
            OnDurable::Removed => {}
            OnDurable::NextTool => self.next_tool(),
            OnDurable::RunTool(call) => self.run_tool(call),
            OnDurable::Launch => self.launch_recorded(),
            OnDurable::Restore => self.restore_files(),
            OnDurable::Helper(out) => self.out.push(Effect::Helper(out)),
        }
    }

    /// Tells the callers among `continuations` that their command failed.
    pub(super) fn fail(&mut self, continuations: Vec<OnDurable>, err: &EngineError) {
        for c in continuations {
            match c {
                OnDurable::Reply(responder) => self.out.push(Effect::Reply(responder.answer(Err(err.clone())))),
                OnDurable::Info(reply, _) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err.clone())))),
                _ => {}
            }
        }
    }

    pub(super) fn on_health(&mut self, state: HealthState) {
        match (&self.state, state.health) {
            (OperationState::PersistenceBlocked { .. }, JournalHealth::Healthy) => {
                // The store is writable again: start over from what is
                // durable, recovering the stream the failure interrupted.
                tracing::info!(session = %self.row.id, "journal healthy again: reloading the session");
                // Nothing runs until the reload (which the shell does at
                // once) has recovered what the failure interrupted.
                self.state = OperationState::Idle;
                let row = Box::new(self.row.clone());
                self.out.push(Effect::Reload { row, cause: RecoveryCause::StoreFailure });
            }
            (OperationState::PersistenceBlocked { .. }, _) => {}
            (_, JournalHealth::Blocked) => {
                self.block(state.reason.unwrap_or_else(|| "the store cannot be written".into()));
            }
            _ => {}
        }
    }

    /// The durable state is read: take it, and recover what it says was
    /// left unfinished (unless the journal is blocked: then recovery waits
    /// for the reset, which reloads).
    pub(super) fn on_loaded(&mut self, durable: Result<Box<Durable>, EngineError>, cause: RecoveryCause) {
        let durable = match durable {
            Ok(d) => *d,
            Err(e) => return self.block(format!("reloading after a reset failed: {e}")),
        };
        self.row = durable.row;
        self.completions = None;
        self.queue = durable.queue.into();
        self.path = durable.path;
        self.spent = durable.spent;
        self.helper_loaded();
        self.summaries = durable.summaries;
        self.in_force = durable.in_force;
        self.interrupted_changes = durable.interrupted_changes;
        self.git_hooks = durable.git_hooks;
        self.history = History::Held { release_armed: false };
        self.pipeline.reload(self.row.last_seq);
        if self.is_blocked() {
            return;
        }
        if let Some((call_id, undone)) = durable.guarded.filter(|(_, u)| !u.is_empty()) {
            self.pipeline.event(None, forge_proto::EventKind::GitSettingsUndone { call_id, undone });
        }
        self.recover(durable.unfinished, cause);
        if let Some(intent) = durable.rewind {
            match self.state {
                OperationState::Idle => self.resume_rewind(intent),
                _ => tracing::error!(session = %self.row.id, "a rewind was left unfinished beside a turn: not resumed"),
            }
        }
        // The next queued message waits until recovery is durable.
        if self.pipeline.is_idle() {
            self.start_next_queued();
        } else {
            self.pipeline.effect(OnDurable::StartQueued);
        }
    }

    /// Fail closed: stop all work, refuse new work, tell every waiter.
    pub(super) fn block(&mut self, reason: String) {
        if self.is_blocked() {
            return;
        }
        tracing::error!(session = %self.row.id, %reason, "session blocked: persistence failed");
        self.completions = None;
        if let OperationState::Streaming(_) = &self.state {
            self.out.push(Effect::StopRequest);
        }
        if let OperationState::ToolLoop(l) = &mut self.state
            && l.running.take().is_some()
        {
            self.out.push(Effect::StopTool);
        }
        let err = EngineError::blocked(&reason);
        let abandoned = self.pipeline.abandon();
        self.fail(abandoned, &err);
        self.state = OperationState::PersistenceBlocked { reason };
    }
}
