//! Steering a running turn (`session.steer`): the text waits, durable, as
//! a queued row marked `steer`; at the turn's next safe point (a tool
//! batch's results are in, the next request not yet made) it enters the
//! history as a user message, `steer_applied`, and the request carries it.
//! A turn that ends first leaves it to run as the next message, before the
//! queued ones; after a crash it is loaded that way too.

use forge_proto::params::{SendParams, SteerParams};
use forge_proto::{ClientRef, ErrorKind, EventKind, OperationStateKind, SendResult, SteerResult};

use super::OnDurable;
use super::{Effect, Responder, Session};
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::session::Reply;
use crate::store::QueuedRow;

impl Session {
    /// A turn is under way that a steer can still join.
    fn turn_running(&self) -> bool {
        matches!(
            self.state.kind(),
            OperationStateKind::Streaming
                | OperationStateKind::ExecutingTools
                | OperationStateKind::AwaitingApproval
                | OperationStateKind::Summarizing
                | OperationStateKind::SummarizationRetry
                | OperationStateKind::ToolRecovery
                | OperationStateKind::AwaitingToolResults
        )
    }

    pub(super) fn on_steer(&mut self, params: SteerParams, client: ClientRef, reply: Reply<serde_json::Value>) {
        let reply = reply.typed::<SteerResult>();
        if params.text.trim().is_empty() {
            let e = EngineError::new(ErrorKind::InvalidParams, "nothing to steer with: the text is empty");
            return self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e))));
        }
        // No turn to join: the text is a message, sent as any other.
        if !self.turn_running() {
            let send = Reply::<SendResult>::mapped(reply, |s| SteerResult {
                session_id: s.session_id,
                message_id: s.message_id,
                seq: s.seq,
                started: !s.queued,
            });
            let params = SendParams { session: params.session, text: Some(params.text), ..Default::default() };
            return self.on_input(params, client, send);
        }
        let message_id = self.clock.new_id("m");
        let created_ms = self.clock.now_ms();
        let text = params.text;
        let row = QueuedRow {
            session_id: self.row.id.clone(),
            message_id: message_id.clone(),
            text: text.clone(),
            context: None,
            client: Some(client.clone()),
            created_ms,
            grants: None,
            images: Vec::new(),
        };
        self.persist_queued(&row, true);
        self.steers.push_back(row);
        let index = self.pipeline.event(Some(client), EventKind::SteerQueued { message_id: message_id.clone(), text });
        let session_id = self.row.id.clone();
        let responder = Responder::from_seqs(reply, move |seqs| SteerResult {
            session_id,
            message_id,
            seq: seqs.get(index).copied().flatten().unwrap_or(0),
            started: false,
        });
        self.pipeline.effect(OnDurable::Reply(responder));
    }

    /// The turn's safe point: its waiting steers enter the history, in
    /// order, after the tool batch's results.
    pub(super) fn apply_steers(&mut self) {
        while let Some(s) = self.steers.pop_front() {
            let QueuedRow { message_id, text, client, .. } = s;
            self.pipeline.op(StoreOp::QueueRemove { session_id: self.row.id.clone(), message_id: message_id.clone() });
            self.add_user_node(&message_id, &text, None, client.clone(), Vec::new());
            self.pipeline.event(client, EventKind::SteerApplied { message_id, text });
        }
    }

    /// A queued row (a message, or a steer) kept in the store.
    pub(super) fn persist_queued(&mut self, row: &QueuedRow, steer: bool) {
        self.pipeline.op(StoreOp::QueuePush {
            session_id: row.session_id.clone(),
            message_id: row.message_id.clone(),
            text: row.text.clone(),
            context: row.context.clone(),
            client: row.client.clone(),
            created_ms: row.created_ms,
            steer,
            grants: row.grants.clone(),
            images: (!row.images.is_empty()).then(|| serde_json::to_string(&row.images).unwrap_or_default()),
        });
    }

    /// The turn ended before its steers could join: they run next, first.
    pub(super) fn steers_to_queue(&mut self) {
        while let Some(s) = self.steers.pop_back() {
            self.queue.push_front(s);
        }
    }
}
