//! Git-backed sessions. A session in git mode works on its own branch,
//! `forge/session/<id>`, checked out in a private linked worktree inside
//! the repository's git directory (`.git/forge/worktrees/<id>`), so the
//! user's working tree, index and current branch are never touched. The
//! tools work in that worktree as in any directory (it is the session's
//! overlay: the branch's last commit plus the turn's pending changes);
//! at the end of each turn everything in it becomes one commit, with the
//! session state that produced it in `.forge/sessions/<id>.json`.
//!
//! Everything here goes through libgit2: no `git` process, no hooks, no
//! filters or other programs the repository's configuration names.

mod brought;
mod commit;
mod held;
mod merge;
mod read;

use std::path::{Path, PathBuf};

pub use brought::{Brought, brought};
pub use commit::{Committed, Moved, TurnCommit, commit_for_node, commit_turn, move_branch, reword_tip, turn_of};
pub use held::{HeldFile, held_changes};
pub use merge::{MergeOptions, Merged, merge_session, rebase_session};
pub use read::{CommitInfo, Shown, diff_branch, diff_worktree, kept_tips, log, show, turn_states};

/// The prefix of every session branch.
pub const BRANCH_PREFIX: &str = "forge/session/";

/// Where a commit says which turn it holds (`Forge-Turn: <message id>`).
pub const TURN_TRAILER: &str = "Forge-Turn";

/// Where a commit says which session made it.
pub const SESSION_TRAILER: &str = "Forge-Session";

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{dir} is not inside a git repository; git mode needs one (`git init`, or leave out --git)")]
    NotARepository { dir: String },
    #[error("the repository at {dir} has no working tree (a bare repository); git mode needs one")]
    Bare { dir: String },
    #[error("the repository at {dir} has no commit yet; make a first commit, or give --base")]
    NoCommit { dir: String },
    #[error("`{name}` names no commit in {dir}")]
    BadRef { name: String, dir: String },
    #[error("branch {branch} already exists in {dir}")]
    BranchExists { branch: String, dir: String },
    #[error("the session's worktree {path} is missing; it was removed outside Forge")]
    WorktreeMissing { path: String },
    #[error(
        "branch {branch} moved outside Forge (its tip is no longer the session's last commit); nothing was committed"
    )]
    Moved { branch: String },
    #[error("the session's worktree {path} holds changes no commit has (a commit failed?); nothing was moved")]
    Dirty { path: String },
    #[error("{what} stops at a conflict in {}; nothing was changed (resolve it in your branch or the session's, then try again)", files.join(", "))]
    Conflict { what: String, files: Vec<String> },
    #[error(
        "your working tree in {dir} is not on a branch (a detached HEAD); check out the branch to bring the work to"
    )]
    NotOnBranch { dir: String },
    #[error("your working tree in {dir} has changes not committed ({}); commit or stash them first", files.join(", "))]
    UserTreeDirty { dir: String, files: Vec<String> },
    #[error(
        "no commit of this git session holds the files at {node} (a turn's end, or a stop for an approval, is one); rewind to the end of a turn (`forgectl git log` lists them), or move the conversation alone with --conversation-only"
    )]
    NoCommitFor { node: String },
    #[error("the branch's last commit {commit} is not a turn of a Forge session; its message is not Forge's to edit")]
    NotATurn { commit: String },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl GitError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { path: path.display().to_string(), source }
    }
}

/// A session's branch and worktree, as made by [`start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The user's working tree (the repository's top directory).
    pub repo: PathBuf,
    pub branch: String,
    /// The commit the branch started from.
    pub base: String,
    /// The session's private worktree.
    pub worktree: PathBuf,
    /// Where in the worktree the session works: the directory it was
    /// started in, at the same place relative to the repository's top.
    pub cwd: PathBuf,
}

/// The branch of session `id`.
pub fn branch_name(id: &str) -> String {
    format!("{BRANCH_PREFIX}{id}")
}

/// The repository `dir` is in, and `dir` relative to its top.
pub fn discover(dir: &Path) -> Result<(git2::Repository, PathBuf), GitError> {
    let repo =
        git2::Repository::discover(dir).map_err(|_| GitError::NotARepository { dir: dir.display().to_string() })?;
    let top = repo.workdir().ok_or_else(|| GitError::Bare { dir: dir.display().to_string() })?;
    let top = top.canonicalize().map_err(|e| GitError::io(top, e))?;
    let dir = dir.canonicalize().map_err(|e| GitError::io(dir, e))?;
    let rel = dir.strip_prefix(&top).map(Path::to_path_buf).unwrap_or_default();
    Ok((repo, rel))
}

/// The user's repository, from any of its worktrees (a session's one
/// included): the common git directory's own working tree.
fn main_repo(repo: &git2::Repository) -> Result<git2::Repository, GitError> {
    if repo.is_worktree() {
        let common = repo.commondir().to_path_buf();
        Ok(git2::Repository::open(common)?)
    } else {
        Ok(git2::Repository::open(repo.path())?)
    }
}

/// The user's repository `dir` is in (from any of its worktrees).
fn open_user(dir: &Path) -> Result<git2::Repository, GitError> {
    let (repo, _) = discover(dir)?;
    main_repo(&repo)
}

/// The hooks directory the repository at `dir` sets with core.hooksPath
/// (from any configuration git reads), relative to its top, when it lies
/// inside the repository.
pub fn hooks_path(dir: &Path) -> Option<String> {
    let repo = open_user(dir).ok()?;
    let value = repo.config().ok()?.snapshot().ok()?.get_string("core.hooksPath").ok()?;
    let p = Path::new(&value);
    let top = repo.workdir()?.canonicalize().ok()?;
    let inside = match p.is_absolute() {
        true => p.strip_prefix(&top).ok()?.to_path_buf(),
        false => p.to_path_buf(),
    };
    // `./hooks` is `hooks`; `..` would leave the tree.
    let parts: Vec<_> = inside.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect();
    let clean = parts.iter().all(|c| matches!(c, std::path::Component::Normal(_)));
    let inside: PathBuf = parts.iter().collect();
    (clean && !inside.as_os_str().is_empty()).then(|| inside.to_string_lossy().trim_end_matches('/').to_string())
}

/// The user's working tree of the repository `dir` is in, from any of its
/// worktrees (a session's one included), if `dir` is in one.
pub fn user_top(dir: &Path) -> Option<PathBuf> {
    let (found, _) = discover(dir).ok()?;
    let repo = main_repo(&found).ok()?;
    repo.workdir()?.canonicalize().ok()
}

/// Where session `id`'s worktree lives in the repository whose common git
/// directory is `common`.
pub fn worktree_path(common: &Path, id: &str) -> PathBuf {
    common.join("forge").join("worktrees").join(id)
}

fn worktree_name(id: &str) -> String {
    format!("forge-{id}")
}

/// Starts session `id` in git mode from `dir`: branch `forge/session/<id>`
/// at `base` (a commit, branch or tag; the current HEAD when `None`) or at
/// `from` (a commit of another session, to resume), and its worktree.
pub fn start(dir: &Path, id: &str, base: Option<&str>) -> Result<Started, GitError> {
    let (found, rel) = discover(dir)?;
    let repo = main_repo(&found)?;
    // libgit2 ends directories with a slash.
    let top: PathBuf =
        repo.workdir().ok_or_else(|| GitError::Bare { dir: dir.display().to_string() })?.components().collect();
    let shown = top.display().to_string();
    let commit = match base {
        Some(name) => repo
            .revparse_single(name)
            .and_then(|o| o.peel_to_commit())
            .map_err(|_| GitError::BadRef { name: name.to_string(), dir: shown.clone() })?,
        None => repo.head().and_then(|h| h.peel_to_commit()).map_err(|_| GitError::NoCommit { dir: shown.clone() })?,
    };
    let branch = branch_name(id);
    if repo.find_branch(&branch, git2::BranchType::Local).is_ok() {
        return Err(GitError::BranchExists { branch, dir: shown });
    }
    let created = repo.branch(&branch, &commit, false)?;
    let common: PathBuf = repo.path().components().collect();
    let path = worktree_path(&common, id);
    let parent = path.parent().unwrap_or(&path);
    std::fs::create_dir_all(parent).map_err(|e| GitError::io(parent, e))?;
    let reference = created.into_reference();
    let mut opts = git2::WorktreeAddOptions::new();
    // Locked, so that `git worktree prune` never drops it while Forge
    // still works in it.
    opts.lock(true).reference(Some(&reference));
    if let Err(e) = repo.worktree(&worktree_name(id), &path, Some(&opts)) {
        // Leave nothing half made behind.
        if let Ok(mut b) = repo.find_branch(&branch, git2::BranchType::Local) {
            let _ = b.delete();
        }
        return Err(e.into());
    }
    let cwd: PathBuf = path.join(&rel).components().collect();
    Ok(Started { repo: top, branch, base: commit.id().to_string(), worktree: path, cwd })
}

/// Removes session `id`'s worktree (its branch, and so its commits, stay).
pub fn remove_worktree(repo_dir: &Path, id: &str) -> Result<(), GitError> {
    let repo = main_repo(&git2::Repository::open(repo_dir)?)?;
    if let Ok(wt) = repo.find_worktree(&worktree_name(id)) {
        let _ = wt.unlock();
        let mut opts = git2::WorktreePruneOptions::new();
        opts.valid(true).locked(true).working_tree(true);
        wt.prune(Some(&mut opts))?;
    }
    Ok(())
}

/// Undoes [`start`] for a session that was never made: its worktree and
/// its branch (which holds no turn yet) go.
pub fn abandon(repo_dir: &Path, id: &str) -> Result<(), GitError> {
    remove_worktree(repo_dir, id)?;
    let repo = main_repo(&git2::Repository::open(repo_dir)?)?;
    if let Ok(mut b) = repo.find_branch(&branch_name(id), git2::BranchType::Local) {
        b.delete()?;
    }
    Ok(())
}

/// The signature commits are made with: the repository's `user.name` and
/// `user.email`, else Forge's own.
fn signature(repo: &git2::Repository) -> Result<git2::Signature<'static>, GitError> {
    match repo.signature() {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Ok(git2::Signature::now("Forge", "forge@localhost")?),
    }
}

#[cfg(test)]
mod tests;
