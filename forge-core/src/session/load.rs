//! What the shell reads from the store for a session: its durable state
//! and what it left unfinished ([`Durable`]), and its history. The session
//! machine decides what to make of it.

use std::collections::HashSet;

use forge_proto::{EventKind, SessionEvent, ToolCallRecord};

use super::machine::rewind::RewindIntent;
use super::machine::{Durable, RecoveredStream, Unfinished, chat_message};
use crate::error::EngineError;
use crate::provider::ChatMessage;
use crate::shared::Shared;
use crate::store::{SessionRow, Store, StreamRow};

/// The session's durable state (`row` if the store has no newer one);
/// what it left unfinished only if `recovering`.
pub(super) async fn durable(shared: &Shared, row: SessionRow, recovering: bool) -> Result<Durable, EngineError> {
    let store = &shared.store;
    let row = store.session(&row.id).await?.unwrap_or(row);
    let queue = store.queued(&row.id).await?;
    let path = history(store, row.head_id.as_deref()).await?;
    let unfinished = if recovering { unfinished(shared, &row).await? } else { Unfinished::Nothing };
    let spent = session_total(shared, &row.id).await?;
    let summaries = store
        .summaries(&row.id)
        .await?
        .into_iter()
        .filter_map(|n| {
            let span = n.meta.summary_of?;
            Some(crate::context::Summary { id: n.id, first: span.first, last: span.last, text: n.text })
        })
        .collect();
    // A switch to a larger window put summarized messages back after the
    // newest summary: requests go on sending what it chose.
    let done = store.last_seq_of_kind(&row.id, "summarization_done").await?;
    let in_force = match store.last_event_of_kind(&row.id, "context_restored").await? {
        Some((seq, body)) if seq > done => Some(body.get("summary_id").and_then(|s| s.as_str()).map(str::to_string)),
        _ => None,
    };
    let interrupted_changes = store.interrupted_changes(&row.id).await?;
    let rewind = if recovering { unfinished_rewind(store, &row.id).await? } else { None };
    let guarded = match recovering {
        true => super::crash_guard::after_crash(shared, &row.id).await?,
        false => None,
    };
    let git_hooks = row.git.as_ref().and_then(|g| forge_git::hooks_path(std::path::Path::new(&g.worktree)));
    Ok(Durable {
        row,
        queue,
        path,
        unfinished,
        spent,
        summaries,
        in_force,
        interrupted_changes,
        rewind,
        guarded,
        git_hooks,
    })
}

/// A rewind whose intent (`rewind_started`) is durable and whose end
/// (`files_restored`) is not.
async fn unfinished_rewind(store: &Store, id: &str) -> Result<Option<RewindIntent>, EngineError> {
    let Some((started, body)) = store.last_event_of_kind(id, "rewind_started").await? else { return Ok(None) };
    if store.last_seq_of_kind(id, "files_restored").await? > started {
        return Ok(None);
    }
    let event: SessionEvent = serde_json::from_value(body)
        .map_err(|e| EngineError::internal(format!("the journal's rewind_started cannot be read: {e}")))?;
    let EventKind::RewindStarted { node, conversation, files, steps, fork, fork_name } = event.kind else {
        return Ok(None);
    };
    let fork = fork.map(|id| (id, fork_name));
    let path = match (conversation, &node) {
        (false, _) => None,
        (true, None) => Some(Vec::new()),
        (true, Some(n)) => Some(history(store, Some(n)).await?),
    };
    Ok(Some(RewindIntent { node, fork, files, steps, path }))
}

/// Tokens and estimated cost of provider responses (of one session, or
/// all; from a time on), in total and per session, directory and model.
/// A provider response's list price, if the catalog knows one.
fn price_of(shared: &Shared, r: &crate::store::UsageRow) -> Option<forge_proto::Price> {
    crate::provider::ProviderKind::parse(&r.provider)
        .and_then(|p| crate::catalog::lookup(&shared.config, p, &r.model).price)
}

/// One session's tokens and estimated cost (what spawning a session and
/// `session.show` need: no report built).
pub(crate) async fn session_total(shared: &Shared, session: &str) -> Result<forge_proto::UsageTotal, EngineError> {
    let mut total = forge_proto::UsageTotal::default();
    for r in shared.store.usage_rows(Some(session), None).await? {
        total.add(&r.usage, price_of(shared, &r).as_ref());
    }
    Ok(total)
}

pub(crate) async fn spent(
    shared: &Shared,
    session: Option<&str>,
    since_ms: Option<i64>,
) -> Result<forge_proto::UsageReport, EngineError> {
    use forge_proto::{UsageLine, UsageTotal};
    use std::collections::HashMap;
    let rows = shared.store.usage_rows(session, since_ms).await?;
    let mut total = UsageTotal::default();
    let mut by: [HashMap<String, UsageTotal>; 3] = Default::default();
    for r in &rows {
        let price = price_of(shared, r);
        total.add(&r.usage, price.as_ref());
        let keys = [r.session_id.clone(), r.cwd.clone(), format!("{}/{}", r.provider, r.model)];
        for (map, key) in by.iter_mut().zip(keys) {
            map.entry(key).or_default().add(&r.usage, price.as_ref());
        }
    }
    // Most expensive first, then most tokens.
    let lines = |map: HashMap<String, UsageTotal>| {
        let mut v: Vec<UsageLine> = map.into_iter().map(|(key, total)| UsageLine { key, total }).collect();
        v.sort_by(|a, b| {
            b.total
                .cost_usd
                .total_cmp(&a.total.cost_usd)
                .then(b.total.responses.cmp(&a.total.responses))
                .then(a.key.cmp(&b.key))
        });
        v
    };
    let [sessions, cwds, models] = by;
    Ok(forge_proto::UsageReport {
        since_ms,
        total,
        sessions: lines(sessions),
        cwds: lines(cwds),
        models: lines(models),
    })
}

/// The conversation on the path to `head`. (Nodes never go through the
/// delta log, so SQLite has every one.)
pub(super) async fn history(store: &Store, head: Option<&str>) -> Result<Vec<ChatMessage>, EngineError> {
    let nodes = match head {
        Some(head) => store.path_to(head).await?,
        None => Vec::new(),
    };
    Ok(nodes.iter().filter_map(chat_message).collect())
}

/// What the session's journal says was not finished, most specific first.
async fn unfinished(shared: &Shared, row: &SessionRow) -> Result<Unfinished, EngineError> {
    let (store, id) = (&shared.store, row.id.as_str());
    let streams = store.open_streams(id).await?;
    if !streams.is_empty() {
        // Deltas acked through the delta log must be in SQLite to be read.
        shared.writer.sync().await;
        let mut recovered = Vec::with_capacity(streams.len());
        for row in streams {
            let (text, tool_calls) = streamed(store, id, &row).await?;
            recovered.push(RecoveredStream { row, text, tool_calls });
        }
        return Ok(Unfinished::Streams(recovered));
    }
    // A summary was being written (and neither landed nor failed): for
    // the unfinished turn, or asked for while the session was idle.
    // Write it again.
    let unfinished_turn = store.unfinished_turn(id).await?;
    let turn = store.last_seq_of_kind(id, "turn_started").await?;
    let summarizing = store.last_seq_of_kind(id, "summarization_started").await?;
    let settled = store
        .last_seq_of_kind(id, "summarization_done")
        .await?
        .max(store.last_seq_of_kind(id, "summarization_failed").await?);
    if summarizing > settled && (unfinished_turn.is_none() || summarizing > turn) {
        shared.writer.sync().await;
        return Ok(Unfinished::Summarizing { message_id: unfinished_turn });
    }
    let Some(message_id) = unfinished_turn else {
        if row.git.is_some() {
            return uncommitted_turn(shared, id).await;
        }
        return Ok(Unfinished::Nothing);
    };
    // The turn's first request waited for MCP servers (the wait and its
    // end are each in one batch with what comes before and after them).
    let waiting = store.last_seq_of_kind(id, "mcp_waiting").await?;
    if waiting > turn && waiting > store.last_seq_of_kind(id, "mcp_waited").await? {
        return Ok(Unfinished::AwaitingTools { message_id });
    }
    if awaiting_tool_results(store, id).await? {
        return Ok(Unfinished::AwaitingToolResults { message_id });
    }
    shared.writer.sync().await;
    if let Some(approval_id) = pending_approval_id(store, id, turn).await? {
        return Ok(Unfinished::PendingApproval { message_id, approval_id });
    }
    let started = started_tool_calls(store, id).await?;
    let announced = recovery_announced(store, id).await?;
    Ok(Unfinished::ToolCalls { message_id, started, announced })
}

/// Git mode: the last turn ended after the last commit was journaled
/// (the turn's end and its commit's event are in separate batches).
async fn uncommitted_turn(shared: &Shared, id: &str) -> Result<Unfinished, EngineError> {
    let store = &shared.store;
    shared.writer.sync().await;
    let ended = store.last_seq_of_kind(id, "turn_finished").await?;
    let committed =
        store.last_seq_of_kind(id, "git_committed").await?.max(store.last_seq_of_kind(id, "git_commit_failed").await?);
    if ended == 0 || committed > ended {
        return Ok(Unfinished::Nothing);
    }
    let page = store.events_after(id, ended - 1, 1).await?;
    let found = page.first().and_then(|(_, body)| match serde_json::from_str::<SessionEvent>(body).ok()?.kind {
        EventKind::TurnFinished { message_id, status, .. } => Some(Unfinished::Commit { message_id, status }),
        _ => None,
    });
    Ok(found.unwrap_or(Unfinished::Nothing))
}

/// Parse-only: the turn waits for results a client supplies.
async fn awaiting_tool_results(store: &Store, id: &str) -> Result<bool, EngineError> {
    let waiting = store.last_seq_of_kind(id, "awaiting_tool_results").await?;
    let resumed = store.last_seq_of_kind(id, "stream_resumed").await?;
    let started = store.last_seq_of_kind(id, "turn_started").await?;
    Ok(waiting > resumed.max(started))
}

/// The id of an approval the unfinished turn (begun at seq `turn`)
/// requested and nobody answered (a helper agent's, shown here too, is the
/// helper's to restore; one a finished turn left, such as a git session's
/// held files asked about again after a restart, is not this turn's).
async fn pending_approval_id(store: &Store, id: &str, turn: u64) -> Result<Option<String>, EngineError> {
    Ok(store.own_pending_approval(id, turn).await?)
}

/// Each event of the session after `from`, in order, until `take` says
/// it has seen enough (returns false).
async fn each_event_after(
    store: &Store,
    id: &str,
    from: u64,
    mut take: impl FnMut(EventKind) -> bool,
) -> Result<(), EngineError> {
    let mut after = from;
    loop {
        let page = store.events_after(id, after, 1000).await?;
        let Some((last, _)) = page.last() else { return Ok(()) };
        after = *last;
        for (_, body) in &page {
            if let Ok(ev) = serde_json::from_str::<SessionEvent>(body)
                && !take(ev.kind)
            {
                return Ok(());
            }
        }
    }
}

/// Calls with `tool_running` since the turn's last answer.
async fn started_tool_calls(store: &Store, id: &str) -> Result<HashSet<String>, EngineError> {
    let from = store.last_seq_of_kind(id, "turn_started").await?;
    let mut started = HashSet::new();
    each_event_after(store, id, from, |kind| {
        if let EventKind::ToolRunning { call_id, .. } = kind {
            started.insert(call_id);
        }
        true
    })
    .await?;
    Ok(started)
}

/// True if the newest tool event already is the `tool_recovery` notice
/// (a second restart must not announce it again).
async fn recovery_announced(store: &Store, id: &str) -> Result<bool, EngineError> {
    let notice = store.last_seq_of_kind(id, "tool_recovery").await?;
    let mut newest = 0;
    for kind in ["turn_started", "tool_running", "tool_result", "stream_resumed", "approval_resolved"] {
        newest = newest.max(store.last_seq_of_kind(id, kind).await?);
    }
    Ok(notice > newest)
}

/// The stream's text and tool calls: its persisted deltas, in order. They
/// follow the stream's `turn_started`; the next turn's events (if any)
/// end them.
async fn streamed(store: &Store, id: &str, stream: &StreamRow) -> Result<(String, Vec<ToolCallRecord>), EngineError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    each_event_after(store, id, stream.first_seq, |kind| match kind {
        EventKind::TextDelta { text: t } => {
            text.push_str(&t);
            true
        }
        EventKind::TurnStarted { .. }
        | EventKind::AssistantNode { .. }
        | EventKind::TurnFinished { .. }
        | EventKind::ToolRunning { .. }
        | EventKind::ToolResult { .. } => false,
        other => {
            super::machine::fold_tool_call(&mut calls, &other);
            true
        }
    })
    .await?;
    Ok((text, calls))
}
