//! Git mode at the engine: a session's branch and worktree made when the
//! session is, a commit of a git session resumed as a new session, and
//! the `git.*` queries. The commits themselves are a state of the session
//! (`session/machine/git_commit.rs`).

use std::path::{Path, PathBuf};

use forge_proto::params::{CreateParams, GitLogParams, GitShowParams};
use forge_proto::{GitCommit, GitDiff, GitLog, GitSession, GitShown};

use super::*;
use crate::config::GitMode;

/// What `session.create` asked of git mode.
pub(super) struct GitAsk {
    pub git: Option<bool>,
    pub base: Option<String>,
    pub from_commit: Option<String>,
}

impl GitAsk {
    pub fn of(req: &CreateParams) -> Self {
        Self { git: req.git, base: req.base.clone(), from_commit: req.from_commit.clone() }
    }
}

/// A git session about to be created.
pub(super) struct GitStart {
    pub started: forge_git::Started,
    /// Resuming a commit: the session and node its conversation forks from.
    pub fork: Option<(String, String)>,
    /// Resuming a commit of a session this daemon lacks: the conversation
    /// rebuilt from the commits (its nodes, for the new session) and its
    /// last node.
    pub restored: Option<(Vec<StoreOp>, Option<String>)>,
    pub from_commit: Option<String>,
}

impl GitStart {
    pub fn session(&self) -> GitSession {
        let s = &self.started;
        GitSession {
            repo: s.repo.display().to_string(),
            branch: s.branch.clone(),
            base: s.base.clone(),
            worktree: s.worktree.display().to_string(),
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, forge_git::GitError> + Send + 'static,
) -> Result<T, EngineError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| EngineError::internal(e.to_string()))?.map_err(EngineError::from)
}

/// What a session commit's state file says of where it was made.
#[derive(serde::Deserialize)]
struct StateHead {
    session: String,
    head: Option<String>,
}

impl Engine {
    /// Whether a new session in `cwd` works in git mode: as asked, else as
    /// `[git] mode` says where `cwd` is in a repository.
    pub(super) fn wants_git(&self, req: &GitAsk, cwd: &str) -> bool {
        match req.git {
            Some(g) => g || req.from_commit.is_some(),
            None if req.from_commit.is_some() => true,
            None => self.shared().config.git.mode == GitMode::Branch && forge_git::discover(Path::new(cwd)).is_ok(),
        }
    }

    /// Makes session `id`'s branch and worktree (from `base`, or from
    /// `from_commit` resuming the conversation that commit holds).
    pub(super) async fn start_git(&self, req: &GitAsk, cwd: &str, id: &str) -> Result<GitStart, EngineError> {
        let dir = PathBuf::from(cwd);
        let (mut fork, mut restored) = (None, None);
        let base = match &req.from_commit {
            Some(rev) => {
                let (rev, d) = (rev.clone(), dir.clone());
                let shown = blocking(move || forge_git::show(&d, &rev)).await?;
                let state: Option<StateHead> = shown.state.as_deref().and_then(|s| serde_json::from_str(s).ok());
                let Some(StateHead { session, head: Some(head) }) = state else {
                    return Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        format!(
                            "commit {} is not a turn of a Forge git session (it has no session state)",
                            shown.info.id
                        ),
                    ));
                };
                if self.shared().store.session(&session).await?.is_some() {
                    fork = Some((session, head));
                } else {
                    restored = Some(self.restore_from(&dir, &shown.info.id, id).await?);
                }
                Some(shown.info.id)
            }
            None => req.base.clone(),
        };
        let (d, i, b) = (dir, id.to_string(), base.clone());
        let started = blocking(move || forge_git::start(&d, &i, b.as_deref())).await?;
        Ok(GitStart { started, fork, restored, from_commit: req.from_commit.as_ref().and(base) })
    }

    /// The conversation behind commit `commit` rebuilt from the commits
    /// (the daemon lacks the session that made it), as session `id`'s
    /// nodes: with the ids the states kept unless the store has one of
    /// them already.
    async fn restore_from(
        &self,
        dir: &Path,
        commit: &str,
        id: &str,
    ) -> Result<(Vec<StoreOp>, Option<String>), EngineError> {
        let (d, c) = (dir.to_path_buf(), commit.to_string());
        let states = blocking(move || forge_git::turn_states(&d, &c, super::git_restore::MAX_TURNS)).await?;
        let kept: Vec<String> = states
            .iter()
            .filter_map(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .flat_map(|v| {
                let nodes = v["messages"].as_array().cloned().unwrap_or_default();
                nodes.into_iter().filter_map(|m| m["node"].as_str().map(str::to_string))
            })
            .collect();
        let keep = self.shared().store.existing_nodes(&kept).await?.is_empty();
        let clock = &self.shared().clock;
        let name = |k: Option<&str>| match k.filter(|_| keep) {
            Some(k) => k.to_string(),
            None => clock.new_id("m"),
        };
        let (ops, head) = super::git_restore::rebuild(&states, id, clock.now_ms(), name)
            .map_err(|e| EngineError::new(ErrorKind::InvalidParams, format!("cannot resume commit {commit}: {e}")))?;
        tracing::info!(session = id, commit, nodes = ops.len(), "a conversation rebuilt from its commits");
        Ok((ops, head))
    }

    /// Undoes [`Self::start_git`] when the session could not be made.
    pub(super) async fn abandon_git(&self, g: &GitStart, id: &str) {
        let (repo, id) = (g.started.repo.clone(), id.to_string());
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || forge_git::abandon(&repo, &id)).await {
            tracing::warn!(error = %e, "removing the branch of a session not made failed");
        }
    }

    async fn git_of(&self, selector: &str) -> Result<(String, GitSession), EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let git = row.git.ok_or_else(|| {
            EngineError::new(
                ErrorKind::InvalidParams,
                format!("session {id} is not a git session (`forgectl session new --git` makes one)"),
            )
        })?;
        Ok((id, git))
    }

    pub async fn git_log(&self, p: GitLogParams) -> Result<GitLog, EngineError> {
        let (id, git) = self.git_of(&p.session).await?;
        let limit = p.limit.unwrap_or(100) as usize;
        let (repo, branch) = (PathBuf::from(&git.repo), git.branch.clone());
        let (commits, kept) =
            blocking(move || Ok((forge_git::log(&repo, &branch, limit)?, forge_git::kept_tips(&repo, &id)?))).await?;
        let kept = kept.into_iter().map(|(name, c)| forge_proto::GitKept { name, commit: wire(c) }).collect();
        Ok(GitLog { branch: git.branch, commits: commits.into_iter().map(wire).collect(), kept })
    }

    pub async fn git_show(&self, p: GitShowParams) -> Result<GitShown, EngineError> {
        let dir = match p.cwd {
            Some(c) if !c.is_empty() => PathBuf::from(c),
            _ => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let commit = p.commit;
        let shown = blocking(move || forge_git::show(&dir, &commit)).await?;
        let state = shown.state.as_deref().and_then(|s| serde_json::from_str(s).ok());
        Ok(GitShown { commit: wire(shown.info), state, diff: shown.diff })
    }

    pub async fn git_diff(&self, p: forge_proto::params::GitDiffParams) -> Result<GitDiff, EngineError> {
        let (_, git) = self.git_of(&p.session).await?;
        let (repo, branch, worktree) = (PathBuf::from(&git.repo), git.branch.clone(), PathBuf::from(&git.worktree));
        let (diff, marked) = match p.turn {
            true => (blocking(move || forge_git::diff_worktree(&worktree)).await?, Vec::new()),
            false => {
                let (diff, brought, hooks) = blocking(move || {
                    let (diff, brought) = forge_git::diff_branch(&repo, &branch)?;
                    Ok((diff, brought, forge_git::hooks_path(&repo)))
                })
                .await?;
                (diff, super::git_marks::marks(&brought, hooks.as_deref()))
            }
        };
        Ok(GitDiff { branch: git.branch, diff, marked })
    }

    /// `git.merge`: the session's work onto the user's current branch, the
    /// session idle.
    pub async fn git_merge(
        &self,
        p: forge_proto::params::GitMergeParams,
    ) -> Result<forge_proto::GitMerged, EngineError> {
        let (id, git) = self.git_of(&p.session).await?;
        let info = self.session_info(&id).await?;
        if info.state != forge_proto::OperationStateKind::Idle {
            return Err(EngineError::new(
                ErrorKind::SessionBusy,
                format!(
                    "session {id} is running a turn; merge once it has ended (or cancel it: `forgectl cancel {id}`)"
                ),
            ));
        }
        let (repo, branch, session) = (PathBuf::from(&git.repo), git.branch.clone(), id.clone());
        let (squash, without_state) = (p.squash, p.without_state);
        let options = move |dry_run| forge_git::MergeOptions { squash, without_state, dry_run };
        let (first, plan) = (options(true), (repo.clone(), branch.clone(), session.clone()));
        // Worked out in memory first: what it would bring decides whether
        // it may go without the user's word.
        let (planned, hooks) = blocking(move || {
            let (repo, branch, session) = plan;
            Ok((forge_git::merge_session(&repo, &branch, &session, first)?, forge_git::hooks_path(&repo)))
        })
        .await?;
        let marked = super::git_marks::marks(&planned.brought, hooks.as_deref());
        let wire = |m: forge_git::Merged, marked, dry_run| forge_proto::GitMerged {
            session_id: id.clone(),
            into: m.into,
            commit: m.commit,
            previous: m.previous,
            how: m.how.to_string(),
            files: m.files,
            marked,
            dry_run,
        };
        if p.dry_run {
            return Ok(wire(planned, marked, true));
        }
        if !marked.is_empty() && !p.accept_marked {
            let lines: Vec<String> = marked.iter().map(|m| format!("{}: {}", m.path, m.detail)).collect();
            return Err(EngineError::new(
                ErrorKind::GitMarked,
                format!(
                    "merging session {id} would bring files that need your word first; nothing was changed: {} \
                     (look with `forgectl git diff {id}`, then `forgectl git merge {id} --yes` to take them)",
                    lines.join("; ")
                ),
            ));
        }
        let m = blocking(move || forge_git::merge_session(&repo, &branch, &session, options(false))).await?;
        Ok(wire(m, marked, false))
    }

    /// A removed git session's worktree goes (its branch stays).
    pub(super) async fn remove_git_worktree(&self, id: &str, git: &GitSession) {
        let (repo, id) = (PathBuf::from(&git.repo), id.to_string());
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || forge_git::remove_worktree(&repo, &id)).await {
            tracing::warn!(error = %e, "removing a git session's worktree failed");
        }
    }
}

fn wire(c: forge_git::CommitInfo) -> GitCommit {
    GitCommit {
        id: c.id,
        summary: c.summary,
        message: c.message,
        time: c.time,
        session: c.session,
        turn: c.turn,
        files: c.files,
    }
}
