//! What the engine answers from the store and the live sessions without
//! changing anything: a session's info, the list, history, events,
//! commands, the plan, usage, recall and the pending approvals.

use forge_proto::{ErrorKind, HistoryResult, SessionInfo};

use super::Engine;
use crate::error::EngineError;
use crate::session::SessionHandle;
use crate::store::SessionRow;

impl Engine {
    /// A session's info from its row, with the live state if it runs.
    pub(super) fn info_from(&self, row: SessionRow, live: Option<&SessionHandle>, message_count: u64) -> SessionInfo {
        let snapshot = live.map(|h| (h.snapshot.borrow().clone(), h.attached_count()));
        crate::session::answers::info(row, snapshot.as_ref().map(|(s, n)| (s, *n)), message_count)
    }

    pub(super) async fn session_info(&self, id: &str) -> Result<SessionInfo, EngineError> {
        let live = self.inner.sessions.lock().await.get(id).filter(|h| h.is_alive()).cloned();
        let snapshot = live.map(|h| (h.snapshot.borrow().clone(), h.attached_count()));
        crate::session::answers::full_info(self.shared(), id, snapshot.as_ref().map(|(s, n)| (s, *n))).await
    }
    /// The facts kept from a session's summarized spans that match
    /// `query`, best first (what the model's `recall` tool finds).
    pub async fn recall(
        &self,
        selector: &str,
        query: &str,
        limit: Option<u32>,
    ) -> Result<forge_proto::RecallResult, EngineError> {
        let session_id = self.resolve(selector).await?;
        if query.trim().is_empty() {
            return Err(EngineError::new(ErrorKind::InvalidParams, "give words to search for"));
        }
        let limit = limit.unwrap_or(10);
        let hits = crate::librarian::recall(&self.shared().store, &session_id, query, limit).await?;
        Ok(forge_proto::RecallResult { session_id, query: query.to_string(), hits })
    }
    /// Tokens and estimated cost per session, directory and model (of one
    /// session, from a time on, if given).
    pub async fn usage(
        &self,
        selector: Option<&str>,
        since_ms: Option<i64>,
    ) -> Result<forge_proto::UsageReport, EngineError> {
        let id = match selector {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        crate::session::load::spent(self.shared(), id.as_deref(), since_ms).await
    }
    pub async fn list_sessions(&self) -> Result<Vec<SessionInfo>, EngineError> {
        let rows = self.shared().store.sessions().await?;
        let counts = self.shared().store.node_counts().await?;
        let sessions = self.inner.sessions.lock().await;
        Ok(rows
            .into_iter()
            .map(|row| {
                let live = sessions.get(&row.id).filter(|h| h.is_alive());
                let count = counts.get(&row.id).copied().unwrap_or(0);
                self.info_from(row, live, count)
            })
            .collect())
    }
    /// The commands session `selector` has: its own, then its MCP
    /// servers' prompts.
    pub async fn commands(&self, selector: &str) -> Result<Vec<forge_proto::CommandInfo>, EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let cwd = std::path::Path::new(&row.cwd);
        let trusted = self.shared().trust.trusts(cwd);
        let mut commands: Vec<_> = crate::slash_commands::load(cwd, trusted).into_iter().map(|c| c.info).collect();
        // An MCP prompt of a name a file already has is not offered.
        let prompts = self.mcp_commands(&id).into_iter().filter(|p| !commands.iter().any(|c| c.name == p.name));
        commands.extend(prompts.collect::<Vec<_>>());
        Ok(commands)
    }

    /// The session's plan as the model last updated it.
    pub async fn plan(&self, selector: &str) -> Result<forge_proto::PlanInfo, EngineError> {
        let id = self.resolve(selector).await?;
        let last = self.shared().store.last_event_of_kind(&id, "plan_updated").await?;
        let mut info = forge_proto::PlanInfo { session_id: id, steps: Vec::new(), note: None, seq: None };
        if let Some((seq, body)) = last
            && let Ok(ev) = serde_json::from_value::<forge_proto::SessionEvent>(body)
            && let forge_proto::EventKind::PlanUpdated { steps, note } = ev.kind
        {
            (info.steps, info.note, info.seq) = (steps, note, Some(seq));
        }
        Ok(info)
    }
    pub async fn show(&self, selector: &str) -> Result<SessionInfo, EngineError> {
        let id = self.resolve(selector).await?;
        self.session_info(&id).await
    }
    /// Every pending approval of the live sessions (sessions with one are
    /// started with the daemon, so none is missed).
    pub async fn approvals(&self) -> Vec<forge_proto::PendingApproval> {
        let mut all: Vec<forge_proto::PendingApproval> = self
            .inner
            .sessions
            .lock()
            .await
            .values()
            .filter(|h| h.is_alive())
            .filter_map(|h| h.snapshot.borrow().approval.clone())
            .collect();
        // A helper's approval is its parent's too: listed once, as the
        // helper's (whose session it names).
        all.sort_by(|a, b| a.approval_id.cmp(&b.approval_id));
        all.dedup_by(|a, b| a.approval_id == b.approval_id);
        all
    }
    pub async fn history(&self, selector: &str) -> Result<HistoryResult, EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let messages = match &row.head_id {
            Some(h) => self.shared().store.path_to(h).await?.iter().map(|n| n.to_history()).collect(),
            None => Vec::new(),
        };
        Ok(HistoryResult { session_id: id, head: row.head_id, messages })
    }
    /// Stored events after `after_seq`, as JSON bodies.
    pub async fn events(
        &self,
        selector: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<(String, Vec<String>), EngineError> {
        let id = self.resolve(selector).await?;
        self.shared().writer.sync().await;
        let rows = self.shared().store.events_after(&id, after_seq, limit.clamp(1, 10_000)).await?;
        Ok((id, rows.into_iter().map(|(_, b)| b).collect()))
    }
}
