//! A turn's first request waits for MCP servers still starting (the first
//! turns after forged starts), at most `[mcp] startup_timeout_seconds`,
//! so the model is offered their tools instead of failing on a name it
//! does not know yet. The wait is the `AwaitingTools` state: it is
//! journaled (`mcp_waiting`), can be cancelled, and is taken up again
//! after a restart.

use std::sync::Arc;

use forge_proto::{ClientRef, EventKind, MessageStatus};

use super::state::OperationState;
use super::{Effect, Session};
use crate::tools::ToolRegistry;

impl Session {
    /// The servers the refresh before this message found still starting.
    pub(crate) fn set_mcp_starting(&mut self, servers: Vec<String>) {
        self.mcp_starting = servers;
    }

    /// Before a turn's first request: with servers still starting, the
    /// turn waits for them (returns true) instead of asking the model.
    pub(super) fn wait_for_tools(&mut self, message_id: &str) -> bool {
        let servers = std::mem::take(&mut self.mcp_starting);
        let limit = self.config.mcp.turn_wait();
        if servers.is_empty() || limit.is_zero() {
            return false;
        }
        self.pipeline.event(None, EventKind::McpWaiting { servers, timeout_seconds: limit.as_secs() });
        self.begin_tools_wait(message_id.to_string());
        true
    }

    /// After a restart: the turn waited for servers, and waits again (they
    /// are starting again with forged).
    pub(super) fn restore_tools_wait(&mut self, message_id: String) {
        self.begin_tools_wait(message_id);
    }

    fn begin_tools_wait(&mut self, message_id: String) {
        let job = self.new_job();
        let since_ms = self.clock.now_ms();
        self.state = OperationState::AwaitingTools { message_id, job, since_ms };
        self.out.push(Effect::WaitForTools { job, limit: self.config.mcp.turn_wait() });
    }

    /// The wait is over: the turn goes on with the tools offered now
    /// (`None`: those it had).
    pub(super) fn on_tools_started(&mut self, job: u64, tools: Option<Arc<ToolRegistry>>, not_started: Vec<String>) {
        let OperationState::AwaitingTools { job: waiting, .. } = &self.state else { return };
        // Stopping, the wait stays journaled: a restart waits again.
        if *waiting != job || self.exit.is_some() {
            return;
        }
        let OperationState::AwaitingTools { message_id, since_ms, .. } =
            std::mem::replace(&mut self.state, OperationState::Finishing)
        else {
            return;
        };
        if let Some(tools) = tools {
            self.set_tools(tools);
        }
        let waited_ms = u64::try_from(self.clock.now_ms().saturating_sub(since_ms)).unwrap_or(0);
        let marker = self.pipeline.event(None, EventKind::McpWaited { waited_ms, not_started });
        self.proceed_turn(message_id, Some(marker), 0);
    }

    /// `session.cancel` while the turn waits for servers: it ends.
    pub(super) fn cancel_tools_wait(&mut self, client: ClientRef) -> bool {
        let OperationState::AwaitingTools { message_id, .. } = &self.state else { return false };
        let message_id = message_id.clone();
        self.pipeline.event(Some(client), EventKind::CancelRequested {});
        self.finish_tool_turn(message_id, MessageStatus::Cancelled, None);
        true
    }
}
