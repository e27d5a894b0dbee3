//! What a shell command changed: the session's roots are scanned before
//! and after it, and the files whose content or mode differ are its
//! changes. A scan compares each file's size, times, inode and mode with
//! the previous scan first and reads only the files that differ; their
//! content goes to the blob store as it is read, so a file's content
//! before a command is kept before the command runs.
//!
//! Some files are watched without their content being kept: files
//! `.gitignore` keeps out of git (build output), files over 16 MiB and
//! files the sandbox denies (secrets). A change to one of them is still
//! found (by its size, times and inode), so that a rewind can name it as
//! one it cannot restore instead of passing over it in silence.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::rewind::Unrecorded;

/// Files past this size are watched, not recorded.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// A tree past this many files, or this much content read in one scan, is
/// not recorded (a command run in a home directory, say).
pub const MAX_FILES: usize = 100_000;
pub const MAX_READ_BYTES: u64 = 512 * 1024 * 1024;
/// Ignored files past this many are not watched (a large build
/// directory): the manifest says so instead.
pub const MAX_IGNORED: usize = 100_000;
/// A file modified this close to the previous scan (or after it) is read
/// again even if its size and times look unchanged: a write in the same
/// kernel timestamp tick as an earlier one leaves them equal (git's
/// "racily clean" entries). Generous for file systems with coarse times.
const RACY_NS: i128 = 2_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("more than {MAX_FILES} files under the roots")]
    TooManyFiles,
    #[error("more than {} MiB to read under the roots", MAX_READ_BYTES / (1024 * 1024))]
    TooMuchContent,
}

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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub stat: Stat,
    /// The content's hash (shared between scans: most files keep theirs),
    /// or the mark of a file watched without its content
    /// (`rewind::Unrecorded::mark`).
    pub hash: std::sync::Arc<str>,
}

/// The files under the roots, as last scanned. Keyed by the path's bytes:
/// hashing a `Path` walks its components, which cost more than the stats.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub files: HashMap<OsString, Entry>,
    /// When the scan began (ns since the epoch): entries modified after
    /// this, less `RACY_NS`, are not trusted by the next scan.
    pub taken_ns: i128,
    /// The roots had more ignored files than are watched: changes among
    /// them go unseen.
    pub ignored_unwatched: bool,
}

/// Scans `roots`, reusing `known`'s hash of a file whose stats are
/// unchanged; every file read is handed to `keep(hash, content)` (to be
/// stored) before the scan returns. `skip` names files whose content is
/// not to be kept (they are watched only).
pub fn scan(
    roots: &[PathBuf],
    known: &Manifest,
    skip: &(dyn Fn(&Path) -> bool + Sync),
    keep: &mut dyn FnMut(String, Vec<u8>),
) -> Result<Manifest, ScanError> {
    let taken_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or_default();
    // The files git would see, then (stats only) the ones it ignores.
    let (found, too_many) = walk(roots, true, MAX_FILES);
    if too_many {
        return Err(ScanError::TooManyFiles);
    }
    let (all, ignored_unwatched) = walk(roots, false, MAX_FILES + MAX_IGNORED);
    let mut files = HashMap::with_capacity(all.len());
    let mut read: u64 = 0;
    for (path, stat) in found {
        let path = path.into_os_string();
        let watched = if stat.size > MAX_FILE_BYTES && stat.mode != crate::rewind::SYMLINK_MODE {
            Some(Unrecorded::TooBig)
        } else if skip(Path::new(&path)) {
            Some(Unrecorded::Denied)
        } else {
            None
        };
        if let Some(why) = watched {
            files.insert(path, Entry { stat, hash: why.mark().into() });
            continue;
        }
        let racy = stat.mtime_ns.max(stat.ctime_ns) + RACY_NS >= known.taken_ns;
        let same = known.files.get(&path).filter(|e| e.stat == stat && !racy && !e.hash.starts_with('!'));
        let entry = match same {
            Some(e) => e.clone(),
            None => {
                read += stat.size;
                if read > MAX_READ_BYTES {
                    return Err(ScanError::TooMuchContent);
                }
                let Ok(Some((data, _))) = crate::rewind::read_any(Path::new(&path)) else {
                    files.insert(path, Entry { stat, hash: Unrecorded::Unreadable.mark().into() });
                    continue;
                };
                let hash = crate::rewind::hash(&data);
                let shared: std::sync::Arc<str> = hash.as_str().into();
                keep(hash, data);
                Entry { stat, hash: shared }
            }
        };
        files.insert(path, entry);
    }
    for (path, stat) in all {
        files.entry(path.into_os_string()).or_insert_with(|| Entry { stat, hash: Unrecorded::Ignored.mark().into() });
    }
    Ok(Manifest { files, taken_ns, ignored_unwatched })
}

/// The regular files and symbolic links under `roots` with their stats
/// (`.git` left out; with `git`, what `.gitignore` keeps out too), and
/// whether there were more than `max`.
fn walk(roots: &[PathBuf], git: bool, max: usize) -> (Vec<(PathBuf, Stat)>, bool) {
    let found: std::sync::Mutex<Vec<(PathBuf, Stat)>> = Default::default();
    let too_many = std::sync::atomic::AtomicBool::new(false);
    for root in roots {
        ignore::WalkBuilder::new(root)
            .standard_filters(git)
            .hidden(false)
            .git_global(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build_parallel()
            .run(|| {
                Box::new(|entry| {
                    use ignore::WalkState;
                    let Ok(entry) = entry else { return WalkState::Continue };
                    if !entry.file_type().is_some_and(|t| t.is_file() || t.is_symlink()) {
                        return WalkState::Continue;
                    }
                    let Ok(meta) = entry.metadata() else { return WalkState::Continue };
                    let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
                    if found.len() >= max {
                        too_many.store(true, std::sync::atomic::Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    found.push((entry.into_path(), Stat::of(&meta)));
                    WalkState::Continue
                })
            });
    }
    (found.into_inner().unwrap_or_else(|p| p.into_inner()), too_many.into_inner())
}

/// The files created, deleted, or changed in content or mode, in order
/// (a watched file: in its stats).
pub fn changed(before: &Manifest, after: &Manifest) -> Vec<PathBuf> {
    let differs = |a: &Entry, b: Option<&Entry>| match b {
        None => true,
        Some(b) if a.hash.starts_with('!') || b.hash.starts_with('!') => a != b,
        Some(b) => (&a.hash, a.stat.mode) != (&b.hash, b.stat.mode),
    };
    let mut out: Vec<PathBuf> = before
        .files
        .iter()
        .filter(|(p, e)| differs(e, after.files.get(*p)))
        .chain(after.files.iter().filter(|(p, _)| !before.files.contains_key(*p)))
        .map(|(p, _)| PathBuf::from(p))
        .collect();
    out.sort();
    out
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
}

#[cfg(test)]
mod tests;
