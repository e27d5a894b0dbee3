//! The session event stream: everything a client can see about a session.
//!
//! Each event has a per-session `seq` (1, 2, 3, ... with no gaps), assigned
//! by the session and persisted before any client receives it. Replaying from
//! the store and following live yield the same sequence.

use serde::{Deserialize, Serialize};

pub use crate::event_kind::{EventKind, GitUndone, TurnStatus};
use crate::types::{ClientRef, JournalHealth};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionEvent {
    pub session_id: String,
    pub seq: u64,
    /// Wall-clock time the daemon recorded the event (Unix ms).
    pub ts_ms: i64,
    /// The client whose action caused the event, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRef>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// One notification of a `session.subscribe` subscription.
#[allow(clippy::large_enum_variant)] // built once per notification, never stored in bulk
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SubscriptionItem {
    /// A session event, in `seq` order, never repeated.
    Event(SessionEvent),
    /// Every stored event up to `last_seq` has been delivered; what follows
    /// is live.
    Live { last_seq: u64 },
    /// This client fell behind; the daemon is re-reading from the store from
    /// `resume_seq`. No event is lost or repeated.
    Lagged { resume_seq: u64 },
    /// The daemon's journal changed health. `blocked` means nothing can be
    /// written: running turns were stopped and new ones are refused until
    /// `journal.reset` succeeds. Not a session event (it has no seq).
    Journal { health: JournalHealth, reason: Option<String> },
    /// The session was removed or the daemon is stopping; no more items.
    Closed { reason: String },
    #[serde(other)]
    Unknown,
}
