//! The blob store's sizes and what may go from it: content no record
//! needs (collected), and past `[store] max_blob_mb` the oldest rewind
//! content (evicted, and remembered as such). Images a node shows or a
//! queued message carries never go.

use sqlx::Row;

use super::{Store, StoreError};

/// Images something still shows or will send.
const IMAGES: &str = "SELECT json_extract(i.value, '$.hash') FROM nodes, json_each(nodes.meta, '$.images') i
         WHERE nodes.meta LIKE '%\"images\"%'
     UNION SELECT json_extract(i.value, '$.hash') FROM queued_messages q, json_each(q.images) i
         WHERE q.images IS NOT NULL";

/// Rewind content a change record names.
const CHANGES: &str = "SELECT before_hash FROM file_changes WHERE before_hash IS NOT NULL
     UNION SELECT after_hash FROM file_changes WHERE after_hash IS NOT NULL";

/// Every blob a record needs.
pub(crate) fn referenced() -> String {
    format!("{CHANGES} UNION {IMAGES}")
}

/// What the blobs weigh.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BlobSizes {
    pub count: u64,
    pub bytes: u64,
    /// Content change records name.
    pub rewind_bytes: u64,
    pub image_bytes: u64,
    /// Blobs evicted to keep under the bound, so far.
    pub evicted: u64,
    /// Per session: (id, rewind bytes, image bytes), largest first.
    pub sessions: Vec<(String, u64, u64)>,
}

impl Store {
    /// What the blobs weigh in all (one sum; the bound checks only this).
    pub async fn blob_bytes(&self) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query_scalar("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetch_one(&self.pool()).await?;
        Ok(n.max(0) as u64)
    }

    pub async fn blob_sizes(&self) -> Result<BlobSizes, StoreError> {
        let pool = self.pool();
        let one = |sql: String| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).fetch_one(&pool).await.map(|n| n.max(0) as u64)
            }
        };
        let count = one("SELECT COUNT(*) FROM blobs".into()).await?;
        let bytes = one("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs".into()).await?;
        let sum_of = |set: &str| format!("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs WHERE hash IN ({set})");
        let rewind_bytes = one(sum_of(CHANGES)).await?;
        let image_bytes = one(sum_of(IMAGES)).await?;
        let evicted = one("SELECT COUNT(*) FROM evicted_blobs".into()).await?;
        let per_session = "WITH rewind(session_id, hash) AS (
                 SELECT session_id, before_hash FROM file_changes WHERE before_hash IS NOT NULL
                 UNION SELECT session_id, after_hash FROM file_changes WHERE after_hash IS NOT NULL),
             images(session_id, hash) AS (
                 SELECT session_id, json_extract(i.value, '$.hash') FROM nodes, json_each(nodes.meta, '$.images') i
                     WHERE nodes.meta LIKE '%\"images\"%'),
             sized(session_id, rewind, image) AS (
                 SELECT r.session_id, LENGTH(b.data), 0 FROM rewind r JOIN blobs b ON b.hash = r.hash
                 UNION ALL SELECT i.session_id, 0, LENGTH(b.data) FROM images i JOIN blobs b ON b.hash = i.hash)
             SELECT session_id, SUM(rewind), SUM(image) FROM sized GROUP BY session_id
             ORDER BY SUM(rewind) + SUM(image) DESC";
        let sessions = sqlx::query(per_session)
            .fetch_all(&pool)
            .await?
            .into_iter()
            .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1).max(0) as u64, r.get::<i64, _>(2).max(0) as u64))
            .collect();
        Ok(BlobSizes { count, bytes, rewind_bytes, image_bytes, evicted, sessions })
    }

    /// Blobs that may be evicted (not images), least recently put first:
    /// (hash, bytes), and the newest use when listed.
    pub async fn eviction_candidates(&self) -> Result<(Vec<(String, u64)>, i64), StoreError> {
        let pool = self.pool();
        let seen: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(used), 0) FROM blob_use").fetch_one(&pool).await?;
        let sql = format!(
            "SELECT b.hash, LENGTH(b.data) FROM blobs b LEFT JOIN blob_use u ON u.hash = b.hash
             WHERE b.hash NOT IN ({IMAGES}) ORDER BY COALESCE(u.used, 0), b.hash"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&pool)
            .await?
            .into_iter()
            .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1).max(0) as u64))
            .collect();
        Ok((rows, seen))
    }

    /// Whether a blob was evicted to keep the store under its bound.
    pub async fn was_evicted(&self, hash: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM evicted_blobs WHERE hash = ?")
            .bind(hash)
            .fetch_one(&self.pool())
            .await?
            > 0)
    }
}
