//! The Forest: a session's conversation tree as read from the store, and
//! the questions asked of it (children, siblings, leaves, paths). Every
//! node has a parent (none for a root); a session is a head in this tree,
//! and a fork shares its origin's path up to the fork node. Mutations are
//! `StoreOp`s the session actor journals; this module only reads.

use std::collections::HashMap;

use forge_proto::Role;

use crate::store::NodeRow;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForestError {
    #[error("no node `{0}` in this session's tree; `forgectl tree SESSION` lists them")]
    NoSuchNode(String),
    /// A node names a parent the store does not have.
    #[error("the history is broken at node `{node}`: its parent `{parent}` is missing")]
    BrokenChain { node: String, parent: String },
    #[error(
        "no node `{node}` in session {session} (by id, id prefix or bookmark); `forgectl tree {session}` lists them"
    )]
    Unnamed { node: String, session: String },
    #[error("`{node}` matches {count} nodes; give more of the id")]
    Ambiguous { node: String, count: usize },
}

/// A session's tree: its own nodes, and the path it shares with the
/// session it was forked from.
#[derive(Debug, Default)]
pub struct Forest {
    nodes: HashMap<String, NodeRow>,
    /// Children by parent (`None`: the roots), oldest first.
    children: HashMap<Option<String>, Vec<String>>,
    /// The session's bookmarks (name, node), when read with the tree.
    bookmarks: Vec<(String, String)>,
}

impl Forest {
    pub fn new(mut rows: Vec<NodeRow>) -> Forest {
        rows.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then_with(|| a.id.cmp(&b.id)));
        let mut forest = Forest::default();
        for row in rows {
            forest.children.entry(row.parent_id.clone()).or_default().push(row.id.clone());
            forest.nodes.insert(row.id.clone(), row);
        }
        forest
    }

    /// The same tree, its nodes nameable by the session's bookmarks too.
    pub fn with_bookmarks(mut self, bookmarks: Vec<(String, String)>) -> Forest {
        self.bookmarks = bookmarks;
        self
    }

    /// The node a user names: by id, bookmark, or unique id prefix (the
    /// one reading of a node's name, for every command that takes one).
    pub fn resolve(&self, session: &str, node: &str) -> Result<String, ForestError> {
        let node = node.trim();
        if self.contains(node) {
            return Ok(node.to_string());
        }
        if let Some((_, id)) = self.bookmarks.iter().find(|(name, _)| name == node) {
            return Ok(id.clone());
        }
        let mut matches = self.nodes.keys().filter(|id| !node.is_empty() && id.starts_with(node));
        match (matches.next(), matches.count()) {
            (Some(one), 0) => Ok(one.clone()),
            (None, _) => Err(ForestError::Unnamed { node: node.to_string(), session: session.to_string() }),
            (Some(_), more) => Err(ForestError::Ambiguous { node: node.to_string(), count: more + 1 }),
        }
    }

    pub fn get(&self, id: &str) -> Result<&NodeRow, ForestError> {
        self.nodes.get(id).ok_or_else(|| ForestError::NoSuchNode(id.to_string()))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.nodes.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node, oldest first.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeRow> {
        let mut all: Vec<&NodeRow> = self.nodes.values().collect();
        all.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then_with(|| a.id.cmp(&b.id)));
        all.into_iter()
    }

    /// The children of `id` (`None`: the roots), oldest first, summaries
    /// included.
    pub fn children(&self, id: Option<&str>) -> &[String] {
        self.children.get(&id.map(str::to_string)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The conversation children of `id`: its children less the summaries
    /// hanging beside the path.
    pub fn replies(&self, id: Option<&str>) -> Vec<&NodeRow> {
        self.children(id).iter().filter_map(|c| self.nodes.get(c)).filter(|n| n.role != Role::Summary).collect()
    }

    /// `id` and its siblings (summaries left out), oldest first, and where
    /// `id` stands among them.
    pub fn siblings(&self, id: &str) -> Result<(Vec<&NodeRow>, usize), ForestError> {
        let node = self.get(id)?;
        let all = self.replies(node.parent_id.as_deref());
        let at = all.iter().position(|n| n.id == id).unwrap_or(0);
        Ok((all, at))
    }

    /// The nodes that end a branch (no reply after them), oldest first.
    pub fn leaves(&self) -> Vec<&NodeRow> {
        self.nodes().filter(|n| n.role != Role::Summary && self.replies(Some(&n.id)).is_empty()).collect()
    }

    /// Root to `id`, checking that every link is there.
    pub fn path(&self, id: &str) -> Result<Vec<&NodeRow>, ForestError> {
        let mut out = vec![self.get(id)?];
        while let Some(parent) = out.last().and_then(|n| n.parent_id.as_deref()) {
            match self.nodes.get(parent) {
                Some(p) => out.push(p),
                None => {
                    let node = out.last().map(|n| n.id.clone()).unwrap_or_default();
                    return Err(ForestError::BrokenChain { node, parent: parent.to_string() });
                }
            }
            if out.len() > self.nodes.len() {
                // A cycle can only come from a corrupt store.
                return Err(ForestError::BrokenChain { node: id.to_string(), parent: parent.to_string() });
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Every node under `id` (not `id`), parents before children.
    pub fn descendants(&self, id: &str) -> Vec<&NodeRow> {
        let mut out = Vec::new();
        let mut stack: Vec<&str> = self.children(Some(id)).iter().rev().map(String::as_str).collect();
        while let Some(next) = stack.pop() {
            if let Some(n) = self.nodes.get(next) {
                out.push(n);
                stack.extend(self.children(Some(next)).iter().rev().map(String::as_str));
            }
        }
        out
    }

    /// The newest leaf under `id` (itself if it has no reply): where a
    /// checkout of a branch's earlier node would continue.
    pub fn newest_leaf_under<'a>(&'a self, id: &'a str) -> &'a str {
        let mut at = id;
        loop {
            let replies = self.replies(Some(at));
            match replies.iter().max_by_key(|n| (n.created_ms, n.id.clone())) {
                Some(n) => at = n.id.as_str(),
                None => return at,
            }
        }
    }
}

/// The first words of a message, on one line.
pub fn preview(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max_chars) {
        None => flat,
        Some((end, _)) => format!("{}...", &flat[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::NodeMeta;
    use forge_proto::MessageStatus;

    pub(crate) fn node(id: &str, parent: Option<&str>, role: Role, at: i64) -> NodeRow {
        NodeRow {
            id: id.into(),
            session_id: "s".into(),
            parent_id: parent.map(str::to_string),
            role,
            text: format!("text of {id}"),
            status: MessageStatus::Complete,
            created_ms: at,
            meta: NodeMeta::default(),
        }
    }

    fn sample() -> Forest {
        Forest::new(vec![
            node("u1", None, Role::User, 1),
            node("a1", Some("u1"), Role::Assistant, 2),
            node("u2", Some("a1"), Role::User, 3),
            node("a2", Some("u2"), Role::Assistant, 4),
            node("sum", Some("a1"), Role::Summary, 5),
            node("u2b", Some("a1"), Role::User, 6),
        ])
    }

    #[test]
    fn a_node_is_named_by_id_bookmark_or_unique_prefix() {
        let f = sample().with_bookmarks(vec![("start".into(), "u1".into())]);
        assert_eq!(f.resolve("s", "u2"), Ok("u2".into()), "an id, though a prefix of another");
        assert_eq!(f.resolve("s", " start "), Ok("u1".into()), "a bookmark, trimmed");
        assert_eq!(f.resolve("s", "su"), Ok("sum".into()), "a unique prefix");
        assert_eq!(f.resolve("s", "a"), Err(ForestError::Ambiguous { node: "a".into(), count: 2 }));
        assert!(matches!(f.resolve("s", "zz"), Err(ForestError::Unnamed { .. })));
        assert!(matches!(f.resolve("s", ""), Err(ForestError::Unnamed { .. })), "nothing names no node");
    }

    #[test]
    fn children_siblings_leaves_and_paths() {
        let f = sample();
        assert_eq!(f.children(None), ["u1"]);
        assert_eq!(f.children(Some("a1")), ["u2", "sum", "u2b"]);
        let (sibs, at) = f.siblings("u2b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((sibs.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), at), (vec!["u2", "u2b"], 1));
        let leaves: Vec<&str> = f.leaves().iter().map(|n| n.id.as_str()).collect();
        assert_eq!(leaves, ["a2", "u2b"], "summaries are not branches");
        let path: Vec<&str> = f.path("a2").unwrap_or_else(|e| panic!("{e}")).iter().map(|n| n.id.as_str()).collect();
        assert_eq!(path, ["u1", "a1", "u2", "a2"]);
        let under: Vec<&str> = f.descendants("a1").iter().map(|n| n.id.as_str()).collect();
        assert_eq!(under, ["u2", "a2", "sum", "u2b"]);
        assert_eq!(f.newest_leaf_under("u1"), "u2b");
    }

    #[test]
    fn a_missing_node_or_a_broken_chain_is_an_error() {
        let f = Forest::new(vec![node("a", Some("gone"), Role::User, 1)]);
        assert_eq!(f.path("a").err(), Some(ForestError::BrokenChain { node: "a".into(), parent: "gone".into() }));
        assert_eq!(f.get("x").err(), Some(ForestError::NoSuchNode("x".into())));
    }

    #[test]
    fn previews_are_one_short_line() {
        assert_eq!(preview("fix   the\nbuild please", 12), "fix the buil...");
        assert_eq!(preview("short", 12), "short");
    }
}
