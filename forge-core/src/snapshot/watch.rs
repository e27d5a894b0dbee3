//! The kernel's word on what changed under the roots: an inotify watch on
//! every directory, read around each command. The kernel queues a note
//! before the writing call returns, so once a command has exited every
//! file it touched is named (a touched file is read again; one merely
//! named by a note and unchanged is no change). A full queue loses notes:
//! the caller then scans the roots again.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchMask};

/// What the notes said since the last reading.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    /// Files created, written, removed, renamed or changed in mode.
    pub files: BTreeSet<PathBuf>,
    /// Directories that appeared (made or moved in): to be walked.
    pub new_dirs: BTreeSet<PathBuf>,
    /// Directories that went away (removed or moved out).
    pub gone_dirs: BTreeSet<PathBuf>,
    /// Notes were lost (the queue overflowed, a root itself moved): only
    /// a scan of the roots can tell what changed.
    pub lost: bool,
}

pub(super) struct Watcher {
    inotify: Inotify,
    /// Each watch's directory.
    dirs: HashMap<i32, PathBuf>,
    buf: Vec<u8>,
}

fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
        | WatchMask::EXCL_UNLINK
}

/// How many directories one user may watch (`fs.inotify.max_user_watches`).
pub(super) fn user_limit() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(8192)
}

impl Watcher {
    pub(super) fn new() -> std::io::Result<Watcher> {
        Ok(Watcher { inotify: Inotify::init()?, dirs: HashMap::new(), buf: vec![0; 64 * 1024] })
    }

    /// Watches `dir` (watching it again, say after it moved, renames it).
    pub(super) fn watch(&mut self, dir: &Path) -> std::io::Result<()> {
        let wd = self.inotify.watches().add(dir, mask())?;
        self.dirs.insert(wd.get_watch_descriptor_id(), dir.to_path_buf());
        Ok(())
    }

    pub(super) fn count(&self) -> usize {
        self.dirs.len()
    }

    /// Forgets the watches of `dir` and what was under it (it moved away
    /// or is gone; what moved within the roots is watched again by its
    /// new name).
    pub(super) fn unwatch_under(&mut self, dir: &Path) {
        self.dirs.retain(|_, d| !d.starts_with(dir));
    }

    /// Reads every note queued so far.
    pub(super) fn drain(&mut self) -> Dirty {
        let mut dirty = Dirty::default();
        loop {
            let events = match self.inotify.read_events(&mut self.buf) {
                Ok(events) => events,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the notes of file changes; scanning instead");
                    dirty.lost = true;
                    break;
                }
            };
            for e in events {
                note(&mut dirty, &mut self.dirs, e.wd.get_watch_descriptor_id(), e.mask, e.name);
            }
        }
        dirty
    }
}

fn note(dirty: &mut Dirty, dirs: &mut HashMap<i32, PathBuf>, wd: i32, mask: EventMask, name: Option<&OsStr>) {
    if mask.contains(EventMask::Q_OVERFLOW) {
        dirty.lost = true;
        return;
    }
    if mask.contains(EventMask::IGNORED) {
        dirs.remove(&wd);
        return;
    }
    let Some(dir) = dirs.get(&wd) else { return };
    let Some(name) = name else {
        // The directory itself was removed or moved: its parent's note
        // names it, unless it is a root.
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
            dirty.gone_dirs.insert(dir.clone());
        }
        return;
    };
    let path = dir.join(name);
    if mask.contains(EventMask::ISDIR) {
        if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
            dirty.new_dirs.insert(path);
        } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
            dirty.gone_dirs.insert(path);
        }
        // A directory's own mode or times: nothing recorded.
        return;
    }
    dirty.files.insert(path);
}
