//! The session's answers to the method table's `machine` block: one arm
//! per [`SessionRequest`], each handing the params, as the wire gave them,
//! to its handler. A new command of the machine is its table line, its
//! arm here and its handler.

use forge_proto::ClientRef;
use forge_proto::methods::SessionRequest;

use super::commands::Access;
use super::{Answer, Effect, ReadyReply, Session};
use crate::session::{Reply, SessionCmd};

impl Session {
    pub(super) fn on_request(&mut self, request: SessionRequest, client: ClientRef, reply: Reply<serde_json::Value>) {
        let access = match &request {
            SessionRequest::Context(_) => Access::Read,
            SessionRequest::Rewind(p) if p.dry_run => Access::Read,
            _ => Access::Write,
        };
        let Some(reply) = self.admit(reply, access) else { return };
        match request {
            SessionRequest::Answer(params) => {
                // A helper's approval shown here is answered by the helper.
                let Some((params, client, reply)) = self.forward_answer(params, client, reply) else { return };
                let result = self.on_approval(params, client);
                self.reply_when_durable(reply.typed(), result);
            }
            SessionRequest::ApprovalRules(params) => {
                let result = self.on_approval_rules(params.mode, params.allow, params.clear, Some(client));
                self.reply_when_durable(reply.typed(), result);
            }
            SessionRequest::ToolResult(params) => {
                let result = self.on_tool_result(params, client);
                self.reply_when_durable(reply.typed(), result);
            }
            SessionRequest::Recover(params) => {
                let result = self.on_recover(params.action, Some(client));
                self.reply_when_durable(reply.typed(), result);
            }
            SessionRequest::Steer(params) => self.on_steer(params, client, reply),
            SessionRequest::Summarize(_) => {
                let result = self.summarize_now();
                self.out.push(Effect::Reply(ReadyReply::now(reply.typed(), result)));
            }
            SessionRequest::Send(params) => self.on_input(params, client, reply.typed()),
            SessionRequest::Cancel(params) => {
                self.note_cancel_before_task();
                self.on_cancel(client, params.drop_queued, reply.typed());
            }
            SessionRequest::Rename(params) => {
                let name = params.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
                match name.as_deref().map(super::commands::check_session_name).transpose() {
                    // Whether another session has it is the store's to say.
                    Ok(_) => self.out.push(Effect::ClaimName { name, client, reply: reply.typed() }),
                    Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
                }
            }
            SessionRequest::Configure(params) => self.on_configure(params, client, reply.typed()),
            SessionRequest::Clear(_) => self.on_clear(client, reply.typed()),
            SessionRequest::ContextFiles(params) => self.on_context_files(params, client, reply.typed()),
            SessionRequest::GitRebase(_) => {
                self.on_git_branch(super::git_commit::MoveTo::Rebase, client, reply.typed())
            }
            SessionRequest::GitReword(p) if p.message.trim().is_empty() => {
                let e = crate::error::EngineError::new(forge_proto::ErrorKind::InvalidParams, "the message is empty");
                self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
            }
            SessionRequest::GitReword(p) => {
                self.on_git_branch(|_| super::git_commit::MoveTo::Reword(p.message), client, reply.typed())
            }
            SessionRequest::Context(params) => {
                let info = self.context_info(params.system);
                let (span, repo, reply) = (params.span, params.repo, reply.typed());
                self.out.push(Effect::Answer(Box::new(Answer::Context { info, span, repo, reply })));
            }
            // The tree commands: each with the tree as the store has it
            // now (`tree.rs`).
            request @ (SessionRequest::Checkout(_)
            | SessionRequest::Rewind(_)
            | SessionRequest::Edit(_)
            | SessionRequest::Bookmark(_)
            | SessionRequest::DeleteNode(_)
            | SessionRequest::Split(_)) => {
                self.out.push(Effect::ReadTree { then: SessionCmd::Request { request, client, reply } })
            }
        }
    }
}
