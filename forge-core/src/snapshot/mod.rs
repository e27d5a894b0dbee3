//! What a shell command changed. The first command of a session scans
//! its roots: every file's stats, and the content of each file whose
//! content is not already known goes to the blob store, so that what a
//! file held before a command is kept before the command runs. Files git
//! has in its index unchanged are not copied: their content is git's
//! object, kept reachable by a ref of Forge's (see `git_index.rs`).
//!
//! After that, the kernel says which directories changed (inotify, see
//! `watch.rs`): around each command only the files it touched are read
//! again (`refresh.rs`), so a command costs what it changed, not the size
//! of the tree. Where the kernel cannot watch the tree (too many
//! directories for the user's inotify limit, or its queue overflowed),
//! the roots are scanned again, comparing each file's stats with the
//! last scan and reading only the files that differ.
//!
//! Some files are watched without their content being kept: files
//! `.gitignore` keeps out of git (build output), files over 16 MiB and
//! files the sandbox denies (secrets). A change to one of them is still
//! found, so that a rewind can name it as one it cannot restore instead
//! of passing over it in silence.

mod git_index;
mod ignores;
mod refresh;
mod scan;
mod tracker;
mod watch;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use git_index::{GIT_PREFIX, REF_PREFIX};
pub use scan::scan;
pub use tracker::{Found, SCAN_ENV, Tracker, Trackers};

/// Files past this size are watched, not recorded.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Ignored files past this many are not listed by a scan (a large build
/// directory): the manifest says so instead.
pub const MAX_IGNORED: usize = 100_000;
/// A file modified this close to the previous scan (or after it) is read
/// again even if its size and times look unchanged: a write in the same
/// kernel timestamp tick as an earlier one leaves them equal (git's
/// "racily clean" entries). Generous for file systems with coarse times.
const RACY_NS: i128 = 2_000_000_000;

/// What a file's metadata says; equal stats (outside the racy window)
/// mean equal content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    /// Permission bits, or `rewind::SYMLINK_MODE` for a symbolic link.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        let mode = if meta.file_type().is_symlink() { crate::rewind::SYMLINK_MODE } else { meta.mode() & 0o7777 };
        Stat {
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            mode,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub stat: Stat,
    /// The content's hash (shared between scans: most files keep theirs),
    /// git's object id after [`GIT_PREFIX`] for a file git has unchanged,
    /// or the mark of a file watched without its content
    /// (`rewind::Unrecorded::mark`).
    pub hash: Arc<str>,
}

impl Entry {
    fn is_mark(&self) -> bool {
        self.hash.starts_with('!')
    }
}

/// The files under the roots, as last known. Ordered, so that what was
/// under a directory that went away is one range.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub files: BTreeMap<OsString, Entry>,
    /// When the scan began (ns since the epoch): entries modified after
    /// this, less `RACY_NS`, are not trusted by the next scan.
    pub taken_ns: i128,
    /// The roots had more ignored files than are listed: changes among
    /// them go unseen by scans.
    pub ignored_unwatched: bool,
    /// The work trees whose git objects stand for unchanged files' content.
    pub repos: Vec<PathBuf>,
}

/// The files created, deleted, or changed in content or mode between two
/// scans, in order (a watched file: in its stats).
pub fn changed(before: &Manifest, after: &Manifest) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = before
        .files
        .iter()
        .filter(|(p, e)| differs(Some(e), after.files.get(*p)))
        .chain(after.files.iter().filter(|(p, _)| !before.files.contains_key(*p)))
        .map(|(p, _)| PathBuf::from(p))
        .collect();
    out.sort();
    out
}

/// Whether a file's record differs: in content or mode, or for a file
/// whose content is not kept, in its stats.
fn differs(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => false,
        (Some(a), Some(b)) if a.is_mark() || b.is_mark() => a != b,
        (Some(a), Some(b)) => (&a.hash, a.stat.mode) != (&b.hash, b.stat.mode),
        _ => true,
    }
}

impl Manifest {
    /// A file's state as recorded: (hash or mark, mode), `None` if absent.
    pub fn state(&self, path: &Path) -> crate::rewind::FileState {
        self.files.get(path.as_os_str()).map(|e| (e.hash.to_string(), e.stat.mode))
    }

    /// Forgets what is known of `path`: a file tool of Forge changed it,
    /// so the next scan reads it whatever its stats say.
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path.as_os_str());
    }

    /// The paths of the entries under the directory `dir`: one range,
    /// since every path with a given prefix sorts together.
    fn under(&self, dir: &Path) -> Vec<OsString> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let mut prefix = dir.as_os_str().as_bytes().to_vec();
        prefix.push(b'/');
        let start = OsString::from_vec(prefix.clone());
        self.files
            .range(start..)
            .take_while(|(p, _)| p.as_bytes().starts_with(&prefix))
            .map(|(p, _)| p.clone())
            .collect()
    }
}

/// Where each file read is to go: `keep(hash, content)` stores it.
pub type Keep<'a> = &'a mut dyn FnMut(String, Vec<u8>);
/// Files whose content is never kept (the sandbox denies them).
pub type Skip<'a> = &'a (dyn Fn(&Path) -> bool + Sync);

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tracker_tests;

/// Now, in ns since the epoch.
fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or_default()
}
