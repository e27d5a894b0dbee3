//! Rewind: the files tools changed are put back as they were at a node,
//! then the conversation moves there. An operation state of its own
//! (`Rewinding`), so no turn starts (a message sent meanwhile queues) and
//! nothing edits the tree while files move:
//!
//! 1. `Planning`: with the tree just read, the shell works out what each
//!    recorded file is to hold and what it holds now (conflicts, a dry
//!    run's diff).
//! 2. `Journaling`: the intent (`rewind_started`, with every file's target
//!    and, when forced, what is overwritten) goes through the pipeline;
//!    no file moves before it is durable.
//! 3. `Restoring`: the shell writes the files; then `files_restored` and
//!    the head's move are journaled together.
//!
//! A daemon stopped between 2 and 3 finds the intent without its end on
//! restart and finishes it (`files_restored` with `recovered`): the
//! targets are content the store already holds, so writing them again is
//! harmless.

use forge_proto::{ClientRef, ErrorKind, EventKind, RestoredFile, RewindResult, RewindStep, Role};

use super::state::OperationState;
use super::{Effect, OnDurable, ReadyReply, Responder, Session};
use crate::error::EngineError;
use crate::forest::Forest;
use crate::journal::StoreOp;
use crate::provider::ChatMessage;
use crate::session::Reply;

/// `session.rewind`, as asked (the node resolved by the engine).
pub(crate) struct RewindArgs {
    /// Where to; with `last_turn`, the start of the last turn instead.
    pub node: Option<String>,
    pub last_turn: bool,
    pub files: bool,
    pub conversation: bool,
    pub dry_run: bool,
    pub force: bool,
    pub client: ClientRef,
}

/// For the shell: work out what a rewind from the end of `from` to the end
/// of `to` does to the files.
pub(crate) struct PlanRewind {
    pub job: u64,
    pub session_id: String,
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub dry_run: bool,
    pub force: bool,
}

/// What the shell found.
pub(crate) struct RewindPlan {
    /// The files as the answer reports them (and a dry run's diff).
    pub result: RewindResult,
    /// What to write, file by file.
    pub steps: Vec<RewindStep>,
    /// Files changed outside Forge since Forge changed them.
    pub conflicts: Vec<String>,
    /// With `force`: what keeps the content the rewind overwrites.
    pub keep: Vec<StoreOp>,
}

/// For the shell: write these files.
pub(crate) struct RestoreFiles {
    pub job: u64,
    pub steps: Vec<RewindStep>,
}

/// A rewind's intent found without its end, on restart.
pub(crate) struct RewindIntent {
    pub node: Option<String>,
    pub files: Vec<RestoredFile>,
    pub steps: Vec<RewindStep>,
    /// The conversation up to `node`, when the head is to move there.
    pub path: Option<Vec<ChatMessage>>,
}

pub(super) enum RewindStage {
    Planning,
    Journaling { steps: Vec<RewindStep> },
    Restoring,
}

/// A rewind in progress.
pub(super) struct Rewinding {
    pub job: u64,
    pub stage: RewindStage,
    pub node: Option<String>,
    /// The conversation up to `node`, when the head moves there.
    pub path: Option<Vec<ChatMessage>>,
    pub result: RewindResult,
    pub client: ClientRef,
    /// Nobody waits for a rewind finished on restart.
    pub reply: Option<Reply<RewindResult>>,
    /// Overwrite files changed outside Forge (what they held is kept).
    pub force: bool,
    pub recovered: bool,
}

/// What a rewind does first.
enum Planned {
    /// No files to move: finish now.
    Now { client: ClientRef, node: Option<String>, path: Option<Vec<ChatMessage>>, result: RewindResult },
    /// Plan the files (`Rewinding` in `Planning`).
    Files(Rewinding),
}

fn ids(forest: &Forest, head: Option<&str>) -> Result<Vec<String>, EngineError> {
    Ok(match head {
        Some(h) => forest.path(h)?.into_iter().map(|n| n.id.clone()).collect(),
        None => Vec::new(),
    })
}

impl Session {
    /// `session.rewind`, with the tree just read.
    pub(super) fn on_rewind(&mut self, forest: &Forest, args: RewindArgs, reply: Reply<RewindResult>) {
        if !matches!(self.state, OperationState::Idle) {
            let err = self.busy("wait for it to end (or cancel it), then rewind");
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
        }
        match self.plan_rewind(forest, args) {
            Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
            Ok(Planned::Now { client, node, path, result }) => self.finish_rewind(&client, node, path, result, reply),
            Ok(Planned::Files(mut r)) => {
                r.reply = Some(reply);
                self.state = OperationState::Rewinding(Box::new(r));
            }
        }
    }

    /// Where the rewind goes, and whether files are to be planned first.
    fn plan_rewind(&mut self, forest: &Forest, args: RewindArgs) -> Result<Planned, EngineError> {
        let from = ids(forest, self.row.head_id.as_deref())?;
        let target = match (args.last_turn, &args.node) {
            (true, _) => {
                let last_user = from.iter().rev().find(|n| forest.get(n).is_ok_and(|n| n.role == Role::User));
                let Some(last_user) = last_user else {
                    return Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        "nothing to undo: the conversation has no turn",
                    ));
                };
                forest.get(last_user)?.parent_id.clone()
            }
            (false, node) => node.clone(),
        };
        if let Some(n) = &target
            && forest.get(n)?.role == Role::Summary
        {
            return Err(EngineError::new(ErrorKind::InvalidParams, "rewind to a message, not to a summary"));
        }
        let to = ids(forest, target.as_deref())?;
        let path = match (args.conversation && !args.dry_run, &target) {
            (false, _) => None,
            (true, None) => Some(Vec::new()),
            (true, Some(n)) => Some(forest.path(n)?.into_iter().filter_map(super::chat_message).collect()),
        };
        let result = RewindResult {
            session_id: self.row.id.clone(),
            node: target.clone(),
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run: args.dry_run,
            diff: None,
            conversation: args.conversation && !args.dry_run,
        };
        if !args.files {
            return Ok(Planned::Now { client: args.client, node: target, path, result });
        }
        let job = self.new_job();
        self.out.push(Effect::PlanRewind(Box::new(PlanRewind {
            job,
            session_id: self.row.id.clone(),
            from,
            to,
            dry_run: args.dry_run,
            force: args.force,
        })));
        Ok(Planned::Files(Rewinding {
            job,
            stage: RewindStage::Planning,
            node: target,
            path,
            result,
            client: args.client,
            reply: None,
            force: args.force,
            recovered: false,
        }))
    }

    /// The shell worked out what the rewind does to the files.
    pub(super) fn on_rewind_planned(&mut self, job: u64, plan: Result<Box<RewindPlan>, EngineError>) {
        let OperationState::Rewinding(r) = &mut self.state else { return };
        if r.job != job || !matches!(r.stage, RewindStage::Planning) {
            return;
        }
        let fail = |s: &mut Session, r: Box<Rewinding>, e: EngineError| {
            s.state = OperationState::Idle;
            if let Some(reply) = r.reply {
                s.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
            }
            s.start_next_queued();
        };
        let OperationState::Rewinding(mut r) = std::mem::replace(&mut self.state, OperationState::Idle) else {
            return;
        };
        let plan = match plan {
            Ok(p) => *p,
            Err(e) => return fail(self, r, e),
        };
        r.result.files = plan.result.files;
        r.result.unknown = plan.result.unknown;
        r.result.diff = plan.result.diff;
        if r.result.dry_run {
            let result = r.result.clone();
            if let Some(reply) = r.reply.take() {
                self.out.push(Effect::Reply(ReadyReply::now(reply, Ok(result))));
            }
            return self.start_next_queued();
        }
        if !plan.conflicts.is_empty() && !r.force {
            let err = EngineError::new(
                ErrorKind::RewindConflict,
                format!(
                    "these files changed outside Forge since Forge last changed them, and were left as they are: {}. \
                     Look at them (--dry-run shows the diff), then rewind with --force to overwrite them (what they hold is kept)",
                    plan.conflicts.join(", ")
                ),
            );
            return fail(self, r, err);
        }
        if plan.steps.is_empty() {
            let Rewinding { node, path, result, client, reply, .. } = *r;
            return self.finish_files(&client, node, path, result, reply, false);
        }
        for op in plan.keep {
            self.pipeline.op(op);
        }
        self.pipeline.event(
            Some(r.client.clone()),
            EventKind::RewindStarted {
                node: r.node.clone(),
                conversation: r.path.is_some(),
                files: r.result.files.clone(),
                steps: plan.steps.clone(),
            },
        );
        r.stage = RewindStage::Journaling { steps: plan.steps };
        self.state = OperationState::Rewinding(r);
        self.pipeline.effect(OnDurable::Restore);
    }

    /// The intent is durable: the files may move.
    pub(super) fn restore_files(&mut self) {
        let OperationState::Rewinding(r) = &mut self.state else { return };
        let RewindStage::Journaling { steps } = std::mem::replace(&mut r.stage, RewindStage::Restoring) else {
            return;
        };
        self.next_job += 1;
        r.job = self.next_job;
        self.out.push(Effect::RestoreFiles(Box::new(RestoreFiles { job: r.job, steps })));
    }

    /// The shell wrote the files (the first `done`; `error`: why it
    /// stopped there).
    pub(super) fn on_files_restored(&mut self, job: u64, done: usize, error: Option<String>) {
        match &self.state {
            OperationState::Rewinding(r) if r.job == job && matches!(r.stage, RewindStage::Restoring) => {}
            _ => return,
        }
        let OperationState::Rewinding(r) = std::mem::replace(&mut self.state, OperationState::Idle) else {
            return;
        };
        let Rewinding { node, path, mut result, client, reply, recovered, .. } = *r;
        match error {
            None => self.finish_files(&client, node, path, result, reply, recovered),
            Some(e) => {
                // What did move is said; the rest is as it was.
                let restored: Vec<RestoredFile> =
                    result.files.drain(..).filter(|f| f.action != "kept").take(done).collect();
                self.pipeline.event(Some(client), EventKind::FilesRestored { node, files: restored, recovered });
                let err = EngineError::internal(format!(
                    "{e}; {done} file(s) were restored before it, the others are as they were"
                ));
                if let Some(reply) = reply {
                    self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
                }
                self.start_next_queued();
            }
        }
    }

    /// The files are in place: `files_restored`, then the head's move.
    fn finish_files(
        &mut self,
        client: &ClientRef,
        node: Option<String>,
        path: Option<Vec<ChatMessage>>,
        result: RewindResult,
        reply: Option<Reply<RewindResult>>,
        recovered: bool,
    ) {
        if !result.files.is_empty() {
            let files = result.files.clone();
            self.pipeline
                .event(Some(client.clone()), EventKind::FilesRestored { node: node.clone(), files, recovered });
        }
        self.state = OperationState::Idle;
        match reply {
            Some(reply) => self.finish_rewind(client, node, path, result, reply),
            None => self.move_conversation(client, node, path),
        }
        self.start_next_queued();
    }

    fn finish_rewind(
        &mut self,
        client: &ClientRef,
        node: Option<String>,
        path: Option<Vec<ChatMessage>>,
        result: RewindResult,
        reply: Reply<RewindResult>,
    ) {
        self.move_conversation(client, node, path);
        self.pipeline.effect(OnDurable::Reply(Responder::with(reply, result)));
    }

    fn move_conversation(&mut self, client: &ClientRef, node: Option<String>, path: Option<Vec<ChatMessage>>) {
        match (path, node) {
            (None, _) => {}
            (Some(path), Some(node)) => self.move_head(Some(node), path, client),
            (Some(_), None) => self.clear_history(client.clone()),
        }
    }

    /// A rewind the daemon stopped during: finish it (see the module).
    pub(super) fn resume_rewind(&mut self, intent: RewindIntent) {
        tracing::warn!(session = %self.row.id, files = intent.steps.len(), "finishing a rewind the daemon stopped during");
        let result = RewindResult {
            session_id: self.row.id.clone(),
            node: intent.node.clone(),
            files: intent.files,
            unknown: Vec::new(),
            dry_run: false,
            diff: None,
            conversation: intent.path.is_some(),
        };
        self.state = OperationState::Rewinding(Box::new(Rewinding {
            job: 0,
            stage: RewindStage::Journaling { steps: intent.steps },
            node: intent.node,
            path: intent.path,
            result,
            client: ClientRef::daemon(),
            reply: None,
            force: true,
            recovered: true,
        }));
        self.restore_files();
    }
}
