//! A database deleted or replaced on disk while the writer holds it open:
//! noticing it before anything is acked, and writing it back on reset.

use std::path::Path;

use super::{DeltaLog, Writer, describe, open, open_deltas};
use crate::ids::now_ms;

impl Writer {
    /// Why the database on disk is no longer the one this connection
    /// writes (deleted, or another file put in its place), if it is not.
    /// Two `stat`s: cheap enough for every commit.
    pub(super) fn store_moved(&mut self) -> Option<String> {
        let mut moved: std::ffi::c_int = 0;
        // SAFETY: a file-control query on our own open connection, writing
        // one int we own.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                self.conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut std::ffi::c_int).cast(),
            )
        };
        if rc == rusqlite::ffi::SQLITE_OK && moved != 0 {
            return Some(format!(
                "the database file {} was deleted or replaced while forged was running",
                self.db_path.display()
            ));
        }
        let wal = sibling(&self.db_path, "-wal");
        let now = std::fs::metadata(&wal).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        match (now, self.wal_id) {
            (Some(id), None) => self.wal_id = Some(id),
            (now, Some(known)) if now != Some(known) => {
                return Some(format!(
                    "the database's write-ahead log {} was deleted or replaced while forged was running",
                    wal.display()
                ));
            }
            _ => {}
        }
        None
    }

    /// If the database on disk is no longer the one this connection
    /// writes: blocks the journal and writes the database back to its path
    /// at once (what was acknowledged would otherwise live only in a
    /// deleted file, lost to a crash or a stop). The journal stays blocked
    /// until a reset, which then has readers reopen the store. The error
    /// says why the database could not be written back.
    pub(super) fn write_back_if_moved(&mut self) -> Result<(), String> {
        let Some(reason) = self.store_moved() else { return Ok(()) };
        if self.health.borrow().health != super::JournalHealth::Blocked {
            tracing::error!(error = %reason, "journal writer blocked");
        }
        match self.restore() {
            Ok(note) => {
                let told = format!("{reason}; {note}");
                self.written_back = Some(note);
                self.set_health(super::JournalHealth::Blocked, Some(told));
                Ok(())
            }
            Err(e) => {
                let told = format!("{reason}; {e}");
                self.set_health(super::JournalHealth::Blocked, Some(told.clone()));
                Err(told)
            }
        }
    }

    /// Writes the database this connection still holds back to its path,
    /// after it was deleted or replaced there: everything acknowledged
    /// goes into a fresh copy (`VACUUM INTO`), which takes the path; a
    /// file found in its place is moved aside, never overwritten.
    pub(super) fn restore(&mut self) -> Result<String, String> {
        let path = self.db_path.clone();
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            format!("cannot write the database back to {}: {what}: {e}", path.display())
        };
        self.commit_unchecked(&[]).map_err(|e| failed("moving the delta log into it", &describe(&e)))?;
        let tmp = sibling(&path, ".restoring");
        let _ = std::fs::remove_file(&tmp);
        let tmp_text = tmp.to_str().ok_or_else(|| failed("the path is not UTF-8", &tmp.display()))?;
        self.conn.execute("VACUUM INTO ?1", [tmp_text]).map_err(|e| failed("copying", &describe(&e)))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(|e| failed("syncing the copy", &e))?;
        // Closing this connection must not delete files by name: by then
        // the names are the restored database's.
        let mut persist: std::ffi::c_int = 1;
        // SAFETY: as in `store_moved`.
        unsafe {
            rusqlite::ffi::sqlite3_file_control(
                self.conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_PERSIST_WAL,
                (&mut persist as *mut std::ffi::c_int).cast(),
            );
        }
        let stamp = now_ms();
        let mut kept = Vec::new();
        if std::fs::symlink_metadata(&path).is_ok() {
            let aside = sibling(&path, &format!(".replaced-{stamp}"));
            std::fs::rename(&path, &aside).map_err(|e| failed("moving aside the file found there", &e))?;
            kept.push(aside);
        }
        let wal = sibling(&path, "-wal");
        if let Ok(m) = std::fs::symlink_metadata(&wal) {
            use std::os::unix::fs::MetadataExt;
            if Some((m.dev(), m.ino())) == self.wal_id {
                // Ours: everything in it is in the copy.
                let _ = std::fs::remove_file(&wal);
            } else {
                let aside = sibling(&path, &format!(".replaced-{stamp}-wal"));
                std::fs::rename(&wal, &aside).map_err(|e| failed("moving aside the WAL found there", &e))?;
                kept.push(aside);
            }
        }
        // The shared-memory index is rebuilt from the WAL; readers still on
        // the old file keep their own mapping.
        let _ = std::fs::remove_file(sibling(&path, "-shm"));
        std::fs::rename(&tmp, &path).map_err(|e| failed("renaming the copy", &e))?;
        if let Some(dir) = path.parent() {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        self.conn = open(&path, self.durability).map_err(|e| failed("reopening it", &describe(&e)))?;
        self.wal_id = None;
        if self.deltas.as_ref().is_none_or(DeltaLog::is_unlinked) {
            self.deltas = self.deltas_path.as_deref().and_then(open_deltas);
            self.deltas_unlinked = false;
        }
        let mut note = format!("the database was written back to {} with everything acknowledged", path.display());
        if !kept.is_empty() {
            let names: Vec<String> = kept.iter().map(|p| p.display().to_string()).collect();
            note.push_str(&format!("; what was found in its place was kept as {}", names.join(" and ")));
        }
        tracing::warn!("{note}");
        Ok(note)
    }
}

/// `db` with `suffix` appended to its file name (`forge.db-wal`, ...).
pub(super) fn sibling(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
