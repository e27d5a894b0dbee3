//! A tool call's task, beside the session's shell: the `PreToolUse`
//! hooks, the files it may change recorded for rewind before it runs (a
//! command's roots scanned), the call under its timeout (a panic is an
//! error result), the `PostToolUse` hooks, and what changed after.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::machine::{Event, FileAfter, ToolEnd, ToolRun};
use crate::hooks::HookRun;
use crate::journal::WriteBatch;
use crate::tools::{ToolError, ToolOutput};

/// Output pieces buffered between a running tool and the session; a tool
/// that outruns it loses live pieces, never its result.
const TOOL_OUTPUT_CHANNEL: usize = 256;

/// A tool task's end: its result, the files it changed, the hooks run.
pub(super) type ToolOutcome = (Result<String, ToolError>, Vec<FileAfter>, Vec<HookRun>);

/// A tool call running in its own task.
pub(super) struct RunningTool {
    pub(super) task: JoinHandle<ToolOutcome>,
    pub(super) output: mpsc::Receiver<ToolOutput>,
}

/// The `PreToolUse` and `PostToolUse` hooks of one call.
pub(super) struct ToolHooks {
    pub(super) pre: Vec<crate::hooks::Hook>,
    pub(super) post: Vec<crate::hooks::Hook>,
    pub(super) session_id: String,
    pub(super) cwd: String,
}

/// Where a tool call's file changes are recorded.
pub(super) struct Recorder {
    pub(super) writer: crate::journal::JournalWriter,
    pub(super) session_id: String,
    pub(super) baseline: Arc<std::sync::Mutex<crate::snapshot::Manifest>>,
}

/// Most content stored in one write while scanning.
pub(super) const SCAN_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Scans the roots (reusing `known` where files did not change), every
/// content read stored durably before this returns.
pub(super) async fn scan_and_store(
    recorder: &Recorder,
    sandbox: &crate::tools::Sandbox,
    known: crate::snapshot::Manifest,
) -> Result<crate::snapshot::Manifest, ScanFailure> {
    let writer = recorder.writer.clone();
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
        let scanned = crate::snapshot::scan(sandbox.roots(), &known, &skip, &mut |hash, data| {
            bytes += data.len();
            batch.extend(crate::journal::StoreOp::blob(hash, data));
            if bytes > SCAN_BATCH_BYTES {
                bytes = 0;
                flush(&mut batch, &mut failed);
            }
        });
        flush(&mut batch, &mut failed);
        match (failed, scanned) {
            (Some(e), _) => Err(ScanFailure::Store(e)),
            (None, Err(e)) => Err(ScanFailure::TooBig(e)),
            (None, Ok(manifest)) => Ok(manifest),
        }
    })
    .await
    .map_err(|e| ScanFailure::Store(e.to_string()))?
}

/// Why the roots could not be recorded around a command.
pub(super) enum ScanFailure {
    /// The store refused the contents: the command is not run.
    Store(String),
    /// Too much to record: the command runs, unrecorded.
    TooBig(crate::snapshot::ScanError),
}

impl std::fmt::Display for ScanFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanFailure::Store(e) => write!(f, "{e}"),
            ScanFailure::TooBig(e) => write!(f, "{e}"),
        }
    }
}

/// Records what a command changed under the roots: each changed file's
/// state before (durably, now) and after (with the result).
pub(super) async fn record_scanned(
    recorder: &Recorder,
    sandbox: &crate::tools::Sandbox,
    before: crate::snapshot::Manifest,
    node_id: &str,
    call_id: &str,
) -> Result<Vec<FileAfter>, String> {
    let after = scan_and_store(recorder, sandbox, before.clone()).await.map_err(|e| e.to_string())?;
    let changed = crate::snapshot::changed(&before, &after);
    let ops: Vec<crate::journal::StoreOp> = changed
        .iter()
        .map(|p| crate::journal::StoreOp::BeginChange {
            session_id: recorder.session_id.clone(),
            node_id: node_id.to_string(),
            call_id: call_id.to_string(),
            path: p.display().to_string(),
            before: before.state(p),
            created_ms: crate::ids::now_ms(),
        })
        .collect();
    if !ops.is_empty() {
        recorder.writer.write(WriteBatch { ops }).await.map_err(|e| e.to_string())?;
    }
    let out = changed
        .iter()
        .map(|p| FileAfter { path: p.display().to_string(), after: after.state(p), data: None })
        .collect();
    *recorder.baseline.lock().unwrap_or_else(|p| p.into_inner()) = after;
    Ok(out)
}

/// Starts a tool call in its own task, with its timeout. The files it
/// touches are recorded first (durably: a crash during the call leaves
/// their content before it), and read again after it.
pub(super) fn spawn_tool(run: ToolRun, recorder: Recorder, hooks: ToolHooks) -> RunningTool {
    let ToolRun { tool, args, record, mut ctx, timeout } = run;
    let (output_tx, output) = mpsc::channel(TOOL_OUTPUT_CHANNEL);
    ctx.output = Some(output_tx);
    let task = tokio::spawn(async move {
        use crate::hooks::{HookDecision, HookEvent};
        let name = tool.name().to_string();
        let mut runs: Vec<HookRun> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let tool_input = args.clone();
        let hook_input = |event: HookEvent, extra: serde_json::Value| {
            crate::hooks::input(event, &hooks.session_id, &hooks.cwd, extra)
        };
        for hook in &hooks.pre {
            let input =
                hook_input(HookEvent::PreToolUse, serde_json::json!({"tool_name": name, "tool_input": tool_input}));
            let r = crate::hooks::run(hook, &input, &ctx.sandbox, Some(&name)).await;
            let (decision, says, context) = (r.decision, r.says(), r.context.clone());
            runs.push(r);
            // A block, and a hook that failed or hung, both stop the call.
            if decision != HookDecision::Allow {
                let message = format!("not run: {says}");
                return (Err(ToolError::ExecutionFailed { tool: name, message }), Vec::new(), runs);
            }
            notes.extend(context);
        }
        let touched: Vec<(String, std::path::PathBuf)> = match &record {
            Some(_) => tool
                .touches(&args)
                .iter()
                .filter_map(|p| ctx.sandbox.resolve(p).ok())
                .map(|p| (p.display().to_string(), p))
                .collect(),
            None => Vec::new(),
        };
        if let (Some((node_id, call_id)), false) = (&record, touched.is_empty())
            && let Err(e) = record_before(&recorder, node_id, call_id, &touched).await
        {
            let message = format!("not run: the files it would change could not be recorded for rewind ({e})");
            return (Err(ToolError::ExecutionFailed { tool: tool.name().into(), message }), Vec::new(), runs);
        }
        // A command may change anything under the roots: scan before.
        let scanned = match &record {
            Some(_) if tool.changes_files_anywhere() => {
                let known = recorder.baseline.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match scan_and_store(&recorder, &ctx.sandbox, known).await {
                    Ok(m) => Some(m),
                    Err(ScanFailure::TooBig(e)) => {
                        tracing::warn!(error = %e, "a command's file changes are not recorded for rewind");
                        None
                    }
                    Err(e) => {
                        let message =
                            format!("not run: the files under the roots could not be recorded for rewind ({e})");
                        return (
                            Err(ToolError::ExecutionFailed { tool: tool.name().into(), message }),
                            Vec::new(),
                            runs,
                        );
                    }
                }
            }
            _ => None,
        };
        // A tool that stops itself on time is given a moment more to say
        // what it stopped.
        let outer = if tool.stops_on_time() { timeout + std::time::Duration::from_secs(15) } else { timeout };
        let mut result = match tokio::time::timeout(outer, tool.execute(args, &ctx)).await {
            Ok(r) => r,
            Err(_) => Err(ToolError::Timeout { tool: tool.name().into(), elapsed: timeout }),
        };
        crash_point(tool.name());
        for hook in &hooks.post {
            let response = match &result {
                Ok(text) => serde_json::json!({"output": text, "is_error": false}),
                Err(e) => serde_json::json!({"output": e.to_string(), "is_error": true}),
            };
            let input = hook_input(
                HookEvent::PostToolUse,
                serde_json::json!({"tool_name": name, "tool_input": tool_input, "tool_response": response}),
            );
            let r = crate::hooks::run(hook, &input, &ctx.sandbox, Some(&name)).await;
            if r.decision != HookDecision::Allow {
                notes.push(r.says());
            }
            notes.extend(r.context.clone());
            runs.push(r);
        }
        if !notes.is_empty() {
            let tail = format!("\n--- hooks ---\n{}", notes.join("\n"));
            result = match result {
                Ok(text) => Ok(text + &tail),
                Err(e) => Err(ToolError::ExecutionFailed { tool: name.clone(), message: format!("{e}{tail}") }),
            };
        }
        let mut after: Vec<FileAfter> = tokio::task::spawn_blocking(move || {
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
        if let (Some(before), Some((node_id, call_id))) = (scanned, &record) {
            match record_scanned(&recorder, &ctx.sandbox, before, node_id, call_id).await {
                Ok(changes) => after.extend(changes),
                Err(e) => tracing::warn!(error = %e, "what a command changed could not be recorded for rewind"),
            }
        }
        (result, after, runs)
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

/// The content of the files a call is about to change, made durable
/// before it runs.
pub(super) async fn record_before(
    recorder: &Recorder,
    node_id: &str,
    call_id: &str,
    touched: &[(String, std::path::PathBuf)],
) -> Result<(), String> {
    let paths = touched.to_vec();
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
            ops.extend(crate::journal::StoreOp::blob(hash.clone(), data));
            (hash, mode)
        });
        ops.push(crate::journal::StoreOp::BeginChange {
            session_id: recorder.session_id.clone(),
            node_id: node_id.to_string(),
            call_id: call_id.to_string(),
            path,
            before,
            created_ms: crate::ids::now_ms(),
        });
    }
    recorder.writer.write(crate::journal::WriteBatch { ops }).await.map(|_| ()).map_err(|e| e.to_string())
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
    let (end, changes, hooks) = match done {
        Ok((result, changes, hooks)) => (ToolEnd::Finished(result), changes, hooks),
        Err(e) if e.is_panic() => (ToolEnd::Panicked, Vec::new(), Vec::new()),
        Err(_) => (ToolEnd::Stopped, Vec::new(), Vec::new()),
    };
    Event::ToolDone { rest, end, changes, hooks }
}
