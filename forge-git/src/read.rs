//! Reading sessions back from git: a branch's turns, one commit's
//! conversation and diff, what a branch would bring to the user's HEAD.

use std::path::Path;

use crate::commit::{changed, state_path, trailer, turn_of};
use crate::{GitError, SESSION_TRAILER, discover, main_repo};

/// One turn's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    pub id: String,
    pub summary: String,
    pub message: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// The session that made it.
    pub session: Option<String>,
    /// The turn (user message id) it holds.
    pub turn: Option<String>,
    /// Paths it changed (the state file left out).
    pub files: Vec<String>,
}

/// A commit, its session state and its diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub info: CommitInfo,
    /// `.forge/sessions/<session>.json` as the commit holds it.
    pub state: Option<String>,
    /// The commit's changes against its first parent, as a patch (the
    /// state file left out).
    pub diff: String,
}

fn info(repo: &git2::Repository, c: &git2::Commit) -> Result<CommitInfo, GitError> {
    let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
    let session = trailer(&message, SESSION_TRAILER);
    let files = changed(repo, c, session.as_deref().unwrap_or_default())?;
    Ok(CommitInfo {
        id: c.id().to_string(),
        summary: message.lines().next().unwrap_or_default().to_string(),
        turn: turn_of(&message),
        session,
        message,
        time: c.time().seconds(),
        files,
    })
}

fn open(repo_dir: &Path) -> Result<git2::Repository, GitError> {
    let (repo, _) = discover(repo_dir)?;
    main_repo(&repo)
}

/// The turns on `branch`, newest first: its commits made by Forge sessions
/// (a resumed session's branch goes on into the session it came from), up
/// to `limit`.
pub fn log(repo_dir: &Path, branch: &str, limit: usize) -> Result<Vec<CommitInfo>, GitError> {
    let repo = open(repo_dir)?;
    let mut c = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let mut out = Vec::new();
    while out.len() < limit {
        let i = info(&repo, &c)?;
        if i.session.is_none() {
            break;
        }
        out.push(i);
        match c.parent(0) {
            Ok(p) => c = p,
            Err(_) => break,
        }
    }
    Ok(out)
}

/// The tips session `session`'s branch left (`prev-N`), newest first.
pub fn kept_tips(repo_dir: &Path, session: &str) -> Result<Vec<(String, CommitInfo)>, GitError> {
    let repo = open(repo_dir)?;
    let mut out = Vec::new();
    for r in repo.references_glob(&format!("refs/forge/session/{session}/prev-*"))?.flatten() {
        let Some(name) = r.name().ok().and_then(|n| n.rsplit('/').next()).map(str::to_string) else { continue };
        let Ok(c) = r.peel_to_commit() else { continue };
        out.push((name, info(&repo, &c)?));
    }
    let number = |n: &str| n.strip_prefix("prev-").and_then(|k| k.parse::<u64>().ok()).unwrap_or(0);
    out.sort_by_key(|(n, _)| std::cmp::Reverse(number(n)));
    Ok(out)
}

/// Commit `rev`: its turn, session state and diff.
pub fn show(repo_dir: &Path, rev: &str) -> Result<Shown, GitError> {
    let repo = open(repo_dir)?;
    let c = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| GitError::BadRef { name: rev.to_string(), dir: repo_dir.display().to_string() })?;
    let info = info(&repo, &c)?;
    let state = match &info.session {
        Some(s) => c
            .tree()?
            .get_path(&state_path(s))
            .ok()
            .and_then(|e| e.to_object(&repo).ok())
            .and_then(|o| o.as_blob().map(|b| String::from_utf8_lossy(b.content()).into_owned())),
        None => None,
    };
    let old = match c.parent(0) {
        Ok(p) => Some(p.tree()?),
        Err(_) => None,
    };
    let mut opts = git2::DiffOptions::new();
    let diff = repo.diff_tree_to_tree(old.as_ref(), Some(&c.tree()?), Some(&mut opts))?;
    let skip = info.session.as_deref().map(state_path);
    let diff = patch(&diff, skip.as_deref())?;
    Ok(Shown { info, state, diff })
}

/// The session states of the turns that lead to commit `rev`, oldest
/// first: `rev` and its first parents as far as each is a session's turn
/// (the conversation a commit resumes, read from git alone). At most
/// `limit` turns.
pub fn turn_states(repo_dir: &Path, rev: &str, limit: usize) -> Result<Vec<String>, GitError> {
    let repo = open(repo_dir)?;
    let mut c = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| GitError::BadRef { name: rev.to_string(), dir: repo_dir.display().to_string() })?;
    let mut states = Vec::new();
    while states.len() < limit {
        let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
        let Some(owner) = crate::commit::trailer(&message, SESSION_TRAILER) else { break };
        let Some(state) = c
            .tree()?
            .get_path(&state_path(&owner))
            .ok()
            .and_then(|e| e.to_object(&repo).ok())
            .and_then(|o| o.as_blob().map(|b| String::from_utf8_lossy(b.content()).into_owned()))
        else {
            break;
        };
        states.push(state);
        match c.parent(0) {
            Ok(p) => c = p,
            Err(_) => break,
        }
    }
    states.reverse();
    Ok(states)
}

/// What merging `branch` into the user's HEAD would bring: its changes
/// since their merge base, as a patch, and file by file.
pub fn diff_branch(repo_dir: &Path, branch: &str) -> Result<(String, Vec<crate::Brought>), GitError> {
    let repo = open(repo_dir)?;
    let tip = repo.find_reference(&format!("refs/heads/{branch}"))?.peel_to_commit()?;
    let base = match repo.head().and_then(|h| h.peel_to_commit()) {
        Ok(head) => repo.find_commit(repo.merge_base(head.id(), tip.id())?)?,
        Err(_) => tip.clone(),
    };
    let (from, to) = (base.tree()?, tip.tree()?);
    let diff = repo.diff_tree_to_tree(Some(&from), Some(&to), None)?;
    Ok((patch(&diff, None)?, crate::brought(&repo, &from, &to)?))
}

/// The running turn's changes so far: what the session's worktree holds
/// beyond its branch's last commit (new files included), as a patch.
pub fn diff_worktree(worktree: &Path) -> Result<String, GitError> {
    if !worktree.is_dir() {
        return Err(GitError::WorktreeMissing { path: worktree.display().to_string() });
    }
    let repo = git2::Repository::open(worktree)?;
    let tip = repo.head()?.peel_to_tree()?;
    let mut opts = git2::DiffOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true).show_untracked_content(true);
    let diff = repo.diff_tree_to_workdir_with_index(Some(&tip), Some(&mut opts))?;
    patch(&diff, None)
}

fn patch(diff: &git2::Diff, skip: Option<&Path>) -> Result<String, GitError> {
    let mut out = String::new();
    diff.print(git2::DiffFormat::Patch, |delta, _, line| {
        let path = delta.new_file().path().or_else(|| delta.old_file().path());
        if skip.is_some() && path == skip {
            return true;
        }
        let text = String::from_utf8_lossy(line.content());
        match line.origin() {
            c @ ('+' | '-' | ' ') => {
                out.push(c);
                out.push_str(&text);
            }
            _ => out.push_str(&text),
        }
        true
    })?;
    Ok(out)
}
