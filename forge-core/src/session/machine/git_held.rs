//! Git mode: files that make something run later (a hook, the
//! repository's `core.hooksPath` directory, `.gitattributes`, `.envrc`,
//! `.mcp.json`: see `runs_code_later`) are held out of a turn's commit
//! until a user has seen them. The file tools ask before writing such
//! files (or the user's rules let them); commands, and helper agents'
//! commands, write them freely. So at the turn's end every such file that
//! differs from the branch is asked about, as one approval (`held-…`)
//! with a pseudo-call per file whose summary is its diff, except one a
//! file tool wrote and nothing changed since (its hash unchanged).
//! Approved, a file is committed with the turn; denied (or cancelled), it
//! is put back as the branch had it. A checkpoint meanwhile leaves them in
//! the worktree, so the turn's commit still sees them. Nothing is taken
//! off the list by a failed commit: the next commit finds them again.

use std::collections::BTreeMap;
use std::path::PathBuf;

use forge_proto::{ApprovalCall, ApprovalDecision, ApprovalResult, ClientRef, ErrorKind, EventKind, PendingApproval};

use super::git_commit::{CommitJob, Hold};
use super::state::{HeldWait, OperationState};
use super::{Effect, FileAfter, Session};
use crate::error::EngineError;

/// Held files' approvals' ids start with this.
const HELD_APPROVAL: &str = "held-";

/// What the running turn's file tools wrote among files that run later:
/// the path (relative to the worktree's top) and the content's hash
/// (`None`: deleted).
pub(super) enum RunLaterWritten {
    Known(BTreeMap<PathBuf, Option<String>>),
    /// The daemon restarted since the turn began: nothing is exempt.
    Unknown,
}

impl Default for RunLaterWritten {
    fn default() -> Self {
        Self::Known(BTreeMap::new())
    }
}

impl Session {
    /// A file tool's changes (not a command's): those to files that run
    /// later are noted with their content, which the user asked for or
    /// whose rules let it run.
    pub(super) fn note_run_later(&mut self, changes: &[FileAfter]) {
        let Some(git) = &self.row.git else { return };
        let RunLaterWritten::Known(written) = &mut self.run_later else { return };
        let top = std::path::Path::new(&git.worktree);
        for c in changes {
            let path = crate::rewind::text_path(&c.path);
            let Ok(rel) = path.strip_prefix(top) else { continue };
            written.insert(rel.to_path_buf(), c.after.as_ref().map(|(hash, _)| hash.clone()));
        }
    }

    /// What the commit holds back: `ask` at the turn's end (the list is
    /// taken: the turn is over), else left out of a checkpoint.
    pub(super) fn run_later_hold(&mut self, ask: bool) -> Hold {
        let written = match ask {
            true => std::mem::take(&mut self.run_later),
            false => match &self.run_later {
                RunLaterWritten::Known(w) => RunLaterWritten::Known(w.clone()),
                RunLaterWritten::Unknown => RunLaterWritten::Unknown,
            },
        };
        let exempt = match written {
            RunLaterWritten::Known(w) => w.into_iter().collect(),
            RunLaterWritten::Unknown => Vec::new(),
        };
        Hold::RunLater { exempt, ask }
    }

    /// The commit found files to hold: a user is asked about each.
    pub(super) fn on_held(
        &mut self,
        job: u64,
        commit: forge_git::TurnCommit,
        files: Vec<forge_git::HeldFile>,
        usage: Option<super::git_commit::MessageUsage>,
    ) {
        let Some((message_id, status)) = self.committed_turn(job, usage) else { return };
        let mut calls = Vec::new();
        let mut paths = Vec::new();
        for f in files {
            let shown = f.path.display().to_string();
            let call_id = format!("{}{shown}", forge_proto::HELD_CALL_PREFIX);
            calls.push(ApprovalCall {
                call_id: call_id.clone(),
                name: forge_proto::HELD_CALL.into(),
                arguments: serde_json::json!({"path": shown}).to_string(),
                risk: "high".into(),
                summary: format!(
                    "{shown} changed in this turn, other than by a file tool you let write it (by a command, say), \
                     and it makes something run later (a hook, a setting git or a tool reads): approve to commit \
                     it with the turn, deny to put back what the branch had\n{}",
                    f.diff
                ),
            });
            paths.push((call_id, f.path));
        }
        let approval = PendingApproval {
            session_id: self.row.id.clone(),
            session_name: self.row.name.clone(),
            approval_id: self.clock.new_id(HELD_APPROVAL),
            calls,
        };
        let approval_seq = self.ask_own(&approval);
        let wait = HeldWait { message_id, status, commit, approval, approval_seq, paths };
        self.state = OperationState::AwaitingHeld(Box::new(wait));
    }

    /// A client's answer: the approved files are committed, the others
    /// put back, and the commit is written.
    pub(super) fn on_held_answer(
        &mut self,
        decision: ApprovalDecision,
        approval_id: Option<String>,
        chosen: (Option<Vec<String>>, Option<Vec<u32>>),
        client: ClientRef,
    ) -> Result<ApprovalResult, EngineError> {
        let OperationState::AwaitingHeld(wait) = &self.state else {
            return Err(EngineError::new(ErrorKind::ApprovalNotPending, "no held files wait for a decision"));
        };
        if approval_id.as_ref().is_some_and(|id| *id != wait.approval.approval_id) {
            return Err(EngineError::new(
                ErrorKind::ApprovalNotPending,
                "nothing to approve under that id (it may have been answered already; `forgectl approvals` lists what waits)",
            ));
        }
        let all: Vec<String> = wait.approval.calls.iter().map(|c| c.call_id.clone()).collect();
        let approved = super::approvals::selected(&all, decision, chosen)?;
        let OperationState::AwaitingHeld(wait) = std::mem::replace(&mut self.state, OperationState::Finishing) else {
            return Err(EngineError::new(ErrorKind::ApprovalNotPending, "no held files wait for a decision"));
        };
        let HeldWait { message_id, status, mut commit, approval, paths, .. } = *wait;
        let denied: Vec<String> = all.iter().filter(|c| !approved.contains(c)).cloned().collect();
        self.pipeline.event(
            Some(client),
            EventKind::ApprovalResolved {
                approval_id: approval.approval_id.clone(),
                approved: approved.clone(),
                denied: denied.clone(),
            },
        );
        commit.put_back = paths.into_iter().filter(|(c, _)| denied.contains(c)).map(|(_, p)| p).collect();
        let Some(git) = self.row.git.as_ref() else {
            return Err(EngineError::internal("a held commit in a session that is not a git session"));
        };
        let (worktree, branch) = (std::path::PathBuf::from(&git.worktree), git.branch.clone());
        let job = self.new_job();
        // Answered: what is left differing is the user's word now.
        let hold = Hold::Nothing;
        self.out.push(Effect::CommitTurn(Box::new(CommitJob { job, worktree, branch, commit, message: None, hold })));
        self.state = OperationState::Committing { job, message_id, status };
        Ok(ApprovalResult { session_id: self.row.id.clone(), approval_id: approval.approval_id, approved, denied })
    }

    /// `session.cancel` while held files wait: they are put back and the
    /// turn is committed without them.
    pub(super) fn cancel_held(&mut self, client: ClientRef) -> bool {
        if !matches!(self.state, OperationState::AwaitingHeld(_)) {
            return false;
        }
        self.on_held_answer(ApprovalDecision::DenyAll, None, (None, None), client).is_ok()
    }
}
