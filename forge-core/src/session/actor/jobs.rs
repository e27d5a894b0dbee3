//! The jobs a session's shell runs beside it for its machine (hooks, a
//! call's records, a rewind's facts and files, a message prepared, the
//! wait for MCP tools, a git commit or branch move): each its own task,
//! always reporting back as `Event::JobDone`, a panic included.

use std::path::PathBuf;

use super::SessionActor;
use crate::error::EngineError;
use crate::session::machine::call::JobOutcome;
use crate::session::machine::{Effect, Event};

impl SessionActor {
    /// Runs `work` beside the shell; `failed` is what it reports if it
    /// panics (a job always reports back).
    fn job(
        &mut self,
        job: u64,
        work: impl std::future::Future<Output = JobOutcome> + Send + 'static,
        failed: impl FnOnce() -> JobOutcome + Send + 'static,
    ) {
        let task = tokio::spawn(work);
        self.jobs.push(Box::pin(async move {
            let outcome = task.await.unwrap_or_else(|e| {
                tracing::error!(job, error = %e, "a session job panicked");
                failed()
            });
            Event::JobDone { job, outcome }
        }));
    }

    /// Starts the job an effect asks for; it reports back as
    /// `Event::JobDone`.
    pub(super) fn start_job(&mut self, effect: Effect) {
        match effect {
            Effect::RunHooks(job) => {
                let id = job.job;
                let first = job.hooks.first().map(|h| (h.event, h.command.clone(), h.fail_closed));
                let tool = job.tool.clone();
                let failed = move || {
                    let runs = first.map(|(event, command, fail_closed)| crate::hooks::HookRun {
                        event,
                        command,
                        tool,
                        decision: match fail_closed {
                            true => crate::hooks::HookDecision::Block,
                            false => crate::hooks::HookDecision::Error,
                        },
                        reason: Some("the hook's runner failed inside forged".into()),
                        context: None,
                        exit_code: None,
                        duration_ms: 0,
                        halt: false,
                    });
                    JobOutcome::Hooks(runs.into_iter().collect())
                };
                self.job(
                    id,
                    async move { JobOutcome::Hooks(crate::session::tool_task::run_hooks(*job).await) },
                    failed,
                );
            }
            Effect::RecordBefore(job) => {
                let (id, recorder) = (job.job, self.recorder());
                let failed = || JobOutcome::RecordedBefore(Err("recording the files failed inside forged".into()));
                self.job(id, crate::session::tool_task::record_before(recorder, *job), failed);
            }
            Effect::RecordAfter(job) => {
                let (id, recorder) = (job.job, self.recorder());
                let roots = crate::session::tool_task::not_read(&job.sandbox);
                let failed = move || JobOutcome::RecordedAfter {
                    ops: Vec::new(),
                    changes: Vec::new(),
                    undone: Vec::new(),
                    unrecorded: roots,
                };
                self.job(id, crate::session::tool_task::record_after(recorder, *job), failed);
            }
            Effect::PlanRewind(job) => {
                let (id, store) = (job.job, self.shared.store.clone());
                let failed = || JobOutcome::RewindPlanned(Err(EngineError::internal("planning the rewind failed")));
                self.job(id, crate::session::rewind_task::plan(store, *job), failed);
            }
            Effect::RestoreFiles(job) => {
                let (id, store) = (job.job, self.shared.store.clone());
                let failed = || JobOutcome::FilesRestored { done: 0, error: Some("restoring the files failed".into()) };
                self.job(id, crate::session::rewind_task::restore(store, *job), failed);
            }
            Effect::PrepareInput(job) => {
                let (id, refresh) = (job.job, self.refresh());
                let failed = || {
                    let input = Err(EngineError::internal("preparing the message failed inside forged"));
                    JobOutcome::InputPrepared(Box::new(crate::session::machine::input::Prepared {
                        refresh: None,
                        input,
                    }))
                };
                self.job(id, crate::session::input_task::prepare(self.shared.clone(), *job, refresh), failed);
            }
            Effect::WaitForTools { job, limit } => {
                let shared = self.shared.clone();
                let id = self.session.id().to_string();
                let cwd = PathBuf::from(self.session.cwd());
                let work = async move {
                    let not_started = shared.mcp.wait_started(Some(&id), limit).await;
                    JobOutcome::ToolsStarted { tools: Some(shared.tools_for(&id, &cwd).0), not_started }
                };
                self.job(job, work, || JobOutcome::ToolsStarted { tools: None, not_started: Vec::new() });
            }
            Effect::MoveBranch(m) => {
                let job = m.job;
                let failed = || {
                    JobOutcome::BranchMoved(Err(crate::error::EngineError::internal(
                        "moving the branch failed inside forged",
                    )))
                };
                self.job(job, crate::session::git_task::move_branch(*m), failed);
            }
            Effect::CommitTurn(c) => {
                let job = c.job;
                let work = crate::session::git_task::commit(self.shared.providers.clone(), *c);
                let failed =
                    || JobOutcome::Committed { result: Err("committing failed inside forged".into()), usage: None };
                self.job(job, work, failed);
            }
            _ => tracing::error!("not a job's effect: dropped"),
        }
    }
}
