//! What the store adds to an answer: a session's info as `session.show`
//! gives it, a context report's summaries, span and repository map, and
//! whether a name is free. The engine's queries and a session's shell
//! (answering its machine's `Effect::Answer` and `Effect::ClaimName`)
//! read them the same way.

use std::sync::Arc;

use forge_proto::{ContextInfo, ErrorKind, OperationStateKind, SessionInfo};

use super::Snapshot;
use super::machine::NameClaim;
use crate::error::EngineError;
use crate::shared::Shared;
use crate::store::SessionRow;

/// A session's info from its row and, if it runs, its live state (the
/// snapshot and how many clients follow it).
pub(crate) fn info(row: SessionRow, live: Option<(&Snapshot, u32)>, message_count: u64) -> SessionInfo {
    let (state, queued, last_seq, attached) = match live {
        // State and seq from one snapshot: the state is what the events
        // up to `last_seq` made it, so a client that joins with this state
        // and follows from `last_seq + 1` misses nothing (`forgectl attach
        // --from live`).
        Some((s, attached)) => (s.state, s.queued, s.last_seq, attached),
        None => (OperationStateKind::Idle, 0, row.last_seq, 0),
    };
    SessionInfo {
        id: row.id,
        name: row.name,
        cwd: row.cwd,
        provider: row.provider,
        model: row.model,
        sampling: row.sampling,
        active_files: row.active_files,
        created_ms: row.created_ms,
        updated_ms: row.updated_ms,
        state,
        waiting_on: state.waiting_on().to_string(),
        attached_clients: attached,
        queued_messages: queued,
        message_count,
        last_seq,
        head: row.head_id,
        usage: None,
        approval_mode: row.approval.mode,
        always_allow: row.approval.always,
        untrusted: None,
        tools_waiting: Vec::new(),
        notices: Vec::new(),
        git: row.git,
        helper: row.helper.map(|h| h.of),
    }
}

/// `session.show` for session `id`, with its message count and usage.
pub(crate) async fn full_info(
    shared: &Shared,
    id: &str,
    live: Option<(&Snapshot, u32)>,
) -> Result<SessionInfo, EngineError> {
    let row = shared.store.session(id).await?.ok_or_else(|| EngineError::not_found(id))?;
    let count = match &row.head_id {
        Some(h) => shared.store.path_to(h).await?.len() as u64,
        None => 0,
    };
    let mut info = info(row, live, count);
    info.usage = Some(super::load::session_total(shared, id).await?);
    Ok(info)
}

/// A context report as the machine made it, with what the store keeps:
/// the summaries, the original messages of summary `span`, and (`repo`)
/// the repository map.
pub(crate) async fn full_context(
    shared: &Shared,
    row: &SessionRow,
    mut info: ContextInfo,
    span: Option<u32>,
    repo: bool,
) -> Result<ContextInfo, EngineError> {
    let store = &shared.store;
    info.summaries = store
        .summaries(&row.id)
        .await?
        .iter()
        .filter_map(|n| {
            Some(forge_proto::SummaryInfo {
                summary_id: n.id.clone(),
                span: n.meta.summary_of.clone()?,
                text: n.text.clone(),
                created_ms: n.created_ms,
            })
        })
        .collect();
    if let Some(n) = span {
        let count = info.summaries.len();
        let s = (n as usize).checked_sub(1).and_then(|i| info.summaries.get(i)).ok_or_else(|| {
            EngineError::new(
                ErrorKind::InvalidParams,
                format!("the session has {count} summaries; --span takes 1 to {count}"),
            )
        })?;
        // Summaries are cumulative: the span is the path up to its last node.
        let nodes = store.path_to(&s.span.last).await?;
        info.span_messages = Some(nodes.iter().map(|n| n.to_history()).collect());
    }
    if repo {
        let cwd = std::path::Path::new(&row.cwd);
        // Asking starts a build when none ran yet.
        shared.repo_map(cwd, &row.id, &row.provider, &row.model);
        info.repo_map = Some(shared.repo_maps.info(&shared.config, cwd));
    }
    Ok(info)
}

/// Refused if another session than `owner` has the name.
pub(crate) async fn check_name_free(shared: &Shared, name: &str, owner: Option<&str>) -> Result<(), EngineError> {
    match shared.store.name_owner(name).await? {
        Some(other) if Some(other.as_str()) != owner => {
            Err(EngineError::new(ErrorKind::InvalidName, format!("the name \"{name}\" is taken by session {other}")))
        }
        _ => Ok(()),
    }
}

/// Session `owner`'s claim on `name` (none: the name cleared), holding
/// the daemon's name lock until the claim is dropped.
pub(crate) async fn claim_name(shared: &Shared, name: Option<String>, owner: &str) -> Result<NameClaim, EngineError> {
    let held = Arc::clone(&shared.names).lock_owned().await;
    if let Some(n) = &name {
        check_name_free(shared, n, Some(owner)).await?;
    }
    Ok(NameClaim::new(name, Some(held)))
}
