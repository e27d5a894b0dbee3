//! The session's answers to the method table's `machine` block: one arm
//! per [`SessionRequest`], each handing the params, as the wire gave them,
//! to its handler. A new command of the machine is its table line, its
//! arm here and its handler.

use forge_proto::ClientRef;
use forge_proto::methods::SessionRequest;

use super::commands::Access;
use super::{Effect, ReadyReply, Session};
use crate::session::Reply;

impl Session {
    pub(super) fn on_request(&mut self, request: SessionRequest, client: ClientRef, reply: Reply<serde_json::Value>) {
        let Some(reply) = self.admit(reply, Access::Write) else { return };
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
            SessionRequest::Send(params) => self.on_input(params, client, reply.typed()),
            SessionRequest::Summarize(_) => {
                let result = self.summarize_now();
                self.out.push(Effect::Reply(ReadyReply::now(reply.typed(), result)));
            }
        }
    }
}
