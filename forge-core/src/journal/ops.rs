//! What the journal writer writes: [`StoreOp`]s grouped in
//! [`WriteBatch`]es, and how each becomes SQL.

use std::sync::Arc;

use forge_proto::{ClientRef, MessageStatus, Role, Usage};
use sqlx::sqlite::SqliteConnection;

use crate::store::rows::{NodeMeta, enum_str};

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

pub(super) async fn apply(conn: &mut SqliteConnection, op: &StoreOp) -> Result<(), sqlx::Error> {
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
                "DELETE FROM streams WHERE session_id = ?",
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
        StoreOp::StreamBegin { stream_id, session_id, message_id, provider, model, first_seq, created_ms } => {
            sqlx::query(
                "INSERT INTO streams (stream_id, session_id, message_id, provider, model, first_seq, state, created_ms)
                 VALUES (?, ?, ?, ?, ?, ?, 'open', ?)",
            )
            .bind(stream_id)
            .bind(session_id)
            .bind(message_id)
            .bind(provider)
            .bind(model)
            .bind(*first_seq as i64)
            .bind(created_ms)
            .execute(&mut *conn)
            .await?;
        }
        StoreOp::StreamSeal { stream_id, outcome, error, error_kind, stop_reason, usage, sealed_ms } => {
            let usage = usage.as_ref().and_then(|u| serde_json::to_string(u).ok());
            sqlx::query(
                "UPDATE streams SET state = 'sealed', outcome = ?, error = ?, error_kind = ?, stop_reason = ?, usage = ?, sealed_ms = ?
                 WHERE stream_id = ? AND state = 'open'",
            )
            .bind(enum_str(outcome))
            .bind(error)
            .bind(error_kind)
            .bind(stop_reason)
            .bind(usage)
            .bind(sealed_ms)
            .bind(stream_id)
            .execute(&mut *conn)
            .await?;
        }
        StoreOp::StreamCommit { stream_id } => {
            sqlx::query("DELETE FROM streams WHERE stream_id = ?").bind(stream_id).execute(&mut *conn).await?;
        }
    }
    Ok(())
}
