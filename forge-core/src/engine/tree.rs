//! The conversation tree: listing it and its branches, checking out,
//! editing, rewinding (files included), bookmarks, deleting and splitting
//! nodes.

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
        let store = &self.shared().store;
        let sessions = store.lineage(id).await?;
        Ok(store.file_changes(&sessions).await?)
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

    pub async fn checkout(&self, selector: &str, node: &str, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::Checkout { node, client, reply }).await?;
        self.session_info(&handle.id).await
    }

    pub async fn edit(
        &self,
        selector: &str,
        node: &str,
        text: String,
        client: ClientRef,
    ) -> Result<forge_proto::EditResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        let files = self.files_lock(&handle.id).await;
        let _no_rewind = files.lock().await;
        handle.request(|reply| SessionCmd::Edit { node, text, client, reply }).await
    }

    /// Rewinds a session to `node` (the last turn's start if none): the
    /// files tools changed since are put back, then the head moves there.
    #[allow(clippy::too_many_arguments)]
    pub async fn rewind(
        &self,
        selector: &str,
        node: Option<&str>,
        files: bool,
        conversation: bool,
        dry_run: bool,
        force: bool,
        client: ClientRef,
    ) -> Result<forge_proto::RewindResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let id = handle.id.clone();
        // From the head read to the head moved, no turn starts.
        let lock = self.files_lock(&id).await;
        let _moving = lock.lock().await;
        let store = &self.shared().store;
        let row = store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        let (forest, target) = match node {
            Some(n) => {
                let (forest, n) = self.resolve_node(&id, n).await?;
                if forest.get(&n)?.role == forge_proto::Role::Summary {
                    return Err(EngineError::new(ErrorKind::InvalidParams, "rewind to a message, not to a summary"));
                }
                (forest, Some(n))
            }
            None => {
                let forest = Forest::new(store.tree(&id).await?);
                let path = Self::path_ids(&forest, row.head_id.as_deref())?;
                let last_user =
                    path.iter().rev().find(|n| forest.get(n).is_ok_and(|n| n.role == forge_proto::Role::User));
                let Some(last_user) = last_user.cloned() else {
                    return Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        "nothing to undo: the conversation has no turn",
                    ));
                };
                let parent = forest.get(&last_user)?.parent_id.clone();
                (forest, parent)
            }
        };
        if !matches!(handle.snapshot.borrow().state, forge_proto::OperationStateKind::Idle) {
            return Err(EngineError::new(
                ErrorKind::SessionBusy,
                format!("session {id} is running a turn; wait for it to end (or cancel it), then rewind"),
            ));
        }
        let from = Self::path_ids(&forest, row.head_id.as_deref())?;
        let to = Self::path_ids(&forest, target.as_deref())?;
        let mut result = forge_proto::RewindResult {
            session_id: id.clone(),
            node: target.clone(),
            files: Vec::new(),
            unknown: Vec::new(),
            dry_run,
            diff: None,
            conversation: conversation && !dry_run,
        };
        if files {
            self.move_files(&id, &from, &to, dry_run, force, &mut result).await?;
        }
        if dry_run {
            return Ok(result);
        }
        if !result.files.is_empty() {
            let (node, files) = (target.clone(), result.files.clone());
            let client = client.clone();
            handle.request(|reply| SessionCmd::FilesRestored { node, files, client, reply }).await?;
        }
        if conversation {
            match target {
                Some(node) => handle.request(|reply| SessionCmd::Checkout { node, client, reply }).await?,
                None => handle.request(|reply| SessionCmd::Clear { client, reply }).await?,
            }
        }
        Ok(result)
    }

    /// Moves the files of session `id` (and what its forks' origins
    /// recorded) from their state at the end of `from` to the end of `to`.
    pub(super) async fn move_files(
        &self,
        id: &str,
        from: &[String],
        to: &[String],
        dry_run: bool,
        force: bool,
        result: &mut forge_proto::RewindResult,
    ) -> Result<(), EngineError> {
        let store = &self.shared().store;
        let changes = self.lineage_changes(id).await?;
        let steps = crate::rewind::plan(from, to, &changes);
        // What each file holds now, read off the session task.
        let paths: Vec<String> = steps.iter().map(|s| s.path.clone()).collect();
        let current = tokio::task::spawn_blocking(move || {
            paths.iter().map(|p| crate::rewind::read_state(Path::new(p))).collect::<Vec<_>>()
        })
        .await
        .map_err(|e| EngineError::internal(e.to_string()))?;
        let mut todo = Vec::new();
        let mut conflicts = Vec::new();
        for (step, now) in steps.into_iter().zip(current) {
            let now =
                now.map_err(|e| EngineError::new(ErrorKind::InvalidParams, format!("cannot read {}: {e}", step.path)))?;
            let now_state = now.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
            let Some(target) = step.target.clone() else {
                result.unknown.push(step.path.clone());
                continue;
            };
            if target == now_state {
                continue;
            }
            let conflict = step.expected.as_ref().is_some_and(|e| *e != now_state);
            if conflict {
                conflicts.push(step.path.clone());
            }
            let action = match (&now_state, &target) {
                (Some(_), None) => "delete",
                (None, Some(_)) => "create",
                _ => "restore",
            };
            result.files.push(forge_proto::RestoredFile {
                path: step.path.clone(),
                action: action.into(),
                conflict,
                overwritten: None,
                note: None,
            });
            todo.push((step.path, now, target, step.expected));
        }
        if !conflicts.is_empty() && !force && !dry_run {
            return Err(EngineError::new(
                ErrorKind::RewindConflict,
                format!(
                    "these files changed outside Forge since Forge last changed them, and were left as they are: {}. \
                     Look at them (--dry-run shows the diff), then rewind with --force to overwrite them (what they hold is kept)",
                    conflicts.join(", ")
                ),
            ));
        }
        let mut diff = String::new();
        for ((path, now, target, expected), file) in todo.into_iter().zip(result.files.iter_mut()) {
            let target_data = match &target {
                Some((hash, mode)) => match store.blob(hash).await? {
                    Some(data) => Some((data, *mode)),
                    // Content holding a secret is never stored.
                    None => {
                        file.action = "kept".into();
                        file.note = Some("its recorded content held a secret, which Forge does not store".into());
                        continue;
                    }
                },
                None => None,
            };
            if dry_run {
                diff.push_str(&crate::rewind::unified_diff(
                    &path,
                    now.as_ref().map(|(d, _)| d.as_slice()),
                    target_data.as_ref().map(|(d, _)| d.as_slice()),
                ));
                continue;
            }
            if file.conflict {
                // Forced: what is overwritten is kept, as a change made
                // after the head it leaves, so going back there (checkout
                // with --restore-files) brings it back.
                let mut ops = Vec::new();
                let after = now.as_ref().map(|(data, mode)| {
                    let hash = crate::rewind::hash(data);
                    ops.extend(StoreOp::blob(hash.clone(), data.clone()));
                    file.overwritten = Some(hash.clone());
                    (hash, *mode)
                });
                // (With no head, under the session's own id: on no path,
                // but its content is kept.)
                let node_id = from.last().cloned().unwrap_or_else(|| id.to_string());
                ops.push(StoreOp::RecordChange {
                    session_id: id.to_string(),
                    node_id,
                    call_id: "edited-by-hand".into(),
                    path: path.clone(),
                    before: expected.flatten(),
                    after,
                    created_ms: crate::ids::now_ms(),
                });
                let batch = crate::journal::WriteBatch { ops };
                self.shared().writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
            }
            let p = PathBuf::from(&path);
            tokio::task::spawn_blocking(move || {
                crate::rewind::write_state(&p, target_data.as_ref().map(|(d, m)| (d.as_slice(), *m)))
            })
            .await
            .map_err(|e| EngineError::internal(e.to_string()))?
            .map_err(|e| EngineError::internal(format!("cannot restore {path}: {e}")))?;
        }
        if dry_run {
            result.diff = Some(diff);
        }
        Ok(())
    }

    pub async fn bookmark(
        &self,
        selector: &str,
        name: String,
        node: Option<&str>,
        delete: bool,
        client: ClientRef,
    ) -> Result<forge_proto::BookmarkResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let node = match node {
            Some(n) if !delete => Some(self.resolve_node(&handle.id, n).await?.1),
            _ => None,
        };
        handle.request(|reply| SessionCmd::Bookmark { name, node, delete, client, reply }).await
    }

    pub async fn delete_node(
        &self,
        selector: &str,
        node: &str,
        cascade: bool,
        client: ClientRef,
    ) -> Result<forge_proto::DeleteNodeResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::DeleteNode { node, cascade, client, reply }).await
    }

    pub async fn split(
        &self,
        selector: &str,
        node: &str,
        at: u64,
        client: ClientRef,
    ) -> Result<forge_proto::SplitResult, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(selector).await?;
        let (_, node) = self.resolve_node(&handle.id, node).await?;
        handle.request(|reply| SessionCmd::Split { node, at, client, reply }).await
    }

    /// The lock a rewind of session `id` holds (see `Inner::files`).
    pub(super) async fn files_lock(&self, id: &str) -> Arc<Mutex<()>> {
        self.inner.files.lock().await.entry(id.to_string()).or_default().clone()
    }
}
