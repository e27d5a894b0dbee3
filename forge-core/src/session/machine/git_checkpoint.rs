//! Git mode: control returns to the user with the repository committed.
//! A turn that stops on an approval commits its work so far first
//! (`awaiting_approval`), and the user's answer is a commit of its own
//! (`approved` or `denied`, the decision in the state file), before the
//! batch runs on: its next call waits for the commit. Each is journaled
//! as `git_checkpoint`; the turn's own commit comes at its end. A
//! checkpoint has its own trailer key (`<turn>~<reason>-<approval>`), so a
//! restart never takes it for the turn's commit.

use forge_proto::EventKind;
use serde_json::json;

use super::state::{Checkpoint, OperationState};
use super::{Effect, Session};

impl Session {
    /// The batch waits for a decision: its work so far is committed.
    pub(super) fn checkpoint_awaiting(&mut self) {
        let OperationState::ToolLoop(l) = &self.state else { return };
        let Some(a) = &l.approval else { return };
        let approval_id = a.approval_id.clone();
        self.queue_checkpoint(Checkpoint {
            reason: "awaiting_approval",
            approval_id,
            approved: vec![],
            denied: vec![],
        });
    }

    /// The user answered: the decision is a commit of its own.
    pub(super) fn checkpoint_answer(&mut self, approval_id: &str, approved: &[String], denied: &[String]) {
        let reason = if approved.is_empty() { "denied" } else { "approved" };
        let (approved, denied) = (approved.to_vec(), denied.to_vec());
        self.queue_checkpoint(Checkpoint { reason, approval_id: approval_id.to_string(), approved, denied });
    }

    fn queue_checkpoint(&mut self, c: Checkpoint) {
        if self.row.git.is_none() {
            return;
        }
        let OperationState::ToolLoop(l) = &mut self.state else { return };
        match l.checkpoint {
            // One at a time, in order.
            Some(_) => l.next_checkpoint = Some(Box::new(c)),
            None => self.start_checkpoint(c),
        }
    }

    fn start_checkpoint(&mut self, c: Checkpoint) {
        let Some(git) = self.row.git.as_ref() else { return };
        let (worktree, branch) = (std::path::PathBuf::from(&git.worktree), git.branch.clone());
        let OperationState::ToolLoop(l) = &self.state else { return };
        let turn = l.message_id.clone();
        let key = format!("{turn}~{}-{}", c.reason, c.approval_id);
        let mark = match c.reason {
            "awaiting_approval" => "[awaiting approval]",
            "approved" => "[approved]",
            _ => "[denied]",
        };
        let approval =
            json!({"approval_id": c.approval_id, "decision": c.reason, "approved": c.approved, "denied": c.denied});
        let commit = self.commit_of(&turn, &key, json!(c.reason), Some(mark), Some(("approval", approval)));
        // What runs later waits for the turn's own commit, where a user
        // is asked about it.
        let hold = self.run_later_hold(false);
        let job = self.new_job();
        self.out.push(Effect::CommitTurn(Box::new(super::git_commit::CommitJob {
            job,
            worktree,
            branch,
            commit,
            message: None,
            hold,
        })));
        if let OperationState::ToolLoop(l) = &mut self.state {
            l.checkpoint = Some((job, Box::new(c)));
        }
    }

    /// A commit came back: if it is the checkpoint in flight, it is
    /// journaled and the batch goes on (true).
    pub(super) fn on_checkpoint(&mut self, job: u64, result: &Result<forge_git::Committed, String>) -> bool {
        let OperationState::ToolLoop(l) = &mut self.state else { return false };
        let Some((_, c)) = l.checkpoint.take_if(|(j, _)| *j == job) else { return false };
        let next = l.next_checkpoint.take();
        let message_id = l.message_id.clone();
        let Checkpoint { reason, approval_id, .. } = *c;
        let branch = self.row.git.as_ref().map(|g| g.branch.clone()).unwrap_or_default();
        let event = match result {
            Ok(c) => EventKind::GitCheckpoint {
                message_id,
                commit: c.commit.clone(),
                branch,
                files: c.files.clone(),
                reason: reason.to_string(),
                approval_id,
            },
            Err(error) => EventKind::GitCommitFailed { message_id, error: error.clone() },
        };
        self.pipeline.event(None, event);
        let waiting = matches!(&self.state, OperationState::ToolLoop(l) if l.approval.is_some());
        match next {
            Some(c) => self.start_checkpoint(*c),
            // The batch goes on once answered (not while it waits).
            None if !waiting => self.next_tool(),
            None => {}
        }
        true
    }
}
