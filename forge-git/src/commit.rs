//! A turn made one commit: everything in the session's worktree (as git
//! would add it: ignored files left out) plus the session's state file,
//! on the session's branch, whose tip must still be the last commit
//! (libgit2 moves the ref through a lock file, so a crash leaves the old
//! tip or the new one, never half a ref).

use std::path::{Path, PathBuf};

use crate::{GitError, SESSION_TRAILER, TURN_TRAILER, signature};

/// What one turn's commit holds.
#[derive(Debug, Clone)]
pub struct TurnCommit {
    pub session: String,
    /// The turn's user message (its node id): made into a trailer, so a
    /// commit already made for it is found again instead of made twice.
    pub turn: String,
    /// The commit message's first line.
    pub subject: String,
    /// More lines, if any.
    pub body: Option<String>,
    /// `.forge/sessions/<session>.json`.
    pub state: Vec<u8>,
    /// Paths kept out of this commit, their change left in the worktree
    /// (files a command wrote that run something later, not yet approved).
    pub leave_out: Vec<PathBuf>,
    /// Paths put back as the branch's tip has them before committing
    /// (such files a user denied).
    pub put_back: Vec<PathBuf>,
}

/// A turn's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub commit: String,
    /// Paths the turn changed (the state file left out), relative to the
    /// repository's top.
    pub files: Vec<String>,
    /// False when the branch already held this turn's commit (made before
    /// a crash that came before it was journaled).
    pub made: bool,
}

/// The session state file's path in the tree.
pub fn state_path(session: &str) -> PathBuf {
    PathBuf::from(".forge").join("sessions").join(format!("{session}.json"))
}

/// The turn (user message id) a commit message names, if any.
pub fn turn_of(message: &str) -> Option<String> {
    trailer(message, TURN_TRAILER)
}

pub(crate) fn trailer(message: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}: ");
    message.lines().rev().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.trim().to_string())
}

/// Commits what session `t.session`'s worktree holds to its branch.
pub fn commit_turn(worktree: &Path, branch: &str, t: &TurnCommit) -> Result<Committed, GitError> {
    if !worktree.is_dir() {
        return Err(GitError::WorktreeMissing { path: worktree.display().to_string() });
    }
    let repo = git2::Repository::open(worktree)?;
    let refname = format!("refs/heads/{branch}");
    let parent = repo.find_reference(&refname)?.peel_to_commit()?;
    if turn_of(&String::from_utf8_lossy(parent.message_bytes())).as_deref() == Some(t.turn.as_str()) {
        let files = changed(&repo, &parent, &t.session)?;
        return Ok(Committed { commit: parent.id().to_string(), files, made: false });
    }
    // The state file in the worktree too, so that after the commit the
    // worktree is clean and shows what the commit holds.
    let rel = state_path(&t.session);
    write_state_file(worktree, &rel, &t.state)?;
    crate::held::put_back(&repo, &parent, &t.put_back)?;

    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    // Even where `.forge/` is ignored by the project.
    index.add_path(&rel)?;
    crate::held::leave_out(&repo, &parent, &mut index, &t.leave_out)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;

    let mut message = t.subject.trim().to_string();
    if let Some(body) = t.body.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        message.push_str("\n\n");
        message.push_str(body);
    }
    message.push_str(&format!("\n\n{SESSION_TRAILER}: {}\n{TURN_TRAILER}: {}\n", t.session, t.turn));
    let sig = signature(&repo)?;
    // libgit2 moves the ref only if its tip is still `parent`.
    let id = repo.commit(Some(&refname), &sig, &sig, &message, &tree, &[&parent]).map_err(|e| {
        if e.code() == git2::ErrorCode::Modified {
            GitError::Moved { branch: branch.to_string() }
        } else {
            GitError::Git(e)
        }
    })?;
    let commit = repo.find_commit(id)?;
    let files = changed(&repo, &commit, &t.session)?;
    Ok(Committed { commit: id.to_string(), files, made: true })
}

/// Writes the session's state file at `rel` in the worktree, whatever a
/// command left on the way: a link in its place or in place of
/// `.forge/` or `.forge/sessions/` is removed, not followed (the file
/// would otherwise land wherever the link points, a key file of the
/// user's say).
fn write_state_file(worktree: &Path, rel: &Path, state: &[u8]) -> Result<(), GitError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    unlink_on_the_way(worktree, rel)?;
    let file = worktree.join(rel);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| GitError::io(dir, e))?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file)
        .map_err(|e| GitError::io(&file, e))?;
    out.write_all(state).map_err(|e| GitError::io(&file, e))
}

/// Removes the first symbolic link on the way from `top` to `rel` (the
/// path itself included), so what is written there next stays inside.
pub(crate) fn unlink_on_the_way(top: &Path, rel: &Path) -> Result<(), GitError> {
    let mut at = top.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return std::fs::remove_file(&at).map_err(|e| GitError::io(&at, e));
            }
            Ok(m) if m.is_dir() => continue,
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// The paths `commit` changed against its first parent, the session's
/// state file left out.
pub(crate) fn changed(repo: &git2::Repository, commit: &git2::Commit, session: &str) -> Result<Vec<String>, GitError> {
    let new = commit.tree()?;
    let old = match commit.parent(0) {
        Ok(p) => Some(p.tree()?),
        Err(_) => None,
    };
    let diff = repo.diff_tree_to_tree(old.as_ref(), Some(&new), None)?;
    let state = state_path(session);
    let mut files: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()).map(Path::to_path_buf))
        .filter(|p| *p != state)
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// Gives the last commit of session `session`'s branch (checked out in
/// `worktree`) the message `message`, keeping its trailers, tree and
/// parents; the tip it replaces is kept as `refs/forge/session/<id>/prev-N`.
pub fn reword_tip(worktree: &Path, branch: &str, session: &str, message: &str) -> Result<Option<Moved>, GitError> {
    let repo = git2::Repository::open(worktree)?;
    let refname = format!("refs/heads/{branch}");
    let tip = repo.find_reference(&refname)?.peel_to_commit()?;
    let old = String::from_utf8_lossy(tip.message_bytes()).into_owned();
    if trailer(&old, SESSION_TRAILER).is_none() {
        return Err(GitError::NotATurn { commit: tip.id().to_string() });
    }
    let trailers: Vec<&str> = old.lines().filter(|l| l.starts_with("Forge-")).collect();
    let new = format!("{}\n\n{}\n", message.trim(), trailers.join("\n"));
    let parents: Vec<git2::Commit> = tip.parents().collect();
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    let id = repo.commit(None, &tip.author(), &tip.committer(), &new, &tip.tree()?, &parents)?;
    let kept = keep_tip(&repo, session, tip.id(), "forge: the tip before a reword")?;
    repo.reference_matching(&refname, id, true, tip.id(), "forge: the last commit's message edited")
        .map_err(|_| GitError::Moved { branch: branch.to_string() })?;
    Ok(Some(Moved { from: tip.id().to_string(), to: id.to_string(), kept }))
}

/// Where a checkout of a session's node moved its branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The tip before, kept on `kept`.
    pub from: String,
    pub to: String,
    /// `refs/forge/session/<id>/prev-N`.
    pub kept: String,
}

/// The commit a session's conversation node stands for: the commit of the
/// turn that ends at `node`, or the commit before the turn `node` starts
/// (its user message). Searched from the branch's tip and the tips kept by
/// earlier moves; `None` when no commit names the node.
pub fn commit_for_node(worktree: &Path, branch: &str, session: &str, node: &str) -> Result<Option<String>, GitError> {
    let repo = git2::Repository::open(worktree)?;
    let mut walk = repo.revwalk()?;
    walk.push_ref(&format!("refs/heads/{branch}"))?;
    for r in repo.references_glob(&format!("refs/forge/session/{session}/prev-*"))?.flatten() {
        if let Some(id) = r.target() {
            walk.push(id)?;
        }
    }
    // A turn may be several commits (its checkpoints, keyed
    // `<turn>~...`, then its own): before it is the parent of its first.
    let checkpoint = format!("{node}~");
    let mut before: Option<String> = None;
    for id in walk {
        let commit = repo.find_commit(id?)?;
        let message = String::from_utf8_lossy(commit.message_bytes()).into_owned();
        let Some(owner) = trailer(&message, SESSION_TRAILER) else { continue };
        let Ok(entry) = commit.tree()?.get_path(&state_path(&owner)) else { continue };
        let Some(blob) = entry.to_object(&repo).ok().and_then(|o| o.into_blob().ok()) else { continue };
        let state: serde_json::Value = serde_json::from_slice(blob.content()).unwrap_or_default();
        let turn = state["turn"].as_str().unwrap_or_default();
        if turn == node || turn.starts_with(&checkpoint) {
            before = commit.parent_id(0).ok().map(|p| p.to_string());
            continue;
        }
        if before.is_some() {
            break;
        }
        if state["head"] == node {
            return Ok(Some(commit.id().to_string()));
        }
    }
    Ok(before)
}

/// Moves session `session`'s branch (checked out in `worktree`) to commit
/// `to`, its files and index with it; the tip it leaves is kept on
/// `refs/forge/session/<id>/prev-N`, so nothing is lost. Refused when the
/// worktree holds changes no commit has.
pub fn move_branch(worktree: &Path, branch: &str, session: &str, to: &str) -> Result<Option<Moved>, GitError> {
    if !worktree.is_dir() {
        return Err(GitError::WorktreeMissing { path: worktree.display().to_string() });
    }
    let repo = git2::Repository::open(worktree)?;
    let refname = format!("refs/heads/{branch}");
    let from = repo.find_reference(&refname)?.peel_to_commit()?.id();
    let target = repo.find_commit(git2::Oid::from_str(to)?)?;
    if target.id() == from {
        return Ok(None);
    }
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    if !repo.statuses(Some(&mut opts))?.is_empty() {
        return Err(GitError::Dirty { path: worktree.display().to_string() });
    }
    let kept = keep_tip(&repo, session, from, "forge: the tip before a checkout")?;
    repo.reference_matching(&refname, target.id(), true, from, "forge: checkout of a turn")
        .map_err(|_| GitError::Moved { branch: branch.to_string() })?;
    repo.reset(target.as_object(), git2::ResetType::Hard, None)?;
    Ok(Some(Moved { from: from.to_string(), to: target.id().to_string(), kept }))
}

/// Keeps `tip` on the session's next free `refs/forge/session/<id>/prev-N`
/// before its branch moves off it; returns that ref.
fn keep_tip(repo: &git2::Repository, session: &str, tip: git2::Oid, why: &str) -> Result<String, GitError> {
    let kept = (1..)
        .map(|n| format!("refs/forge/session/{session}/prev-{n}"))
        .find(|r| repo.find_reference(r).is_err())
        .unwrap_or_default();
    repo.reference(&kept, tip, false, why)?;
    Ok(kept)
}
