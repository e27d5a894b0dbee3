//! The journal writer: the single task that writes the store.
//!
//! Sessions hand it [`WriteBatch`]es over a bounded channel and get a
//! [`WriteAck`] back. Every batch waiting when a transaction starts goes
//! into that transaction (group commit), so a flood of small writes costs few
//! commits. A successful ack carries a [`PersistedProof`], which only this
//! module can make: code that publishes events to clients demands one, so
//! nothing is shown before it is on disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use forge_proto::JournalHealth;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Executor};
use tokio::sync::{mpsc, oneshot, watch};

use crate::store::rows::{NodeMeta, enum_str};
use forge_proto::{ClientRef, MessageStatus, Role};

/// How many batches may wait for the writer before senders wait.
const QUEUE_DEPTH: usize = 1024;
/// Most batches folded into one transaction.
const MAX_GROUP: usize = 512;
/// Retries of a failing commit before the writer declares itself blocked.
const COMMIT_RETRIES: u32 = 3;

/// One change to the store. A batch's ops apply atomically, in order.
#[derive(Debug, Clone)]
pub enum StoreOp {
    CreateSession {
        id: String,
        name: Option<String>,
        cwd: String,
        provider: String,
        model: String,
        created_ms: i64,
    },
    RenameSession { id: String, name: Option<String> },
    RemoveSession { id: String },
    /// Appends an event; `body` is the event's JSON as clients receive it.
    AppendEvent { session_id: String, seq: u64, ts_ms: i64, kind: &'static str, body: Arc<str> },
    InsertNode {
        id: String,
        session_id: String,
        parent_id: Option<String>,
        role: Role,
        text: String,
        status: MessageStatus,
        created_ms: i64,
        meta: NodeMeta,
    },
    SetHead { session_id: String, head_id: Option<String> },
    QueuePush { session_id: String, message_id: String, text: String, client: Option<ClientRef>, created_ms: i64 },
    QueueRemove { session_id: String, message_id: String },
    QueueClear { session_id: String },
}

#[derive(Debug, Default)]
pub struct WriteBatch {
    pub ops: Vec<StoreOp>,
}

/// Proof that a batch is durable. Only the writer constructs it.
#[derive(Debug)]
pub struct PersistedProof {
    batch_id: u64,
}

impl PersistedProof {
    pub fn batch_id(&self) -> u64 {
        self.batch_id
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum PersistError {
    /// The batch itself was invalid (e.g. a name taken): nothing of it was
    /// written, the store is fine.
    #[error("rejected by the store: {0}")]
    Rejected(String),
    /// The store cannot be written; the daemon must stop taking work.
    #[error("the store cannot be written: {0}")]
    Blocked(String),
}

#[derive(Debug)]
pub struct WriteAck {
    pub result: Result<PersistedProof, PersistError>,
}

struct WriteRequest {
    batch: WriteBatch,
    ack: oneshot::Sender<WriteAck>,
}

/// Counters shown by `daemon.status` and benchmarks.
#[derive(Debug, Default)]
pub struct JournalStats {
    pub batches: AtomicU64,
    pub transactions: AtomicU64,
    pub ops: AtomicU64,
}

/// A handle to the writer. Cheap to clone.
#[derive(Clone)]
pub struct JournalWriter {
    tx: mpsc::Sender<WriteRequest>,
    health: watch::Receiver<JournalHealth>,
    pub stats: Arc<JournalStats>,
}

impl JournalWriter {
    /// Starts the writer task, which owns `conn` until every handle is gone.
    pub fn spawn(conn: SqliteConnection) -> (JournalWriter, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let (health_tx, health) = watch::channel(JournalHealth::Healthy);
        let stats = Arc::new(JournalStats::default());
        let task = tokio::spawn(run(conn, rx, health_tx, stats.clone()));
        (JournalWriter { tx, health, stats }, task)
    }

    /// Queues a batch; the returned receiver yields its ack. Waits while the
    /// writer's queue is full (the caller's turn is then backpressured).
    pub async fn submit(&self, batch: WriteBatch) -> oneshot::Receiver<WriteAck> {
        let (ack, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(req)) = self.tx.send(WriteRequest { batch, ack }).await {
            let _ = req.ack.send(WriteAck { result: Err(PersistError::Blocked("the journal writer stopped".into())) });
        }
        rx
    }

    /// Writes a batch and waits for its ack.
    pub async fn write(&self, batch: WriteBatch) -> Result<PersistedProof, PersistError> {
        match self.submit(batch).await.await {
            Ok(ack) => ack.result,
            Err(_) => Err(PersistError::Blocked("the journal writer stopped".into())),
        }
    }

    pub fn health(&self) -> JournalHealth {
        self.health.borrow().clone()
    }
}

async fn run(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<WriteRequest>,
    health: watch::Sender<JournalHealth>,
    stats: Arc<JournalStats>,
) {
    let mut next_batch_id: u64 = 1;
    let mut group: Vec<WriteRequest> = Vec::with_capacity(64);
    while let Some(first) = rx.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(r) => group.push(r),
                Err(_) => break,
            }
        }
        if *health.borrow() == JournalHealth::Blocked {
            for req in group.drain(..) {
                let _ = req.ack.send(WriteAck {
                    result: Err(PersistError::Blocked("the store is blocked after an earlier write failure".into())),
                });
            }
            continue;
        }
        let results = commit_group(&mut conn, &group, &health).await;
        stats.transactions.fetch_add(1, Ordering::Relaxed);
        for (req, result) in group.drain(..).zip(results) {
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.ops.fetch_add(req.batch.ops.len() as u64, Ordering::Relaxed);
            let result = result.map(|()| {
                let proof = PersistedProof { batch_id: next_batch_id };
                next_batch_id += 1;
                proof
            });
            let _ = req.ack.send(WriteAck { result });
        }
    }
    let _ = conn.close().await;
}

/// Writes a group in one transaction, each batch inside its own savepoint
/// so that a rejected batch does not take the others down with it.
async fn commit_group(
    conn: &mut SqliteConnection,
    group: &[WriteRequest],
    health: &watch::Sender<JournalHealth>,
) -> Vec<Result<(), PersistError>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_commit_group(conn, group).await {
            Ok(results) => {
                if *health.borrow() != JournalHealth::Healthy {
                    health.send_replace(JournalHealth::Healthy);
                }
                return results;
            }
            Err(e) => {
                let _ = conn.execute("ROLLBACK").await;
                tracing::warn!(attempt, error = %e, "journal commit failed");
                if attempt >= COMMIT_RETRIES {
                    tracing::error!(error = %e, "journal writer blocked: the store cannot be written");
                    health.send_replace(JournalHealth::Blocked);
                    let msg = e.to_string();
                    return group.iter().map(|_| Err(PersistError::Blocked(msg.clone()))).collect();
                }
                health.send_replace(JournalHealth::Degraded);
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
            }
        }
    }
}

async fn try_commit_group(
    conn: &mut SqliteConnection,
    group: &[WriteRequest],
) -> Result<Vec<Result<(), PersistError>>, sqlx::Error> {
    conn.execute("BEGIN IMMEDIATE").await?;
    let mut results = Vec::with_capacity(group.len());
    for req in group {
        conn.execute("SAVEPOINT batch").await?;
        let mut outcome = Ok(());
        for op in &req.batch.ops {
            if let Err(e) = apply(conn, op).await {
                if is_io_error(&e) {
                    return Err(e);
                }
                outcome = Err(PersistError::Rejected(e.to_string()));
                break;
            }
        }
        if outcome.is_err() {
            conn.execute("ROLLBACK TO batch").await?;
        }
        conn.execute("RELEASE batch").await?;
        results.push(outcome);
    }
    conn.execute("COMMIT").await?;
    Ok(results)
}

/// Constraint violations are the batch's fault; anything else is the
/// store's (disk full, read-only, I/O).
fn is_io_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => !matches!(
            db.kind(),
            sqlx::error::ErrorKind::UniqueViolation
                | sqlx::error::ErrorKind::ForeignKeyViolation
                | sqlx::error::ErrorKind::NotNullViolation
                | sqlx::error::ErrorKind::CheckViolation
        ),
        _ => true,
    }
}

async fn apply(conn: &mut SqliteConnection, op: &StoreOp) -> Result<(), sqlx::Error> {
    match op {
        StoreOp::CreateSession { id, name, cwd, provider, model, created_ms } => {
            sqlx::query(
                "INSERT INTO sessions (id, name, cwd, provider, model, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(name)
            .bind(cwd)
            .bind(provider)
            .bind(model)
            .bind(created_ms)
            .bind(created_ms)
            .execute(&mut *conn)
            .await?;
        }
        StoreOp::RenameSession { id, name } => {
            sqlx::query("UPDATE sessions SET name = ? WHERE id = ?").bind(name).bind(id).execute(&mut *conn).await?;
        }
        StoreOp::RemoveSession { id } => {
            for sql in [
                "DELETE FROM events WHERE session_id = ?",
                "DELETE FROM nodes WHERE session_id = ?",
                "DELETE FROM queued_messages WHERE session_id = ?",
                "DELETE FROM sessions WHERE id = ?",
            ] {
                sqlx::query(sql).bind(id).execute(&mut *conn).await?;
            }
        }
        StoreOp::AppendEvent { session_id, seq, ts_ms, kind, body } => {
            sqlx::query("INSERT INTO events (session_id, seq, ts_ms, kind, body) VALUES (?, ?, ?, ?, ?)")
                .bind(session_id)
                .bind(*seq as i64)
                .bind(ts_ms)
                .bind(*kind)
                .bind(&**body)
                .execute(&mut *conn)
                .await?;
            sqlx::query("UPDATE sessions SET last_seq = ?, updated_ms = ? WHERE id = ?")
                .bind(*seq as i64)
                .bind(ts_ms)
                .bind(session_id)
                .execute(&mut *conn)
                .await?;
        }
        StoreOp::InsertNode { id, session_id, parent_id, role, text, status, created_ms, meta } => {
            let meta = serde_json::to_string(meta).unwrap_or_else(|_| "{}".into());
            sqlx::query(
                "INSERT INTO nodes (id, session_id, parent_id, role, text, status, created_ms, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(session_id)
            .bind(parent_id)
            .bind(enum_str(role))
            .bind(text)
            .bind(enum_str(status))
            .bind(created_ms)
            .bind(meta)
            .execute(&mut *conn)
            .await?;
        }
        StoreOp::SetHead { session_id, head_id } => {
            sqlx::query("UPDATE sessions SET head_id = ? WHERE id = ?")
                .bind(head_id)
                .bind(session_id)
                .execute(&mut *conn)
                .await?;
        }
        StoreOp::QueuePush { session_id, message_id, text, client, created_ms } => {
            let client = client.as_ref().and_then(|c| serde_json::to_string(c).ok());
            sqlx::query(
                "INSERT INTO queued_messages (session_id, message_id, text, client, created_ms) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(session_id)
            .bind(message_id)
            .bind(text)
            .bind(client)
            .bind(created_ms)
            .execute(&mut *conn)
            .await?;
        }
        StoreOp::QueueRemove { session_id, message_id } => {
            sqlx::query("DELETE FROM queued_messages WHERE session_id = ? AND message_id = ?")
                .bind(session_id)
                .bind(message_id)
                .execute(&mut *conn)
                .await?;
        }
        StoreOp::QueueClear { session_id } => {
            sqlx::query("DELETE FROM queued_messages WHERE session_id = ?")
                .bind(session_id)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}
