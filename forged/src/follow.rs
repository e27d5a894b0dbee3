//! One subscription loop for both transports: a session's feed (replay,
//! then live) written to an [`Outlet`], a WebSocket subscription sink or a
//! JSON-lines connection, until the feed ends, the subscriber goes away or
//! unsubscribes.

use std::future::Future;
use std::sync::Arc;

use forge_core::{EventFeed, FeedItem, LiveTap};
use forge_proto::SubscriptionItem;

/// Where one subscription's items go.
pub trait Outlet: Send + Sync {
    /// Writes one item, whose `SubscriptionItem` JSON is `json`; `Err` when
    /// the subscriber is gone.
    fn send(&self, item: &FeedItem, json: String) -> impl Future<Output = Result<(), ()>> + Send;

    /// Resolves when the subscriber went away or unsubscribed.
    fn closed(&self) -> impl Future<Output = ()> + Send;

    /// Whether `item` was delivered already another way (a live tap), so
    /// its JSON need not even be made.
    fn delivered(&self, _item: &FeedItem) -> bool {
        false
    }

    /// A tap the session offers each durable event to, on its own task.
    fn tap(&self) -> Option<Arc<dyn LiveTap>> {
        None
    }
}

/// Writes `feed`'s items to `out` until the feed ends (the session closed
/// or was removed) or the subscriber is gone. Meanwhile its connection
/// counts as following a session (`_following`, from
/// `ConnState::subscription`: never closed to make room).
pub async fn follow(mut feed: EventFeed, out: impl Outlet, _following: crate::conn::Busy) {
    if let Some(tap) = out.tap() {
        feed.set_tap(tap);
    }
    loop {
        let item = tokio::select! {
            biased;
            () = out.closed() => break,
            item = feed.next() => item,
        };
        let Some(item) = item else { break };
        if out.delivered(&item) {
            continue;
        }
        let closed = matches!(item, FeedItem::Closed { .. });
        let Some(json) = item_text(&item) else { continue };
        if out.send(&item, json).await.is_err() || closed {
            break;
        }
    }
}

/// A stored event's JSON as a `SubscriptionItem::Event`: `{"type":"event",`
/// + the event object without its `{`.
pub(crate) fn event_text(json: &str) -> Option<String> {
    // An event journaled before events had a size cap is cut to fit here.
    let json = forge_core::event_size::clamp(json, forge_core::event_size::MAX_EVENT_BYTES);
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
