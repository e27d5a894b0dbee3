//! `session.*` methods that need more than a direct engine call.

use forge_core::{CreateSession, FeedItem};
use forge_proto::api::RpcResult;
use forge_proto::error::rpc_error;
use forge_proto::{ErrorKind, SessionEvent, SessionInfo, SubscriptionItem};
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionSink};
use serde_json::value::RawValue;

use super::{ConnServer, to_rpc};
use crate::follow::Outlet;

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
    let feed = match server.engine().subscribe(&session, from_seq).await {
        Ok(f) => f,
        Err(e) => {
            pending.reject(to_rpc(e)).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    tracing::debug!(conn = server.conn.id, session = feed.session_id(), ?from_seq, "subscribed");
    crate::follow::follow(feed, WebSocket(sink), server.conn()).await;
    Ok(())
}

/// A WebSocket subscription: each item a `session.event` notification
/// through jsonrpsee's sink.
struct WebSocket(SubscriptionSink);

impl Outlet for WebSocket {
    async fn send(&self, _item: &FeedItem, json: String) -> Result<(), ()> {
        let raw = RawValue::from_string(json).map_err(drop)?;
        self.0.send(raw).await.map_err(drop)
    }

    async fn closed(&self) {
        self.0.closed().await
    }
}
