//! Files a session's worktree holds changed that make something run later
//! (a hook, a `.gitattributes` filter, an `.envrc`): the session's commit
//! holds them back until a user has seen them, so a confined command (or
//! a helper agent's) cannot put a program into the branch the user
//! merges without anyone looking. Here: what such files differ by from
//! the branch's tip, and, for the commit, how to leave them out or put
//! the tip's version back. Paths are kept as bytes throughout.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::GitError;

/// Most bytes of one file's diff shown.
const DIFF_MAX: usize = 16 * 1024;

/// One file held from a commit, with what it would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFile {
    /// Relative to the repository's top, as the file system names it.
    pub path: PathBuf,
    /// Its diff against the branch's tip, as text (cut at 16 KiB, saying
    /// how much there is in all).
    pub diff: String,
}

/// The changed files of `branch`'s worktree against the branch's tip
/// (created, modified, deleted, or turned into a symlink) that `wanted`
/// names; files the repository ignores are not committed, so not held.
pub fn held_changes(worktree: &Path, branch: &str, wanted: &dyn Fn(&Path) -> bool) -> Result<Vec<HeldFile>, GitError> {
    let repo = git2::Repository::open(worktree)?;
    let tip = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let tree = tip.tree()?;
    let mut opts = git2::DiffOptions::new();
    // As text whatever the worktree's `.gitattributes` says (`-diff`
    // would show a hook as "binary" and hide what it runs).
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true)
        .force_text(true);
    let diff = repo.diff_tree_to_workdir(Some(&tree), Some(&mut opts))?;
    let mut held = Vec::new();
    for (i, delta) in diff.deltas().enumerate() {
        let Some(path) = delta.new_file().path().or_else(|| delta.old_file().path()) else { continue };
        if !wanted(path) {
            continue;
        }
        let mut text = match git2::Patch::from_diff(&diff, i)? {
            Some(mut patch) => String::from_utf8_lossy(&patch.to_buf()?).into_owned(),
            None => String::new(),
        };
        if text.len() > DIFF_MAX {
            let all = text.len();
            let cut = (0..=DIFF_MAX).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
            text.truncate(cut);
            text.push_str(&format!("\n[… {all} bytes of diff in all; the rest is not shown: read the file itself]\n"));
        }
        held.push(HeldFile { path: path.to_path_buf(), diff: text });
    }
    Ok(held)
}

/// Puts `paths` back as the tip of the worktree's branch has them (a file
/// the tip lacks is removed), through libgit2's checkout, which replaces a
/// symlink the command left in a path's place instead of writing through it.
pub(crate) fn put_back(repo: &git2::Repository, tip: &git2::Commit, paths: &[PathBuf]) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    // libgit2 does not see a file turned symlink; the link (or a linked
    // directory above the path) goes first, never what it points to.
    let top = repo.workdir().ok_or_else(|| GitError::Bare { dir: repo.path().display().to_string() })?;
    for p in paths {
        crate::commit::unlink_on_the_way(top, p)?;
    }
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force().remove_untracked(true).disable_pathspec_match(true);
    for p in paths {
        checkout.path(p.as_path());
    }
    repo.checkout_tree(tip.as_object(), Some(&mut checkout))?;
    Ok(())
}

/// Leaves `paths` out of the index about to be committed: each keeps the
/// tip's entries there (or stays absent), while the worktree keeps the
/// change for a later commit. Entries are set one by one, by exact name
/// (no pattern matching).
pub(crate) fn leave_out(
    repo: &git2::Repository,
    tip: &git2::Commit,
    index: &mut git2::Index,
    paths: &[PathBuf],
) -> Result<(), GitError> {
    let tree = tip.tree()?;
    for p in paths {
        index.remove_path(p)?;
        index.remove_dir(p, 0)?;
        let Ok(entry) = tree.get_path(p) else { continue };
        match entry.kind() {
            Some(git2::ObjectType::Blob) => add_entry(index, p, entry.filemode(), entry.id())?,
            // A directory the command replaced (by a link): all it held.
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id())?;
                let mut blobs = Vec::new();
                sub.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
                    if e.kind() == Some(git2::ObjectType::Blob) {
                        let name = Path::new(std::ffi::OsStr::from_bytes(e.name_bytes()));
                        blobs.push((p.join(dir).join(name), e.filemode(), e.id()));
                    }
                    git2::TreeWalkResult::Ok
                })?;
                for (path, mode, id) in blobs {
                    add_entry(index, &path, mode, id)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn add_entry(index: &mut git2::Index, path: &Path, mode: i32, id: git2::Oid) -> Result<(), GitError> {
    let name = path.as_os_str().as_bytes().to_vec();
    let zero = git2::IndexTime::new(0, 0);
    index.add(&git2::IndexEntry {
        ctime: zero,
        mtime: zero,
        dev: 0,
        ino: 0,
        mode: mode as u32,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: name.len().min(0xfff) as u16,
        flags_extended: 0,
        path: name,
    })?;
    Ok(())
}
