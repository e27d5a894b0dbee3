//! `store.status` and `store.gc`, and the bound on the blobs
//! (`[store] max_blob_mb`) the daemon keeps while it runs.

use super::*;
use forge_proto::{StoreGcResult, StoreSession, StoreStatus};

impl Engine {
    /// The database file's size and its WAL's.
    pub(super) fn db_sizes(&self) -> (u64, u64) {
        let db = self.shared().db_path();
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        (size(db), size(Path::new(&wal)))
    }

    pub async fn store_status(&self) -> Result<StoreStatus, EngineError> {
        let shared = self.shared();
        let sizes = shared.store.blob_sizes().await?;
        let names: HashMap<String, Option<String>> =
            shared.store.sessions().await?.into_iter().map(|s| (s.id, s.name)).collect();
        let (db_bytes, wal_bytes) = self.db_sizes();
        Ok(StoreStatus {
            path: shared.db_path().display().to_string(),
            db_bytes,
            wal_bytes,
            blobs: sizes.count,
            blob_bytes: sizes.bytes,
            max_blob_bytes: shared.config.store.max_blob_bytes(),
            rewind_bytes: sizes.rewind_bytes,
            image_bytes: sizes.image_bytes,
            other_bytes: sizes.bytes.saturating_sub(sizes.rewind_bytes + sizes.image_bytes),
            evicted: sizes.evicted,
            sessions: sizes
                .sessions
                .into_iter()
                .map(|(id, rewind_bytes, image_bytes)| StoreSession {
                    name: names.get(&id).cloned().flatten(),
                    id,
                    rewind_bytes,
                    image_bytes,
                })
                .collect(),
        })
    }

    /// Collects what no record needs, then keeps the bound.
    pub async fn store_gc(&self) -> Result<StoreGcResult, EngineError> {
        self.check_running()?;
        let shared = self.shared();
        let before = shared.store.blob_bytes().await?;
        let held = shared.trackers.held();
        let batch = WriteBatch { ops: vec![StoreOp::CollectBlobs { held }] };
        shared.writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
        let collected_bytes = before.saturating_sub(shared.store.blob_bytes().await?);
        let (evicted_blobs, evicted_bytes) = self.keep_store_bound().await?;
        Ok(StoreGcResult { collected_bytes, evicted_bytes, evicted_blobs, status: self.store_status().await? })
    }

    /// Evicts the oldest rewind content while the blobs weigh more than
    /// `[store] max_blob_mb`: (blobs, bytes) evicted.
    pub async fn keep_store_bound(&self) -> Result<(u64, u64), EngineError> {
        let shared = self.shared();
        let max = shared.config.store.max_blob_bytes();
        let total = shared.store.blob_bytes().await?;
        if total <= max {
            return Ok((0, 0));
        }
        let (candidates, seen) = shared.store.eviction_candidates().await?;
        let mut over = total - max;
        let mut hashes = Vec::new();
        let mut bytes = 0;
        for (hash, size) in candidates {
            if over == 0 {
                break;
            }
            over = over.saturating_sub(size);
            bytes += size;
            hashes.push(hash);
        }
        let count = hashes.len() as u64;
        tracing::info!(count, bytes, max, "evicting the oldest rewind content to keep under [store] max_blob_mb");
        let op = StoreOp::EvictBlobs { hashes, seen, at_ms: crate::ids::now_ms() };
        shared.writer.write(WriteBatch { ops: vec![op] }).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
        Ok((count, bytes))
    }
}
