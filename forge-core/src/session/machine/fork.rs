//! A fork, as one step of its origin's machine: the new session's rows
//! and first events (`session_created`, `session_forked`) go into the
//! origin's batch, so the fork exists once that batch is durable and not
//! before. With `restore_files` the fork is the end of a files-only
//! rewind of the origin: its first batch rides in the rewind's last one
//! (with the origin's `files_restored`), so either both happen or
//! neither. A rewind refused (a conflict, files that cannot be restored)
//! makes no fork; one the daemon stopped during names its fork in
//! `rewind_started` and is finished on restart with it.

use forge_proto::params::ForkParams;
use forge_proto::{ClientRef, ErrorKind, EventKind, RestoredFile, Role};

use super::rewind::RewindArgs;
use super::state::{Forking, OperationState};
use super::{Effect, OnDurable, ReadyReply, Session};
use crate::error::EngineError;
use crate::forest::Forest;
use crate::journal::StoreOp;
use crate::session::Reply;

fn invalid(message: impl Into<String>) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}

impl Session {
    /// `session.fork`, with the tree just read. Answers the new session's
    /// id once it is durable.
    pub(super) fn on_fork(&mut self, forest: &Forest, params: ForkParams, client: ClientRef, reply: Reply<String>) {
        let node = match self.fork_node(forest, params.node.as_deref()) {
            Ok(n) => n,
            Err(e) => return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
        };
        let fork = Forking { id: self.clock.new_id("s"), name: params.name, node, client, reply: Some(reply) };
        if !params.restore_files {
            return self.make_fork(fork, Vec::new(), false);
        }
        // The files first, as a rewind of the origin that leaves its
        // conversation; the fork is made with its end.
        if !matches!(self.state, OperationState::Idle) {
            let e = EngineError::new(
                ErrorKind::SessionBusy,
                format!(
                    "session {} is running a turn; wait for it to end (or cancel it), then fork with --restore-files",
                    self.row.id
                ),
            );
            return self.fail_fork(fork, e);
        }
        let args = RewindArgs {
            node: Some(fork.node.clone()),
            last_turn: false,
            files: true,
            conversation: false,
            dry_run: false,
            force: params.force,
            partial: params.partial,
            client: fork.client.clone(),
        };
        self.rewind_for_fork(forest, args, fork);
    }

    /// The node a fork branches off: the one named (resolved already), or
    /// the head; a message, not a summary.
    fn fork_node(&self, forest: &Forest, node: Option<&str>) -> Result<String, EngineError> {
        if self.row.git.is_some() {
            return Err(invalid(format!(
                "session {id} is a git session: resume one of its commits instead (`forgectl git log {id}` lists them, `forgectl session new --git --from COMMIT` resumes one on a branch of its own)",
                id = self.row.id
            )));
        }
        let node = match node {
            Some(n) => n.to_string(),
            None => self.row.head_id.clone().ok_or_else(|| {
                invalid("the conversation is empty: nothing to fork (`forgectl session new` starts a session)")
            })?,
        };
        if forest.get(&node)?.role == Role::Summary {
            return Err(invalid("a fork starts at a message, not at a summary"));
        }
        Ok(node)
    }

    /// The fork's rows and first events, in this session's batch (with
    /// the files a `restore_files` put back, as the fork's own
    /// `files_restored`); answered once durable.
    pub(super) fn make_fork(&mut self, fork: Forking, files: Vec<RestoredFile>, recovered: bool) {
        let Forking { id, name, node, client, reply } = fork;
        let created_ms = self.clock.now_ms();
        let (cwd, provider, model) = (self.row.cwd.clone(), self.row.provider.clone(), self.row.model.clone());
        let from = self.row.id.clone();
        let ops = vec![
            StoreOp::CreateSession {
                id: id.clone(),
                name: name.clone(),
                cwd: cwd.clone(),
                provider: provider.clone(),
                model: model.clone(),
                created_ms,
            },
            StoreOp::ForkSession { id: id.clone(), from: from.clone(), node: node.clone() },
            StoreOp::set_sampling(&id, &self.row.sampling),
            StoreOp::set_active_files(&id, &self.row.active_files),
        ];
        let sampling = self.row.sampling;
        let mut events = vec![
            (Some(client.clone()), EventKind::SessionCreated { name, cwd, provider, model, sampling }),
            (Some(client.clone()), EventKind::SessionForked { from, node: node.clone() }),
        ];
        if !files.is_empty() {
            events.push((Some(client), EventKind::FilesRestored { node: Some(node), files, recovered }));
        }
        // Numbered by the fork's own pipeline, from its first seq.
        let batch = super::pipeline::first_batch(&id, ops, events, created_ms);
        for op in batch.ops {
            self.pipeline.op(op);
        }
        if let Some(reply) = reply {
            self.pipeline.effect(OnDurable::Reply(super::Responder::with(reply, id)));
        }
    }

    /// No fork: its caller is told why.
    pub(super) fn fail_fork(&mut self, fork: Forking, e: EngineError) {
        if let Some(reply) = fork.reply {
            self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
        }
    }
}
