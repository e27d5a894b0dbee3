//! Stamped tokens (`mock:stamp`: each token the mock's write time, `t<ns> `)
//! as a follower sees them, and percentiles of what was measured.

use forge_proto::{EventKind, SubscriptionItem};
use forge_tests::mock::unix_ns;

/// The stamped tokens a follower saw: (stamp, when it got here).
#[derive(Default)]
pub(crate) struct Stamps {
    partial: String,
    pub(crate) seen: Vec<(u128, u128)>,
}

impl Stamps {
    /// Notes `item`'s stamps; true when the turn is over.
    pub(crate) fn on(&mut self, item: SubscriptionItem) -> bool {
        let SubscriptionItem::Event(ev) = item else { return false };
        let now = unix_ns();
        match ev.kind {
            EventKind::TextDelta { text } => {
                self.partial.push_str(&text);
                // Whole tokens only: `t<ns> `.
                while let Some(end) = self.partial.find(' ') {
                    let token: String = self.partial.drain(..=end).collect();
                    if let Some(ns) = token.trim().strip_prefix('t').and_then(|n| n.parse::<u128>().ok()) {
                        self.seen.push((ns, now));
                    }
                }
                false
            }
            EventKind::TurnFinished { .. } => true,
            _ => false,
        }
    }
}

/// The `p` percentile (0..=1) of `sorted`.
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
