//! Files a turn's commands wrote that make something run later (a hook, a
//! `.gitattributes` filter, an `.envrc`): the session's commit holds them
//! back until a user has seen them, so a confined command cannot put a
//! program into the branch the user merges without anyone looking. Here:
//! what such files differ by from the branch's tip, and, for the commit,
//! how to leave them out or put the tip's version back.

use std::path::Path;

use crate::GitError;

/// Most bytes of one file's diff shown.
const DIFF_MAX: usize = 16 * 1024;

/// One file held from a commit, with what it would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFile {
    /// Relative to the repository's top.
    pub path: String,
    /// Its diff against the branch's tip (cut at 16 KiB).
    pub diff: String,
}

/// Which files a commit holds back.
pub enum Holding<'a> {
    /// These paths, where they differ from the tip.
    Paths(&'a [String]),
    /// Every changed path the predicate names (after a restart, when what
    /// the turn's commands wrote is no longer known).
    Matching(&'a dyn Fn(&str) -> bool),
}

/// The files `which` names that the worktree of `branch` holds changed
/// against the branch's tip (created, modified, deleted, or turned into a
/// symlink); files the repository ignores are not committed, so not held.
pub fn held_changes(worktree: &Path, branch: &str, which: Holding) -> Result<Vec<HeldFile>, GitError> {
    if matches!(which, Holding::Paths(p) if p.is_empty()) {
        return Ok(Vec::new());
    }
    let repo = git2::Repository::open(worktree)?;
    let tip = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let tree = tip.tree()?;
    let mut opts = git2::DiffOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true).show_untracked_content(true).include_typechange(true);
    if let Holding::Paths(paths) = &which {
        opts.disable_pathspec_match(true);
        for p in *paths {
            opts.pathspec(p);
        }
    }
    let diff = repo.diff_tree_to_workdir(Some(&tree), Some(&mut opts))?;
    let mut held = Vec::new();
    for (i, delta) in diff.deltas().enumerate() {
        let Some(path) = delta.new_file().path().or_else(|| delta.old_file().path()) else { continue };
        let path = path.to_string_lossy().into_owned();
        if let Holding::Matching(wanted) = &which
            && !wanted(&path)
        {
            continue;
        }
        let mut text = match git2::Patch::from_diff(&diff, i)? {
            Some(mut patch) => String::from_utf8_lossy(&patch.to_buf()?).into_owned(),
            None => String::new(),
        };
        if text.len() > DIFF_MAX {
            let cut = (0..=DIFF_MAX).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
            text.truncate(cut);
            text.push_str("\n[… the rest of the diff is not shown]\n");
        }
        held.push(HeldFile { path, diff: text });
    }
    Ok(held)
}

/// Puts `paths` back as the tip of the worktree's branch has them (a file
/// the tip lacks is removed), through libgit2's checkout, which replaces a
/// symlink the command left in a path's place instead of writing through it.
pub(crate) fn put_back(repo: &git2::Repository, tip: &git2::Commit, paths: &[String]) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    // libgit2 does not see a file turned symlink; the link (or a linked
    // directory above the path) goes first, never what it points to.
    let top = repo.workdir().ok_or_else(|| GitError::Bare { dir: repo.path().display().to_string() })?;
    for p in paths {
        let mut at = top.to_path_buf();
        for part in Path::new(p).components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    std::fs::remove_file(&at).map_err(|e| GitError::io(&at, e))?;
                    break;
                }
                Ok(m) if m.is_dir() => continue,
                _ => break,
            }
        }
    }
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force().remove_untracked(true).disable_pathspec_match(true);
    for p in paths {
        checkout.path(p);
    }
    repo.checkout_tree(tip.as_object(), Some(&mut checkout))?;
    Ok(())
}

/// Leaves `paths` out of the index about to be committed: they keep the
/// tip's version there (or stay absent), while the worktree keeps the
/// change for a later commit.
pub(crate) fn leave_out(
    repo: &git2::Repository,
    tip: &git2::Commit,
    index: &mut git2::Index,
    paths: &[String],
) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    index.write()?;
    repo.reset_default(Some(tip.as_object()), paths.iter())?;
    index.read(true)?;
    Ok(())
}
