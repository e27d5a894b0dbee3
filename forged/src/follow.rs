//! One subscription loop for both transports: a session's feed (replay,
//! then live) written to an [`Outlet`], a WebSocket subscription sink or a
//! JSON-lines connection, until the feed ends, the subscriber goes away or
//! unsubscribes.

use std::future::Future;
use std::sync::Arc;

use forge_core::{EventFeed, FeedItem, LiveTap};

use crate::rpc::item_text;

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
