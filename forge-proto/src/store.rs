//! `store.status` and `store.gc`: what the daemon's store weighs and
//! collecting what no record needs.

use serde::{Deserialize, Serialize};

/// `store.status`: the database and the blobs (contents of files as rewind
/// recorded them, and images), per session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreStatus {
    /// The database file; `forgectl journal` shows the same.
    pub path: String,
    pub db_bytes: u64,
    pub wal_bytes: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
    /// `[store] max_blob_mb`, in bytes: past it the oldest rewind content
    /// is evicted.
    pub max_blob_bytes: u64,
    /// Blobs change records name (what undo and rewind restore).
    pub rewind_bytes: u64,
    /// Images messages show or queued messages carry (never evicted).
    pub image_bytes: u64,
    /// The rest: contents sessions' records of their directories hold
    /// for a file's next change, and what no record needs any more
    /// (`store gc` collects it).
    pub other_bytes: u64,
    /// Blobs evicted to stay under the bound so far (a rewind names the
    /// files it can no longer restore).
    pub evicted: u64,
    /// Largest first.
    pub sessions: Vec<StoreSession>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreSession {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub rewind_bytes: u64,
    pub image_bytes: u64,
}

/// `store.gc`: what went, and the store after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreGcResult {
    /// Bytes of blobs no record needed.
    pub collected_bytes: u64,
    /// Rewind content evicted to get under the bound.
    pub evicted_bytes: u64,
    pub evicted_blobs: u64,
    pub status: StoreStatus,
}
