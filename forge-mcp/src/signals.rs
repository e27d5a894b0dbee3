//! What a server's task is told, held as flags rather than queued: told
//! the same thing a thousand times (a server flooding `list_changed`, a
//! burst of failed calls), it holds one of each, so its memory is bounded
//! and no kind is lost behind another.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tokio::sync::Notify;

/// What a server task is told.
#[derive(Debug, PartialEq)]
pub(crate) enum Control {
    /// `forgectl mcp restart`: reconnect now.
    Restart,
    /// A call found the connection gone.
    Lost(String),
    Shutdown,
}

/// The orders waiting for a server's task: the strongest is taken first
/// (`Shutdown`, which stays, then `Restart`, which makes a `Lost` moot,
/// then `Lost`).
#[derive(Default)]
pub(crate) struct Orders {
    shutdown: AtomicBool,
    restart: AtomicBool,
    lost: Mutex<Option<String>>,
    /// The task has ended: nobody takes orders any more.
    ended: AtomicBool,
    notify: Notify,
}

impl Orders {
    /// Gives an order; false if the task has ended.
    pub(crate) fn give(&self, c: Control) -> bool {
        match c {
            Control::Shutdown => self.shutdown.store(true, Ordering::SeqCst),
            Control::Restart => self.restart.store(true, Ordering::SeqCst),
            Control::Lost(why) => *self.lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(why),
        }
        self.notify.notify_one();
        !self.ended.load(Ordering::SeqCst)
    }

    fn take(&self) -> Option<Control> {
        if self.shutdown.load(Ordering::SeqCst) {
            return Some(Control::Shutdown);
        }
        let lost = self.lost.lock().unwrap_or_else(|p| p.into_inner()).take();
        if self.restart.swap(false, Ordering::SeqCst) {
            return Some(Control::Restart);
        }
        lost.map(Control::Lost)
    }

    /// The next order (cancel-safe: an order is only taken when returned).
    pub(crate) async fn next(&self) -> Control {
        loop {
            if let Some(c) = self.take() {
                return c;
            }
            self.notify.notified().await;
        }
    }

    /// The task says it has ended.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
    }
}

/// A list a server said changed (`*/list_changed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Listing {
    Tools,
    Prompts,
    Resources,
}

const LISTINGS: [Listing; 3] = [Listing::Tools, Listing::Prompts, Listing::Resources];

impl Listing {
    fn bit(self) -> u8 {
        match self {
            Listing::Tools => 1,
            Listing::Prompts => 2,
            Listing::Resources => 4,
        }
    }
}

/// The lists to read again: one bit per kind.
#[derive(Default)]
pub(crate) struct Changed {
    kinds: AtomicU8,
    notify: Notify,
}

impl Changed {
    pub(crate) fn mark(&self, listing: Listing) {
        self.kinds.fetch_or(listing.bit(), Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Every kind marked since the last call, each once (cancel-safe).
    pub(crate) async fn next(&self) -> Vec<Listing> {
        loop {
            let kinds = self.kinds.swap(0, Ordering::SeqCst);
            if kinds != 0 {
                return LISTINGS.into_iter().filter(|l| kinds & l.bit() != 0).collect();
            }
            self.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flood_of_notices_holds_one_of_each_kind() {
        let changed = Changed::default();
        for _ in 0..10_000 {
            changed.mark(Listing::Prompts);
        }
        changed.mark(Listing::Tools);
        assert_eq!(changed.next().await, [Listing::Tools, Listing::Prompts], "the tools are not lost behind prompts");
        changed.mark(Listing::Resources);
        assert_eq!(changed.next().await, [Listing::Resources]);
    }

    #[tokio::test]
    async fn shutdown_wins_and_a_restart_makes_a_lost_connection_moot() {
        let orders = Orders::default();
        for i in 0..1000 {
            assert!(orders.give(Control::Lost(format!("call {i} failed"))));
        }
        assert_eq!(orders.next().await, Control::Lost("call 999 failed".into()), "the latest word");
        orders.give(Control::Lost("again".into()));
        orders.give(Control::Restart);
        assert_eq!(orders.next().await, Control::Restart);
        orders.give(Control::Restart);
        orders.give(Control::Shutdown);
        assert_eq!(orders.next().await, Control::Shutdown);
        assert_eq!(orders.next().await, Control::Shutdown, "it stays");
        orders.end();
        assert!(!orders.give(Control::Restart), "an ended task takes no order");
    }
}
