//! Rewind: the files tools changed are put back as they were at a node,
//! then the conversation moves there. An operation state of its own
//! (`Rewinding`), so no turn starts (a message sent meanwhile queues) and
//! nothing edits the tree while files move:
//!
//! 1. `Planning`: with the tree just read, the shell reads what each
//!    recorded file is to hold and what it holds now; the machine decides
//!    what to do with each (`rewind_plan.rs`: conflicts, a dry run's
//!    diff).
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

use super::rewind_plan::{Decide, FileFacts};
use super::state::{Forking, OperationState, RewindStage, Rewinding};
use super::{Effect, OnDurable, ReadyReply, Session};
use crate::error::EngineError;
use crate::forest::Forest;
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
    /// Go on when some files cannot be restored.
    pub partial: bool,
    pub client: ClientRef,
}

impl RewindArgs {
    /// `session.rewind`'s params, as the machine reads them.
    pub(crate) fn new(p: forge_proto::params::RewindParams, client: ClientRef) -> Result<Self, EngineError> {
        if p.files_only && p.conversation_only {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                "files_only and conversation_only exclude each other",
            ));
        }
        Ok(Self {
            last_turn: p.node.is_none(),
            node: p.node,
            files: !p.conversation_only,
            conversation: !p.files_only,
            dry_run: p.dry_run,
            force: p.force,
            partial: p.partial,
            client,
        })
    }
}

/// For the shell: work out what a rewind from the end of `from` to the end
/// of `to` does to the files.
pub(crate) struct PlanRewind {
    pub job: u64,
    pub session_id: String,
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub dry_run: bool,
}

/// For the shell: write these files.
pub(crate) struct RestoreFiles {
    pub job: u64,
    pub steps: Vec<RewindStep>,
    /// The session's roots: directories the rewind leaves empty are
    /// removed up to them, never above.
    pub roots: Vec<std::path::PathBuf>,
}

/// A rewind's intent found without its end, on restart.
pub(crate) struct RewindIntent {
    pub node: Option<String>,
    /// A fork's `restore_files`: the fork's id and name.
    pub fork: Option<(String, Option<String>)>,
    pub files: Vec<RestoredFile>,
    pub steps: Vec<RewindStep>,
    /// The conversation up to `node`, when the head is to move there.
    pub path: Option<Vec<ChatMessage>>,
}

/// Most files named one by one in a `rewind_incomplete` message.
const NAMED: usize = 20;

/// The files a rewind would leave as they are, each with the reason, as
/// the error that stops it (`None`: it restores everything).
fn incomplete(result: &RewindResult) -> Option<EngineError> {
    const UNKNOWN: &str = "a tool call there was interrupted before its result was recorded";
    let left: Vec<(&str, &str)> = result
        .files
        .iter()
        .filter(|f| f.action == "kept")
        .map(|f| (f.path.as_str(), f.note.as_deref().unwrap_or("its content was not recorded")))
        .chain(result.unknown.iter().map(|p| (p.as_str(), UNKNOWN)))
        .collect();
    if left.is_empty() {
        return None;
    }
    let mut message = format!("{} file(s) cannot be restored and would be left as they are:\n", left.len());
    for (path, why) in left.iter().take(NAMED) {
        message.push_str(&format!("  {path}: {why}\n"));
    }
    if left.len() > NAMED {
        message.push_str(&format!("  and {} more (--dry-run --json lists them all)\n", left.len() - NAMED));
    }
    message.push_str("Nothing was changed; undo (or rewind) again with --yes to restore the rest anyway.");
    Some(EngineError::new(ErrorKind::RewindIncomplete, message))
}

fn ids(forest: &Forest, head: Option<&str>) -> Result<Vec<String>, EngineError> {
    Ok(match head {
        Some(h) => forest.path(h)?.into_iter().map(|n| n.id.clone()).collect(),
        None => Vec::new(),
    })
}

/// Where a rewind goes from `head` (`None`: the start), and for an undo
/// the message that started the turn it undoes.
pub(super) fn target(
    forest: &Forest,
    head: Option<&str>,
    args: &RewindArgs,
) -> Result<(Option<String>, Option<String>), EngineError> {
    let (target, turn) = match (args.last_turn, &args.node) {
        (true, _) => {
            let from = ids(forest, head)?;
            // The message that started the last turn: a user message that
            // follows a tool batch (a steer) is part of the turn.
            let starts_turn = |n: &str| {
                let Ok(node) = forest.get(n) else { return false };
                let parent = node.parent_id.as_deref().and_then(|p| forest.get(p).ok());
                node.role == Role::User
                    && !parent.is_some_and(|p| p.role == Role::Tool || !p.meta.message.tool_calls.is_empty())
            };
            let Some(start) = from.iter().rev().find(|n| starts_turn(n)) else {
                return Err(EngineError::new(
                    ErrorKind::InvalidParams,
                    "nothing to undo: the conversation has no turn",
                ));
            };
            (forest.get(start)?.parent_id.clone(), Some(start.clone()))
        }
        (false, node) => (node.clone(), None),
    };
    if let Some(n) = &target
        && forest.get(n)?.role == Role::Summary
    {
        return Err(EngineError::new(ErrorKind::InvalidParams, "rewind to a message, not to a summary"));
    }
    Ok((target, turn))
}

impl Session {
    /// `session.rewind`, with the tree just read.
    pub(super) fn on_rewind(&mut self, forest: &Forest, args: RewindArgs, reply: Reply<RewindResult>) {
        if !matches!(self.state, OperationState::Idle) {
            let err = self.busy("wait for it to end (or cancel it), then rewind");
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
        }
        // A git session's undo or rewind moves its branch, as a checkout.
        if self.row.git.is_some() && args.files && args.conversation && !args.dry_run {
            return self.git_rewind(forest, args, reply);
        }
        let files = args.files;
        match self.plan_rewind(forest, args) {
            Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
            Ok(mut r) => {
                r.reply = Some(reply);
                match files {
                    true => self.state = OperationState::Rewinding(Box::new(r)),
                    // No file to move: the conversation moves now.
                    false => self.finish_rewind(r),
                }
            }
        }
    }

    /// Where the rewind goes; with files to move, the shell is asked to
    /// plan them.
    fn plan_rewind(&mut self, forest: &Forest, args: RewindArgs) -> Result<Rewinding, EngineError> {
        let from = ids(forest, self.row.head_id.as_deref())?;
        let (target, _) = target(forest, self.row.head_id.as_deref(), &args)?;
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
            files_omitted: 0,
        };
        let job = match args.files {
            false => 0,
            true => {
                let job = self.new_job();
                self.out.push(Effect::PlanRewind(Box::new(PlanRewind {
                    job,
                    session_id: self.row.id.clone(),
                    from,
                    to,
                    dry_run: args.dry_run,
                })));
                job
            }
        };
        Ok(Rewinding {
            job,
            stage: RewindStage::Planning,
            node: target,
            path,
            result,
            client: args.client,
            reply: None,
            force: args.force,
            partial: args.partial,
            recovered: false,
            fork: None,
        })
    }

    /// A fork's `restore_files`: a files-only rewind that makes the fork
    /// with its end (see `fork.rs`).
    pub(super) fn rewind_for_fork(&mut self, forest: &Forest, args: RewindArgs, fork: Forking) {
        match self.plan_rewind(forest, args) {
            Err(e) => self.fail_fork(fork, e),
            Ok(mut r) => {
                r.fork = Some(Box::new(fork));
                self.state = OperationState::Rewinding(Box::new(r));
            }
        }
    }

    /// The rewind in progress, if it waits for `job` in a stage `at`
    /// accepts: taken, the session idle again.
    fn take_rewind(&mut self, job: u64, at: fn(&RewindStage) -> bool) -> Option<Rewinding> {
        match &self.state {
            OperationState::Rewinding(r) if r.job == job && at(&r.stage) => {}
            _ => return None,
        }
        match std::mem::replace(&mut self.state, OperationState::Idle) {
            OperationState::Rewinding(r) => Some(*r),
            _ => None,
        }
    }

    /// The rewind is over: its caller is answered (a success once it is
    /// durable; a fork's, by its fork) and what queued behind it may start.
    fn end_rewind(&mut self, r: Rewinding, result: Result<RewindResult, EngineError>) {
        if let (Some(fork), Err(e)) = (r.fork, &result) {
            self.fail_fork(*fork, e.clone());
        }
        if let Some(reply) = r.reply {
            self.reply_when_durable(reply, result.map(capped));
        }
        self.start_next_queued();
    }

    /// The shell found what the files hold: what the rewind does to them
    /// is decided here.
    pub(super) fn on_rewind_planned(&mut self, job: u64, facts: Result<Vec<FileFacts>, EngineError>) {
        let Some(mut r) = self.take_rewind(job, |s| matches!(s, RewindStage::Planning)) else { return };
        let decide = Decide {
            session_id: &self.row.id,
            leaving: self.row.head_id.as_deref(),
            dry_run: r.result.dry_run,
            force: r.force,
            now_ms: self.clock.now_ms(),
            cwd: &self.row.cwd,
        };
        let plan = match facts.and_then(|f| decide.plan(f).map_err(|e| EngineError::new(ErrorKind::InvalidParams, e))) {
            Ok(p) => p,
            Err(e) => return self.end_rewind(r, Err(e)),
        };
        r.result.files = plan.result.files;
        r.result.unknown = plan.result.unknown;
        r.result.diff = plan.result.diff;
        if r.result.dry_run {
            // Nothing is written: answered at once.
            if let Some(reply) = r.reply.take() {
                self.out.push(Effect::Reply(ReadyReply::now(reply, Ok(capped(r.result)))));
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
            return self.end_rewind(r, Err(err));
        }
        if let Some(err) = incomplete(&r.result).filter(|_| !r.partial) {
            return self.end_rewind(r, Err(err));
        }
        if plan.steps.is_empty() {
            return self.finish_rewind(r);
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
                fork: r.fork.as_ref().map(|f| f.id.clone()),
                fork_name: r.fork.as_ref().and_then(|f| f.name.clone()),
            },
        );
        r.stage = RewindStage::Journaling { steps: plan.steps };
        self.state = OperationState::Rewinding(Box::new(r));
        self.pipeline.effect(OnDurable::Restore);
    }

    /// The intent is durable: the files may move.
    pub(super) fn restore_files(&mut self) {
        let job = self.new_job();
        let OperationState::Rewinding(r) = &mut self.state else { return };
        let RewindStage::Journaling { steps } = std::mem::replace(&mut r.stage, RewindStage::Restoring) else {
            return;
        };
        r.job = job;
        let roots = super::tools::sandbox_for(&self.row, &self.config).roots().to_vec();
        self.out.push(Effect::RestoreFiles(Box::new(RestoreFiles { job, steps, roots })));
    }

    /// The shell wrote the files (the first `done`; `error`: why it
    /// stopped there).
    pub(super) fn on_files_restored(&mut self, job: u64, done: usize, error: Option<String>) {
        let Some(mut r) = self.take_rewind(job, |s| matches!(s, RewindStage::Restoring)) else { return };
        let Some(e) = error else {
            // Its intent is durable: a store that fails from here on
            // finishes it once writable again (on reload).
            r.reply = r.reply.take().map(finishes_on_reload);
            return self.finish_rewind(r);
        };
        // What did move is said; the rest is as it was, and so is the
        // conversation.
        let restored: Vec<RestoredFile> = r.result.files.drain(..).filter(|f| f.action != "kept").take(done).collect();
        let (client, node, recovered) = (r.client.clone(), r.node.clone(), r.recovered);
        self.pipeline.event(Some(client), EventKind::FilesRestored { node, files: restored, recovered });
        let err =
            EngineError::internal(format!("{e}; {done} file(s) were restored before it, the others are as they were"));
        self.end_rewind(r, Err(err));
    }

    /// The files are in place: the conversation's move, then
    /// `files_restored` (if any moved) as the rewind's last event, so a
    /// client waiting for the session to settle has seen the whole rewind
    /// when it stops there; the answer once they are durable.
    fn finish_rewind(&mut self, mut r: Rewinding) {
        let (node, client, recovered) = (r.node.clone(), r.client.clone(), r.recovered);
        match (r.path.take(), node.clone()) {
            (None, _) => {}
            (Some(path), Some(node)) => self.move_head(Some(node), path, &client),
            (Some(_), None) => self.clear_history(client.clone()),
        }
        if !r.result.files.is_empty() {
            let files = r.result.files.clone();
            self.pipeline.event(Some(client), EventKind::FilesRestored { node, files, recovered });
        }
        // In the same batch: a fork's files move with it or not at all.
        if let Some(fork) = r.fork.take() {
            self.make_fork(*fork, r.result.files.clone(), recovered);
        }
        let result = r.result.clone();
        self.end_rewind(r, Ok(result));
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
            files_omitted: 0,
        };
        let intent_node = intent.node.clone();
        self.state = OperationState::Rewinding(Box::new(Rewinding {
            job: 0,
            stage: RewindStage::Journaling { steps: intent.steps },
            node: intent.node,
            path: intent.path,
            result,
            client: ClientRef::daemon(),
            reply: None,
            force: true,
            partial: true,
            recovered: true,
            // Made without its name: the name was held for it before the
            // daemon stopped, and may be another session's by now.
            fork: intent.fork.map(|(id, _)| {
                let node = intent_node.clone().unwrap_or_default();
                Box::new(Forking { id, name: None, node, client: ClientRef::daemon(), reply: None })
            }),
        }));
        self.restore_files();
    }
}

/// A rewind's reply once its files are restored: a store that cannot
/// record the end does not undo it (the intent is durable, and the reload
/// after `journal reset` finishes it), so the caller is told that, not
/// that the rewind failed.
fn finishes_on_reload(reply: Reply<RewindResult>) -> Reply<RewindResult> {
    reply.map_err(|e| match e.kind {
        ErrorKind::PersistenceBlocked => EngineError::new(
            ErrorKind::PersistenceBlocked,
            format!(
                "the files are restored; the rewind finishes (the conversation moves and it is recorded) when the store is writable again: {}",
                e.message
            ),
        ),
        _ => e,
    })
}

/// Files a rewind's answer lists; the rest are counted (a turn that
/// touched 200,000 files must not make an answer past the protocol's
/// message size).
const LISTED_FILES: usize = 2_000;
/// The most of a dry run's diff an answer carries.
const DIFF_BYTES: usize = 4 * 1024 * 1024;

/// `result` as answered: the files that could not be restored first, at
/// most [`LISTED_FILES`] of them all, and the diff cut at [`DIFF_BYTES`].
fn capped(mut result: RewindResult) -> RewindResult {
    if result.files.len() > LISTED_FILES {
        result.files.sort_by_key(|f| f.action != "kept");
        result.files_omitted = (result.files.len() - LISTED_FILES) as u64;
        result.files.truncate(LISTED_FILES);
    }
    result.unknown.truncate(LISTED_FILES);
    if let Some(diff) = result.diff.as_mut().filter(|d| d.len() > DIFF_BYTES) {
        let cut = (0..=DIFF_BYTES).rev().find(|i| diff.is_char_boundary(*i)).unwrap_or(0);
        let rest = diff.len() - cut;
        diff.truncate(cut);
        diff.push_str(&format!("\n[forge: the diff goes on for {rest} more bytes, not shown]\n"));
    }
    result
}

#[cfg(test)]
mod capped_tests {
    use forge_proto::{RestoredFile, RewindResult};

    #[test]
    fn a_rewind_of_many_files_answers_the_first_ones_and_counts_the_rest() {
        let file = |i: usize, action: &str| RestoredFile {
            path: format!("f{i}"),
            action: action.into(),
            conflict: false,
            overwritten: None,
            note: None,
        };
        let mut files: Vec<RestoredFile> = (0..200_000).map(|i| file(i, "delete")).collect();
        files.push(file(7, "kept"));
        let result = RewindResult {
            session_id: "s".into(),
            node: None,
            files,
            unknown: Vec::new(),
            dry_run: true,
            diff: Some("x".repeat(5 << 20)),
            conversation: true,
            files_omitted: 0,
        };
        let r = super::capped(result);
        assert_eq!((r.files.len(), r.files_omitted), (super::LISTED_FILES, 200_001 - super::LISTED_FILES as u64));
        assert_eq!(r.files[0].action, "kept", "what cannot be restored is listed first");
        let diff = r.diff.clone().unwrap_or_default();
        assert!(diff.len() < (5 << 20) && diff.ends_with("more bytes, not shown]\n"));
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert!(json.len() < forge_proto::MAX_MESSAGE_BYTES as usize, "{} bytes", json.len());
    }
}
