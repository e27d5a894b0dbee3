//! Reads of the event log and the stream journal: events after a
//! sequence number, the last of a kind, what a session left unfinished.

use sqlx::Row;

use super::{Store, StoreError, StreamRow};

impl Store {
    /// Stored event bodies (JSON) with `seq > after`, in order, at most `limit`.
    pub async fn events_after(&self, session: &str, after: u64, limit: u32) -> Result<Vec<(u64, String)>, StoreError> {
        let rows = sqlx::query("SELECT seq, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")
            .bind(session)
            .bind(i64::try_from(after).unwrap_or(i64::MAX))
            .bind(limit as i64)
            .fetch_all(&self.pool())
            .await?;
        rows.iter().map(|r| Ok((r.try_get::<i64, _>("seq")? as u64, r.try_get::<String, _>("body")?))).collect()
    }

    /// The seq of the session's newest event of `kind` (0 if none).
    pub async fn last_seq_of_kind(&self, session: &str, kind: &str) -> Result<u64, StoreError> {
        let v: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM events WHERE session_id = ? AND kind = ?")
            .bind(session)
            .bind(kind)
            .fetch_one(&self.pool())
            .await?;
        Ok(v.unwrap_or(0) as u64)
    }

    /// The id of the session's own newest approval request after seq
    /// `after` (not one a helper agent's, shown here) if nothing answered
    /// it since.
    pub async fn own_pending_approval(&self, session: &str, after: u64) -> Result<Option<String>, StoreError> {
        let asked: Option<(i64, Option<String>)> = sqlx::query_as(
            "SELECT seq, json_extract(body, '$.approval_id') FROM events
             WHERE session_id = ? AND kind = 'approval_requested' AND json_extract(body, '$.helper') IS NULL
               AND seq > ?
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(session)
        .bind(after as i64)
        .fetch_optional(&self.pool())
        .await?;
        let Some((seq, Some(approval_id))) = asked else { return Ok(None) };
        let answered: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM events WHERE session_id = ? AND kind = 'approval_resolved' AND seq > ?
               AND json_extract(body, '$.approval_id') = ?",
        )
        .bind(session)
        .bind(seq)
        .bind(&approval_id)
        .fetch_one(&self.pool())
        .await?;
        Ok((answered == 0).then_some(approval_id))
    }

    /// Whether the newest run of call `call_id` of the session has its
    /// result journaled (ids may repeat across turns: some servers number
    /// calls from 0 in each answer).
    pub async fn call_answered(&self, session: &str, call_id: &str) -> Result<bool, StoreError> {
        let (ran, answered): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT MAX(CASE WHEN kind = 'tool_running' THEN seq END), MAX(CASE WHEN kind = 'tool_result' THEN seq END)
               FROM events WHERE session_id = ? AND kind IN ('tool_running', 'tool_result')
               AND json_extract(body, '$.call_id') = ?",
        )
        .bind(session)
        .bind(call_id)
        .fetch_one(&self.pool())
        .await?;
        Ok(answered.unwrap_or(0) > ran.unwrap_or(0))
    }

    /// The session's newest event of a kind: its seq and JSON body.
    pub async fn last_event_of_kind(
        &self,
        session: &str,
        kind: &str,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, body FROM events WHERE session_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1")
                .bind(session)
                .bind(kind)
                .fetch_optional(&self.pool())
                .await?;
        Ok(row.and_then(|(seq, body)| Some((seq as u64, serde_json::from_str(&body).ok()?))))
    }

    /// The `message_id` of the session's newest `turn_started`, if that
    /// turn has no `turn_finished` yet.
    pub async fn unfinished_turn(&self, session: &str) -> Result<Option<String>, StoreError> {
        let Some((started, body)) = self.last_event_of_kind(session, "turn_started").await? else { return Ok(None) };
        let finished = self.last_seq_of_kind(session, "turn_finished").await?;
        if finished > started {
            return Ok(None);
        }
        Ok(body.get("message_id").and_then(|m| m.as_str()).map(str::to_string))
    }

    /// Stream journal entries of a session not yet committed, oldest first.
    pub async fn open_streams(&self, session: &str) -> Result<Vec<StreamRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT stream_id, session_id, message_id, provider, model, first_seq, state, outcome, error, error_kind, stop_reason, usage, reasoning
             FROM streams WHERE session_id = ? ORDER BY first_seq",
        )
        .bind(session)
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(StreamRow::from_row).collect()
    }

    /// (uncommitted streams, events) over all sessions.
    pub async fn journal_counts(&self) -> Result<(u64, u64), StoreError> {
        let streams: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM streams").fetch_one(&self.pool()).await?;
        let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events").fetch_one(&self.pool()).await?;
        Ok((streams as u64, events as u64))
    }
}
