//! The conversation tree: listing it and its branches, checking out,
//! editing, rewinding (files included), bookmarks, deleting and splitting
//! nodes.

use forge_proto::params::{BookmarkParams, CheckoutParams, DeleteNodeParams, EditParams, RewindParams, SplitParams};

use super::*;

impl Engine {
    /// A node of a session's tree named by id, bookmark or id prefix.
    pub(super) async fn resolve_node(&self, session: &str, node: &str) -> Result<(Forest, String), EngineError> {
        let forest = Forest::new(self.shared().store.tree(session).await?);
        let node = node.trim();
        if forest.contains(node) {
            return Ok((forest, node.to_string()));
        }
        if let Some((_, id)) = self.shared().store.bookmarks(session).await?.into_iter().find(|(name, _)| name == node)
        {
            return Ok((forest, id));
        }
        let matches: Vec<String> =
            forest.nodes().filter(|n| !node.is_empty() && n.id.starts_with(node)).map(|n| n.id.clone()).collect();
        match matches.as_slice() {
            [one] => {
                let one = one.clone();
                Ok((forest, one))
            }
            [] => Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!(
                    "no node `{node}` in session {session} (by id, id prefix or bookmark); `forgectl tree {session}` lists them"
                ),
            )),
            many => Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("`{node}` matches {} nodes; give more of the id", many.len()),
            )),
        }
    }

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

    /// A tree command: its node (by id, prefix or bookmark) resolved to
    /// an id in the params the session gets.
    async fn tree_command<P: Addressed, T: Send + 'static>(
        &self,
        mut params: P,
        node: impl FnOnce(&mut P) -> Option<&mut String>,
        cmd: impl FnOnce(P, Reply<T>) -> SessionCmd,
    ) -> Result<(String, T), EngineError> {
        let id = self.resolve(params.session()).await?;
        if let Some(node) = node(&mut params) {
            *node = self.resolve_node(&id, node).await?.1;
        }
        self.command_on(id, params, cmd).await
    }

    pub async fn checkout(&self, params: CheckoutParams, client: ClientRef) -> Result<SessionInfo, EngineError> {
        let cmd = |params, reply| SessionCmd::Checkout { params, client, reply };
        let (id, ()) = self.tree_command(params, |p| Some(&mut p.node), cmd).await?;
        self.session_info(&id).await
    }

    pub async fn edit(&self, params: EditParams, client: ClientRef) -> Result<forge_proto::EditResult, EngineError> {
        let cmd = |params, reply| SessionCmd::Edit { params, client, reply };
        Ok(self.tree_command(params, |p| Some(&mut p.node), cmd).await?.1)
    }

    /// Rewinds a session to `node` (the last turn's start if none): the
    /// files tools changed since are put back, then the head moves there
    /// (the session does it, in its `Rewinding` state).
    pub async fn rewind(
        &self,
        params: RewindParams,
        client: ClientRef,
    ) -> Result<forge_proto::RewindResult, EngineError> {
        let cmd = |params, reply| SessionCmd::Rewind { params, client, reply };
        Ok(self.tree_command(params, |p| p.node.as_mut(), cmd).await?.1)
    }

    pub async fn bookmark(
        &self,
        params: BookmarkParams,
        client: ClientRef,
    ) -> Result<forge_proto::BookmarkResult, EngineError> {
        let cmd = |params, reply| SessionCmd::Bookmark { params, client, reply };
        // A bookmark deleted needs no node.
        fn node(p: &mut BookmarkParams) -> Option<&mut String> {
            if p.delete { None } else { p.node.as_mut() }
        }
        Ok(self.tree_command(params, node, cmd).await?.1)
    }

    pub async fn delete_node(
        &self,
        params: DeleteNodeParams,
        client: ClientRef,
    ) -> Result<forge_proto::DeleteNodeResult, EngineError> {
        let cmd = |params, reply| SessionCmd::DeleteNode { params, client, reply };
        Ok(self.tree_command(params, |p| Some(&mut p.node), cmd).await?.1)
    }

    pub async fn split(&self, params: SplitParams, client: ClientRef) -> Result<forge_proto::SplitResult, EngineError> {
        let cmd = |params, reply| SessionCmd::Split { params, client, reply };
        Ok(self.tree_command(params, |p| Some(&mut p.node), cmd).await?.1)
    }
}
