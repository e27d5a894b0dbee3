//! The writer's SQL: a group of batches in one transaction, and SQLite's
//! failures in words a user can act on.

use rusqlite::Connection;

use super::super::ops::is_io_error;
use super::super::{PersistError, WriteBatch};

/// A batch that breaks a constraint is a bug in the daemon: it is refused
/// alone, the store and other batches are kept.
pub(super) fn rejected(e: &rusqlite::Error) -> PersistError {
    tracing::error!(error = %e, "a journal batch was rejected by the store");
    PersistError::Blocked(format!("a write was rejected by the store: {e}"))
}

/// A statement without parameters, prepared once.
pub(super) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

pub(super) fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// A failure in words a user can act on.
pub(super) fn describe(e: &rusqlite::Error) -> String {
    if let rusqlite::Error::SqliteFailure(err, Some(reason)) = e
        && err.extended_code == rusqlite::ffi::SQLITE_READONLY_DBMOVED
    {
        return reason.clone();
    }
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

/// The whole group in one transaction, each batch in its own savepoint
/// when there are several: a batch the store rejects (a constraint, which
/// is a bug in the daemon) is refused alone and the others commit. A
/// failure of the store itself (disk full, read-only, I/O) fails the whole
/// transaction, to be retried by the caller.
pub(super) fn try_commit(conn: &Connection, group: &[&WriteBatch]) -> rusqlite::Result<Vec<Result<(), PersistError>>> {
    // One statement is a transaction of its own (a paced stream's delta):
    // no BEGIN and COMMIT to run.
    if let [batch] = group
        && let [op] = batch.ops.as_slice()
    {
        return match op.execute(conn) {
            Ok(()) => Ok(vec![Ok(())]),
            Err(e) if is_io_error(&e) => Err(e),
            Err(e) => Ok(vec![Err(rejected(&e))]),
        };
    }
    exec(conn, "BEGIN IMMEDIATE")?;
    let isolate = group.len() > 1;
    let mut results = Vec::with_capacity(group.len());
    for batch in group {
        if isolate {
            exec(conn, "SAVEPOINT batch")?;
        }
        let mut outcome = Ok(());
        for op in &batch.ops {
            if let Err(e) = op.execute(conn) {
                if is_io_error(&e) {
                    return Err(e);
                }
                outcome = Err(rejected(&e));
                break;
            }
        }
        if isolate {
            if outcome.is_err() {
                exec(conn, "ROLLBACK TO batch")?;
            }
            exec(conn, "RELEASE batch")?;
        } else if outcome.is_err() {
            exec(conn, "ROLLBACK")?;
            return Ok(vec![outcome]);
        }
        results.push(outcome);
    }
    exec(conn, "COMMIT")?;
    Ok(results)
}
