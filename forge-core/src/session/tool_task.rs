//! What the session's shell runs beside it for a tool call, each stage
//! as the machine asks (see `machine/call.rs`): the call itself under its
//! timeout (a panic is an error result), its hooks, and the records of
//! the files it may change, before and after.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::machine::call::{JobOutcome, RecordAfter, RecordBefore};
use super::machine::hooks::HookJob;
use super::machine::state::Before;
use super::machine::{Event, FileAfter, ToolEnd, ToolRun};
use crate::hooks::{HookDecision, HookRun};
use crate::journal::{StoreOp, WriteBatch};
use crate::tools::{ToolError, ToolOutput};

/// Output pieces buffered between a running tool and the session; a tool
/// that outruns it loses live pieces, never its result.
const TOOL_OUTPUT_CHANNEL: usize = 256;

/// A tool call running in its own task.
pub(super) struct RunningTool {
    /// Its result, and the images it carries (see `ToolCtx::images`).
    pub(super) task: JoinHandle<(Result<String, ToolError>, Vec<forge_tools::ToolImage>)>,
    pub(super) output: mpsc::Receiver<ToolOutput>,
}

/// Where a command's records store the contents they read, and the
/// session's record of its roots (kept up to date between commands).
#[derive(Clone)]
pub(super) struct Recorder {
    pub(super) writer: crate::journal::JournalWriter,
    pub(super) tracker: Arc<std::sync::Mutex<crate::snapshot::Tracker>>,
    /// Where the git guard is saved while a command runs.
    pub(super) guard_file: PathBuf,
}

/// Most content stored in one write while recording.
pub(super) const SCAN_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Runs `work` on the session's tracker off the runtime, every content it
/// hands over stored durably before this returns (an error if the store
/// refused it).
async fn with_tracker<T: Send + 'static>(
    recorder: &Recorder,
    sandbox: &crate::tools::Sandbox,
    work: impl FnOnce(&mut crate::snapshot::Tracker, crate::snapshot::Skip, crate::snapshot::Keep) -> T + Send + 'static,
) -> Result<T, String> {
    let writer = recorder.writer.clone();
    let tracker = recorder.tracker.clone();
    let sandbox = sandbox.clone();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut batch: Vec<crate::journal::StoreOp> = Vec::new();
        let mut bytes = 0;
        let mut failed: Option<String> = None;
        let flush = |batch: &mut Vec<crate::journal::StoreOp>, failed: &mut Option<String>| {
            if batch.is_empty() || failed.is_some() {
                return;
            }
            let ops = std::mem::take(batch);
            if let Err(e) = rt.block_on(writer.write(WriteBatch { ops })) {
                *failed = Some(e.to_string());
            }
        };
        let skip = |p: &Path| sandbox.is_denied(p);
        let mut tracker = tracker.lock().unwrap_or_else(|p| p.into_inner());
        let out = work(&mut tracker, &skip, &mut |hash, data| {
            bytes += data.len();
            batch.extend(crate::journal::StoreOp::blob(hash, data));
            if bytes > SCAN_BATCH_BYTES {
                bytes = 0;
                flush(&mut batch, &mut failed);
            }
        });
        flush(&mut batch, &mut failed);
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Runs a call's hooks in order (with `stop_at_first`, none after one
/// that does not allow).
pub(super) async fn run_hooks(job: HookJob) -> Vec<HookRun> {
    let mut runs = Vec::new();
    for hook in &job.hooks {
        let run = crate::hooks::run(hook, &job.input, &job.sandbox, job.tool.as_deref()).await;
        let stop = job.stop_at_first && run.decision == HookDecision::Block;
        runs.push(run);
        if stop {
            break;
        }
    }
    runs
}

/// Reads the files a call may change (and scans the roots for a command):
/// the ops that record them, for the journal, and the scan.
pub(super) async fn record_before(recorder: Recorder, job: RecordBefore) -> JobOutcome {
    let mut ops = Vec::new();
    if !job.touched.is_empty() {
        match read_before(&job).await {
            Ok(o) => ops = o,
            Err(e) => {
                let e = format!("the files it would change could not be recorded for rewind ({e})");
                return JobOutcome::RecordedBefore(Err(e));
            }
        }
    }
    if job.scan {
        let roots = job.sandbox.roots().to_vec();
        let before =
            move |t: &mut crate::snapshot::Tracker, skip: crate::snapshot::Skip, keep: crate::snapshot::Keep| {
                t.before(&roots, skip, keep);
                t.guard_saved()
            };
        let guard = match with_tracker(&recorder, &job.sandbox, before).await {
            Ok(guard) => guard,
            Err(e) => {
                let e = format!("the files under the roots could not be recorded for rewind ({e})");
                return JobOutcome::RecordedBefore(Err(e));
            }
        };
        // Durable before the command runs, as the contents are.
        if guard.is_none() {
            // A nested repository's path JSON cannot hold: a crash during
            // this command is not checked (said), and no older save stays.
            tracing::warn!(session = %job.session_id, "the git guard could not be saved before the command");
            super::crash_guard::clear(&recorder.guard_file);
        }
        if let Some(guard) = guard {
            let (file, call_id) = (recorder.guard_file.clone(), job.call_id.clone());
            let saved = tokio::task::spawn_blocking(move || super::crash_guard::save(&file, &call_id, &guard)).await;
            if let Ok(Err(e)) | Err(e) = saved.map_err(std::io::Error::other) {
                let e = format!("the git guard could not be saved before the command ({e})");
                return JobOutcome::RecordedBefore(Err(e));
            }
        }
    }
    let scanned = job.scan;
    JobOutcome::RecordedBefore(Ok((ops, scanned)))
}

/// Reads what a call changed: each named file's state after, and for a
/// command what changed under the roots (its state before recorded now).
pub(super) async fn record_after(recorder: Recorder, job: RecordAfter) -> JobOutcome {
    let RecordAfter { session_id, node_id, call_id, before, sandbox, stopped, .. } = job;
    if stopped {
        // Nothing of the command may change anything once it is read.
        let wait = || forge_tools::supervisor::wait_stopped(std::time::Duration::from_secs(10));
        let _ = tokio::task::spawn_blocking(wait).await;
    }
    let Before { touched, scanned } = before;
    {
        // What a file tool of Forge wrote is read again by the next scan,
        // whatever its stats say.
        let mut tracker = recorder.tracker.lock().unwrap_or_else(|p| p.into_inner());
        for (_, p) in &touched {
            tracker.forget(p);
        }
    }
    let mut changes: Vec<FileAfter> = tokio::task::spawn_blocking(move || {
        touched
            .into_iter()
            .filter_map(|(path, p)| {
                let state = crate::rewind::read_state(&p).ok()?;
                let after = state.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
                Some(FileAfter { path, after, data: state.map(|(data, _)| data) })
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    let mut ops = Vec::new();
    let mut undone = Vec::new();
    let mut unrecorded = Vec::new();
    if scanned {
        let after = |t: &mut crate::snapshot::Tracker, skip: crate::snapshot::Skip, keep: crate::snapshot::Keep| {
            (t.after(skip, keep), t.ignored_unwatched(), t.take_undone())
        };
        let checked = with_tracker(&recorder, &sandbox, after).await;
        // The command's end is checked: a crash from here on has nothing to undo.
        let file = recorder.guard_file.clone();
        let _ = tokio::task::spawn_blocking(move || super::crash_guard::clear(&file)).await;
        match checked {
            Ok((found, ignored_unwatched, guarded)) => {
                let base = sandbox.roots().first().cloned().unwrap_or_default();
                undone = guarded
                    .into_iter()
                    .map(|u| forge_proto::GitUndone {
                        path: u.path.strip_prefix(&base).unwrap_or(&u.path).display().to_string(),
                        what: u.what,
                    })
                    .collect();
                for f in found {
                    let path = crate::rewind::path_text(&f.path);
                    ops.push(StoreOp::BeginChange {
                        session_id: session_id.clone(),
                        node_id: node_id.clone(),
                        call_id: call_id.clone(),
                        path: path.clone(),
                        before: f.before,
                        created_ms: crate::ids::now_ms(),
                    });
                    changes.push(FileAfter { path, after: f.after, data: None });
                }
                if ignored_unwatched {
                    let mark = crate::rewind::Unrecorded::IgnoredUnwatched;
                    unrecorded = sandbox.roots().iter().map(|r| (crate::rewind::path_text(r), mark)).collect();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "what a command changed could not be recorded for rewind");
                unrecorded = not_read(&sandbox);
            }
        }
    }
    JobOutcome::RecordedAfter { ops, changes, undone, unrecorded }
}

/// Every root marked as not recorded: what a command changed there could
/// not be read after it (an undo names them instead of saying nothing).
pub(super) fn not_read(sandbox: &crate::tools::Sandbox) -> Vec<(String, crate::rewind::Unrecorded)> {
    sandbox.roots().iter().map(|r| (crate::rewind::path_text(r), crate::rewind::Unrecorded::NotRead)).collect()
}

/// Starts a tool call in its own task, with its timeout.
pub(super) fn spawn_tool(run: ToolRun) -> RunningTool {
    let ToolRun { tool, args, mut ctx, timeout, .. } = run;
    let (output_tx, output) = mpsc::channel(TOOL_OUTPUT_CHANNEL);
    ctx.output = Some(output_tx);
    let sink: forge_tools::ImageSink = Default::default();
    ctx.images = Some(sink.clone());
    let task = tokio::spawn(async move {
        // A tool that stops itself on time is given a moment more to say
        // what it stopped.
        let outer = if tool.stops_on_time() { timeout + std::time::Duration::from_secs(15) } else { timeout };
        let result = match tokio::time::timeout(outer, tool.execute(args, &ctx)).await {
            Ok(r) => r,
            Err(_) => Err(ToolError::Timeout { tool: tool.name().into(), elapsed: timeout }),
        };
        crash_point(tool.name());
        let images = std::mem::take(&mut *sink.lock().unwrap_or_else(|p| p.into_inner()));
        (result, images)
    });
    RunningTool { task, output }
}

/// Crash tests: with `FORGE_CRASH_AFTER_TOOL=NAME` in the daemon's
/// environment, the process kills itself (SIGKILL) the moment a call of
/// tool NAME has done its work, before its result is recorded: what a
/// `kill -9` at the worst moment leaves, made deterministic.
pub(super) fn crash_point(tool: &str) {
    static AFTER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AFTER.get_or_init(|| std::env::var("FORGE_CRASH_AFTER_TOOL").ok()).as_deref() == Some(tool) {
        tracing::error!(tool, "FORGE_CRASH_AFTER_TOOL: killing the daemon now");
        // SAFETY: kill(2) on this very process; nothing is touched after.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// Crash tests: with `FORGE_CRASH_AFTER_GIT_COMMIT=1`, the process kills
/// itself once a turn's commit is on its branch, before `git_committed`
/// is journaled.
pub(super) fn crash_after_commit() {
    if std::env::var("FORGE_CRASH_AFTER_GIT_COMMIT").as_deref() == Ok("1") {
        tracing::error!("FORGE_CRASH_AFTER_GIT_COMMIT: killing the daemon now");
        // SAFETY: kill(2) on this very process; nothing is touched after.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// The content of the files a call is about to change, as ops for the
/// journal (made durable before it runs).
async fn read_before(job: &RecordBefore) -> Result<Vec<StoreOp>, String> {
    let paths = job.touched.clone();
    let states = tokio::task::spawn_blocking(move || {
        paths.into_iter().map(|(shown, p)| (shown, crate::rewind::read_state(&p))).collect::<Vec<_>>()
    })
    .await
    .map_err(|e| e.to_string())?;
    let mut ops = Vec::new();
    for (path, state) in states {
        let state = state.map_err(|e| format!("{path}: {e}"))?;
        let before = state.map(|(data, mode)| {
            let hash = crate::rewind::hash(&data);
            ops.extend(StoreOp::blob(hash.clone(), data));
            (hash, mode)
        });
        ops.push(StoreOp::BeginChange {
            session_id: job.session_id.clone(),
            node_id: job.node_id.clone(),
            call_id: job.call_id.clone(),
            path,
            before,
            created_ms: crate::ids::now_ms(),
        });
    }
    Ok(ops)
}

/// The running tool's next output piece, or its end (output first, so
/// nothing it printed comes after its result).
pub(super) async fn tool_event(tool: &mut Option<RunningTool>) -> Event {
    let Some(running) = tool.as_mut() else { return std::future::pending().await };
    let done = tokio::select! {
        biased;
        Some(out) = running.output.recv() => return Event::ToolOutput(out),
        done = &mut running.task => done,
    };
    let mut rest = Vec::new();
    if let Some(mut running) = tool.take() {
        while let Ok(out) = running.output.try_recv() {
            rest.push(out);
        }
    }
    let (end, images) = match done {
        Ok((result, images)) => (ToolEnd::Finished(result), images_of(images)),
        Err(e) if e.is_panic() => (ToolEnd::Panicked, Vec::new()),
        Err(_) => (ToolEnd::Stopped, Vec::new()),
    };
    Event::ToolDone { rest, end, images }
}

/// A tool's images, checked as a client's are (one Forge cannot read is
/// left out; the result's text still names it).
fn images_of(images: Vec<forge_tools::ToolImage>) -> Vec<(forge_proto::ImageInfo, Vec<u8>)> {
    images
        .into_iter()
        .take(crate::images::MAX_IMAGES)
        .filter_map(|i| match crate::images::decode(&i.data, Some(&i.mime_type), None) {
            Ok(d) => Some((d.info, d.data)),
            Err(why) => {
                tracing::warn!("a tool's image is left out: {why}");
                None
            }
        })
        .collect()
}
