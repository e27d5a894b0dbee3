//! The journal: the single writer of the store and what it writes.
//!
//! Sessions hand the writer numbered [`WriteBatch`]es and get a
//! [`JournalAck`] `{ seq, result }` back on their own channel. A successful
//! ack carries a [`PersistedProof`], which only the writer can make: the
//! session applies and publishes a batch's events only with one in hand,
//! so nothing is shown before it is durable (persist-before-apply).

mod delta_log;
mod ops;
mod writer;

pub use ops::{StoreOp, WriteBatch};
pub use writer::{HealthState, JournalStats, JournalWriter, ResetOutcome, StatsSnapshot};

use forge_proto::JournalHealth;

/// Proof that a batch is durable. It has no public constructor and is not
/// `Clone`: only the writer mints one, once per committed batch.
#[derive(Debug)]
pub struct PersistedProof {
    batch_id: u64,
}

impl PersistedProof {
    /// Only for the pipeline's unit tests, which play the writer.
    #[cfg(test)]
    pub(crate) fn for_tests(batch_id: u64) -> Self {
        Self { batch_id }
    }

    /// The writer's number for the committed batch (increasing).
    pub fn batch_id(&self) -> u64 {
        self.batch_id
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PersistError {
    /// The store cannot be written; the daemon must stop taking work.
    #[error("{0}")]
    Blocked(String),
}

/// The writer's answer for one batch.
#[derive(Debug)]
pub struct JournalAck {
    /// The seq the submitter gave the batch.
    pub seq: u64,
    pub result: Result<PersistedProof, PersistError>,
}

impl JournalHealthExt for JournalHealth {
    fn is_blocked(&self) -> bool {
        *self == JournalHealth::Blocked
    }
}

/// Small helpers on the protocol's health enum.
pub trait JournalHealthExt {
    fn is_blocked(&self) -> bool;
}
