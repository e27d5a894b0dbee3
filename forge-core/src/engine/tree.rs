//! The conversation tree as queries answer it: every node, and the
//! branches. (Checkout, edit, rewind, bookmarks, delete and split are the
//! session machine's: `session/machine/tree.rs`.)

use super::*;

impl Engine {
    /// A node of a session's tree named by id, bookmark or id prefix.
    /// Every node of a session's tree, with its head and bookmarks.
    pub async fn tree(&self, selector: &str) -> Result<forge_proto::TreeInfo, EngineError> {
        let id = self.resolve(selector).await?;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let forest = Forest::new(store.tree(&id).await?);
        let on_path: std::collections::HashSet<&str> = match row.head_id.as_deref() {
            Some(h) => forest.path(h)?.into_iter().map(|n| n.id.as_str()).collect(),
            None => Default::default(),
        };
        let bookmarks = store.bookmarks(&id).await?;
        let mut files: std::collections::HashMap<String, Vec<String>> = Default::default();
        // A call that left a file as it was (it failed, say) changed nothing.
        for c in self.lineage_changes(&id).await?.into_iter().filter(|c| !(c.done && c.before == c.after)) {
            let paths = files.entry(c.node_id).or_default();
            if !paths.contains(&c.path) {
                paths.push(c.path);
            }
        }
        let marks = |node: &str| -> Vec<String> {
            bookmarks.iter().filter(|(_, n)| n == node).map(|(name, _)| name.clone()).collect()
        };
        let nodes = forest
            .nodes()
            .map(|n| forge_proto::TreeNode {
                id: n.id.clone(),
                parent_id: n.parent_id.clone(),
                role: n.role,
                preview: crate::forest::preview(&n.text, 60),
                status: n.status,
                created_ms: n.created_ms,
                replies: forest.replies(Some(&n.id)).len() as u32,
                on_path: on_path.contains(n.id.as_str()),
                bookmarks: marks(&n.id),
                files: files.remove(&n.id).unwrap_or_default(),
                system_prompt: n.meta.system_prompt.clone(),
            })
            .collect();
        Ok(forge_proto::TreeInfo {
            session_id: id.clone(),
            head: row.head_id,
            forked_from: store.forked_from(&id).await?,
            nodes,
        })
    }

    /// The file changes recorded in a session and the sessions it was
    /// forked from (a fork shares their nodes).
    pub(super) async fn lineage_changes(&self, id: &str) -> Result<Vec<crate::rewind::Change>, EngineError> {
        crate::session::lineage_changes(&self.shared().store, id).await
    }

    /// Where each branch of a session's tree ends.
    pub async fn branches(&self, selector: &str) -> Result<Vec<forge_proto::BranchInfo>, EngineError> {
        let id = self.resolve(selector).await?;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let forest = Forest::new(store.tree(&id).await?);
        let head_path: std::collections::HashSet<String> = match row.head_id.as_deref() {
            Some(h) => forest.path(h)?.into_iter().map(|n| n.id.clone()).collect(),
            None => Default::default(),
        };
        let bookmarks = store.bookmarks(&id).await?;
        let mut out = Vec::new();
        for leaf in forest.leaves() {
            let path = forest.path(&leaf.id)?;
            out.push(forge_proto::BranchInfo {
                leaf: leaf.id.clone(),
                role: leaf.role,
                preview: crate::forest::preview(&leaf.text, 60),
                created_ms: leaf.created_ms,
                messages: path.len() as u64,
                diverges_at: path.iter().find(|n| !head_path.contains(&n.id)).map(|n| n.id.clone()),
                head: row.head_id.as_deref() == Some(leaf.id.as_str()),
                bookmarks: bookmarks.iter().filter(|(_, n)| *n == leaf.id).map(|(name, _)| name.clone()).collect(),
            });
        }
        Ok(out)
    }
}
