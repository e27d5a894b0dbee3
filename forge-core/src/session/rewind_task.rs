//! What the session's shell runs for a rewind (see `machine/rewind.rs`):
//! working out what each recorded file is to hold and holds now, and
//! writing the files once the intent is durable.

use super::machine::call::JobOutcome;
use super::machine::rewind::{PlanRewind, RestoreFiles};
use super::machine::rewind_plan::{FileFacts, Stored};
use crate::error::EngineError;
use crate::rewind::Unrecorded;
use crate::store::Store;

/// The file changes recorded in a session and the sessions it was forked
/// from (a fork shares their nodes).
pub(crate) async fn lineage_changes(store: &Store, id: &str) -> Result<Vec<crate::rewind::Change>, EngineError> {
    let sessions = store.lineage(id).await?;
    Ok(store.file_changes(&sessions).await?)
}

pub(super) async fn plan(store: Store, job: PlanRewind) -> JobOutcome {
    JobOutcome::RewindPlanned(facts(&store, job).await)
}

/// What the records say of each file between the end of `from` and the
/// end of `to`, what it holds now, and whether the store has its target
/// (its bytes too for a dry run's diff). The machine decides the rest
/// (`machine/rewind_plan.rs`).
async fn facts(store: &Store, job: PlanRewind) -> Result<Vec<FileFacts>, EngineError> {
    let PlanRewind { session_id, from, to, dry_run, .. } = job;
    let changes = lineage_changes(store, &session_id).await?;
    let steps = crate::rewind::plan(&from, &to, &changes);
    // What each file holds now, read off the session task.
    let paths: Vec<String> = steps.iter().map(|s| s.path.clone()).collect();
    let current = tokio::task::spawn_blocking(move || {
        paths
            .iter()
            .map(|p| crate::rewind::read_any(&crate::rewind::text_path(p)).map_err(|e| e.to_string()))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| EngineError::internal(e.to_string()))?;
    let mut facts = Vec::with_capacity(steps.len());
    for (step, now) in steps.into_iter().zip(current) {
        let stored = match &step.target {
            Some(Some((hash, _))) if Unrecorded::of(hash).is_none() => match store.blob(hash).await? {
                Some(data) => Stored::Present(dry_run.then_some(data)),
                None if store.was_evicted(hash).await? => Stored::Evicted,
                None => Stored::Withheld,
            },
            _ => Stored::NotNeeded,
        };
        facts.push(FileFacts { step, now, stored });
    }
    Ok(facts)
}

/// Writes each file as its step says, in order, stopping at the first
/// that cannot be written.
pub(super) async fn restore(store: Store, job: RestoreFiles) -> JobOutcome {
    let all = job.steps.len();
    for (done, step) in job.steps.iter().cloned().enumerate() {
        let data = match &step.hash {
            Some(hash) => match store.blob(hash).await {
                Ok(Some(data)) => Some(data),
                Ok(None) => return failed(done, format!("{}: its recorded content is not in the store", step.path)),
                Err(e) => return failed(done, format!("{}: {e}", step.path)),
            },
            None => None,
        };
        let (path, mode) = (crate::rewind::text_path(&step.path), step.mode);
        let written =
            tokio::task::spawn_blocking(move || crate::rewind::write_state(&path, data.as_deref().map(|d| (d, mode))))
                .await;
        match written {
            Ok(Ok(())) => crash_after_restored(done + 1),
            Ok(Err(e)) => return failed(done, format!("cannot restore {}: {e}", step.path)),
            Err(e) => return failed(done, format!("cannot restore {}: {e}", step.path)),
        }
    }
    // What the undone command made and the rewind emptied goes too.
    let removed: Vec<std::path::PathBuf> =
        job.steps.iter().filter(|s| s.hash.is_none()).map(|s| crate::rewind::text_path(&s.path)).collect();
    let roots = job.roots;
    let _ = tokio::task::spawn_blocking(move || crate::rewind::remove_emptied_dirs(&removed, &roots)).await;
    JobOutcome::FilesRestored { done: all, error: None }
}

/// Crash tests: with `FORGE_CRASH_AFTER_RESTORED=N` in the daemon's
/// environment, the process kills itself (SIGKILL) once a rewind has
/// written N files: a `kill -9` in the middle of an undo, made
/// deterministic.
fn crash_after_restored(written: usize) {
    static AFTER: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let after = AFTER.get_or_init(|| std::env::var("FORGE_CRASH_AFTER_RESTORED").ok()?.parse().ok());
    if *after == Some(written) {
        tracing::error!(written, "FORGE_CRASH_AFTER_RESTORED: killing the daemon now");
        // SAFETY: kill(2) on this very process; nothing is touched after.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

fn failed(done: usize, error: String) -> JobOutcome {
    JobOutcome::FilesRestored { done, error: Some(error) }
}
