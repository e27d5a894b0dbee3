//! What a shell command changed: the session's roots are scanned before
//! and after it (files `.gitignore` keeps out of git, `.git`, files the
//! sandbox denies and files over 16 MiB left out), and the files whose
//! content or mode differ are its changes. A scan compares sizes and
//! modification times with the previous one first and reads only the
//! files that differ; their content goes to the blob store as it is read,
//! so a file's content before a command is kept before the command runs.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Files past this size are not recorded.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// A tree past this many files, or this much content read in one scan, is
/// not recorded (a command run in a home directory, say).
pub const MAX_FILES: usize = 100_000;
pub const MAX_READ_BYTES: u64 = 512 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("more than {MAX_FILES} files under the roots")]
    TooManyFiles,
    #[error("more than {} MiB to read under the roots", MAX_READ_BYTES / (1024 * 1024))]
    TooMuchContent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub size: u64,
    pub mtime_ns: i128,
    pub mode: u32,
    /// Shared between scans: most files keep theirs.
    pub hash: std::sync::Arc<str>,
}

/// The files under the roots, as last scanned. Keyed by the path's bytes:
/// hashing a `Path` walks its components, which cost more than the stats.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub files: HashMap<OsString, Entry>,
}

/// Scans `roots`, reusing `known`'s hash of a file whose size, time and
/// mode are unchanged; every file read is handed to `keep(hash, content)`
/// (to be stored) before the scan returns. `skip` leaves files out.
pub fn scan(
    roots: &[PathBuf],
    known: &Manifest,
    skip: &(dyn Fn(&Path) -> bool + Sync),
    keep: &mut dyn FnMut(String, Vec<u8>),
) -> Result<Manifest, ScanError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // The walk (directory reads, ignore rules, stats) on every core...
    let found: std::sync::Mutex<Vec<(PathBuf, u64, i128, u32)>> = Default::default();
    let too_many = std::sync::atomic::AtomicBool::new(false);
    for root in roots {
        ignore::WalkBuilder::new(root)
            .hidden(false)
            .git_global(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build_parallel()
            .run(|| {
                Box::new(|entry| {
                    use ignore::WalkState;
                    let Ok(entry) = entry else { return WalkState::Continue };
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        return WalkState::Continue;
                    }
                    let Ok(meta) = entry.metadata() else { return WalkState::Continue };
                    if meta.len() > MAX_FILE_BYTES || skip(entry.path()) {
                        return WalkState::Continue;
                    }
                    let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
                    let mode = meta.permissions().mode() & 0o7777;
                    let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
                    if found.len() >= MAX_FILES {
                        too_many.store(true, std::sync::atomic::Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    found.push((entry.into_path(), meta.len(), mtime_ns, mode));
                    WalkState::Continue
                })
            });
    }
    if too_many.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ScanError::TooManyFiles);
    }
    // ...then only the files that differ from the last scan are read.
    let mut files = HashMap::new();
    let mut read: u64 = 0;
    for (path, size, mtime_ns, mode) in found.into_inner().unwrap_or_else(|p| p.into_inner()) {
        let path = path.into_os_string();
        let same =
            known.files.get(&path).filter(|e| e.size == size && e.mtime_ns == mtime_ns && e.mode == mode).cloned();
        let entry = match same {
            Some(e) => e,
            None => {
                read += size;
                if read > MAX_READ_BYTES {
                    return Err(ScanError::TooMuchContent);
                }
                let Ok(data) = std::fs::read(&path) else { continue };
                let hash = crate::rewind::hash(&data);
                let shared: std::sync::Arc<str> = hash.as_str().into();
                keep(hash, data);
                Entry { size, mtime_ns, mode, hash: shared }
            }
        };
        files.insert(path, entry);
    }
    Ok(Manifest { files })
}

/// The files created, deleted, or changed in content or mode, in order.
pub fn changed(before: &Manifest, after: &Manifest) -> Vec<PathBuf> {
    let differs = |a: Option<&Entry>, b: Option<&Entry>| a.map(|e| (&*e.hash, e.mode)) != b.map(|e| (&*e.hash, e.mode));
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

impl Manifest {
    /// A file's state as recorded: (hash, mode), `None` if absent.
    pub fn state(&self, path: &Path) -> crate::rewind::FileState {
        self.files.get(path.as_os_str()).map(|e| (e.hash.to_string(), e.mode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_files_are_read_again_and_changes_are_found() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().to_path_buf();
        std::fs::write(root.join("keep.txt"), "same").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("edit.txt"), "old").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("gone.txt"), "bye").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("target")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("target/big.o"), "ignored").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".git/HEAD"), "ref").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".env"), "SECRET=1").unwrap_or_else(|e| panic!("{e}"));
        let skip = |p: &Path| p.file_name().is_some_and(|n| n == ".env");
        let mut read = Vec::new();
        let before = scan(std::slice::from_ref(&root), &Manifest::default(), &skip, &mut |h, _| read.push(h))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(before.files.len(), 4, "{:?}", before.files.keys());
        assert_eq!(read.len(), 4);

        // Make sure the edit changes the modification time the scan sees.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(root.join("edit.txt"), "new!").unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(root.join("gone.txt")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("made.txt"), "hi").unwrap_or_else(|e| panic!("{e}"));
        let mut read = Vec::new();
        let after = scan(std::slice::from_ref(&root), &before, &skip, &mut |_, d| read.push(d))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.len(), 2, "only the edited and the new file are read");
        let names: Vec<String> =
            changed(&before, &after).iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into()).collect();
        assert_eq!(names, ["edit.txt", "gone.txt", "made.txt"]);
    }
}
