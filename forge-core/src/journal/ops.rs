//! What the journal writer writes: [`StoreOp`]s grouped in
//! [`WriteBatch`]es, and how each becomes SQL.

use std::sync::Arc;

use forge_proto::{ClientRef, MessageStatus, Role, Usage};
use sqlx::sqlite::SqliteConnection;

use crate::store::rows::{NodeMeta, enum_str};

/// One change to the store. A batch's ops apply atomically, in order.
/// (Ops live only until their batch is written, so their size matters
/// little.)
#[allow(clippy::large_enum_variant)]
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
    SetModel { session_id: String, provider: String, model: String },
    QueuePush { session_id: String, message_id: String, text: String, client: Option<ClientRef>, created_ms: i64 },
    QueueRemove { session_id: String, message_id: String },
    QueueClear { session_id: String },
    /// Opens a stream journal entry (with the turn's `turn_started`).
    StreamBegin {
        stream_id: String,
        session_id: String,
        message_id: String,
        provider: String,
        model: String,
        first_seq: u64,
        created_ms: i64,
    },
    /// The provider finished (or failed, or was cancelled): the outcome is
    /// durable before the answer becomes history.
    StreamSeal {
        stream_id: String,
        outcome: MessageStatus,
        error: Option<String>,
        error_kind: Option<String>,
        stop_reason: Option<String>,
        usage: Option<Usage>,
        sealed_ms: i64,
    },
    /// The answer is history: prune the journal entry.
    StreamCommit { stream_id: String },
}

#[derive(Debug, Default)]
pub struct WriteBatch {
    pub ops: Vec<StoreOp>,
}

/// Constraint violations are the batch's fault; anything else is the
/// store's (disk full, read-only, I/O).
pub(super) fn is_io_error(e: &sqlx::Error) -> bool {
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

type Query<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

impl StoreOp {
    /// The op's SQL: one or more `;`-terminated statements. Ops compose
    /// into one multi-statement query per transaction (one round trip to
    /// SQLite's thread instead of one per statement).
    pub(super) fn sql(&self) -> &'static str {
        match self {
            StoreOp::CreateSession { .. } => {
                "INSERT INTO sessions (id, name, cwd, provider, model, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?);"
            }
            StoreOp::RenameSession { .. } => "UPDATE sessions SET name = ? WHERE id = ?;",
            StoreOp::RemoveSession { .. } => {
                "DELETE FROM events WHERE session_id = ?; DELETE FROM nodes WHERE session_id = ?; \
                 DELETE FROM queued_messages WHERE session_id = ?; DELETE FROM streams WHERE session_id = ?; \
                 DELETE FROM sessions WHERE id = ?;"
            }
            // A session's last seq and update time are read from its newest
            // event: no second write per event.
            StoreOp::AppendEvent { .. } => "INSERT INTO events (session_id, seq, ts_ms, kind, body) VALUES (?, ?, ?, ?, ?);",
            StoreOp::InsertNode { .. } => {
                "INSERT INTO nodes (id, session_id, parent_id, role, text, status, created_ms, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?);"
            }
            StoreOp::SetHead { .. } => "UPDATE sessions SET head_id = ? WHERE id = ?;",
            StoreOp::SetModel { .. } => "UPDATE sessions SET provider = ?, model = ? WHERE id = ?;",
            StoreOp::QueuePush { .. } => {
                "INSERT INTO queued_messages (session_id, message_id, text, client, created_ms) VALUES (?, ?, ?, ?, ?);"
            }
            StoreOp::QueueRemove { .. } => "DELETE FROM queued_messages WHERE session_id = ? AND message_id = ?;",
            StoreOp::QueueClear { .. } => "DELETE FROM queued_messages WHERE session_id = ?;",
            StoreOp::StreamBegin { .. } => {
                "INSERT INTO streams (stream_id, session_id, message_id, provider, model, first_seq, state, created_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, 'open', ?);"
            }
            StoreOp::StreamSeal { .. } => {
                "UPDATE streams SET state = 'sealed', outcome = ?, error = ?, error_kind = ?, stop_reason = ?, usage = ?, sealed_ms = ? \
                 WHERE stream_id = ? AND state = 'open';"
            }
            StoreOp::StreamCommit { .. } => "DELETE FROM streams WHERE stream_id = ?;",
        }
    }

    /// Binds the op's values in the order its statements use them.
    pub(super) fn bind<'q>(&'q self, q: Query<'q>) -> Query<'q> {
        match self {
            StoreOp::CreateSession { id, name, cwd, provider, model, created_ms } => {
                q.bind(id).bind(name).bind(cwd).bind(provider).bind(model).bind(created_ms).bind(created_ms)
            }
            StoreOp::RenameSession { id, name } => q.bind(name).bind(id),
            StoreOp::RemoveSession { id } => q.bind(id).bind(id).bind(id).bind(id).bind(id),
            StoreOp::AppendEvent { session_id, seq, ts_ms, kind, body } => {
                q.bind(session_id).bind(*seq as i64).bind(ts_ms).bind(*kind).bind(&**body)
            }
            StoreOp::InsertNode { id, session_id, parent_id, role, text, status, created_ms, meta } => q
                .bind(id)
                .bind(session_id)
                .bind(parent_id)
                .bind(enum_str(role))
                .bind(text)
                .bind(enum_str(status))
                .bind(created_ms)
                .bind(serde_json::to_string(meta).unwrap_or_else(|_| "{}".into())),
            StoreOp::SetHead { session_id, head_id } => q.bind(head_id).bind(session_id),
            StoreOp::SetModel { session_id, provider, model } => q.bind(provider).bind(model).bind(session_id),
            StoreOp::QueuePush { session_id, message_id, text, client, created_ms } => q
                .bind(session_id)
                .bind(message_id)
                .bind(text)
                .bind(client.as_ref().and_then(|c| serde_json::to_string(c).ok()))
                .bind(created_ms),
            StoreOp::QueueRemove { session_id, message_id } => q.bind(session_id).bind(message_id),
            StoreOp::QueueClear { session_id } => q.bind(session_id),
            StoreOp::StreamBegin { stream_id, session_id, message_id, provider, model, first_seq, created_ms } => q
                .bind(stream_id)
                .bind(session_id)
                .bind(message_id)
                .bind(provider)
                .bind(model)
                .bind(*first_seq as i64)
                .bind(created_ms),
            StoreOp::StreamSeal { stream_id, outcome, error, error_kind, stop_reason, usage, sealed_ms } => q
                .bind(enum_str(outcome))
                .bind(error)
                .bind(error_kind)
                .bind(stop_reason)
                .bind(usage.as_ref().and_then(|u| serde_json::to_string(u).ok()))
                .bind(sealed_ms)
                .bind(stream_id),
            StoreOp::StreamCommit { stream_id } => q.bind(stream_id),
        }
    }
}

/// Applies one op on its own (the careful path, statement by statement).
pub(super) async fn apply(conn: &mut SqliteConnection, op: &StoreOp) -> Result<(), sqlx::Error> {
    op.bind(sqlx::query(op.sql())).execute(&mut *conn).await?;
    Ok(())
}

/// Writes a whole group in one transaction and one round trip. Any error
/// leaves the transaction to be rolled back by the caller.
pub(super) async fn apply_group<'q>(
    conn: &mut SqliteConnection,
    batches: impl Iterator<Item = &'q WriteBatch>,
) -> Result<(), sqlx::Error> {
    let ops: Vec<&StoreOp> = batches.flat_map(|b| b.ops.iter()).collect();
    let mut sql = String::with_capacity(32 + ops.len() * 96);
    sql.push_str("BEGIN IMMEDIATE;");
    for op in &ops {
        sql.push_str(op.sql());
    }
    sql.push_str("COMMIT;");
    // The SQL is assembled from the fixed statements above only; every
    // value is bound.
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for op in ops {
        q = op.bind(q);
    }
    q.execute(&mut *conn).await?;
    Ok(())
}
