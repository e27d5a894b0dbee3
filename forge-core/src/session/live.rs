//! Publishing a durable event to the session's followers.
//!
//! Every follower has an [`EventFeed`](super::subscription::EventFeed) fed
//! by a broadcast channel: its task wakes, takes the event and writes it out.
//! A follower may also register a [`LiveTap`]: the session's own task offers
//! it each event the moment the event is durable, before the broadcast, so a
//! caught-up client can get it with no task hop at all (forged writes it to
//! the socket from there). A tap only ever *tries*: whatever it does not take
//! still reaches its feed through the broadcast, in order.
//!
//! The newest few events stay in memory ([`Recent`]): a follower that joins
//! near the live edge (a client that sent a message and follows its turn)
//! catches up from them instead of reading the store.

use std::collections::VecDeque;
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

/// How many of the newest events are kept in memory, and at most how
/// many bytes of them: enough for the start of a turn.
const RECENT_EVENTS: usize = 64;
const RECENT_BYTES: usize = 16 * 1024;

/// A joining follower's live receiver and the events kept when it joined.
pub(crate) type Joined = (broadcast::Receiver<PublishedEvent>, Vec<(u64, Arc<str>)>);

/// The newest published events, in seq order with no gap.
#[derive(Default)]
pub(crate) struct Recent(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    events: VecDeque<(u64, Arc<str>)>,
    /// The bytes of `events`' JSON.
    bytes: usize,
}

impl Recent {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to the broadcast and copies the events kept, in one
    /// step against [`Publisher::publish`]: every event after the last
    /// one copied comes through the receiver.
    pub fn join(&self, events: &broadcast::WeakSender<PublishedEvent>) -> Option<Joined> {
        let kept = self.lock();
        let live = events.upgrade()?.subscribe();
        Some((live, kept.events.iter().cloned().collect()))
    }
}

impl Kept {
    fn push(&mut self, seq: u64, json: &Arc<str>) {
        if self.events.back().is_some_and(|(last, _)| last + 1 != seq) {
            // Never a gap: what came before is in the store.
            self.events.clear();
            self.bytes = 0;
        }
        self.events.push_back((seq, json.clone()));
        self.bytes += json.len();
        while self.events.len() > RECENT_EVENTS || self.bytes > RECENT_BYTES {
            let Some((_, gone)) = self.events.pop_front() else { break };
            self.bytes -= gone.len();
        }
    }
}

/// The session actor's side: taps first, then the broadcast.
pub(crate) struct Publisher {
    pub events: broadcast::Sender<PublishedEvent>,
    pub taps: Arc<Taps>,
    pub recent: Arc<Recent>,
}

impl Publisher {
    pub fn publish(&self, seq: u64, json: Arc<str>) {
        self.taps.offer(seq, &json);
        // Kept and broadcast under one lock, for `Recent::join`.
        let mut kept = self.recent.lock();
        kept.push(seq, &json);
        // No subscriber is fine: the event is in the store.
        let _ = self.events.send(PublishedEvent { seq, json });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publisher() -> (Publisher, broadcast::WeakSender<PublishedEvent>) {
        let (events, _) = broadcast::channel(16);
        let weak = events.downgrade();
        (Publisher { events, taps: Arc::default(), recent: Arc::default() }, weak)
    }

    #[test]
    fn a_joining_follower_gets_the_kept_events_then_every_later_one_live() {
        let (p, weak) = publisher();
        for seq in 1..=3 {
            p.publish(seq, format!("e{seq}").into());
        }
        let (mut live, kept) = p.recent.join(&weak).expect("the session lives");
        assert_eq!(kept.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1, 2, 3]);
        p.publish(4, "e4".into());
        assert_eq!(live.try_recv().map(|e| e.seq).ok(), Some(4));
    }

    #[test]
    fn only_the_newest_events_are_kept_and_never_across_a_gap() {
        let (p, weak) = publisher();
        for seq in 1..=(RECENT_EVENTS as u64 + 10) {
            p.publish(seq, "x".into());
        }
        let (_, kept) = p.recent.join(&weak).expect("the session lives");
        assert_eq!(kept.len(), RECENT_EVENTS);
        assert_eq!(kept.first().map(|(s, _)| *s), Some(11));
        p.publish(100, "y".into());
        let (_, kept) = p.recent.join(&weak).expect("the session lives");
        assert_eq!(kept.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [100]);
        // An event larger than the budget is not kept at all.
        p.publish(101, "z".repeat(RECENT_BYTES + 1).into());
        let (_, kept) = p.recent.join(&weak).expect("the session lives");
        assert!(kept.is_empty());
    }
}
