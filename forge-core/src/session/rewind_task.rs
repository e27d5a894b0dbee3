//! What the session's shell runs for a rewind (see `machine/rewind.rs`):
//! working out what each recorded file is to hold and holds now, and
//! writing the files once the intent is durable.

use std::path::{Path, PathBuf};

use forge_proto::{ErrorKind, RestoredFile, RewindResult, RewindStep};

use super::machine::call::JobOutcome;
use super::machine::rewind::{PlanRewind, RestoreFiles, RewindPlan};
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::rewind::Unrecorded;
use crate::store::Store;

/// The file changes recorded in a session and the sessions it was forked
/// from (a fork shares their nodes).
pub(crate) async fn lineage_changes(store: &Store, id: &str) -> Result<Vec<crate::rewind::Change>, EngineError> {
    let sessions = store.lineage(id).await?;
    Ok(store.file_changes(&sessions).await?)
}

/// Why a file whose content the store let go is not restored.
const EVICTED: &str = "its recorded content was evicted to keep the store under [store] max_blob_mb \
     (raise it to keep more; `forgectl store` shows the sizes)";

pub(super) async fn plan(store: Store, job: PlanRewind) -> JobOutcome {
    JobOutcome::RewindPlanned(plan_files(&store, job).await.map(Box::new))
}

/// Each recorded file from its state at the end of `from` to the end of
/// `to`: what it holds now, whether that is what Forge left (a conflict
/// if not), and what to write.
async fn plan_files(store: &Store, job: PlanRewind) -> Result<RewindPlan, EngineError> {
    let PlanRewind { session_id, from, to, dry_run, force, .. } = job;
    let changes = lineage_changes(store, &session_id).await?;
    let mut steps = crate::rewind::plan(&from, &to, &changes);
    // A mark instead of a hash: the change was seen, its content not kept.
    let marked = |s: &Option<crate::rewind::FileState>| match s {
        Some(Some((hash, _))) => Unrecorded::of(hash),
        _ => None,
    };
    let mut unrecorded = Vec::new();
    steps.retain_mut(|step| {
        if let Some(why) = marked(&step.target) {
            unrecorded.push(RestoredFile {
                path: step.path.clone(),
                action: "kept".into(),
                conflict: false,
                overwritten: None,
                note: Some(why.why().into()),
            });
            return false;
        }
        // What Forge left there is not known in content: no conflict can
        // be told.
        if marked(&step.expected).is_some() {
            step.expected = None;
        }
        true
    });
    // What each file holds now, read off the session task.
    let paths: Vec<String> = steps.iter().map(|s| s.path.clone()).collect();
    let current = tokio::task::spawn_blocking(move || {
        paths.iter().map(|p| crate::rewind::read_any(Path::new(p))).collect::<Vec<_>>()
    })
    .await
    .map_err(|e| EngineError::internal(e.to_string()))?;
    let mut plan = RewindPlan {
        result: RewindResult {
            session_id: session_id.clone(),
            node: None,
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run,
            diff: None,
            conversation: false,
        },
        steps: Vec::new(),
        conflicts: Vec::new(),
        keep: Vec::new(),
    };
    let mut diff = String::new();
    for (step, now) in steps.into_iter().zip(current) {
        let now =
            now.map_err(|e| EngineError::new(ErrorKind::InvalidParams, format!("cannot read {}: {e}", step.path)))?;
        let now_state = now.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
        let Some(target) = step.target.clone() else {
            plan.result.unknown.push(step.path.clone());
            continue;
        };
        if target == now_state {
            continue;
        }
        let conflict = step.expected.as_ref().is_some_and(|e| *e != now_state);
        if conflict {
            plan.conflicts.push(step.path.clone());
        }
        let action = match (&now_state, &target) {
            (Some(_), None) => "delete",
            (None, Some(_)) => "create",
            _ => "restore",
        };
        let mut file =
            RestoredFile { path: step.path.clone(), action: action.into(), conflict, overwritten: None, note: None };
        let target_data = match &target {
            Some((hash, _)) => match store.blob(hash).await? {
                Some(data) => Some(data),
                // Content holding a secret is never stored; old content
                // goes past the store's bound.
                None => {
                    file.action = "kept".into();
                    file.note = Some(if store.was_evicted(hash).await? {
                        EVICTED.into()
                    } else {
                        "its recorded content held a secret, which Forge does not store".into()
                    });
                    plan.result.files.push(file);
                    continue;
                }
            },
            None => None,
        };
        if dry_run {
            diff.push_str(&crate::rewind::unified_diff(
                &step.path,
                now.as_ref().map(|(d, _)| d.as_slice()),
                target_data.as_deref(),
            ));
        }
        if conflict && force {
            // What is overwritten is kept, as a change made after the head
            // it leaves, so going back there brings it back. (With no head,
            // under the session's own id: on no path, but kept.)
            let after = now.as_ref().map(|(data, mode)| {
                let hash = crate::rewind::hash(data);
                plan.keep.extend(StoreOp::blob(hash.clone(), data.clone()));
                file.overwritten = Some(hash.clone());
                (hash, *mode)
            });
            plan.keep.push(StoreOp::RecordChange {
                session_id: session_id.clone(),
                node_id: from.last().cloned().unwrap_or_else(|| session_id.clone()),
                call_id: "edited-by-hand".into(),
                path: step.path.clone(),
                before: step.expected.clone().flatten(),
                after,
                created_ms: crate::ids::now_ms(),
            });
        }
        let (hash, mode) = match target {
            Some((hash, mode)) => (Some(hash), mode),
            None => (None, 0),
        };
        plan.steps.push(RewindStep { path: step.path, hash, mode });
        plan.result.files.push(file);
    }
    plan.result.files.extend(unrecorded);
    if dry_run {
        plan.result.diff = Some(diff);
    }
    Ok(plan)
}

/// Writes each file as its step says, in order, stopping at the first
/// that cannot be written.
pub(super) async fn restore(store: Store, job: RestoreFiles) -> JobOutcome {
    let all = job.steps.len();
    for (done, step) in job.steps.into_iter().enumerate() {
        let data = match &step.hash {
            Some(hash) => match store.blob(hash).await {
                Ok(Some(data)) => Some(data),
                Ok(None) => return failed(done, format!("{}: its recorded content is not in the store", step.path)),
                Err(e) => return failed(done, format!("{}: {e}", step.path)),
            },
            None => None,
        };
        let (path, mode) = (PathBuf::from(&step.path), step.mode);
        let written =
            tokio::task::spawn_blocking(move || crate::rewind::write_state(&path, data.as_deref().map(|d| (d, mode))))
                .await;
        match written {
            Ok(Ok(())) => crash_after_restored(done + 1),
            Ok(Err(e)) => return failed(done, format!("cannot restore {}: {e}", step.path)),
            Err(e) => return failed(done, format!("cannot restore {}: {e}", step.path)),
        }
    }
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
