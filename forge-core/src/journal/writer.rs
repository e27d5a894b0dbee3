//! The journal writer: one thread with its own SQLite connection.
//!
//! A thread of its own, not a task: a commit then costs one wake-up to get
//! here and one to send the ack back, and a slow disk (fsync with
//! `durability = "power"`) never holds up a runtime worker.
//!
//! Every batch waiting when a transaction starts goes into it (group
//! commit): under load, transactions grow instead of multiplying. Each batch
//! runs inside its own savepoint, so one bad batch cannot take the others
//! down. A commit that fails is retried (Degraded) and, if it keeps failing
//! (disk full, read-only or deleted database, I/O error), the writer turns
//! Blocked: it refuses every write until an explicit reset proves the store
//! writable again. Nothing acknowledged is ever rolled back.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_proto::JournalHealth;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot, watch};

use super::delta_log::{self, DeltaLog};
use super::{JournalAck, PersistError, PersistedProof, WriteBatch};
use crate::config::Durability;
use crate::ids::now_ms;

mod group;
mod restore;
mod sql;

use sql::{describe, exec, rollback};

/// Commands waiting for the writer before submitters wait.
const QUEUE_DEPTH: usize = 1024;
/// Most batches folded into one transaction.
const MAX_GROUP: usize = 512;
/// Attempts of a failing commit before the writer blocks.
const COMMIT_ATTEMPTS: u32 = 3;

/// Health with the reason, for status displays and blocked errors.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthState {
    pub health: JournalHealth,
    /// Why the writer is degraded or blocked.
    pub reason: Option<String>,
    pub since_ms: i64,
}

/// Counters for `forgectl journal` and the benchmarks.
#[derive(Debug, Default)]
pub struct JournalStats {
    pub transactions: AtomicU64,
    pub batches: AtomicU64,
    pub rows: AtomicU64,
    pub failed_commits: AtomicU64,
    pub largest_group: AtomicU64,
    pub last_commit_us: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub transactions: u64,
    pub batches: u64,
    pub rows: u64,
    pub failed_commits: u64,
    pub largest_group: u64,
    pub last_commit_us: u64,
}

impl JournalStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            transactions: self.transactions.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            failed_commits: self.failed_commits.load(Ordering::Relaxed),
            largest_group: self.largest_group.load(Ordering::Relaxed),
            last_commit_us: self.last_commit_us.load(Ordering::Relaxed),
        }
    }
}

enum AckRoute {
    Session(mpsc::Sender<JournalAck>),
    Once(oneshot::Sender<JournalAck>),
}

impl AckRoute {
    fn send(self, ack: JournalAck) {
        match self {
            // The session's ack channel has room for every batch it may have
            // in flight; a full or closed channel means the session is gone.
            AckRoute::Session(tx) => drop(tx.try_send(ack)),
            AckRoute::Once(tx) => drop(tx.send(ack)),
        }
    }
}

struct WriteRequest {
    seq: u64,
    batch: WriteBatch,
    route: AckRoute,
}

enum Cmd {
    Write(WriteRequest),
    /// Try a write; if it works, return to Healthy.
    Reset(oneshot::Sender<Result<ResetOutcome, String>>),
    /// Check that the database on disk is still the one being written
    /// (writing it back if not; the error: it could not be).
    Verify(oneshot::Sender<Result<(), String>>),
    /// Commits made elsewhere grew the WAL: checkpoint it here.
    Checkpoint,
    /// Move the delta log's events into SQLite (and say when it is done).
    Flush(Option<oneshot::Sender<()>>),
    /// The daemon stops: everything into SQLite, and a database deleted
    /// or replaced on disk written back to its path first.
    Close(oneshot::Sender<Result<(), String>>),
}

/// What a successful reset did.
#[derive(Debug, Clone, PartialEq)]
pub enum ResetOutcome {
    /// The store is writable: the journal is healthy again.
    Healthy,
    /// The database had been deleted or replaced on disk and was written
    /// back to its path; the text says so (and where anything found in its
    /// place was moved). Readers must reopen the store, then reset again.
    Restored(String),
}

/// A handle to the writer. Cheap to clone.
#[derive(Clone)]
pub struct JournalWriter {
    tx: mpsc::Sender<Cmd>,
    health: watch::Receiver<HealthState>,
    stats: Arc<JournalStats>,
    core: Arc<Mutex<Writer>>,
    /// Whether a session may commit on its own thread when the writer is
    /// idle: only when a commit never waits for the disk.
    inline: bool,
    /// Batches in the delta log and not yet in SQLite.
    pending: Arc<AtomicUsize>,
}

fn blocked_error() -> PersistError {
    PersistError::Blocked("the journal writer stopped".into())
}

impl JournalWriter {
    /// Opens the writer's connection to the (already migrated) store at
    /// `path` and starts the writer thread, which runs until every handle
    /// is gone.
    pub fn spawn(path: &Path, durability: Durability) -> Result<(JournalWriter, std::thread::JoinHandle<()>), String> {
        let conn = open(path, durability).map_err(|e| describe(&e))?;
        // Before anyone reads the store: what the last run acked into the
        // delta log joins the rest.
        let deltas_path = delta_log::path_for(path);
        delta_log::recover(&conn, &deltas_path)?;
        let deltas_path = (durability == Durability::Process).then_some(deltas_path);
        let deltas = deltas_path.as_deref().and_then(open_deltas);
        let pending = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let (health_tx, health) =
            watch::channel(HealthState { health: JournalHealth::Healthy, reason: None, since_ms: now_ms() });
        let stats = Arc::new(JournalStats::default());
        let core = Arc::new(Mutex::new(Writer {
            conn,
            db_path: path.to_path_buf(),
            durability,
            wal_id: None,
            deltas_unlinked: false,
            health: health_tx,
            stats: stats.clone(),
            next_batch_id: 1,
            commits_since_checkpoint: 0,
            deltas,
            deltas_path,
            pending: Vec::new(),
            pending_count: pending.clone(),
            written_back: None,
        }));
        let thread_core = core.clone();
        let thread = std::thread::Builder::new()
            .name("forge-journal".into())
            .spawn(move || run(&thread_core, rx, durability))
            .map_err(|e| format!("cannot start the journal writer thread: {e}"))?;
        let inline = durability == Durability::Process;
        Ok((JournalWriter { tx, health, stats, core, inline, pending }, thread))
    }

    /// Commits batch `seq` at once on the calling thread if the writer is
    /// idle and healthy and a commit cannot wait for the disk (durability
    /// "process": no fsync; checkpoints run on the writer thread). Saves the
    /// two thread wake-ups of a round trip through the writer, which is
    /// most of a chunk's latency when a stream is paced. Hands the batch
    /// back when the writer is busy, or when the commit failed for a reason
    /// the writer thread's retries should deal with; a batch the store
    /// rejects is acknowledged as failed, as the thread would.
    pub fn try_write_inline(&self, seq: u64, mut batch: WriteBatch) -> Result<JournalAck, WriteBatch> {
        if !self.inline {
            return Err(batch);
        }
        let Ok(mut core) = self.core.try_lock() else { return Err(batch) };
        if core.health.borrow().health != JournalHealth::Healthy {
            return Err(batch);
        }
        if core.deltas.is_some() && delta_log::accepts(&batch) {
            match core.log_deltas(batch) {
                Ok(proof) => return Ok(JournalAck { seq, result: Ok(proof) }),
                Err(b) => batch = b,
            }
        }
        let started = Instant::now();
        match core.commit(&[&batch]) {
            Ok(mut results) => {
                core.committed(started);
                let result = results.pop().unwrap_or(Ok(()));
                let ack = JournalAck { seq, result: result.map(|()| core.mint_proof(&batch)) };
                if core.commits_since_checkpoint == CHECKPOINT_EVERY {
                    let _ = self.tx.try_send(Cmd::Checkpoint);
                }
                Ok(ack)
            }
            Err(e) => {
                rollback(&core.conn);
                tracing::debug!(error = %e, "inline journal commit failed; the writer thread retries");
                Err(batch)
            }
        }
    }

    /// Queues batch `seq`; its ack arrives on `acks`. Waits while the
    /// writer's queue is full: the submitting session is backpressured, no
    /// one else.
    pub async fn submit(&self, seq: u64, batch: WriteBatch, acks: &mpsc::Sender<JournalAck>) {
        let req = WriteRequest { seq, batch, route: AckRoute::Session(acks.clone()) };
        if let Err(mpsc::error::SendError(Cmd::Write(req))) = self.tx.send(Cmd::Write(req)).await {
            req.route.send(JournalAck { seq, result: Err(blocked_error()) });
        }
    }

    /// Writes a batch and waits for it to be durable.
    pub async fn write(&self, batch: WriteBatch) -> Result<PersistedProof, PersistError> {
        let (tx, rx) = oneshot::channel();
        let req = WriteRequest { seq: 0, batch, route: AckRoute::Once(tx) };
        if self.tx.send(Cmd::Write(req)).await.is_err() {
            return Err(blocked_error());
        }
        rx.await.map_err(|_| blocked_error())?.result
    }

    /// Asks the writer thread to move the delta log into SQLite. Sessions
    /// call this a moment after their last inline write, once the event
    /// has reached its clients.
    pub fn apply_soon(&self) {
        if self.pending.load(Ordering::Acquire) > 0 {
            let _ = self.tx.try_send(Cmd::Flush(None));
        }
    }

    /// Waits until every acknowledged event is in SQLite, for readers of
    /// the event log.
    pub async fn sync(&self) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(Some(tx))).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Leaves Blocked if a test write succeeds; the error says why not. A
    /// database deleted or replaced under the daemon is first written back
    /// to its path from the connection that still holds it
    /// ([`ResetOutcome::Restored`]); the journal stays blocked until the
    /// next reset, once readers have reopened the store.
    pub async fn reset(&self) -> Result<ResetOutcome, String> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Cmd::Reset(tx)).await.map_err(|_| "the journal writer stopped".to_string())?;
        rx.await.map_err(|_| "the journal writer stopped".to_string())?
    }

    pub fn health(&self) -> HealthState {
        self.health.borrow().clone()
    }

    /// Before the daemon stops: every acknowledged event into SQLite, and
    /// a database deleted or replaced on disk written back to its path
    /// (the error says why it could not be: stopping then loses it).
    pub async fn close(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Cmd::Close(tx)).await.map_err(|_| "the journal writer stopped".to_string())?;
        rx.await.map_err(|_| "the journal writer stopped".to_string())?
    }

    /// Blocks the journal now if its database was deleted or replaced on
    /// disk, and writes it back to its path at once, so that a crash
    /// before the reset loses nothing (writes notice it themselves; this
    /// is for the daemon's periodic check and status queries).
    pub async fn verify(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Cmd::Verify(tx)).await.map_err(|_| "the journal writer stopped".to_string())?;
        rx.await.map_err(|_| "the journal writer stopped".to_string())?
    }

    pub fn watch_health(&self) -> watch::Receiver<HealthState> {
        self.health.clone()
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }
}

fn open_deltas(path: &Path) -> Option<DeltaLog> {
    DeltaLog::open(path)
        .map_err(|e| tracing::warn!(path = %path.display(), error = %e, "no delta log: every write goes to SQLite"))
        .ok()
}

fn open(path: &Path, durability: Durability) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Process => "NORMAL",
            Durability::Power => "FULL",
        },
    )?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// The writer thread's loop: every batch waiting when a transaction
/// starts goes into it.
fn run(core: &Mutex<Writer>, mut rx: mpsc::Receiver<Cmd>, durability: Durability) {
    let mut group: Vec<WriteRequest> = Vec::with_capacity(64);
    let mut flushed = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut reset = None;
        let mut verify = Vec::new();
        let mut close = None;
        match first {
            Cmd::Write(w) => {
                group.push(w);
                // Batches that come here in "process" mode are from steady
                // streams (a quiet session commits inline): wait a moment so
                // that more chunks join the transaction. Fewer, larger commits
                // leave the CPU to parsing under floods. With "power", the
                // fsync is that moment.
                if durability == Durability::Process {
                    std::thread::sleep(COMMIT_DELAY);
                }
            }
            Cmd::Reset(r) => reset = Some(r),
            Cmd::Verify(r) => verify.push(r),
            Cmd::Checkpoint => {}
            Cmd::Flush(r) => flushed.extend(r),
            Cmd::Close(r) => close = Some(r),
        }
        while group.len() < MAX_GROUP && reset.is_none() && close.is_none() {
            match rx.try_recv() {
                Ok(Cmd::Write(w)) => group.push(w),
                Ok(Cmd::Reset(r)) => reset = Some(r),
                Ok(Cmd::Verify(r)) => verify.push(r),
                Ok(Cmd::Checkpoint) => {}
                Ok(Cmd::Flush(r)) => flushed.extend(r),
                Ok(Cmd::Close(r)) => close = Some(r),
                Err(_) => break,
            }
        }
        // A panic elsewhere while holding the lock left no transaction
        // open (every path rolls back), so the writer carries on.
        let mut writer = core.lock().unwrap_or_else(|p| p.into_inner());
        if !group.is_empty() {
            writer.write_group(&mut group);
        }
        if let Some(reply) = reset {
            let _ = reply.send(writer.reset());
        }
        if !verify.is_empty() {
            let checked = writer.write_back_if_moved();
            for reply in verify.drain(..) {
                let _ = reply.send(checked.clone());
            }
        }
        // A group's commit took the delta log along; otherwise, now.
        writer.apply_deltas();
        for reply in flushed.drain(..) {
            let _ = reply.send(());
        }
        writer.checkpoint_if_due();
        if let Some(reply) = close {
            let _ = reply.send(writer.write_back_if_moved());
        }
    }
    // Every handle is gone: leave nothing for the next start to recover,
    // not even lines already applied.
    let mut writer = core.lock().unwrap_or_else(|p| p.into_inner());
    writer.apply_deltas();
    if writer.pending.is_empty()
        && let Some(log) = writer.deltas.as_mut()
    {
        let _ = log.empty();
    }
}

/// How long the writer thread lets a group gather (see `run`).
const COMMIT_DELAY: Duration = Duration::from_micros(200);

/// Commits between WAL checkpoints (a small commit adds a few pages).
const CHECKPOINT_EVERY: u32 = 256;

struct Writer {
    conn: Connection,
    db_path: std::path::PathBuf,
    durability: Durability,
    /// The WAL file's (device, inode) once seen. The connection keeps the
    /// WAL open for its whole life, so another file at its path means
    /// commits would go where no start-up looks.
    wal_id: Option<(u64, u64)>,
    /// The delta log's file was removed: a new one is opened once its
    /// pending batches are in SQLite.
    deltas_unlinked: bool,
    health: watch::Sender<HealthState>,
    stats: Arc<JournalStats>,
    next_batch_id: u64,
    commits_since_checkpoint: u32,
    /// `None` with durability "power", or after the file failed.
    deltas: Option<DeltaLog>,
    /// Where the delta log lives ("process" durability only).
    deltas_path: Option<std::path::PathBuf>,
    /// Acked batches in the delta log, not yet in SQLite, oldest first.
    pending: Vec<WriteBatch>,
    pending_count: Arc<AtomicUsize>,
    /// The database was written back after it was deleted or replaced on
    /// disk, before any reset: the next reset reports it, so that readers
    /// reopen the store.
    written_back: Option<String>,
}

impl Writer {
    /// Acks `batch` by appending it to the delta log; hands it back if the
    /// file cannot be written (SQLite takes it then, or fails closed).
    fn log_deltas(&mut self, batch: WriteBatch) -> Result<PersistedProof, WriteBatch> {
        // An ack promises the event reaches the store the next start opens.
        if self.store_moved().is_some() {
            return Err(batch);
        }
        let Some(log) = self.deltas.as_mut() else { return Err(batch) };
        if log.is_unlinked() {
            tracing::warn!("the delta log was removed; its acknowledged events go to SQLite, then a new log is opened");
            self.deltas = None;
            self.deltas_unlinked = true;
            return Err(batch);
        }
        if let Err(e) = log.append(&batch) {
            tracing::warn!(error = %e, "the delta log cannot be written; events go to SQLite directly from now on");
            self.deltas = None;
            return Err(batch);
        }
        let proof = self.mint_proof(&batch);
        self.pending.push(batch);
        self.pending_count.store(self.pending.len(), Ordering::Release);
        Ok(proof)
    }

    /// Moves pending delta-log batches into SQLite (unless blocked: then
    /// they wait in the file and in memory for a reset or the next start).
    pub(super) fn apply_deltas(&mut self) {
        if self.pending.is_empty() || self.health.borrow().health == JournalHealth::Blocked {
            return;
        }
        let results = self.commit_with_retries(&[]);
        debug_assert!(results.is_empty());
    }

    pub(super) fn committed(&mut self, started: Instant) {
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        self.stats.last_commit_us.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.commits_since_checkpoint += 1;
    }

    pub(super) fn mint_proof(&mut self, batch: &WriteBatch) -> PersistedProof {
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats.rows.fetch_add(batch.ops.len() as u64, Ordering::Relaxed);
        let proof = PersistedProof { batch_id: self.next_batch_id };
        self.next_batch_id += 1;
        proof
    }

    /// SQLite's own checkpoints are off on this connection: they would run
    /// inside whichever commit crossed the limit, possibly inline on a
    /// session's thread, and a checkpoint waits for the disk.
    fn checkpoint_if_due(&mut self) {
        if self.commits_since_checkpoint < CHECKPOINT_EVERY {
            return;
        }
        self.commits_since_checkpoint = 0;
        if let Err(e) = self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "WAL checkpoint failed; retried later");
        }
    }

    pub(super) fn set_health(&self, health: JournalHealth, reason: Option<String>) {
        self.health.send_if_modified(|h| {
            if h.health == health && h.reason == reason {
                return false;
            }
            *h = HealthState { health, reason, since_ms: now_ms() };
            true
        });
    }

    fn reset(&mut self) -> Result<ResetOutcome, String> {
        if let Some(note) = self.written_back.take() {
            self.set_health(JournalHealth::Blocked, Some(format!("{note}; finishing the reset")));
            return Ok(ResetOutcome::Restored(note));
        }
        if self.store_moved().is_some() {
            return match self.restore() {
                Ok(note) => {
                    // Readers reopen the store before the next reset says Healthy.
                    self.set_health(JournalHealth::Blocked, Some(format!("{note}; finishing the reset")));
                    Ok(ResetOutcome::Restored(note))
                }
                Err(reason) => {
                    self.set_health(JournalHealth::Blocked, Some(reason.clone()));
                    Err(reason)
                }
            };
        }
        let probe = || -> rusqlite::Result<()> {
            exec(&self.conn, "BEGIN IMMEDIATE")?;
            self.conn.execute(
                "INSERT INTO journal_meta (key, value) VALUES ('last_reset_ms', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [now_ms().to_string()],
            )?;
            exec(&self.conn, "COMMIT")
        };
        // What the delta log acked while the store failed must be in SQLite
        // before Healthy: sessions reload from SQLite when they see it.
        let outcome = probe().and_then(|()| self.commit(&[]).map(drop));
        match outcome {
            Ok(()) => {
                tracing::info!("journal reset: the store is writable again");
                self.set_health(JournalHealth::Healthy, None);
                // The delta log may have been given up on the way here
                // (perhaps leaving a torn line): start it afresh, now that
                // everything it held is in SQLite.
                if self.deltas.is_none() && self.pending.is_empty() {
                    self.deltas = self.deltas_path.as_deref().and_then(open_deltas).and_then(|mut log| {
                        log.empty().map_err(|e| tracing::warn!(error = %e, "cannot empty the delta log")).ok()?;
                        Some(log)
                    });
                }
                Ok(ResetOutcome::Healthy)
            }
            Err(e) => {
                rollback(&self.conn);
                let reason = describe(&e);
                self.set_health(JournalHealth::Blocked, Some(reason.clone()));
                Err(reason)
            }
        }
    }
}

#[cfg(test)]
mod tests;
