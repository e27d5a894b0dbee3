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
    let file = worktree.join(&rel);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| GitError::io(dir, e))?;
    }
    std::fs::write(&file, &t.state).map_err(|e| GitError::io(&file, e))?;

    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    // Even where `.forge/` is ignored by the project.
    index.add_path(&rel)?;
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
