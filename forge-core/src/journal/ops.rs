//! What the journal writer writes: [`StoreOp`]s grouped in
//! [`WriteBatch`]es, and how each becomes SQL.

use std::sync::Arc;

use forge_proto::{ClientRef, MessageStatus, Role, Usage};

use crate::store::rows::{NodeMeta, enum_str};

/// One change to the store. A batch's ops apply atomically, in order.
/// (Ops live only until their batch is written, so their size matters
/// little.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StoreOp {
    CreateSession {
        id: String,
        name: Option<String>,
        cwd: String,
        provider: String,
        model: String,
        created_ms: i64,
    },
    RenameSession {
        id: String,
        name: Option<String>,
    },
    /// A new session (just created) shares `from`'s path up to `node`.
    ForkSession {
        id: String,
        from: String,
        node: String,
    },
    /// An edit in place (a node without children).
    UpdateNodeText {
        id: String,
        text: String,
    },
    /// The children of `of` hang from `to` instead.
    ReparentChildren {
        of: String,
        to: Option<String>,
    },
    DeleteNodes {
        ids: Vec<String>,
    },
    /// Content kept for rewind (a no-op when stored already). Made with
    /// [`StoreOp::blob`], which keeps secrets out.
    PutBlob {
        hash: String,
        data: Vec<u8>,
    },
    /// Deletes the blobs no record needs, but for `held` (content a
    /// session's record of its roots names: the "before" of its next
    /// command).
    CollectBlobs {
        held: Vec<String>,
    },
    /// Deletes these blobs to keep the store under its bound, unless put
    /// again after `seen` (the newest use when they were chosen: a new
    /// record needs them), noting each as evicted.
    EvictBlobs {
        hashes: Vec<String>,
        seen: i64,
        at_ms: i64,
    },
    /// A tool is about to change `path`: what it holds now.
    BeginChange {
        session_id: String,
        node_id: String,
        call_id: String,
        path: String,
        before: Option<(String, u32)>,
        created_ms: i64,
    },
    /// A change found rather than made (a file edited by hand, then
    /// overwritten by a forced rewind): recorded whole, against the node
    /// after which it happened.
    RecordChange {
        session_id: String,
        node_id: String,
        call_id: String,
        path: String,
        before: Option<(String, u32)>,
        after: Option<(String, u32)>,
        created_ms: i64,
    },
    /// The tool's result: what `path` holds after it.
    EndChange {
        node_id: String,
        path: String,
        after: Option<(String, u32)>,
    },
    SetBookmark {
        session_id: String,
        name: String,
        node_id: String,
        created_ms: i64,
    },
    DeleteBookmark {
        session_id: String,
        name: String,
    },
    /// An edit made `to` in place of `from`: its bookmarks follow.
    MoveBookmarks {
        session_id: String,
        from: String,
        to: String,
    },
    RemoveSession {
        id: String,
    },
    /// Appends an event; `body` is the event's JSON as clients receive it.
    AppendEvent {
        session_id: String,
        seq: u64,
        ts_ms: i64,
        kind: &'static str,
        body: Arc<str>,
    },
    InsertNode {
        id: String,
        session_id: String,
        parent_id: Option<String>,
        role: Role,
        text: String,
        status: MessageStatus,
        created_ms: i64,
        meta: NodeMeta,
    },
    /// The Librarian's facts of a summarized span (with its summary node).
    InsertFacts {
        session_id: String,
        summary_id: String,
        facts: Vec<crate::librarian::Fact>,
    },
    SetHead {
        session_id: String,
        head_id: Option<String>,
    },
    SetModel {
        session_id: String,
        provider: String,
        model: String,
    },
    /// A git session's branch and worktree (`GitSession` as JSON).
    SetGit {
        session_id: String,
        git: String,
    },
    /// A helper agent's session: its parent and `HelperSpec` as JSON.
    SetHelper {
        session_id: String,
        parent_id: String,
        helper: String,
    },
    /// A session's own sampling parameters (`forge_proto::Sampling` as
    /// JSON).
    SetSampling {
        session_id: String,
        sampling: String,
    },
    /// A session's active files (`[ActiveFile]` as JSON).
    SetActiveFiles {
        session_id: String,
        files: String,
    },
    /// A session's approval rules (`SessionApproval` as JSON).
    SetApproval {
        session_id: String,
        approval: String,
    },
    QueuePush {
        session_id: String,
        message_id: String,
        text: String,
        context: Option<String>,
        client: Option<ClientRef>,
        created_ms: i64,
        /// Text for the running turn (`session.steer`): after a restart it
        /// runs before the other queued messages.
        steer: bool,
        /// What its command grants its turn (JSON), if anything.
        grants: Option<String>,
        /// Its images (`ImageInfo` JSON), if any.
        images: Option<String>,
    },
    QueueRemove {
        session_id: String,
        message_id: String,
    },
    QueueClear {
        session_id: String,
    },
    /// Opens a stream journal entry (with the turn's `turn_started`).
    StreamBegin {
        stream_id: String,
        session_id: String,
        message_id: String,
        provider: String,
        model: String,
        first_seq: u64,
        created_ms: i64,
    },
    /// The provider finished (or failed, or was cancelled): the outcome is
    /// durable before the answer becomes history.
    StreamSeal {
        stream_id: String,
        outcome: MessageStatus,
        error: Option<String>,
        error_kind: Option<String>,
        stop_reason: Option<String>,
        usage: Option<Usage>,
        reasoning: Vec<crate::provider::Reasoning>,
        sealed_ms: i64,
    },
    /// The answer is history: prune the journal entry.
    StreamCommit {
        stream_id: String,
    },
    /// A file's one-line summary for repository maps, by the SHA-256 of
    /// its content.
    PutRepoSummary {
        blob: String,
        summary: String,
        model: String,
        created_ms: i64,
    },
    /// What a model cost beside the conversation's answers (`kind`:
    /// `repo_summaries`, `commit_message`), for usage reports.
    AddUsage {
        session_id: String,
        cwd: String,
        kind: String,
        provider: String,
        model: String,
        usage: Usage,
        created_ms: i64,
    },
}

impl StoreOp {
    /// Sets a session's active files.
    pub fn set_active_files(session_id: &str, files: &[forge_proto::ActiveFile]) -> StoreOp {
        let files = serde_json::to_string(files).unwrap_or_else(|_| "[]".into());
        StoreOp::SetActiveFiles { session_id: session_id.to_string(), files }
    }

    /// Sets a session's own sampling parameters.
    pub fn set_sampling(session_id: &str, sampling: &forge_proto::Sampling) -> StoreOp {
        let sampling = serde_json::to_string(sampling).unwrap_or_else(|_| "{}".into());
        StoreOp::SetSampling { session_id: session_id.to_string(), sampling }
    }
}

#[derive(Debug, Default)]
pub struct WriteBatch {
    pub ops: Vec<StoreOp>,
}

/// Constraint violations are the batch's fault; anything else is the
/// store's (disk full, read-only, I/O).
pub(super) fn is_io_error(e: &rusqlite::Error) -> bool {
    !matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::ConstraintViolation))
}

impl StoreOp {
    /// Runs the op's statements on the writer's connection (inside the
    /// writer's transaction). Statements are prepared once and cached.
    pub(super) fn execute(&self, conn: &rusqlite::Connection) -> rusqlite::Result<()> {
        let run = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<()> {
            conn.prepare_cached(sql)?.execute(params)?;
            Ok(())
        };
        match self {
            StoreOp::CreateSession { id, name, cwd, provider, model, created_ms } => run(
                "INSERT INTO sessions (id, name, cwd, provider, model, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                &[id, name, cwd, provider, model, created_ms, created_ms],
            ),
            StoreOp::RenameSession { id, name } => run("UPDATE sessions SET name = ? WHERE id = ?", &[name, id]),
            StoreOp::ForkSession { id, from, node } => run(
                "UPDATE sessions SET forked_from = ?, fork_node = ?, head_id = ? WHERE id = ?",
                &[from, node, node, id],
            ),
            StoreOp::UpdateNodeText { id, text } => run("UPDATE nodes SET text = ? WHERE id = ?", &[text, id]),
            StoreOp::ReparentChildren { of, to } => {
                run("UPDATE nodes SET parent_id = ? WHERE parent_id = ?", &[to, of])
            }
            StoreOp::DeleteNodes { ids } => {
                for id in ids {
                    run("DELETE FROM nodes WHERE id = ?", &[id])?;
                    run("DELETE FROM bookmarks WHERE node_id = ?", &[id])?;
                }
                Ok(())
            }
            StoreOp::PutBlob { hash, data } => {
                run("INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)", &[hash, data])?;
                // When it was last needed (the bound evicts the oldest
                // first), and no longer evicted if it was.
                run(
                    "INSERT OR REPLACE INTO blob_use (hash, used) VALUES (?, (SELECT COALESCE(MAX(used), 0) + 1 FROM blob_use))",
                    &[hash],
                )?;
                run("DELETE FROM evicted_blobs WHERE hash = ?", &[hash])
            }
            StoreOp::CollectBlobs { held } => {
                conn.execute_batch(
                    "CREATE TEMP TABLE IF NOT EXISTS held (hash TEXT PRIMARY KEY); DELETE FROM temp.held;",
                )?;
                for h in held {
                    run("INSERT OR IGNORE INTO temp.held (hash) VALUES (?)", &[h])?;
                }
                let sql = format!(
                    "DELETE FROM blobs WHERE hash NOT IN ({}) AND hash NOT IN (SELECT hash FROM temp.held)",
                    crate::store::referenced()
                );
                conn.execute(&sql, [])?;
                conn.execute_batch(
                    "DELETE FROM blob_use WHERE hash NOT IN (SELECT hash FROM blobs); DELETE FROM temp.held;",
                )
            }
            StoreOp::EvictBlobs { hashes, seen, at_ms } => {
                for h in hashes {
                    let gone = conn
                        .prepare_cached(
                            "DELETE FROM blobs WHERE hash = ?1 AND NOT EXISTS \
                             (SELECT 1 FROM blob_use WHERE hash = ?1 AND used > ?2)",
                        )?
                        .execute(rusqlite::params![h, seen])?;
                    if gone > 0 {
                        run("DELETE FROM blob_use WHERE hash = ?", &[h])?;
                        run("INSERT OR REPLACE INTO evicted_blobs (hash, evicted_ms) VALUES (?, ?)", &[h, at_ms])?;
                    }
                }
                Ok(())
            }
            StoreOp::BeginChange { session_id, node_id, call_id, path, before, created_ms } => run(
                "INSERT OR REPLACE INTO file_changes (session_id, node_id, call_id, path, before_hash, before_mode, created_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
                &[
                    session_id,
                    node_id,
                    call_id,
                    path,
                    &before.as_ref().map(|b| b.0.clone()),
                    &before.as_ref().map(|b| b.1),
                    created_ms,
                ],
            ),
            // A tool's own record of that node and path wins; a found
            // change recorded there before gets the newest content.
            StoreOp::RecordChange { session_id, node_id, call_id, path, before, after, created_ms } => run(
                "INSERT INTO file_changes (session_id, node_id, call_id, path, before_hash, before_mode, after_hash, after_mode, done, created_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) \
                 ON CONFLICT (node_id, path) DO UPDATE SET after_hash = excluded.after_hash, after_mode = excluded.after_mode, \
                     created_ms = excluded.created_ms WHERE file_changes.call_id = excluded.call_id",
                &[
                    session_id,
                    node_id,
                    call_id,
                    path,
                    &before.as_ref().map(|b| b.0.clone()),
                    &before.as_ref().map(|b| b.1),
                    &after.as_ref().map(|a| a.0.clone()),
                    &after.as_ref().map(|a| a.1),
                    created_ms,
                ],
            ),
            StoreOp::EndChange { node_id, path, after } => run(
                "UPDATE file_changes SET after_hash = ?, after_mode = ?, done = 1 WHERE node_id = ? AND path = ?",
                &[&after.as_ref().map(|a| a.0.clone()), &after.as_ref().map(|a| a.1), node_id, path],
            ),
            StoreOp::SetBookmark { session_id, name, node_id, created_ms } => run(
                "INSERT OR REPLACE INTO bookmarks (session_id, name, node_id, created_ms) VALUES (?, ?, ?, ?)",
                &[session_id, name, node_id, created_ms],
            ),
            StoreOp::DeleteBookmark { session_id, name } => {
                run("DELETE FROM bookmarks WHERE session_id = ? AND name = ?", &[session_id, name])
            }
            StoreOp::MoveBookmarks { session_id, from, to } => {
                run("UPDATE bookmarks SET node_id = ? WHERE session_id = ? AND node_id = ?", &[to, session_id, from])
            }
            StoreOp::RemoveSession { id } => {
                // Nodes a fork shares (its fork node and what leads to it)
                // stay, with the summaries beside them; the rest of the
                // session's nodes go.
                run(
                    "WITH RECURSIVE keep(id) AS ( \
                         SELECT fork_node FROM sessions WHERE id != ?1 AND fork_node IS NOT NULL \
                         UNION SELECT n.parent_id FROM nodes n JOIN keep k ON n.id = k.id WHERE n.parent_id IS NOT NULL) \
                     DELETE FROM nodes WHERE session_id = ?1 AND id NOT IN (SELECT id FROM keep) \
                         AND NOT (role = 'summary' AND parent_id IN (SELECT id FROM keep))",
                    &[id],
                )?;
                for sql in [
                    "DELETE FROM events WHERE session_id = ?",
                    "DELETE FROM bookmarks WHERE session_id = ?",
                    // What the shared nodes' calls changed stays: a fork
                    // rewinds through them.
                    "DELETE FROM file_changes WHERE session_id = ?1 AND node_id NOT IN (SELECT id FROM nodes)",
                    "DELETE FROM queued_messages WHERE session_id = ?",
                    "DELETE FROM streams WHERE session_id = ?",
                    // The facts of summaries a fork still uses stay.
                    "DELETE FROM facts WHERE session_id = ?1 AND summary_id NOT IN (SELECT id FROM nodes)",
                    "DELETE FROM sessions WHERE id = ?",
                ] {
                    run(sql, &[id])?;
                }
                Ok(())
            }
            // A session's last seq and update time are read from its newest
            // event: no second write per event.
            StoreOp::AppendEvent { session_id, seq, ts_ms, kind, body } => run(
                "INSERT INTO events (session_id, seq, ts_ms, kind, body) VALUES (?, ?, ?, ?, ?)",
                &[session_id, &(*seq as i64), ts_ms, kind, &&**body],
            ),
            StoreOp::InsertNode { id, session_id, parent_id, role, text, status, created_ms, meta } => run(
                "INSERT INTO nodes (id, session_id, parent_id, role, text, status, created_ms, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                &[
                    id,
                    session_id,
                    parent_id,
                    &enum_str(role),
                    text,
                    &enum_str(status),
                    created_ms,
                    &serde_json::to_string(meta).unwrap_or_else(|_| "{}".into()),
                ],
            ),
            StoreOp::InsertFacts { session_id, summary_id, facts } => {
                for f in facts {
                    run(
                        "INSERT INTO facts (text, kind, session_id, node_id, summary_id) VALUES (?, ?, ?, ?, ?)",
                        &[&f.text, &f.kind.as_str(), session_id, &f.node_id, summary_id],
                    )?;
                }
                Ok(())
            }
            StoreOp::SetHead { session_id, head_id } => {
                run("UPDATE sessions SET head_id = ? WHERE id = ?", &[head_id, session_id])
            }
            StoreOp::SetModel { session_id, provider, model } => {
                run("UPDATE sessions SET provider = ?, model = ? WHERE id = ?", &[provider, model, session_id])
            }
            StoreOp::SetGit { session_id, git } => run("UPDATE sessions SET git = ? WHERE id = ?", &[git, session_id]),
            StoreOp::SetHelper { session_id, parent_id, helper } => {
                run("UPDATE sessions SET parent_id = ?, helper = ? WHERE id = ?", &[parent_id, helper, session_id])
            }
            StoreOp::SetActiveFiles { session_id, files } => {
                run("UPDATE sessions SET active_files = ? WHERE id = ?", &[files, session_id])
            }
            StoreOp::SetSampling { session_id, sampling } => {
                run("UPDATE sessions SET sampling = ? WHERE id = ?", &[sampling, session_id])
            }
            StoreOp::SetApproval { session_id, approval } => {
                run("UPDATE sessions SET approval = ? WHERE id = ?", &[approval, session_id])
            }
            StoreOp::QueuePush { session_id, message_id, text, context, client, created_ms, steer, grants, images } => {
                run(
                    "INSERT INTO queued_messages (session_id, message_id, text, context, client, created_ms, steer, grants, images) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    &[
                        session_id,
                        message_id,
                        text,
                        context,
                        &client.as_ref().and_then(|c| serde_json::to_string(c).ok()),
                        created_ms,
                        steer,
                        grants,
                        images,
                    ],
                )
            }
            StoreOp::QueueRemove { session_id, message_id } => {
                run("DELETE FROM queued_messages WHERE session_id = ? AND message_id = ?", &[session_id, message_id])
            }
            StoreOp::QueueClear { session_id } => {
                run("DELETE FROM queued_messages WHERE session_id = ?", &[session_id])
            }
            StoreOp::StreamBegin { stream_id, session_id, message_id, provider, model, first_seq, created_ms } => run(
                "INSERT INTO streams (stream_id, session_id, message_id, provider, model, first_seq, state, created_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, 'open', ?)",
                &[stream_id, session_id, message_id, provider, model, &(*first_seq as i64), created_ms],
            ),
            StoreOp::StreamSeal { stream_id, outcome, error, error_kind, stop_reason, usage, reasoning, sealed_ms } => {
                run(
                    "UPDATE streams SET state = 'sealed', outcome = ?, error = ?, error_kind = ?, stop_reason = ?, usage = ?, reasoning = ?, sealed_ms = ? \
                 WHERE stream_id = ? AND state = 'open'",
                    &[
                        &enum_str(outcome),
                        error,
                        error_kind,
                        stop_reason,
                        &usage.as_ref().and_then(|u| serde_json::to_string(u).ok()),
                        &(!reasoning.is_empty()).then(|| serde_json::to_string(reasoning).ok()).flatten(),
                        sealed_ms,
                        stream_id,
                    ],
                )
            }
            StoreOp::StreamCommit { stream_id } => run("DELETE FROM streams WHERE stream_id = ?", &[stream_id]),
            StoreOp::PutRepoSummary { blob, summary, model, created_ms } => run(
                "INSERT OR REPLACE INTO repo_summaries (blob, summary, model, created_ms) VALUES (?, ?, ?, ?)",
                &[blob, summary, model, created_ms],
            ),
            StoreOp::AddUsage { session_id, cwd, kind, provider, model, usage, created_ms } => run(
                "INSERT INTO extra_usage (session_id, cwd, kind, provider, model, usage, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                &[session_id, cwd, kind, provider, model, &serde_json::to_string(usage).ok(), created_ms],
            ),
        }
    }
}

impl StoreOp {
    /// Content to keep for rewind, unless it holds a secret (a key, a
    /// token, a private key): the store never holds one. Rewind then
    /// leaves such a file as it is, saying why.
    pub fn blob(hash: String, data: Vec<u8>) -> Option<StoreOp> {
        (!crate::redact::holds_secret(&data)).then_some(StoreOp::PutBlob { hash, data })
    }
}
