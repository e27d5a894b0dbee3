//! Rewind: files follow the conversation. Every change a tool makes to a
//! file is recorded (its content before and after, as blobs) against the
//! tool result's node. Moving a session from one node to another then
//! moves its files too: what changed on the way out is put back as it was
//! at the common point, and what the target's branch changed is put
//! forward. This module plans that move (pure) and carries it out on disk,
//! refusing to overwrite a file that changed outside Forge unless forced.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub use crate::store::rows::{Change, FileState};

/// How a recorded path whose name is not UTF-8 starts: its bytes follow
/// in hex. Recorded paths are absolute, so no other starts this way.
const BYTES_PREFIX: &str = "bytes:";

/// A path as the records keep it: as text when it is UTF-8, else its
/// exact bytes (so an undo finds the very file, never a look-alike).
pub fn path_text(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    match path.to_str() {
        Some(text) => text.to_string(),
        None => {
            let hex: String = path.as_os_str().as_bytes().iter().map(|b| format!("{b:02x}")).collect();
            format!("{BYTES_PREFIX}{hex}")
        }
    }
}

/// The path a record names (see [`path_text`]).
pub fn text_path(text: &str) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = text.strip_prefix(BYTES_PREFIX).filter(|h| h.len() % 2 == 0).and_then(|hex| {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect::<Option<Vec<u8>>>()
    });
    match bytes {
        Some(bytes) => std::ffi::OsString::from_vec(bytes).into(),
        None => std::path::PathBuf::from(text),
    }
}

/// A recorded path as people read it (a name that is not UTF-8 with
/// U+FFFD in place of what is not).
pub fn shown_path(text: &str) -> String {
    text_path(text).display().to_string()
}

/// What one file must become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub path: String,
    /// What the file holds now as far as Forge knows (`None`: unknown, a
    /// tool was interrupted before its result was recorded).
    pub expected: Option<FileState>,
    /// What it must hold at the target (`None`: unknown, the target's own
    /// change was interrupted).
    pub target: Option<FileState>,
}

/// The files to move from the state at the end of `from` (the head's path,
/// root first) to the state at the end of `to` (the target's path).
pub fn plan(from: &[String], to: &[String], changes: &[Change]) -> Vec<Step> {
    let index = |path: &[String]| -> HashMap<String, usize> {
        path.iter().enumerate().map(|(i, id)| (id.clone(), i)).collect()
    };
    let (on_from, on_to) = (index(from), index(to));
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let mut by_path: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
    for c in changes {
        by_path.entry(c.path.as_str()).or_default().push(c);
    }
    let mut steps = Vec::new();
    for (path, all) in by_path {
        let along = |on: &HashMap<String, usize>| {
            let mut v: Vec<(usize, &Change)> = all.iter().filter_map(|c| Some((*on.get(&c.node_id)?, *c))).collect();
            v.sort_by_key(|(i, _)| *i);
            v
        };
        let (out, back) = (along(&on_from), along(&on_to));
        let moved = |v: &[(usize, &Change)]| v.iter().any(|(i, _)| *i >= common);
        if !moved(&out) && !moved(&back) {
            continue;
        }
        let expected = match out.last() {
            Some((_, c)) if c.done => Some(c.after.clone()),
            Some(_) => None,
            // Only the target's branch changed it: it should be as that
            // branch found it.
            None => back.iter().find(|(i, _)| *i >= common).map(|(_, c)| c.before.clone()),
        };
        let target = match back.last() {
            Some((_, c)) if c.done => Some(c.after.clone()),
            Some(_) => None,
            None => out.first().map(|(_, c)| c.before.clone()),
        };
        steps.push(Step { path: path.to_string(), expected, target });
    }
    steps
}

/// The mode recorded for a symbolic link (whose content is its target).
pub const SYMLINK_MODE: u32 = 0o120_777;

/// Why a change was found but its content not kept: a rewind names such
/// files as ones it cannot restore. Recorded in place of a content hash
/// as a mark (`!` then the reason's name; a hash is hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrecorded {
    /// `.gitignore` keeps it out of git (build output, say).
    Ignored,
    /// Over `snapshot::MAX_FILE_BYTES`.
    TooBig,
    /// The sandbox denies it (a secret's file).
    Denied,
    /// It could not be read when scanned.
    Unreadable,
    /// The roots were too large to scan around the command (the mark
    /// stands on the root).
    Unscanned,
    /// More ignored files than are watched (the mark stands on the root).
    IgnoredUnwatched,
    /// Its content was to be read from git's objects, and they no longer
    /// have it (the repository was removed or rewritten meanwhile).
    Missing,
    /// Recording the tree the first time would have kept more than the
    /// store may hold (`[store] max_blob_mb`).
    OverBound,
    /// What the command changed could not be read after it ended (the
    /// mark stands on the root).
    NotRead,
    /// The daemon stopped (killed, crashed) while the command ran: what
    /// it changed was never read (the mark stands on the root).
    CutShort,
}

impl Unrecorded {
    const ALL: [Unrecorded; 10] = [
        Unrecorded::Ignored,
        Unrecorded::TooBig,
        Unrecorded::Denied,
        Unrecorded::Unreadable,
        Unrecorded::Unscanned,
        Unrecorded::IgnoredUnwatched,
        Unrecorded::Missing,
        Unrecorded::OverBound,
        Unrecorded::NotRead,
        Unrecorded::CutShort,
    ];

    pub fn mark(self) -> &'static str {
        match self {
            Unrecorded::Ignored => "!ignored",
            Unrecorded::TooBig => "!too-big",
            Unrecorded::Denied => "!denied",
            Unrecorded::Unreadable => "!unreadable",
            Unrecorded::Unscanned => "!unscanned",
            Unrecorded::IgnoredUnwatched => "!ignored-unwatched",
            Unrecorded::Missing => "!missing",
            Unrecorded::OverBound => "!over-bound",
            Unrecorded::NotRead => "!not-read",
            Unrecorded::CutShort => "!cut-short",
        }
    }

    /// The mark's reason, if `hash` is a mark.
    pub fn of(hash: &str) -> Option<Unrecorded> {
        Unrecorded::ALL.into_iter().find(|u| u.mark() == hash)
    }

    /// Why the file cannot be restored, for the user.
    pub fn why(self) -> &'static str {
        match self {
            Unrecorded::Ignored => "it is ignored by .gitignore, so its content was not recorded",
            Unrecorded::TooBig => "it is over 16 MiB, so its content was not recorded",
            Unrecorded::Denied => "the sandbox denies it (it looks like a secret), so its content was not recorded",
            Unrecorded::Unreadable => "it could not be read when the command ran, so its content was not recorded",
            Unrecorded::Unscanned => {
                "the command ran in a tree too large for the Forge of then to record (over 100,000 files or 512 MiB), so none of its changes were recorded"
            }
            Unrecorded::IgnoredUnwatched => {
                "over 100,000 files here are ignored by .gitignore: changes the command made among them were not watched"
            }
            Unrecorded::Missing => {
                "its content before the command was git's, and the repository no longer has it (removed or rewritten)"
            }
            Unrecorded::OverBound => {
                "its directory held more than the store may keep ([store] max_blob_mb) when Forge first recorded it, so its content was not kept"
            }
            Unrecorded::NotRead => {
                "what the command changed here could not be read after it ended (the daemon's log says why), so its changes were not recorded"
            }
            Unrecorded::CutShort => {
                "forged stopped (killed or crashed) while the command ran, so what it changed here was never read"
            }
        }
    }
}

/// SHA-256 of content, in hex: a blob's name.
pub fn hash(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// A file as it is now: content and permission bits (`None` if absent;
/// an error if it cannot be read, e.g. a directory stands there).
pub fn read_state(path: &Path) -> std::io::Result<Option<(Vec<u8>, u32)>> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
        Ok(m) if !m.is_file() => Err(std::io::Error::other(format!("{} is not a regular file", path.display()))),
        Ok(m) => Ok(Some((std::fs::read(path)?, m.permissions().mode() & 0o7777))),
    }
}

/// As [`read_state`], and a symbolic link as its target with
/// [`SYMLINK_MODE`] (it is not followed).
pub fn read_any(path: &Path) -> std::io::Result<Option<(Vec<u8>, u32)>> {
    use std::os::unix::ffi::OsStrExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            Ok(Some((std::fs::read_link(path)?.as_os_str().as_bytes().to_vec(), SYMLINK_MODE)))
        }
        _ => read_state(path),
    }
}

/// Puts a file in the state given (`None`: removes it; [`SYMLINK_MODE`]:
/// a symbolic link to the content), making missing directories; the
/// content is written to a temporary file renamed over the original, so
/// a crash leaves either version whole.
pub fn write_state(path: &Path, state: Option<(&[u8], u32)>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    match state {
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
        Some((data, mode)) => {
            let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
            make_dirs_like_parent(dir)?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let tmp = dir.join(format!(".{name}.forge-rewind-{}", std::process::id()));
            if mode == SYMLINK_MODE {
                use std::os::unix::ffi::OsStrExt;
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(data), &tmp)?;
                return std::fs::rename(&tmp, path);
            }
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
            std::fs::rename(&tmp, path)
        }
    }
}

/// Makes `dir` and its missing parents, each with the mode of the
/// nearest directory that exists (a tree the command removed comes back
/// as open as the project around it, not with the daemon's private
/// umask).
fn make_dirs_like_parent(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing = Vec::new();
    let mut at = dir;
    while std::fs::symlink_metadata(at).is_err() {
        missing.push(at.to_path_buf());
        at = at.parent().ok_or_else(|| std::io::Error::other("no existing parent directory"))?;
    }
    let mode = std::fs::metadata(at)?.permissions().mode() & 0o7777;
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(&d) {
            Ok(()) => std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// After a rewind removed `removed`: their directories left empty are
/// removed too, up to the `roots` (never a root itself, nor anything
/// outside them).
pub fn remove_emptied_dirs(removed: &[std::path::PathBuf], roots: &[std::path::PathBuf]) {
    let mut dirs: Vec<&Path> = removed.iter().filter_map(|p| p.parent()).collect();
    // Deepest first, so a parent is looked at once its children are gone.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs.dedup();
    for dir in dirs {
        let mut at = dir;
        while roots.iter().any(|r| at.starts_with(r) && at != r.as_path()) {
            // Only an empty directory goes (remove_dir refuses any other).
            if std::fs::remove_dir(at).is_err() {
                break;
            }
            let Some(parent) = at.parent() else { break };
            at = parent;
        }
    }
}

/// A unified diff from `now` to `target` (`None`: absent), or a line
/// saying binary files differ.
pub fn unified_diff(path: &str, now: Option<&[u8]>, target: Option<&[u8]>) -> String {
    let text = |d: Option<&[u8]>| d.map(|d| std::str::from_utf8(d).map(str::to_string)).transpose();
    match (text(now), text(target)) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
            let old = if now.is_some() { format!("a/{path}") } else { "/dev/null".into() };
            let new = if target.is_some() { format!("b/{path}") } else { "/dev/null".into() };
            similar::TextDiff::from_lines(&a, &b).unified_diff().header(&old, &new).to_string()
        }
        _ => format!("Binary files a/{path} and b/{path} differ\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_is_recorded_as_its_bytes_and_read_back_exactly() {
        use std::os::unix::ffi::OsStrExt;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/p/caf\xe9.txt"));
        let text = path_text(odd);
        assert_eq!(text, "bytes:2f702f636166e92e747874");
        assert_eq!(text_path(&text), odd);
        assert_eq!(shown_path(&text), "/p/caf\u{fffd}.txt");
        assert_eq!(path_text(Path::new("/p/plain.txt")), "/p/plain.txt");
        assert_eq!(text_path("/p/bytes:zz"), Path::new("/p/bytes:zz"));
        assert_eq!(text_path("bytes:zz"), Path::new("bytes:zz"), "not hex: taken as written");
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn state(h: &str) -> FileState {
        Some((h.to_string(), 0o644))
    }

    fn change(node: &str, path: &str, before: FileState, after: FileState) -> Change {
        Change { node_id: node.into(), path: path.into(), before, after, done: true }
    }

    #[test]
    fn going_back_restores_what_each_file_was_before_the_first_change_since() {
        // t1 creates a.txt, t2 edits it and creates b.txt, t3 deletes b.txt.
        let path = ids(&["u1", "a1", "t1", "u2", "a2", "t2", "u3", "a3", "t3"]);
        let changes = vec![
            change("t1", "a.txt", None, state("a1")),
            change("t2", "a.txt", state("a1"), state("a2")),
            change("t2", "b.txt", None, state("b1")),
            change("t3", "b.txt", state("b1"), None),
        ];
        let back_to_u2 = plan(&path, &path[..4], &changes);
        assert_eq!(
            back_to_u2,
            vec![
                Step { path: "a.txt".into(), expected: Some(state("a2")), target: Some(state("a1")) },
                Step { path: "b.txt".into(), expected: Some(None), target: Some(None) },
            ]
        );
        // And forward again (a rewind of the rewind): the later states.
        let forward = plan(&path[..4], &path, &changes);
        assert_eq!(forward[0], Step { path: "a.txt".into(), expected: Some(state("a1")), target: Some(state("a2")) });
        assert_eq!(forward[1], Step { path: "b.txt".into(), expected: Some(None), target: Some(None) });
    }

    #[test]
    fn another_branch_gets_its_own_files_and_an_interrupted_change_is_unknown() {
        let main = ids(&["u1", "a1", "t1", "u2", "a2", "t2"]);
        let side = ids(&["u1", "a1", "t1", "u2b", "a2b", "t2b"]);
        let mut changes = vec![
            change("t1", "f", None, state("v1")),
            change("t2", "f", state("v1"), state("main")),
            change("t2b", "f", state("v1"), state("side")),
        ];
        assert_eq!(
            plan(&main, &side, &changes),
            vec![Step { path: "f".into(), expected: Some(state("main")), target: Some(state("side")) }]
        );
        changes[1].done = false;
        assert_eq!(plan(&main, &side, &changes)[0].expected, None, "what the interrupted call left is unknown");
        assert!(plan(&main, &main, &changes).is_empty(), "staying put moves nothing");
    }

    #[test]
    fn files_are_written_whole_with_their_mode_and_removed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = dir.path().join("deep/er/x.sh");
        write_state(&f, Some((b"#!/bin/sh\n", 0o755))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_state(&f).unwrap_or_else(|e| panic!("{e}")), Some((b"#!/bin/sh\n".to_vec(), 0o755)));
        write_state(&f, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_state(&f).unwrap_or_else(|e| panic!("{e}")), None);
        assert_eq!(hash(b"").len(), 64);
        let d = unified_diff("x.txt", Some(b"a\nb\n"), Some(b"a\nc\n"));
        assert!(d.contains("--- a/x.txt") && d.contains("-b") && d.contains("+c"), "{d}");
        assert!(unified_diff("new", None, Some(b"x\n")).contains("--- /dev/null"));
        let link = dir.path().join("link");
        write_state(&link, Some((b"/somewhere", SYMLINK_MODE))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_any(&link).unwrap_or_else(|e| panic!("{e}")), Some((b"/somewhere".to_vec(), SYMLINK_MODE)));
        assert_eq!(Unrecorded::of(Unrecorded::TooBig.mark()), Some(Unrecorded::TooBig));
        assert_eq!(Unrecorded::of(&hash(b"x")), None);
    }

    #[test]
    fn an_undo_removes_the_directories_it_empties_and_makes_them_again_as_open_as_their_parent() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join("kept")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        // Made again where a command removed the tree: 0755 like the root.
        let deep = root.join("a/b/c.txt");
        write_state(&deep, Some((b"x", 0o644))).unwrap_or_else(|e| panic!("{e}"));
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!((mode(&root.join("a")), mode(&root.join("a/b"))), (0o755, 0o755));
        // Removed again: the directories it emptied go, the root and a
        // directory with something in it stay.
        std::fs::write(root.join("kept/x"), "x").unwrap_or_else(|e| panic!("{e}"));
        write_state(&deep, None).unwrap_or_else(|e| panic!("{e}"));
        remove_emptied_dirs(&[deep, root.join("kept/gone")], std::slice::from_ref(&root));
        assert!(!root.join("a").exists() && root.join("kept").exists() && root.exists());
    }
}
