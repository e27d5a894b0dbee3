//! What a git session's commit job runs (`Effect::CommitTurn`): the
//! commit message asked of a model, bounded and falling back to the
//! user's first line, then the commit itself on a blocking thread.

use std::path::Path;
use std::time::Duration;

use super::machine::call::JobOutcome;
use super::machine::git_commit::{CommitJob, Hold, MessageUsage};
use crate::provider::ProviderClient;

/// The longest a commit message may take to write: the turn is not over
/// until it is committed.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Commits are written one at a time: a checkpoint still being written
/// when its turn is cancelled and committed must not share the worktree's
/// index and state file with that commit (the later one goes on top).
static COMMITTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(super) async fn commit(providers: ProviderClient, job: CommitJob) -> JobOutcome {
    let CommitJob { worktree, branch, mut commit, message, hold, .. } = job;
    let mut usage = None;
    if let Some(request) = message {
        let (settings, request) = *request;
        let (provider, model) = (settings.kind.as_str().to_string(), request.model.clone());
        let asked =
            tokio::time::timeout(MESSAGE_TIMEOUT, crate::provider::collect_text(providers.stream(settings, request)))
                .await;
        match asked {
            Ok(Ok((text, used))) => {
                usage = used.map(|usage| MessageUsage { provider, model, usage });
                if let Some((subject, body)) = parse_message(&text) {
                    commit.body = body.or_else(|| commit.body.take());
                    commit.subject = subject;
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the commit message could not be written; the user's first line is used")
            }
            Err(_) => tracing::warn!("the commit message took over 30 s; the user's first line is used"),
        }
    }
    let _one_at_a_time = COMMITTING.lock().await;
    let done = tokio::task::spawn_blocking(move || {
        match held(&worktree, &branch, &hold) {
            Ok(files) if files.is_empty() => {}
            Ok(files) if matches!(hold, Hold::RunLater { ask: true, .. }) => return Err(Box::new((commit, files))),
            Ok(files) => commit.leave_out = files.into_iter().map(|f| f.path).collect(),
            // Not committed unseen: the commit fails, saying why.
            Err(e) => return Ok(Err(format!("the files that run later could not be read: {e}"))),
        }
        let done = forge_git::commit_turn(&worktree, &branch, &commit).map_err(|e| e.to_string());
        super::tool_task::crash_after_commit();
        Ok(done)
    });
    match done.await {
        Ok(Ok(result)) => JobOutcome::Committed { result, usage },
        Ok(Err(held)) => {
            let (commit, files) = *held;
            JobOutcome::Held { commit: Box::new(commit), files, usage }
        }
        Err(e) => JobOutcome::Committed { result: Err(format!("committing failed: {e}")), usage },
    }
}

/// The files the commit waits on a user for: those that run later (the
/// repository's hooks directory among them) and differ from the branch's
/// tip, less those still as a file tool wrote them.
fn held(worktree: &Path, branch: &str, hold: &Hold) -> Result<Vec<forge_git::HeldFile>, forge_git::GitError> {
    let Hold::RunLater { exempt, .. } = hold else { return Ok(Vec::new()) };
    let hooks = forge_git::hooks_path(worktree).map(std::path::PathBuf::from);
    let runs_later = |p: &Path| {
        crate::tools::policy::runs_code_later(&p.to_string_lossy()) || hooks.as_ref().is_some_and(|h| p.starts_with(h))
    };
    let mut files = forge_git::held_changes(worktree, branch, &runs_later)?;
    files.retain(|f| {
        let Some((_, written)) = exempt.iter().find(|(p, _)| *p == f.path) else { return true };
        let now = crate::rewind::read_state(&worktree.join(&f.path)).ok().flatten();
        *written != now.map(|(data, _)| crate::rewind::hash(&data))
    });
    Ok(files)
}

/// A model's commit message as subject and body: fences, quotes and a
/// "Subject:" label taken off, the subject cut to 72 characters.
fn parse_message(text: &str) -> Option<(String, Option<String>)> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim_start().starts_with("```")).collect();
    let start = lines.iter().position(|l| !l.trim().is_empty())?;
    let first = lines[start].trim().trim_start_matches("Subject:").trim().trim_matches(|c| c == '"' || c == '`');
    if first.is_empty() {
        return None;
    }
    let subject: String = first.chars().take(72).collect();
    let body = lines[start + 1..].join("\n").trim().to_string();
    Some((subject, (!body.is_empty()).then_some(body)))
}

/// Moves a git session's branch to the commit of a node (`Effect::MoveBranch`).
pub(super) async fn move_branch(job: super::machine::git_commit::MoveJob) -> JobOutcome {
    use super::machine::git_commit::MoveTo;
    let moved = tokio::task::spawn_blocking(move || match &job.to {
        MoveTo::Rebase(repo) => forge_git::rebase_session(repo, &job.worktree, &job.branch, &job.session),
        MoveTo::Reword(message) => forge_git::reword_tip(&job.worktree, &job.branch, &job.session, message),
        MoveTo::Node(node, strict) => match forge_git::commit_for_node(&job.worktree, &job.branch, &job.session, node)?
        {
            Some(commit) => forge_git::move_branch(&job.worktree, &job.branch, &job.session, &commit),
            None if *strict => Err(forge_git::GitError::NoCommitFor { node: node.clone() }),
            None => Ok(None),
        },
    });
    let moved = moved.await.map_err(|e| crate::error::EngineError::internal(e.to_string()));
    JobOutcome::BranchMoved(moved.and_then(|r| r.map_err(crate::error::EngineError::from)))
}

#[cfg(test)]
mod tests {
    use super::parse_message;

    #[test]
    fn a_models_message_is_taken_as_subject_and_body() {
        assert_eq!(
            parse_message("Add a parser\n\nIt reads LP1.\n"),
            Some(("Add a parser".into(), Some("It reads LP1.".into())))
        );
        assert_eq!(parse_message("```\n\"Fix the build\"\n```"), Some(("Fix the build".into(), None)));
        assert_eq!(parse_message("Subject: Rename x"), Some(("Rename x".into(), None)));
        assert_eq!(parse_message("  \n\n"), None);
        let long = "y".repeat(100);
        assert_eq!(parse_message(&long).map(|(s, _)| s.len()), Some(72));
    }
}
