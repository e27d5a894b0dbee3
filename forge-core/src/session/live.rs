//! Publishing a durable event to the session's followers.
//!
//! Every follower has an [`EventFeed`](super::subscription::EventFeed) fed
//! by a broadcast channel: its task wakes, takes the event and writes it out.
//! A follower may also register a [`LiveTap`]: the session's own task offers
//! it each event the moment the event is durable, before the broadcast, so a
//! caught-up client can get it with no task hop at all (forged writes it to
//! the socket from there). A tap only ever *tries*: whatever it does not take
//! still reaches its feed through the broadcast, in order.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::PublishedEvent;

/// Takes an event on the session's task as soon as it is durable. Must not
/// block or take long: every other follower of the session waits for it.
pub trait LiveTap: Send + Sync {
    /// Offered every event published while registered, in seq order.
    fn offer(&self, seq: u64, json: &Arc<str>);
    /// The first seq the follower has not got yet (by the tap or its feed):
    /// the feed skips what lies below it instead of yielding it again.
    fn next_seq(&self) -> u64;
}

/// The taps registered on one session.
#[derive(Default)]
pub(crate) struct Taps {
    list: Mutex<Vec<(u64, Arc<dyn LiveTap>)>>,
    /// Lets the session skip the lock while no one taps.
    count: AtomicUsize,
    next_id: AtomicU64,
}

impl Taps {
    /// Registers `tap`; the id unregisters it.
    pub fn add(&self, tap: Arc<dyn LiveTap>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.push((id, tap));
        self.count.store(list.len(), Ordering::Release);
        id
    }

    pub fn remove(&self, id: u64) {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(i, _)| *i != id);
        self.count.store(list.len(), Ordering::Release);
    }

    fn offer(&self, seq: u64, json: &Arc<str>) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        for (_, tap) in list.iter() {
            tap.offer(seq, json);
        }
    }
}

/// The session actor's side: taps first, then the broadcast.
pub(crate) struct Publisher {
    pub events: broadcast::Sender<PublishedEvent>,
    pub taps: Arc<Taps>,
}

impl Publisher {
    pub fn publish(&self, seq: u64, json: Arc<str>) {
        self.taps.offer(seq, &json);
        // No subscriber is fine: the event is in the store.
        let _ = self.events.send(PublishedEvent { seq, json });
    }
}
