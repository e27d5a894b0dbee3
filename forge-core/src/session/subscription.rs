//! Following a session: replay from the store, then live, with no gap and
//! no duplicate. The live feed is subscribed *before* the store is read, so
//! every event is either in what the store returns or still to come live;
//! seqs already delivered are skipped. A subscriber that joins near the live
//! edge catches up from the events the session keeps in memory, without
//! reading the store at all. A subscriber that falls behind the
//! live feed is told so and re-reads from the store: it can never slow the
//! session or other clients.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{broadcast, watch};

use super::live::LiveTap;
use super::{PublishedEvent, SessionHandle};
use crate::error::EngineError;
use crate::journal::{HealthState, JournalWriter};
use crate::store::Store;

/// What a subscriber gets next.
#[derive(Debug, Clone)]
pub enum FeedItem {
    /// A session event (its JSON), in seq order.
    Event { seq: u64, json: Arc<str> },
    /// Replay is done; from here on events are live.
    Live { last_seq: u64 },
    /// The subscriber fell behind; the rest comes from the store first.
    Lagged { resume_seq: u64 },
    /// The journal's health changed (blocked: nothing can be written).
    Journal { health: forge_proto::JournalHealth, reason: Option<String> },
    /// No more events: the session was removed or the daemon stops.
    Closed { reason: String },
}

enum Phase {
    /// The buffer holds every event up to the live edge (from memory).
    Recent,
    Replay,
    Live,
    Done,
}

pub struct EventFeed {
    session_id: String,
    store: Store,
    /// To wait for acked events still on their way into the store.
    writer: JournalWriter,
    live: broadcast::Receiver<PublishedEvent>,
    next_seq: u64,
    buffer: VecDeque<(u64, Arc<str>)>,
    phase: Phase,
    handle: SessionHandle,
    health: watch::Receiver<HealthState>,
    /// The tap this feed's follower registered, if any, and its id.
    tap: Option<(u64, Arc<dyn LiveTap>)>,
}

const REPLAY_PAGE: u32 = 512;

impl EventFeed {
    /// `from_seq: None` follows live events only.
    pub(crate) fn new(
        handle: SessionHandle,
        store: Store,
        writer: JournalWriter,
        from_seq: Option<u64>,
    ) -> Result<Self, EngineError> {
        let mut health = writer.watch_health();
        // A subscriber that joins while blocked hears about it at once.
        if health.borrow().health == forge_proto::JournalHealth::Healthy {
            health.mark_unchanged();
        } else {
            health.mark_changed();
        }
        let (live, kept) = handle.join_live().ok_or_else(EngineError::gone)?;
        let newest = kept.last().map(|(seq, _)| *seq);
        let last = handle.snapshot.borrow().last_seq.max(newest.unwrap_or(0));
        // A seq beyond the end means "from the next event on".
        let next_seq = from_seq.map(|s| s.clamp(1, last + 1)).unwrap_or(last + 1);
        // What is kept runs up to the live edge; if it reaches back to
        // `next_seq`, it is all the replay there is.
        let (buffer, phase) = match (kept.first(), newest) {
            (Some((oldest, _)), Some(newest)) if *oldest <= next_seq && newest == last => {
                (kept.into_iter().filter(|(seq, _)| *seq >= next_seq).collect(), Phase::Recent)
            }
            _ => (VecDeque::new(), Phase::Replay),
        };
        handle.attached.fetch_add(1, Ordering::Relaxed);
        Ok(Self {
            session_id: handle.id.clone(),
            store,
            writer,
            live,
            next_seq,
            buffer,
            phase,
            handle,
            health,
            tap: None,
        })
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Has the session offer each event to `tap` as soon as it is durable,
    /// for as long as this feed lives (replacing an earlier tap). The feed
    /// skips what the tap reports delivered (`LiveTap::next_seq`).
    pub fn set_tap(&mut self, tap: Arc<dyn LiveTap>) {
        if let Some((id, _)) = self.tap.take() {
            self.handle.taps.remove(id);
        }
        self.tap = Some((self.handle.taps.add(tap.clone()), tap));
    }

    /// Moves past what the tap already delivered.
    fn skip_tapped(&mut self) {
        if let Some((_, tap)) = &self.tap {
            self.next_seq = self.next_seq.max(tap.next_seq());
        }
    }

    pub async fn next(&mut self) -> Option<FeedItem> {
        loop {
            self.skip_tapped();
            if let Some((seq, json)) = self.buffer.pop_front() {
                if seq < self.next_seq {
                    continue;
                }
                self.next_seq = seq + 1;
                return Some(FeedItem::Event { seq, json });
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Recent => {
                    self.phase = Phase::Live;
                    return Some(FeedItem::Live { last_seq: self.next_seq - 1 });
                }
                Phase::Replay => {
                    self.writer.sync().await;
                    let page = match self.store.events_after(&self.session_id, self.next_seq - 1, REPLAY_PAGE).await {
                        Ok(p) => p,
                        Err(e) => {
                            self.phase = Phase::Done;
                            return Some(FeedItem::Closed { reason: format!("reading stored events failed: {e}") });
                        }
                    };
                    if page.is_empty() {
                        self.phase = Phase::Live;
                        return Some(FeedItem::Live { last_seq: self.next_seq - 1 });
                    }
                    self.buffer.extend(page.into_iter().map(|(s, b)| (s, Arc::from(b))));
                }
                Phase::Live => {
                    let received = tokio::select! {
                        biased;
                        r = self.live.recv() => r,
                        Ok(()) = self.health.changed() => {
                            let h = self.health.borrow_and_update().clone();
                            return Some(FeedItem::Journal { health: h.health, reason: h.reason });
                        }
                    };
                    self.skip_tapped();
                    match received {
                        Ok(ev) if ev.seq < self.next_seq => continue,
                        Ok(ev) if ev.seq == self.next_seq => {
                            self.next_seq += 1;
                            return Some(FeedItem::Event { seq: ev.seq, json: ev.json });
                        }
                        // Ahead of us: what lies between is in the store.
                        Ok(ev) => {
                            self.phase = Phase::Replay;
                            self.buffer.push_back((ev.seq, ev.json));
                            self.writer.sync().await;
                            let gap = (ev.seq - self.next_seq) as u32;
                            let Ok(page) = self.store.events_after(&self.session_id, self.next_seq - 1, gap).await
                            else {
                                // The gap could not be read: never skip it;
                                // start over from the store as after a lag.
                                self.buffer.clear();
                                return Some(FeedItem::Lagged { resume_seq: self.next_seq });
                            };
                            let mut items: VecDeque<(u64, Arc<str>)> =
                                page.into_iter().map(|(s, b)| (s, Arc::from(b))).collect();
                            items.extend(self.buffer.drain(..));
                            self.buffer = items;
                            self.phase = Phase::Live;
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            self.phase = Phase::Replay;
                            return Some(FeedItem::Lagged { resume_seq: self.next_seq });
                        }
                        Err(broadcast::error::RecvError::Closed) => {
                            self.phase = Phase::Done;
                            let reason = if self.handle.is_alive() { "closed" } else { "the session stopped" };
                            return Some(FeedItem::Closed { reason: reason.to_string() });
                        }
                    }
                }
            }
        }
    }
}

impl Drop for EventFeed {
    fn drop(&mut self) {
        self.handle.attached.fetch_sub(1, Ordering::Relaxed);
        if let Some((id, _)) = &self.tap {
            self.handle.taps.remove(*id);
        }
    }
}
