//! What the files a command touched became: the paths the kernel's notes
//! name (and what lies under directories made, moved or removed) are
//! looked at again, nothing else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::scan::{Rules, walk};
use super::watch::{Dirty, Watcher};
use super::{Content, Entry, Keep, Manifest, differs, git_index};

/// One file whose record changed.
pub(super) struct Changed {
    pub path: PathBuf,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

/// The notes cannot say what changed: the roots must be scanned.
pub(super) struct Lost;

/// What a command touched: its changes to recorded files, and the paths
/// git may take for a repository's own (for the guard of nested ones).
pub(super) struct Refreshed {
    pub changes: Vec<Changed>,
    pub looks: Vec<PathBuf>,
}

/// Whether `path` lies in a `.git` directory below the root it is under
/// (a git session's root itself lies in the repository's `.git`).
fn in_git_dir(path: &Path, roots: &[PathBuf]) -> bool {
    let below = roots.iter().filter_map(|r| path.strip_prefix(r).ok()).min_by_key(|rel| rel.as_os_str().len());
    below.unwrap_or(path).components().any(|c| c.as_os_str() == ".git")
}

/// Applies `dirty` to `m`, reading each touched file (content kept) and
/// watching new directories: the files whose record changed.
/// What lies in a `.git` directory is not recorded, only named in `looks`.
pub(super) fn refresh(
    m: &mut Manifest,
    dirty: Dirty,
    roots: &[PathBuf],
    watcher: &mut Watcher,
    rules: &mut Rules,
    keep: Keep,
) -> Result<Refreshed, Lost> {
    if dirty.lost {
        return Err(Lost);
    }
    let worth = |p: &PathBuf| in_git_dir(p, roots) || forge_tools::git_guard::worth_a_look(p);
    let mut looks: Vec<PathBuf> =
        dirty.files.iter().chain(&dirty.new_dirs).chain(&dirty.gone_dirs).filter(|p| worth(p)).cloned().collect();
    let mut paths: BTreeSet<PathBuf> = dirty.files.into_iter().filter(|p| !in_git_dir(p, roots)).collect();
    for dir in &dirty.gone_dirs {
        if roots.iter().any(|r| r.starts_with(dir)) {
            return Err(Lost);
        }
        watcher.unwatch_under(dir);
        if !in_git_dir(dir, roots) {
            paths.extend(m.under(dir));
        }
    }
    let failed = std::sync::atomic::AtomicBool::new(false);
    let shared = std::sync::Mutex::new(&mut *watcher);
    for dir in dirty.new_dirs.iter().filter(|d| !in_git_dir(d, roots)) {
        let walked = walk(std::slice::from_ref(dir), &|d| {
            if shared.lock().unwrap_or_else(|p| p.into_inner()).watch(d).is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
        paths.extend(walked.files.into_iter().map(|(p, _)| p));
        looks.extend(walked.looks);
    }
    if failed.into_inner() {
        return Err(Lost);
    }
    // A new rule may change what is ignored anywhere below it.
    if paths.iter().any(|p| p.file_name().is_some_and(|n| n == ".gitignore")) {
        return Err(Lost);
    }
    let mut changes = Vec::new();
    for path in paths {
        let before = m.get(&path).copied();
        let after = look(&path, before.as_ref(), rules, keep);
        if differs(before.as_ref(), after.as_ref()) {
            changes.push(Changed { path: path.clone(), before, after });
        }
        match after {
            Some(e) => m.insert(&path, e),
            None => {
                m.remove(&path);
            }
        };
    }
    Ok(Refreshed { changes, looks })
}

/// What the file at `path` is now (read, since it was touched).
fn look(path: &Path, before: Option<&Entry>, rules: &mut Rules, keep: Keep) -> Option<Entry> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !(meta.is_file() || meta.file_type().is_symlink()) {
        return None;
    }
    let stat = super::Stat::of(&meta);
    if let Some(why) = rules.unrecorded(path, &stat) {
        return Some(Entry::marked(stat, why));
    }
    let Ok(Some((data, _))) = crate::rewind::read_any(path) else {
        return Some(Entry::marked(stat, crate::rewind::Unrecorded::Unreadable));
    };
    // Still git's blob: nothing new to keep.
    if let Some(b) = before.filter(|b| matches!(b.content, Content::Git(_)))
        && git_index::name_of(&data) == Some(b.content)
    {
        return Some(Entry { stat, content: b.content });
    }
    Some(super::scan::kept(stat, data, keep))
}
