//! `session.*` methods that need more than a direct engine call.

use forge_core::{CreateSession, FeedItem};
use forge_proto::api::RpcResult;
use forge_proto::error::rpc_error;
use forge_proto::{ErrorKind, SessionEvent, SessionInfo, SubscriptionItem};
use jsonrpsee::PendingSubscriptionSink;
use jsonrpsee::core::SubscriptionResult;
use serde_json::value::RawValue;

use super::{ConnServer, to_rpc};

pub async fn create(
    server: &ConnServer,
    name: Option<String>,
    cwd: Option<String>,
    provider: Option<String>,
    model: Option<String>,
) -> RpcResult<SessionInfo> {
    let req = CreateSession { name, cwd, provider, model };
    server.engine().create_session(req, server.client_ref()).await.map_err(to_rpc)
}

pub async fn events(
    server: &ConnServer,
    session: String,
    after_seq: Option<u64>,
    limit: Option<u32>,
) -> RpcResult<Vec<SessionEvent>> {
    let (_, bodies) =
        server.engine().events(&session, after_seq.unwrap_or(0), limit.unwrap_or(10_000)).await.map_err(to_rpc)?;
    bodies
        .iter()
        .map(|b| {
            serde_json::from_str(b)
                .map_err(|e| rpc_error(ErrorKind::Internal, format!("a stored event does not decode: {e}")))
        })
        .collect()
}

/// The notification for one feed item (WebSocket).
fn item_json(item: &FeedItem) -> Option<Box<RawValue>> {
    RawValue::from_string(item_text(item)?).ok()
}

/// A stored event's JSON as a `SubscriptionItem::Event`: `{"type":"event",`
/// + the event object without its `{`.
pub(crate) fn event_text(json: &str) -> Option<String> {
    let body = json.strip_prefix('{')?;
    if body.trim_start().starts_with('}') {
        return None;
    }
    Some(format!("{{\"type\":\"event\",{body}"))
}

/// One feed item as a `SubscriptionItem`'s JSON. Events are sent as
/// stored: their JSON is made once, when the event is persisted.
pub(crate) fn item_text(item: &FeedItem) -> Option<String> {
    Some(match item {
        FeedItem::Event { json, .. } => event_text(json)?,
        FeedItem::Live { last_seq } => serde_json::to_string(&SubscriptionItem::Live { last_seq: *last_seq }).ok()?,
        FeedItem::Lagged { resume_seq } => {
            serde_json::to_string(&SubscriptionItem::Lagged { resume_seq: *resume_seq }).ok()?
        }
        FeedItem::Journal { health, reason } => {
            serde_json::to_string(&SubscriptionItem::Journal { health: *health, reason: reason.clone() }).ok()?
        }
        FeedItem::Closed { reason } => {
            serde_json::to_string(&SubscriptionItem::Closed { reason: reason.clone() }).ok()?
        }
    })
}

pub async fn subscribe(
    server: &ConnServer,
    pending: PendingSubscriptionSink,
    session: String,
    from_seq: Option<u64>,
) -> SubscriptionResult {
    let mut feed = match server.engine().subscribe(&session, from_seq).await {
        Ok(f) => f,
        Err(e) => {
            pending.reject(to_rpc(e)).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    let _following = server.conn().subscription();
    tracing::debug!(conn = server.conn.id, session = feed.session_id(), ?from_seq, "subscribed");
    loop {
        let item = tokio::select! {
            _ = sink.closed() => break,
            item = feed.next() => item,
        };
        let Some(item) = item else { break };
        let closed = matches!(item, FeedItem::Closed { .. });
        if let Some(raw) = item_json(&item)
            && sink.send(raw).await.is_err()
        {
            break;
        }
        if closed {
            break;
        }
    }
    Ok(())
}
