//! The SQLite store (`$FORGE_HOME/forge.db`, WAL): sessions, the history
//! tree, the event log and the message queue. This module opens it and
//! answers reads; every write goes through the journal writer
//! ([`crate::journal`]), the single writer of the database.

mod blobs;
mod events;
pub mod rows;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Row, SqlitePool};

pub use blobs::BlobSizes;
pub(crate) use blobs::referenced;
use rows::NodeMeta;
pub use rows::{Durability, FactRow, HelperSpec, NodeRow, QueuedRow, SessionRow, StreamRow, UsageRow};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("corrupt record in the store: {0}")]
    Corrupt(String),
}

/// A `file_changes` row: node, path, before (hash, mode), after, done.
type ChangeRow = (String, String, Option<String>, Option<i64>, Option<String>, Option<i64>, i64);

/// Read access to the store, shared by all sessions and RPC handlers.
#[derive(Clone)]
pub struct Store {
    /// Replaced when the database is written back after it was deleted on
    /// disk (see [`Store::reopen`]); every clone sees the new pool.
    pool: Arc<RwLock<SqlitePool>>,
    path: PathBuf,
    durability: Durability,
}

fn options(path: &Path, durability: Durability) -> Result<SqliteConnectOptions, StoreError> {
    let url = format!("sqlite://{}", path.display());
    Ok(SqliteConnectOptions::from_str(&url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(match durability {
            Durability::Process => SqliteSynchronous::Normal,
            Durability::Power => SqliteSynchronous::Full,
        })
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(false))
}

async fn read_pool(opts: SqliteConnectOptions) -> Result<SqlitePool, StoreError> {
    Ok(SqlitePoolOptions::new().max_connections(4).min_connections(1).connect_with(opts.read_only(true)).await?)
}

impl Store {
    /// Opens (creating and migrating if needed) the store for reading. All
    /// writes go through the journal writer's own connection.
    pub async fn open(path: &Path, durability: Durability) -> Result<Store, StoreError> {
        let opts = options(path, durability)?;
        let mut migrator = opts.clone().connect().await?;
        sqlx::migrate!("./migrations").run(&mut migrator).await?;
        // Content no change record refers to (a removed session's, what a
        // command's scan read of files it then left alone) goes; no
        // session holds a scan yet.
        // (Built from constant text only.)
        let collect = format!("DELETE FROM blobs WHERE hash NOT IN ({})", referenced());
        sqlx::query(sqlx::AssertSqlSafe(collect)).execute(&mut migrator).await?;
        sqlx::query("DELETE FROM blob_use WHERE hash NOT IN (SELECT hash FROM blobs)").execute(&mut migrator).await?;
        migrator.close().await?;
        let pool = read_pool(opts).await?;
        Ok(Store { pool: Arc::new(RwLock::new(pool)), path: path.to_path_buf(), durability })
    }

    /// Opens new read connections to the file now at the store's path and
    /// closes the old ones (which read a database removed from disk).
    pub async fn reopen(&self) -> Result<(), StoreError> {
        let fresh = read_pool(options(&self.path, self.durability)?).await?;
        let old = std::mem::replace(&mut *self.pool.write().unwrap_or_else(|p| p.into_inner()), fresh);
        old.close().await;
        Ok(())
    }

    fn pool(&self) -> SqlitePool {
        self.pool.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub async fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.id, s.name, s.cwd, s.provider, s.model, s.created_ms, s.head_id, s.approval, s.git, s.helper, s.sampling, s.active_files,
                    COALESCE(e.seq, 0) AS last_seq, COALESCE(e.ts_ms, s.created_ms) AS updated_ms
             FROM sessions s
             LEFT JOIN events e ON e.session_id = s.id
                  AND e.seq = (SELECT MAX(seq) FROM events WHERE session_id = s.id)
             ORDER BY s.id",
        )
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(SessionRow::from_row).collect()
    }

    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let row = sqlx::query(
            "SELECT s.id, s.name, s.cwd, s.provider, s.model, s.created_ms, s.head_id, s.approval, s.git, s.helper, s.sampling, s.active_files,
                    COALESCE(e.seq, 0) AS last_seq, COALESCE(e.ts_ms, s.created_ms) AS updated_ms
             FROM sessions s
             LEFT JOIN events e ON e.session_id = s.id
                  AND e.seq = (SELECT MAX(seq) FROM events WHERE session_id = s.id)
             WHERE s.id = ?",
        )
        .bind(id)
        .fetch_optional(&self.pool())
        .await?;
        row.as_ref().map(SessionRow::from_row).transpose()
    }

    /// Ids matching a selector: exact id, exact name, or id prefix (at most
    /// two, enough to tell unique from ambiguous).
    pub async fn find_session_ids(&self, selector: &str) -> Result<Vec<String>, StoreError> {
        let exact: Option<String> = sqlx::query_scalar("SELECT id FROM sessions WHERE id = ? OR name = ? LIMIT 1")
            .bind(selector)
            .bind(selector)
            .fetch_optional(&self.pool())
            .await?;
        if let Some(id) = exact {
            return Ok(vec![id]);
        }
        let escaped = selector.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 2")
                .bind(format!("{escaped}%"))
                .fetch_all(&self.pool())
                .await?;
        Ok(ids)
    }

    pub async fn name_owner(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT id FROM sessions WHERE name = ?").bind(name).fetch_optional(&self.pool()).await?)
    }

    /// The path from the root to `head`, oldest first.
    pub async fn path_to(&self, head: &str) -> Result<Vec<NodeRow>, StoreError> {
        let rows = sqlx::query(
            "WITH RECURSIVE path(id, parent_id, session_id, role, text, status, created_ms, meta, depth) AS (
                 SELECT id, parent_id, session_id, role, text, status, created_ms, meta, 0 FROM nodes WHERE id = ?
                 UNION ALL
                 SELECT n.id, n.parent_id, n.session_id, n.role, n.text, n.status, n.created_ms, n.meta, p.depth + 1
                 FROM nodes n JOIN path p ON n.id = p.parent_id
             )
             SELECT id, parent_id, session_id, role, text, status, created_ms, meta FROM path ORDER BY depth DESC",
        )
        .bind(head)
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(NodeRow::from_row).collect()
    }

    /// The Librarian's facts of a session matching an FTS5 expression
    /// (see [`crate::librarian::match_expression`]), best first, with the
    /// node each cites.
    pub async fn recall(&self, session: &str, expression: &str, limit: u32) -> Result<Vec<FactRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT facts.kind AS fact_kind, facts.text AS fact_text, facts.summary_id AS fact_summary, n.id, n.parent_id, n.session_id, n.role, n.text, n.status, n.created_ms, n.meta
             FROM facts JOIN nodes n ON n.id = facts.node_id
             WHERE facts MATCH ? AND facts.session_id = ? ORDER BY rank LIMIT ?",
        )
        .bind(expression)
        .bind(session)
        .bind(i64::from(limit))
        .fetch_all(&self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(FactRow {
                    kind: r.try_get("fact_kind")?,
                    text: r.try_get("fact_text")?,
                    summary_id: r.try_get("fact_summary")?,
                    node: NodeRow::from_row(r)?,
                })
            })
            .collect()
    }

    /// A session's tree: its own nodes, and the path it shares with the
    /// session it was forked from (up to its head and fork node).
    pub async fn tree(&self, session: &str) -> Result<Vec<NodeRow>, StoreError> {
        let rows = sqlx::query(
            "WITH RECURSIVE t(id) AS (
                 SELECT id FROM nodes WHERE session_id = ?1
                 UNION SELECT head_id FROM sessions WHERE id = ?1 AND head_id IS NOT NULL
                 UNION SELECT fork_node FROM sessions WHERE id = ?1 AND fork_node IS NOT NULL
                 UNION SELECT n.parent_id FROM nodes n JOIN t ON n.id = t.id WHERE n.parent_id IS NOT NULL
             )
             SELECT id, parent_id, session_id, role, text, status, created_ms, meta FROM nodes
             WHERE id IN (SELECT id FROM t)",
        )
        .bind(session)
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(NodeRow::from_row).collect()
    }

    /// The file changes recorded for these sessions' tool calls.
    pub async fn file_changes(&self, sessions: &[String]) -> Result<Vec<rows::Change>, StoreError> {
        let mut out = Vec::new();
        for s in sessions {
            let rows: Vec<ChangeRow> = sqlx::query_as(
                "SELECT node_id, path, before_hash, before_mode, after_hash, after_mode, done FROM file_changes
                     WHERE session_id = ? ORDER BY created_ms",
            )
            .bind(s)
            .fetch_all(&self.pool())
            .await?;
            let state = |h: Option<String>, m: Option<i64>| h.map(|h| (h, m.unwrap_or(0o644) as u32));
            out.extend(rows.into_iter().map(|(node_id, path, bh, bm, ah, am, done)| rows::Change {
                node_id,
                path,
                before: state(bh, bm),
                after: state(ah, am),
                done: done != 0,
            }));
        }
        Ok(out)
    }

    /// File changes of calls whose result was never recorded (a crash
    /// interrupted them): call id to the node their result is to be.
    pub async fn interrupted_changes(
        &self,
        session: &str,
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT DISTINCT call_id, node_id FROM file_changes
             WHERE session_id = ? AND done = 0 AND node_id NOT IN (SELECT id FROM nodes)",
        )
        .bind(session)
        .fetch_all(&self.pool())
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// The complete user messages under the session's head (its roots
    /// when it has none) whose text is exactly `text`, oldest first, in
    /// one query: (id, the head, for a root the digest of its system
    /// prompt).
    pub(crate) async fn user_messages_under_head(
        &self,
        session: &str,
        text: &str,
    ) -> Result<Vec<rows::SameMessage>, StoreError> {
        let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT n.id, s.head_id, json_extract(n.meta, '$.system_prompt') FROM sessions s JOIN nodes n
               ON (n.parent_id = s.head_id OR (s.head_id IS NULL AND n.parent_id IS NULL AND n.session_id = s.id))
             WHERE s.id = ? AND n.role = 'user' AND n.status = 'complete' AND n.text = ?
             ORDER BY n.created_ms LIMIT 16",
        )
        .bind(session)
        .bind(text)
        .fetch_all(&self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(node, under, system_prompt)| rows::SameMessage { node, under, system_prompt })
            .collect())
    }

    /// A blob's content.
    pub async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(sqlx::query_scalar("SELECT data FROM blobs WHERE hash = ?").bind(hash).fetch_optional(&self.pool()).await?)
    }

    /// A session's bookmarks: (name, node), by name.
    pub async fn bookmarks(&self, session: &str) -> Result<Vec<(String, String)>, StoreError> {
        Ok(sqlx::query_as("SELECT name, node_id FROM bookmarks WHERE session_id = ? ORDER BY name")
            .bind(session)
            .fetch_all(&self.pool())
            .await?)
    }

    /// The session a session was forked from, if it was.
    pub async fn forked_from(&self, session: &str) -> Result<Option<String>, StoreError> {
        let v: Option<Option<String>> = sqlx::query_scalar("SELECT forked_from FROM sessions WHERE id = ?")
            .bind(session)
            .fetch_optional(&self.pool())
            .await?;
        Ok(v.flatten())
    }

    /// One node of a session.
    pub async fn node(&self, session: &str, id: &str) -> Result<Option<NodeRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, parent_id, session_id, role, text, status, created_ms, meta FROM nodes WHERE id = ? AND session_id = ?",
        )
        .bind(id)
        .bind(session)
        .fetch_optional(&self.pool())
        .await?;
        row.as_ref().map(NodeRow::from_row).transpose()
    }

    /// The session, then the session it was forked from, and so on: the
    /// sessions whose nodes it may share.
    pub async fn lineage(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let mut sessions = vec![session.to_string()];
        while let Some(origin) = self.forked_from(sessions.last().map(String::as_str).unwrap_or_default()).await? {
            if sessions.contains(&origin) {
                break;
            }
            sessions.push(origin);
        }
        Ok(sessions)
    }

    /// The summary nodes of the session, and those of the sessions it was
    /// forked from that summarize the path it shares, oldest first.
    pub async fn summaries(&self, session: &str) -> Result<Vec<NodeRow>, StoreError> {
        let mut out = Vec::new();
        let lineage = self.lineage(session).await?;
        let shared: std::collections::HashSet<String> = match lineage.len() {
            1 => Default::default(),
            _ => self.tree(session).await?.into_iter().map(|n| n.id).collect(),
        };
        for s in lineage {
            let own = s == session;
            let rows = sqlx::query(
                "SELECT id, parent_id, session_id, role, text, status, created_ms, meta FROM nodes
                 WHERE session_id = ? AND role = 'summary'",
            )
            .bind(&s)
            .fetch_all(&self.pool())
            .await?;
            for r in &rows {
                let n = NodeRow::from_row(r)?;
                if own || n.parent_id.as_ref().is_some_and(|p| shared.contains(p)) {
                    out.push(n);
                }
            }
        }
        out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(out)
    }

    /// Every provider response's usage (from the answers' history nodes),
    /// of one session or all, from a time on, oldest first.
    pub async fn usage_rows(&self, session: Option<&str>, since_ms: Option<i64>) -> Result<Vec<UsageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT n.session_id, s.cwd, n.created_ms, n.meta FROM nodes n JOIN sessions s ON s.id = n.session_id
             WHERE n.role IN ('assistant', 'summary') AND instr(n.meta, '\"usage\"') > 0
               AND (?1 IS NULL OR n.session_id IN (WITH RECURSIVE tree(id) AS
                     (SELECT ?1 UNION SELECT c.id FROM sessions c JOIN tree ON c.parent_id = tree.id)
                     SELECT id FROM tree))
               AND (?2 IS NULL OR n.created_ms >= ?2)
             ORDER BY n.created_ms",
        )
        .bind(session)
        .bind(since_ms)
        .fetch_all(&self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let meta: String = r.try_get("meta")?;
            let meta: NodeMeta =
                serde_json::from_str(&meta).map_err(|e| StoreError::Corrupt(format!("node meta: {e}")))?;
            let Some(usage) = meta.message.usage else { continue };
            out.push(UsageRow {
                session_id: r.try_get("session_id")?,
                cwd: r.try_get("cwd")?,
                created_ms: r.try_get("created_ms")?,
                provider: meta.message.provider.unwrap_or_default(),
                model: meta.message.model.unwrap_or_default(),
                usage,
            });
        }
        // What models cost beside the answers (repository summaries,
        // commit messages).
        let extra = sqlx::query(
            "SELECT session_id, cwd, created_ms, provider, model, usage FROM extra_usage
             WHERE (?1 IS NULL OR session_id IN (WITH RECURSIVE tree(id) AS
                     (SELECT ?1 UNION SELECT c.id FROM sessions c JOIN tree ON c.parent_id = tree.id)
                     SELECT id FROM tree))
               AND (?2 IS NULL OR created_ms >= ?2)",
        )
        .bind(session)
        .bind(since_ms)
        .fetch_all(&self.pool())
        .await?;
        for r in &extra {
            let usage: String = r.try_get("usage")?;
            let Ok(usage) = serde_json::from_str(&usage) else { continue };
            out.push(UsageRow {
                session_id: r.try_get("session_id")?,
                cwd: r.try_get("cwd")?,
                created_ms: r.try_get("created_ms")?,
                provider: r.try_get("provider")?,
                model: r.try_get("model")?,
                usage,
            });
        }
        out.sort_by_key(|u| u.created_ms);
        Ok(out)
    }

    /// The repository-map summaries kept for these contents (by SHA-256).
    pub async fn repo_summaries(
        &self,
        blobs: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let list = serde_json::to_string(blobs).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT blob, summary FROM repo_summaries WHERE blob IN (SELECT value FROM json_each(?))")
                .bind(list)
                .fetch_all(&self.pool())
                .await?;
        Ok(rows.into_iter().collect())
    }

    /// A session's Librarian facts: (summary, node, kind, text), in the
    /// order they were kept.
    pub async fn facts(&self, session: &str) -> Result<Vec<(String, String, rows::FactKind, String)>, StoreError> {
        let rows: Vec<(String, String, String, String)> =
            sqlx::query_as("SELECT summary_id, node_id, kind, text FROM facts WHERE session_id = ? ORDER BY rowid")
                .bind(session)
                .fetch_all(&self.pool())
                .await?;
        rows.into_iter().map(|(s, n, k, t)| Ok((s, n, rows::parse_enum(&k)?, t))).collect()
    }

    /// Which of these node ids the store holds already.
    pub async fn existing_nodes(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        Ok(sqlx::query_scalar("SELECT id FROM nodes WHERE id IN (SELECT value FROM json_each(?))")
            .bind(list)
            .fetch_all(&self.pool())
            .await?)
    }

    pub async fn queued(&self, session: &str) -> Result<Vec<QueuedRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT session_id, message_id, text, context, client, created_ms, grants, images FROM queued_messages WHERE session_id = ? ORDER BY steer DESC, message_id",
        )
        .bind(session)
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(QueuedRow::from_row).collect()
    }

    /// Sessions that need their actor at start-up: a turn was running when
    /// the daemon stopped, messages wait in the queue, a rewind or a git
    /// turn's commit was not finished.
    pub async fn sessions_needing_attention(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT session_id FROM queued_messages UNION SELECT session_id FROM streams
             UNION SELECT s.id FROM sessions s WHERE
               (SELECT MAX(seq) FROM events e WHERE e.session_id = s.id AND e.kind = 'turn_started') >
               COALESCE((SELECT MAX(seq) FROM events e WHERE e.session_id = s.id AND e.kind = 'turn_finished'), 0)
               OR (SELECT MAX(seq) FROM events e WHERE e.session_id = s.id AND e.kind = 'rewind_started') >
               COALESCE((SELECT MAX(seq) FROM events e WHERE e.session_id = s.id AND e.kind = 'files_restored'), 0)
               OR (s.git IS NOT NULL AND
                 (SELECT MAX(seq) FROM events e WHERE e.session_id = s.id AND e.kind = 'turn_finished') >
                 COALESCE((SELECT MAX(seq) FROM events e WHERE e.session_id = s.id
                   AND e.kind IN ('git_committed', 'git_commit_failed')), 0))",
        )
        .fetch_all(&self.pool())
        .await?)
    }

    /// The helper session `parent`'s call `call_id` of answer `answer`
    /// started last, if any.
    pub async fn helper_of(
        &self,
        parent: &str,
        answer: Option<&str>,
        call_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM sessions WHERE parent_id = ? AND json_extract(helper, '$.of.answer') IS ?
               AND json_extract(helper, '$.of.call_id') = ? ORDER BY id DESC LIMIT 1",
        )
        .bind(parent)
        .bind(answer)
        .bind(call_id)
        .fetch_optional(&self.pool())
        .await?)
    }

    pub async fn close(&self) {
        self.pool().close().await;
    }
}

impl Store {
    /// Messages on each session's path, from its root to its head (what
    /// its history shows; a fork's shared path included, branches off it
    /// and summaries beside it not).
    pub async fn node_counts(&self) -> Result<std::collections::HashMap<String, u64>, StoreError> {
        let rows = sqlx::query(
            "WITH RECURSIVE p(session_id, id) AS (
                 SELECT id, head_id FROM sessions WHERE head_id IS NOT NULL
                 UNION ALL SELECT p.session_id, n.parent_id FROM nodes n JOIN p ON n.id = p.id
                     WHERE n.parent_id IS NOT NULL)
             SELECT session_id, COUNT(*) AS n FROM p GROUP BY session_id",
        )
        .fetch_all(&self.pool())
        .await?;
        rows.iter().map(|r| Ok((r.try_get::<String, _>("session_id")?, r.try_get::<i64, _>("n")? as u64))).collect()
    }
}
