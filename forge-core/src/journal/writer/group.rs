//! Group commit: every batch waiting when a transaction starts goes into
//! it, after the delta log's pending batches; a failed commit is rolled
//! back and retried (Degraded), and after the last attempt the writer is
//! Blocked and every batch of the group refused.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use forge_proto::JournalHealth;

use super::sql::{describe, rollback, try_commit};
use super::{COMMIT_ATTEMPTS, JournalAck, PersistError, WriteBatch, WriteRequest, Writer, open_deltas};

impl Writer {
    /// Commits `batches` in one transaction, after the delta log's pending
    /// batches (so every session's batches reach SQLite in order). Results
    /// are for `batches` only.
    pub(super) fn commit(&mut self, batches: &[&WriteBatch]) -> rusqlite::Result<Vec<Result<(), PersistError>>> {
        if let Some(reason) = self.store_moved() {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY_DBMOVED),
                Some(reason),
            ));
        }
        let results = self.commit_unchecked(batches)?;
        if self.deltas_unlinked && self.pending.is_empty() {
            self.deltas_unlinked = false;
            self.deltas = self.deltas_path.as_deref().and_then(open_deltas);
        }
        Ok(results)
    }

    /// `commit` without the check that the database is still in place.
    pub(super) fn commit_unchecked(
        &mut self,
        batches: &[&WriteBatch],
    ) -> rusqlite::Result<Vec<Result<(), PersistError>>> {
        if self.pending.is_empty() {
            return try_commit(&self.conn, batches);
        }
        let all: Vec<&WriteBatch> = self.pending.iter().chain(batches.iter().copied()).collect();
        let mut results = try_commit(&self.conn, &all)?;
        let rest = results.split_off(self.pending.len());
        for r in results {
            if let Err(e) = r {
                // Acked already, so this is a bug; the event stays in the log file.
                tracing::error!(error = %e, "an acknowledged event from the delta log was rejected by the store");
            }
        }
        self.pending.clear();
        self.pending_count.store(0, Ordering::Release);
        if let Some(log) = self.deltas.as_mut()
            && let Err(e) = log.clear()
        {
            // Harmless: the next start skips events already stored.
            tracing::warn!(error = %e, "cannot empty the delta log");
        }
        Ok(rest)
    }

    pub(super) fn write_group(&mut self, group: &mut Vec<WriteRequest>) {
        let blocked = self.health.borrow().health == JournalHealth::Blocked;
        let results = if blocked {
            let reason = self.health.borrow().reason.clone().unwrap_or_default();
            group.iter().map(|_| Err(PersistError::Blocked(reason.clone()))).collect()
        } else {
            self.commit_with_retries(group)
        };
        let n = group.len() as u64;
        self.stats.largest_group.fetch_max(n, Ordering::Relaxed);
        for (req, result) in group.drain(..).zip(results) {
            let result = result.map(|()| self.mint_proof(&req.batch));
            req.route.send(JournalAck { seq: req.seq, result });
        }
    }

    pub(super) fn commit_with_retries(&mut self, group: &[WriteRequest]) -> Vec<Result<(), PersistError>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = Instant::now();
            let batches: Vec<&WriteBatch> = group.iter().map(|r| &r.batch).collect();
            let r = self.commit(&batches);
            match r {
                Ok(results) => {
                    self.committed(started);
                    if self.health.borrow().health == JournalHealth::Degraded {
                        self.set_health(JournalHealth::Healthy, None);
                    }
                    return results;
                }
                Err(e) => {
                    rollback(&self.conn);
                    self.stats.failed_commits.fetch_add(1, Ordering::Relaxed);
                    let reason = describe(&e);
                    tracing::warn!(attempt, error = %reason, "journal commit failed");
                    if attempt >= COMMIT_ATTEMPTS {
                        tracing::error!(error = %reason, "journal writer blocked: the store cannot be written");
                        self.set_health(JournalHealth::Blocked, Some(reason.clone()));
                        return group.iter().map(|_| Err(PersistError::Blocked(reason.clone()))).collect();
                    }
                    self.set_health(JournalHealth::Degraded, Some(reason));
                    std::thread::sleep(Duration::from_millis(50 << attempt));
                }
            }
        }
    }
}
