//! Git mode: a finished turn (complete, failed or cancelled) becomes one
//! commit on the session's branch before the session goes on
//! (`Committing`). The machine decides what the commit holds (the turn's
//! messages, the subject); the shell writes it (`Effect::CommitTurn`),
//! and `git_committed` (or `git_commit_failed`) is journaled before the
//! session moves on. A restart between the turn's end and that event
//! commits again: a commit already on the branch for the turn (its
//! `Forge-Turn` trailer) is found, not made twice.

use std::path::PathBuf;

use forge_proto::{EventKind, MessageStatus};

use super::state::{BranchMove, MoveReply, OperationState};
use super::{Effect, OnDurable, Session};
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::provider::{ChatMessage, ChatRequest, ChatRole, ProviderSettings};
use crate::session::Reply;

/// A turn's commit, for the shell to write.
pub(crate) struct CommitJob {
    pub job: u64,
    pub worktree: PathBuf,
    pub branch: String,
    /// What it holds; its subject and body the fallback when the message
    /// request fails.
    pub commit: forge_git::TurnCommit,
    /// The request that writes the commit message (`[git] message_model`,
    /// else the session's model), for a turn that completed.
    pub message: Option<Box<(ProviderSettings, ChatRequest)>>,
    /// Files the commit waits on a user for (see `git_held.rs`).
    pub hold: Hold,
}

/// Which changed files make a commit wait for a user (see `git_held.rs`).
pub(crate) enum Hold {
    Nothing,
    /// Every file that runs later and differs from the branch's tip, less
    /// those a file tool wrote that still hold what it wrote (`exempt`:
    /// path and hash): asked about (`ask`, the turn's commit) or left out
    /// (a checkpoint).
    RunLater {
        exempt: Vec<(std::path::PathBuf, Option<String>)>,
        ask: bool,
    },
}

/// What the message request is told.
const MESSAGE_INSTRUCTIONS: &str = "You write git commit messages. Given one turn of a coding session (the \
user's request, the tools the assistant called, its final answer), write the commit message for the changes \
that turn made: a subject line in the imperative mood of at most 60 characters, then, if it helps, a blank \
line and a body of at most five short lines saying what changed and why. Write only the message: no quotes, \
no code fences, no preamble.";

/// Most characters of each part of the turn the message request sees.
const MESSAGE_EXCERPT: usize = 2_000;

/// The branch move for the shell: find `node`'s commit, move the branch.
pub(crate) struct MoveJob {
    pub job: u64,
    pub worktree: PathBuf,
    pub branch: String,
    pub session: String,
    /// Where to: the commit of this node, or, for a rebase, the user's
    /// current branch of this repository.
    pub to: MoveTo,
}

pub(crate) enum MoveTo {
    /// The commit of a node; `strict` (a rewind): refused when no commit
    /// holds its files, instead of moving the conversation alone.
    Node(String, bool),
    Rebase(PathBuf),
    /// The last commit's message edited.
    Reword(String),
}

/// What the commit message request used.
pub(crate) struct MessageUsage {
    pub provider: String,
    pub model: String,
    pub usage: forge_proto::Usage,
}

impl Session {
    /// A finished turn of a git session is committed before the session
    /// goes on (true). Stopping, it is left to the restart.
    pub(super) fn commit_turn(&mut self, status: Option<MessageStatus>) -> bool {
        let Some(turn) = self.finished_turn.take() else { return false };
        let Some(git) = self.row.git.as_ref() else { return false };
        if self.exit.is_some() {
            return false;
        }
        let status = status.unwrap_or(MessageStatus::Complete);
        let (worktree, branch) = (PathBuf::from(&git.worktree), git.branch.clone());
        let job = self.new_job();
        let commit = self.turn_commit(&turn, status);
        let message = (status == MessageStatus::Complete).then(|| self.message_request(&turn)).flatten();
        let hold = self.run_later_hold(true);
        self.out.push(Effect::CommitTurn(Box::new(CommitJob { job, worktree, branch, commit, message, hold })));
        self.state = OperationState::Committing { job, message_id: turn, status };
        true
    }

    /// After a restart: the turn ended but its commit is not journaled.
    pub(super) fn restore_commit(&mut self, message_id: String, status: MessageStatus) {
        self.finished_turn = Some(message_id);
        self.state = OperationState::Finishing;
        if !self.commit_turn(Some(status)) {
            self.state = OperationState::Idle;
        }
    }

    /// The commit is written (or failed): journal it, then go on as a
    /// finished turn does (its `Stop` hooks, the next message).
    pub(super) fn on_committed(
        &mut self,
        job: u64,
        result: Result<forge_git::Committed, String>,
        usage: Option<MessageUsage>,
    ) {
        if self.on_checkpoint(job, &result) {
            return;
        }
        let Some((message_id, status)) = self.committed_turn(job, usage) else { return };
        let branch = self.row.git.as_ref().map(|g| g.branch.clone()).unwrap_or_default();
        let event = match result {
            Ok(c) => EventKind::GitCommitted { message_id, commit: c.commit, branch, files: c.files, status },
            Err(error) => EventKind::GitCommitFailed { message_id, error },
        };
        self.pipeline.event(None, event);
        self.finished = Some(status);
        self.pipeline.effect(OnDurable::TurnDone);
    }

    /// The turn's commit `job` came back (committed or held): the turn it
    /// is for, the session `Finishing`, what writing its message cost
    /// counted; `None` when it is not the commit awaited.
    pub(super) fn committed_turn(&mut self, job: u64, usage: Option<MessageUsage>) -> Option<(String, MessageStatus)> {
        let OperationState::Committing { job: waiting, .. } = &self.state else { return None };
        if *waiting != job {
            return None;
        }
        let OperationState::Committing { message_id, status, .. } =
            std::mem::replace(&mut self.state, OperationState::Finishing)
        else {
            return None;
        };
        self.count_message(&message_id, usage);
        Some((message_id, status))
    }

    /// What writing a commit message cost counts like any response.
    pub(super) fn count_message(&mut self, message_id: &str, usage: Option<MessageUsage>) {
        if let Some(MessageUsage { provider, model, usage }) = usage {
            let price = crate::provider::ProviderKind::parse(&provider)
                .and_then(|p| crate::catalog::lookup(&self.config, p, &model).price);
            self.spent.add(&usage, price.as_ref());
            self.report_spend();
            let cost_usd = price.map(|p| p.cost(&usage));
            let session = self.spent.clone();
            let message_id = message_id.to_string();
            // Kept for usage reports too (they read answers' nodes and this).
            self.pipeline.op(StoreOp::AddUsage {
                session_id: self.row.id.clone(),
                cwd: self.row.cwd.clone(),
                kind: "commit_message".into(),
                provider: provider.clone(),
                model: model.clone(),
                usage: usage.clone(),
                created_ms: self.clock.now_ms(),
            });
            self.pipeline.event(None, EventKind::Usage { message_id, provider, model, cost_usd, usage, session });
        }
    }

    /// `session.checkout` of a git session: the branch moves to the node's
    /// commit first (its files with it, the tip left kept), then the head.
    pub(super) fn git_checkout(
        &mut self,
        forest: &crate::forest::Forest,
        node: String,
        client: forge_proto::ClientRef,
        reply: crate::session::Reply<forge_proto::SessionInfo>,
    ) {
        let path = self.conversation_node(forest, &node).and_then(|_| Self::path_to(forest, Some(&node)));
        let path = match path {
            Ok(p) => p,
            Err(e) => return self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e)))),
        };
        self.move_branch(node.clone(), Some(node), path, client, MoveReply::Checkout(reply));
    }

    /// Undo or rewind of a git session (files and conversation): as a
    /// checkout, the branch moves to the commit before the undone turn
    /// (or the target node's), the tip left kept, then the head.
    pub(super) fn git_rewind(
        &mut self,
        forest: &crate::forest::Forest,
        args: super::rewind::RewindArgs,
        reply: crate::session::Reply<forge_proto::RewindResult>,
    ) {
        let planned = super::rewind::target(forest, self.row.head_id.as_deref(), &args).and_then(|(target, turn)| {
            let path = match &target {
                Some(n) => Self::path_to(forest, Some(n))?,
                None => Vec::new(),
            };
            Ok((target, turn, path))
        });
        let (target, turn, path) = match planned {
            Ok(p) => p,
            Err(e) => return self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e)))),
        };
        // The commit before the undone turn: the one its first message
        // starts from, or the one ending at the target.
        let git_node = turn.or_else(|| target.clone()).unwrap_or_default();
        let result = forge_proto::RewindResult {
            session_id: self.row.id.clone(),
            node: target.clone(),
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run: false,
            diff: None,
            conversation: true,
            files_omitted: 0,
        };
        self.move_branch(git_node, target, path, args.client, MoveReply::Rewind(reply, Box::new(result)));
    }

    fn move_branch(
        &mut self,
        git_node: String,
        node: Option<String>,
        path: Vec<crate::provider::ChatMessage>,
        client: forge_proto::ClientRef,
        reply: MoveReply,
    ) {
        let Some(git) = self.row.git.as_ref() else { return };
        let (worktree, branch) = (PathBuf::from(&git.worktree), git.branch.clone());
        let job = self.new_job();
        let session = self.row.id.clone();
        let to = MoveTo::Node(git_node, matches!(reply, MoveReply::Rewind(..)));
        self.out.push(Effect::MoveBranch(Box::new(MoveJob { job, worktree, branch, session, to })));
        self.state = OperationState::MovingBranch(Box::new(BranchMove { job, node, path, client, reply }));
    }

    /// `git.rebase` (onto the user's current branch) and `git.reword` (the
    /// last commit's message): the session's branch moves, while it runs
    /// no turn; the conversation stays.
    pub(super) fn on_git_branch(
        &mut self,
        to: impl FnOnce(PathBuf) -> MoveTo,
        client: forge_proto::ClientRef,
        reply: Reply<forge_proto::GitRebased>,
    ) {
        let refusal = match (&self.state, &self.row.git) {
            (OperationState::Idle, Some(_)) => None,
            (_, None) => Some(EngineError::new(
                forge_proto::ErrorKind::InvalidParams,
                format!("session {} is not a git session (`forgectl session new --git` makes one)", self.row.id),
            )),
            _ => Some(self.busy("try again once it has ended")),
        };
        if let Some(e) = refusal {
            return self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e))));
        }
        let Some(git) = self.row.git.as_ref() else { return };
        let (worktree, branch, repo) = (PathBuf::from(&git.worktree), git.branch.clone(), PathBuf::from(&git.repo));
        let job = self.new_job();
        let session = self.row.id.clone();
        self.out.push(Effect::MoveBranch(Box::new(MoveJob { job, worktree, branch, session, to: to(repo) })));
        let node = self.row.head_id.clone();
        let reply = MoveReply::Rebase(reply);
        self.state = OperationState::MovingBranch(Box::new(BranchMove { job, node, path: Vec::new(), client, reply }));
    }

    /// The branch moved (or could not): the head follows, or the checkout
    /// is refused and nothing moved.
    pub(super) fn on_branch_moved(&mut self, job: u64, result: Result<Option<forge_git::Moved>, EngineError>) {
        let OperationState::MovingBranch(m) = &self.state else { return };
        if m.job != job {
            return;
        }
        let OperationState::MovingBranch(m) = std::mem::replace(&mut self.state, OperationState::Idle) else {
            return;
        };
        let BranchMove { node, path, client, reply, .. } = *m;
        match result {
            Err(e) => match reply {
                MoveReply::Checkout(reply) => self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e)))),
                MoveReply::Rewind(reply, _) => self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e)))),
                MoveReply::Rebase(reply) => self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e)))),
            },
            Ok(moved) => {
                let branch = self.row.git.as_ref().map(|g| g.branch.clone()).unwrap_or_default();
                let mut rebased = forge_proto::GitRebased {
                    session_id: self.row.id.clone(),
                    branch: branch.clone(),
                    commit: None,
                    previous: None,
                    kept: None,
                };
                if let Some(forge_git::Moved { from, to, kept }) = moved {
                    (rebased.commit, rebased.previous, rebased.kept) =
                        (Some(to.clone()), Some(from.clone()), Some(kept.clone()));
                    let event = EventKind::GitBranchMoved { branch, commit: to, previous: from, kept };
                    self.pipeline.event(Some(client.clone()), event);
                }
                match (&reply, node) {
                    // A rebase leaves the conversation where it is.
                    (MoveReply::Rebase(_), _) => {}
                    (_, Some(node)) => self.move_head(Some(node), path, &client),
                    (_, None) => self.clear_history(client.clone()),
                }
                match reply {
                    MoveReply::Checkout(reply) => self.pipeline.effect(super::OnDurable::Info(reply, None)),
                    MoveReply::Rewind(reply, result) => self.reply_when_durable(reply, Ok(*result)),
                    MoveReply::Rebase(reply) => self.reply_when_durable(reply, Ok(rebased)),
                }
            }
        }
        self.start_next_queued();
    }

    /// The request asking a model for the commit message of the turn
    /// started by `turn`: `[git] message_model` at its own provider, else
    /// the session's model. `None` when no provider is ready.
    fn message_request(&self, turn: &str) -> Option<Box<(ProviderSettings, ChatRequest)>> {
        let own = self.config.git.message_model.clone().filter(|m| !m.trim().is_empty());
        let kind = own.as_deref().and_then(|m| crate::catalog::provider_of(&self.config, m));
        let mut settings = match kind {
            Some(kind) => ProviderSettings::resolve(kind, &self.config),
            None => self.provider_settings().ok()?,
        };
        // Asked once: caching its prompt would only cost.
        settings.options.anthropic_cache = false;
        settings.options.gemini_cache_ttl = None;
        let at = self.path.iter().rposition(|m| m.node.as_deref() == Some(turn))?;
        let cut = |t: &str| -> String {
            let mut s: String = t.chars().take(MESSAGE_EXCERPT).collect();
            if t.chars().count() > MESSAGE_EXCERPT {
                s.push_str(" [...]");
            }
            s
        };
        let mut digest = String::new();
        for m in &self.path[at..] {
            match m.role {
                ChatRole::User => digest.push_str(&format!("User request:\n{}\n\n", cut(&m.text))),
                ChatRole::Tool => {}
                ChatRole::Assistant => {
                    for c in &m.tool_calls {
                        let args: String = c.arguments.chars().take(200).collect();
                        digest.push_str(&format!("Tool call: {}({args})\n", c.name));
                    }
                }
            }
        }
        if let Some(last) = self.path[at..].iter().rev().find(|m| m.role == ChatRole::Assistant && !m.text.is_empty()) {
            digest.push_str(&format!("\nFinal answer:\n{}\n", cut(&last.text)));
        }
        let request = ChatRequest {
            model: own.unwrap_or_else(|| self.answering(self.row.model.clone())),
            system: Some(MESSAGE_INSTRUCTIONS.to_string()),
            messages: vec![ChatMessage::user(digest)],
            max_output_tokens: 300,
            tools: Vec::new(),
            output_schema: None,
            web_search: None,
            sampling: Default::default(),
            active_files: None,
        };
        Some(Box::new((settings, request)))
    }
}
