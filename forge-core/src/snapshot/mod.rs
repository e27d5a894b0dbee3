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
use std::path::{Path, PathBuf};

use crate::rewind::Unrecorded;

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
const RACY_NS: i64 = 2_000_000_000;

/// What a file's metadata says; equal stats (outside the racy window)
/// mean equal content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    /// Permission bits, or `rewind::SYMLINK_MODE` for a symbolic link.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
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

/// A file's content as recorded, held inline (a tree of a million files
/// keeps a million of these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Its SHA-256: the blob's name in the store.
    Sha([u8; 32]),
    /// Git's blob id: the file is as git's index has it.
    Git([u8; 20]),
    /// Watched without its content (`rewind::Unrecorded`).
    Mark(Unrecorded),
}

impl Content {
    pub fn sha(data: &[u8]) -> Content {
        use sha2::Digest;
        Content::Sha(sha2::Sha256::digest(data).into())
    }

    /// As change records and the blob store name it: hex, `git:` and
    /// hex, or the mark.
    pub fn text(&self) -> String {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        match self {
            Content::Sha(b) => hex(b),
            Content::Git(b) => format!("{GIT_PREFIX}{}", hex(b)),
            Content::Mark(u) => u.mark().to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub stat: Stat,
    pub content: Content,
}

impl Entry {
    fn is_mark(&self) -> bool {
        matches!(self.content, Content::Mark(_))
    }

    fn marked(stat: Stat, why: Unrecorded) -> Entry {
        Entry { stat, content: Content::Mark(why) }
    }
}

/// The files under the roots, as last known: keyed by the path's bytes,
/// relative to `base` (the first root) when under it, else whole (those
/// start with `/`). Ordered, so that what was under a directory that
/// went away is one range.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    base: PathBuf,
    files: BTreeMap<Box<[u8]>, Entry>,
    /// When the scan began (ns since the epoch): entries modified after
    /// this, less `RACY_NS`, are not trusted by the next scan.
    pub taken_ns: i64,
    /// The roots had more ignored files than are listed: changes among
    /// them go unseen by scans.
    pub ignored_unwatched: bool,
    /// The work trees whose git objects stand for unchanged files' content.
    pub repos: Vec<PathBuf>,
}

/// The files created, deleted, or changed in content or mode between two
/// scans, in order (a watched file: in its stats).
pub fn changed(before: &Manifest, after: &Manifest) -> Vec<PathBuf> {
    if before.base != after.base {
        let mut out: Vec<PathBuf> = before
            .paths()
            .filter(|p| differs(before.get(p), after.get(p)))
            .chain(after.paths().filter(|p| before.get(p).is_none()))
            .collect();
        out.sort();
        return out;
    }
    // Both sorted by the same keys: one pass over the two.
    let mut out = Vec::new();
    let (mut a, mut b) = (before.files.iter().peekable(), after.files.iter().peekable());
    loop {
        let key = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((ka, ea)), Some((kb, eb))) if ka == kb => {
                let k = if differs(Some(ea), Some(eb)) { Some(ka.to_vec()) } else { None };
                a.next();
                b.next();
                k
            }
            (Some((ka, _)), Some((kb, _))) if ka < kb => a.next().map(|(k, _)| k.to_vec()),
            (Some(_), Some(_)) | (None, Some(_)) => b.next().map(|(k, _)| k.to_vec()),
            (Some(_), None) => a.next().map(|(k, _)| k.to_vec()),
        };
        if let Some(k) = key {
            out.push(before.path_of(&k));
        }
    }
    out.sort();
    out
}

/// Whether a file's record differs: in content or mode, or for a file
/// whose content is not kept, in its stats.
fn differs(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => false,
        (Some(a), Some(b)) if a.is_mark() || b.is_mark() => a != b,
        (Some(a), Some(b)) => (a.content, a.stat.mode) != (b.content, b.stat.mode),
        _ => true,
    }
}

impl Manifest {
    /// An empty record of the tree under `base`.
    pub fn under_base(base: &Path) -> Manifest {
        Manifest { base: base.to_path_buf(), ..Manifest::default() }
    }

    /// The key of `path` (borrowed from it: lookups allocate nothing).
    fn key<'a>(&self, path: &'a Path) -> &'a [u8] {
        use std::os::unix::ffi::OsStrExt;
        match path.strip_prefix(&self.base) {
            Ok(rel) if !self.base.as_os_str().is_empty() && !rel.as_os_str().is_empty() => rel.as_os_str().as_bytes(),
            _ => path.as_os_str().as_bytes(),
        }
    }

    /// Whether a record is a `.gitignore` file's.
    fn rules(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.files.iter().filter(|(k, _)| k.ends_with(b"/.gitignore") || &***k == b".gitignore").map(|(k, e)| (&**k, e))
    }

    fn path_of(&self, key: &[u8]) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(key));
        if key.first() == Some(&b'/') { p.to_path_buf() } else { self.base.join(p) }
    }

    pub fn get(&self, path: &Path) -> Option<&Entry> {
        self.files.get(self.key(path))
    }

    pub fn insert(&mut self, path: &Path, entry: Entry) {
        let key: Box<[u8]> = self.key(path).into();
        self.files.insert(key, entry);
    }

    pub fn remove(&mut self, path: &Path) -> Option<Entry> {
        let key = self.key(path);
        self.files.remove(key)
    }

    /// Every file recorded.
    pub fn paths(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.files.keys().map(|k| self.path_of(k))
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.files.values()
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// A file's state as recorded: (hash or mark, mode), `None` if absent.
    pub fn state(&self, path: &Path) -> crate::rewind::FileState {
        self.get(path).map(|e| (e.content.text(), e.stat.mode))
    }

    /// Forgets what is known of `path`: a file tool of Forge changed it,
    /// so the next scan reads it whatever its stats say.
    pub fn forget(&mut self, path: &Path) {
        self.remove(path);
    }

    /// The files under the directory `dir`: one range, since every key
    /// with a given prefix sorts together.
    fn under(&self, dir: &Path) -> Vec<PathBuf> {
        let mut prefix = self.key(dir).to_vec();
        prefix.push(b'/');
        let start: Box<[u8]> = prefix.clone().into();
        self.files.range(start..).take_while(|(k, _)| k.starts_with(&prefix)).map(|(k, _)| self.path_of(k)).collect()
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
fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or_default()
}
