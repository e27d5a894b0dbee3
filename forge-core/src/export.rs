//! A whole session as JSON lines, and back: `forgectl export` /
//! `forgectl import`. The first line describes the session; then every
//! node of its tree (parents first), its bookmarks, the facts the
//! Librarian kept, and its event log, each stored event as it was.
//! Exporting an imported session gives the same lines again.
//!
//! Not exported: what tools did to files (rewind records are about this
//! machine's files), queued messages, and a fork's link to its origin (a
//! fork is exported whole and imported standing alone).

use std::collections::{HashMap, HashSet};

use forge_proto::{ErrorKind, MessageStatus, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::store::rows::NodeMeta;
use crate::store::{NodeRow, SessionRow, Store};

/// The first line's `format`.
pub const FORMAT: &str = "forge-session";
pub const VERSION: u32 = 1;

/// One line of an export.
#[allow(clippy::large_enum_variant)] // read and written one at a time
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Session {
        format: String,
        version: u32,
        id: String,
        #[serde(default)]
        name: Option<String>,
        cwd: String,
        provider: String,
        model: String,
        created_ms: i64,
        #[serde(default)]
        head: Option<String>,
    },
    Node {
        id: String,
        #[serde(default)]
        parent_id: Option<String>,
        role: Role,
        text: String,
        status: MessageStatus,
        created_ms: i64,
        #[serde(default)]
        meta: NodeMeta,
    },
    Bookmark {
        name: String,
        node: String,
    },
    Fact {
        summary_id: String,
        node_id: String,
        kind: crate::librarian::FactKind,
        text: String,
    },
    /// A stored event, exactly as clients received it.
    Event {
        event: Value,
    },
}

fn invalid(message: impl Into<String>) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}

/// Nodes ordered so every parent comes before its children (oldest
/// first among siblings).
fn parents_first(mut nodes: Vec<NodeRow>) -> Vec<NodeRow> {
    nodes.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
    let ids: HashSet<String> = nodes.iter().map(|n| n.id.clone()).collect();
    let mut children: HashMap<Option<String>, Vec<NodeRow>> = HashMap::new();
    for n in nodes {
        // A parent outside the tree makes the node a root here.
        let parent = n.parent_id.clone().filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(n);
    }
    let mut out = Vec::new();
    let mut stack: Vec<NodeRow> = children.remove(&None).unwrap_or_default().into_iter().rev().collect();
    while let Some(n) = stack.pop() {
        if let Some(kids) = children.remove(&Some(n.id.clone())) {
            stack.extend(kids.into_iter().rev());
        }
        out.push(n);
    }
    out
}

/// The lines of session `row`'s export.
pub async fn export(store: &Store, row: &SessionRow) -> Result<Vec<Line>, EngineError> {
    let mut lines = vec![Line::Session {
        format: FORMAT.into(),
        version: VERSION,
        id: row.id.clone(),
        name: row.name.clone(),
        cwd: row.cwd.clone(),
        provider: row.provider.clone(),
        model: row.model.clone(),
        created_ms: row.created_ms,
        head: row.head_id.clone(),
    }];
    let tree = store.tree(&row.id).await?;
    // The summaries of a shared path (a fork's) are part of it too.
    let mut nodes = tree.clone();
    let ids: HashSet<String> = tree.iter().map(|n| n.id.clone()).collect();
    nodes.extend(store.summaries(&row.id).await?.into_iter().filter(|s| !ids.contains(&s.id)));
    let nodes = parents_first(nodes);
    let kept: HashSet<String> = nodes.iter().map(|n| n.id.clone()).collect();
    for n in nodes {
        lines.push(Line::Node {
            id: n.id,
            parent_id: n.parent_id,
            role: n.role,
            text: n.text,
            status: n.status,
            created_ms: n.created_ms,
            meta: n.meta,
        });
    }
    for (name, node) in store.bookmarks(&row.id).await? {
        lines.push(Line::Bookmark { name, node });
    }
    for origin in store.lineage(&row.id).await? {
        for (summary_id, node_id, kind, text) in store.facts(&origin).await? {
            if kept.contains(&summary_id) {
                lines.push(Line::Fact { summary_id, node_id, kind, text });
            }
        }
    }
    let mut after = 0;
    loop {
        let page = store.events_after(&row.id, after, 10_000).await?;
        let Some((last, _)) = page.last() else { break };
        after = *last;
        for (_, body) in page {
            let event =
                serde_json::from_str(&body).map_err(|e| EngineError::internal(format!("a stored event: {e}")))?;
            lines.push(Line::Event { event });
        }
    }
    Ok(lines)
}

/// What an import writes, checked: the session, its nodes (parents
/// first), head, bookmarks, facts and events, in one batch.
pub struct Import {
    pub id: String,
    pub name: Option<String>,
    pub nodes: Vec<String>,
    pub ops: Vec<StoreOp>,
}

/// Reads `lines` and plans the import, refusing anything that would not
/// come out as it went in (ids already in the store are checked by the
/// caller, with `Import::nodes`).
pub fn plan_import(lines: Vec<Line>) -> Result<Import, EngineError> {
    let mut lines = lines.into_iter();
    let Some(Line::Session { format, version, id, name, cwd, provider, model, created_ms, head }) = lines.next() else {
        return Err(invalid(
            "not a Forge session export: its first line must be the session (`forgectl export` writes one)",
        ));
    };
    if format != FORMAT || version != VERSION {
        return Err(invalid(format!(
            "this export is {format} version {version}; this forged reads {FORMAT} version {VERSION}"
        )));
    }
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid(format!("`{id}` is not a session id")));
    }
    let mut ops = vec![StoreOp::CreateSession {
        id: id.clone(),
        name: name.clone(),
        cwd,
        provider: provider.clone(),
        model: model.clone(),
        created_ms,
    }];
    let mut nodes = HashSet::new();
    let mut seq = 0u64;
    for line in lines {
        match line {
            Line::Node { id: node, parent_id, role, text, status, created_ms, meta } => {
                if let Some(p) = parent_id.as_ref().filter(|p| !nodes.contains(*p)) {
                    return Err(invalid(format!("node {node} comes before its parent {p}")));
                }
                if !nodes.insert(node.clone()) {
                    return Err(invalid(format!("node {node} is there twice")));
                }
                ops.push(StoreOp::InsertNode {
                    id: node,
                    session_id: id.clone(),
                    parent_id,
                    role,
                    text,
                    status,
                    created_ms,
                    meta,
                });
            }
            Line::Bookmark { name, node } => {
                if !nodes.contains(&node) {
                    return Err(invalid(format!("bookmark {name} names {node}, which is not in the export")));
                }
                ops.push(StoreOp::SetBookmark { session_id: id.clone(), name, node_id: node, created_ms });
            }
            Line::Fact { summary_id, node_id, kind, text } => ops.push(StoreOp::InsertFacts {
                session_id: id.clone(),
                summary_id,
                facts: vec![crate::librarian::Fact { node_id, kind, text }],
            }),
            Line::Event { event } => {
                let ev: forge_proto::SessionEvent =
                    serde_json::from_value(event.clone()).map_err(|e| invalid(format!("event {}: {e}", seq + 1)))?;
                if ev.session_id != id || ev.seq != seq + 1 {
                    return Err(invalid(format!(
                        "event {} is not the next event of session {id} (seq {} of {})",
                        seq + 1,
                        ev.seq,
                        ev.session_id
                    )));
                }
                seq = ev.seq;
                let kind = ev.kind.name();
                let body: std::sync::Arc<str> = event.to_string().into();
                ops.push(StoreOp::AppendEvent { session_id: id.clone(), seq, ts_ms: ev.ts_ms, kind, body });
            }
            Line::Session { .. } => return Err(invalid("an export holds one session")),
        }
    }
    if let Some(h) = head.as_ref().filter(|h| !nodes.contains(*h)) {
        return Err(invalid(format!("the head {h} is not in the export")));
    }
    ops.push(StoreOp::SetHead { session_id: id.clone(), head_id: head });
    Ok(Import { id, name, nodes: nodes.into_iter().collect(), ops })
}
