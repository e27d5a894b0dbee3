//! The journal writer task.
//!
//! Every batch waiting when a transaction starts goes into it (group
//! commit): under load, transactions grow instead of multiplying. Each batch
//! runs inside its own savepoint, so one bad batch cannot take the others
//! down. A commit that fails is retried (Degraded) and, if it keeps failing
//! (disk full, read-only or deleted database, I/O error), the writer turns
//! Blocked: it refuses every write until an explicit reset proves the store
//! writable again. Nothing acknowledged is ever rolled back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use forge_proto::JournalHealth;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Executor};
use tokio::sync::{mpsc, oneshot, watch};

use super::ops::{apply, apply_group, is_io_error};
use super::{JournalAck, PersistError, PersistedProof, WriteBatch};
use crate::ids::now_ms;

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
    Reset(oneshot::Sender<Result<(), String>>),
}

/// A handle to the writer. Cheap to clone.
#[derive(Clone)]
pub struct JournalWriter {
    tx: mpsc::Sender<Cmd>,
    health: watch::Receiver<HealthState>,
    stats: Arc<JournalStats>,
}

fn blocked_error() -> PersistError {
    PersistError::Blocked("the journal writer stopped".into())
}

impl JournalWriter {
    /// Starts the writer task, which owns `conn` until every handle is gone.
    pub fn spawn(conn: SqliteConnection) -> (JournalWriter, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let (health_tx, health) =
            watch::channel(HealthState { health: JournalHealth::Healthy, reason: None, since_ms: now_ms() });
        let stats = Arc::new(JournalStats::default());
        let task = tokio::spawn(Writer { conn, health: health_tx, stats: stats.clone(), next_batch_id: 1 }.run(rx));
        (JournalWriter { tx, health, stats }, task)
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

    /// Leaves Blocked if a test write succeeds; the error says why not.
    pub async fn reset(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Cmd::Reset(tx)).await.map_err(|_| "the journal writer stopped".to_string())?;
        rx.await.map_err(|_| "the journal writer stopped".to_string())?
    }

    pub fn health(&self) -> HealthState {
        self.health.borrow().clone()
    }

    pub fn watch_health(&self) -> watch::Receiver<HealthState> {
        self.health.clone()
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }
}

struct Writer {
    conn: SqliteConnection,
    health: watch::Sender<HealthState>,
    stats: Arc<JournalStats>,
    next_batch_id: u64,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut group: Vec<WriteRequest> = Vec::with_capacity(64);
        while let Some(first) = rx.recv().await {
            let mut reset = None;
            match first {
                Cmd::Write(w) => group.push(w),
                Cmd::Reset(r) => reset = Some(r),
            }
            // Group commit: take everything already waiting.
            while group.len() < MAX_GROUP && reset.is_none() {
                match rx.try_recv() {
                    Ok(Cmd::Write(w)) => group.push(w),
                    Ok(Cmd::Reset(r)) => reset = Some(r),
                    Err(_) => break,
                }
            }
            if !group.is_empty() {
                self.write_group(&mut group).await;
            }
            if let Some(reply) = reset {
                let _ = reply.send(self.reset().await);
            }
        }
        let _ = self.conn.close().await;
    }

    fn set_health(&self, health: JournalHealth, reason: Option<String>) {
        self.health.send_if_modified(|h| {
            if h.health == health && h.reason == reason {
                return false;
            }
            *h = HealthState { health, reason, since_ms: now_ms() };
            true
        });
    }

    async fn write_group(&mut self, group: &mut Vec<WriteRequest>) {
        let blocked = self.health.borrow().health == JournalHealth::Blocked;
        let results = if blocked {
            let reason = self.health.borrow().reason.clone().unwrap_or_default();
            group.iter().map(|_| Err(PersistError::Blocked(reason.clone()))).collect()
        } else {
            self.commit_with_retries(group).await
        };
        let n = group.len() as u64;
        self.stats.largest_group.fetch_max(n, Ordering::Relaxed);
        for (req, result) in group.drain(..).zip(results) {
            let result = result.map(|()| {
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                self.stats.rows.fetch_add(req.batch.ops.len() as u64, Ordering::Relaxed);
                let proof = PersistedProof { batch_id: self.next_batch_id };
                self.next_batch_id += 1;
                proof
            });
            req.route.send(JournalAck { seq: req.seq, result });
        }
    }

    async fn commit_with_retries(&mut self, group: &[WriteRequest]) -> Vec<Result<(), PersistError>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = Instant::now();
            match try_commit(&mut self.conn, group).await {
                Ok(results) => {
                    self.stats.transactions.fetch_add(1, Ordering::Relaxed);
                    self.stats.last_commit_us.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    if self.health.borrow().health == JournalHealth::Degraded {
                        self.set_health(JournalHealth::Healthy, None);
                    }
                    return results;
                }
                Err(e) => {
                    let _ = self.conn.execute("ROLLBACK").await;
                    self.stats.failed_commits.fetch_add(1, Ordering::Relaxed);
                    let reason = describe(&e);
                    tracing::warn!(attempt, error = %reason, "journal commit failed");
                    if attempt >= COMMIT_ATTEMPTS {
                        tracing::error!(error = %reason, "journal writer blocked: the store cannot be written");
                        self.set_health(JournalHealth::Blocked, Some(reason.clone()));
                        return group.iter().map(|_| Err(PersistError::Blocked(reason.clone()))).collect();
                    }
                    self.set_health(JournalHealth::Degraded, Some(reason));
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
            }
        }
    }

    async fn reset(&mut self) -> Result<(), String> {
        let probe = async {
            self.conn.execute("BEGIN IMMEDIATE").await?;
            sqlx::query("INSERT INTO journal_meta (key, value) VALUES ('last_reset_ms', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
                .bind(now_ms().to_string())
                .execute(&mut self.conn)
                .await?;
            self.conn.execute("COMMIT").await?;
            Ok::<(), sqlx::Error>(())
        };
        match probe.await {
            Ok(()) => {
                tracing::info!("journal reset: the store is writable again");
                self.set_health(JournalHealth::Healthy, None);
                Ok(())
            }
            Err(e) => {
                let _ = self.conn.execute("ROLLBACK").await;
                let reason = describe(&e);
                self.set_health(JournalHealth::Blocked, Some(reason.clone()));
                Err(reason)
            }
        }
    }
}

/// A failure in words a user can act on.
fn describe(e: &sqlx::Error) -> String {
    let text = e.to_string();
    let lower = text.to_lowercase();
    if lower.contains("full") {
        format!("the disk is full ({text})")
    } else if lower.contains("readonly") || lower.contains("read-only") || lower.contains("read only") {
        format!("the database is read-only ({text})")
    } else {
        text
    }
}

/// The fast path: the whole group in one round trip. If anything fails,
/// the careful path below finds out which batch and whether the store or
/// the batch is at fault.
async fn try_commit(
    conn: &mut SqliteConnection,
    group: &[WriteRequest],
) -> Result<Vec<Result<(), PersistError>>, sqlx::Error> {
    match apply_group(conn, group.iter().map(|r| &r.batch)).await {
        Ok(()) => Ok(group.iter().map(|_| Ok(())).collect()),
        Err(e) => {
            tracing::debug!(error = %e, "group write failed; retrying batch by batch");
            let _ = conn.execute("ROLLBACK").await;
            try_commit_each(conn, group).await
        }
    }
}

async fn try_commit_each(
    conn: &mut SqliteConnection,
    group: &[WriteRequest],
) -> Result<Vec<Result<(), PersistError>>, sqlx::Error> {
    conn.execute("BEGIN IMMEDIATE").await?;
    let mut results = Vec::with_capacity(group.len());
    // Each statement is a round trip to SQLite's thread: a lone batch needs
    // no savepoint to be isolated from others.
    let isolate = group.len() > 1;
    for req in group {
        if isolate {
            conn.execute("SAVEPOINT batch").await?;
        }
        let mut outcome = Ok(());
        for op in &req.batch.ops {
            if let Err(e) = apply(conn, op).await {
                if is_io_error(&e) {
                    return Err(e);
                }
                // A batch that breaks a constraint is a bug in the daemon:
                // refuse it alone, keep the store and the other batches.
                tracing::error!(error = %e, "a journal batch was rejected by the store");
                outcome = Err(PersistError::Blocked(format!("a write was rejected by the store: {e}")));
                break;
            }
        }
        if isolate {
            if outcome.is_err() {
                conn.execute("ROLLBACK TO batch").await?;
            }
            conn.execute("RELEASE batch").await?;
        } else if outcome.is_err() {
            conn.execute("ROLLBACK").await?;
            return Ok(results.into_iter().chain([outcome]).collect());
        }
        results.push(outcome);
    }
    conn.execute("COMMIT").await?;
    Ok(results)
}
