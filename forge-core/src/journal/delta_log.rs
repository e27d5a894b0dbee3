//! The delta log: an append-only file in front of SQLite for the events of
//! a paced stream (durability "process" only).
//!
//! Why: after a pause (a paced stream sends a chunk every 20 ms or so) a
//! SQLite commit runs on a cold CPU and takes about 100 µs here, most of it
//! SQLite's own code coming back into the caches; one `write(2)` of the
//! same bytes takes a few µs. Survives any crash of forged as well as the
//! commit does: once `write` returns, the bytes are the kernel's. So a
//! quiet session's batch of events is appended here as one line, acked at
//! once, and moved into SQLite a moment later by the writer (in order,
//! before any later batch), after which the file is emptied. At start-up,
//! lines still in the file are moved into SQLite before anything reads the
//! store. A line cut short (only an OS crash or a full disk can do that)
//! was never acked and is dropped.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{StoreOp, WriteBatch};

/// Where the delta log of the store at `db` lives.
pub(super) fn path_for(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push("-deltas");
    db.with_file_name(name)
}

/// Whether `batch` may go to the delta log: events only (everything else,
/// e.g. history or a stream's seal, is rare and goes to SQLite directly).
pub(super) fn accepts(batch: &WriteBatch) -> bool {
    !batch.ops.is_empty() && batch.ops.iter().all(|op| matches!(op, StoreOp::AppendEvent { .. }))
}

/// One line: the batch's events as `[session_id, seq, ts_ms, kind, body]`.
fn encode(batch: &WriteBatch) -> String {
    let rows: Vec<_> = batch
        .ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::AppendEvent { session_id, seq, ts_ms, kind, body } => {
                Some((session_id.as_str(), *seq, *ts_ms, *kind, &**body))
            }
            _ => None,
        })
        .collect();
    let mut line = serde_json::to_string(&rows).unwrap_or_default();
    line.push('\n');
    line
}

/// Size up to which an applied delta log is left as it is (see `clear`).
const KEEP_BELOW: u64 = 256 * 1024;

pub(super) struct DeltaLog {
    file: File,
    /// Bytes in the file: where a failed append is cut back to.
    len: u64,
}

impl DeltaLog {
    pub(super) fn open(path: &Path) -> std::io::Result<DeltaLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(DeltaLog { file, len })
    }

    /// Appends `batch` in one write. On failure the file is cut back, so a
    /// later line never follows a torn one.
    pub(super) fn append(&mut self, batch: &WriteBatch) -> std::io::Result<()> {
        let line = encode(batch);
        match self.file.write_all(line.as_bytes()) {
            Ok(()) => {
                self.len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }

    /// Whether the file was removed (or replaced) under us: an append would
    /// then go to a file no start-up ever reads.
    pub(super) fn is_unlinked(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().map(|m| m.nlink() == 0).unwrap_or(true)
    }

    /// Empties the file.
    pub(super) fn empty(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.len = 0;
        Ok(())
    }

    /// Everything in the file is in SQLite now. The file is emptied only
    /// once it has grown: emptying it after every event made the next
    /// append allocate a disk block again, which costs more than it saves.
    /// Lines already in SQLite are skipped by `recover`.
    pub(super) fn clear(&mut self) -> std::io::Result<()> {
        if self.len > KEEP_BELOW { self.empty() } else { Ok(()) }
    }
}

/// Moves what the delta log at `path` holds into the store, then empties
/// it. Events already stored are skipped, and so are those of sessions
/// removed since (the log keeps applied lines for a while). Returns how
/// events it read, stored or skipped.
pub(super) fn recover(conn: &Connection, path: &Path) -> Result<u64, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut rows: Vec<(String, u64, i64, String, String)> = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        // A torn last line (no newline was written) does not parse.
        match serde_json::from_slice::<Vec<(String, u64, i64, String, String)>>(&line) {
            Ok(batch) => rows.extend(batch),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "dropped a torn delta-log line (it was never acknowledged)");
                break;
            }
        }
    }
    let n = rows.len() as u64;
    if !rows.is_empty() {
        let apply = || -> rusqlite::Result<usize> {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let mut insert = conn.prepare(
                "INSERT OR IGNORE INTO events (session_id, seq, ts_ms, kind, body) \
                 SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)",
            )?;
            let mut added = 0;
            for (session, seq, ts, kind, body) in &rows {
                added += insert.execute(rusqlite::params![session, *seq as i64, ts, kind, body])?;
            }
            drop(insert);
            conn.execute_batch("COMMIT")?;
            Ok(added)
        };
        let added = match apply() {
            Ok(added) => added,
            Err(e) => {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                return Err(format!("cannot move the delta log {} into the store: {e}", path.display()));
            }
        };
        // Lines already in SQLite are normal (the file is emptied lazily);
        // only events that were not there are news.
        if added > 0 {
            tracing::info!(events = added, "recovered events from the delta log that were not yet in the store");
        }
    }
    DeltaLog::open(path)
        .and_then(|mut log| log.empty())
        .map_err(|e| format!("cannot empty {}: {e}", path.display()))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Durability;
    use crate::store::Store;

    fn event(seq: u64) -> WriteBatch {
        WriteBatch {
            ops: vec![StoreOp::AppendEvent {
                session_id: "s".into(),
                seq,
                ts_ms: 1,
                kind: "text_delta",
                body: Arc::from(format!("{{\"text\":\"line\\n{seq}\"}}")),
            }],
        }
    }

    #[tokio::test]
    async fn what_a_crash_left_in_the_log_reaches_the_store_once_and_a_torn_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("forge.db");
        let store = Store::open(&db, Durability::Process).await.unwrap_or_else(|e| panic!("{e}"));
        let path = path_for(&db);
        let mut log = DeltaLog::open(&path).unwrap_or_else(|e| panic!("{e}"));
        for seq in 1..=3 {
            log.append(&event(seq)).unwrap_or_else(|e| panic!("{e}"));
        }
        // Event 1 had reached SQLite before the crash; the file was not emptied yet.
        let conn = Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
        conn.execute(
            "INSERT INTO sessions (id, cwd, provider, model, created_ms, updated_ms) VALUES ('s', '/', 'p', 'm', 1, 1)",
            [],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // A removed session's events stay removed.
        let mut gone = event(9);
        if let StoreOp::AppendEvent { session_id, .. } = &mut gone.ops[0] {
            *session_id = "removed".into();
        }
        log.append(&gone).unwrap_or_else(|e| panic!("{e}"));
        conn.execute(
            "INSERT INTO events (session_id, seq, ts_ms, kind, body) VALUES ('s', 1, 1, 'text_delta', 'x')",
            [],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // And a line cut short, as only an OS crash or a full disk leaves.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
        f.write_all(br#"[["s",4,1,"text_delta","{\"te"#).unwrap_or_else(|e| panic!("{e}"));
        drop(f);

        assert_eq!(recover(&conn, &path), Ok(4));
        assert_eq!(store.events_after("removed", 0, 10).await.map(|e| e.len()).unwrap_or(9), 0);
        let events = store.events_after("s", 0, 10).await.unwrap_or_else(|e| panic!("{e}"));
        let seqs: Vec<u64> = events.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 2, 3], "each once; the torn one dropped");
        assert_eq!(events[1].1, "{\"text\":\"line\\n2\"}", "bytes exact, newlines included");
        assert_eq!(std::fs::metadata(&path).map(|m| m.len()).unwrap_or(1), 0);
        assert_eq!(recover(&conn, &path), Ok(0), "a second start finds nothing to do");
    }
}
