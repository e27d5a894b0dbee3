//! Making sessions: creating one (its directory checked, its first events
//! journaled), forking one at a node, and a session's export and import.

use forge_proto::params::{CreateParams, ForkParams};

use super::*;

impl Engine {
    pub async fn create_session(&self, req: CreateParams, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.create_session_at(req, client, None, None).await
    }

    /// A new session; with `fork` (session, node), one sharing that
    /// session's path up to the node; with `helper`, a helper agent's
    /// (with its parent's approval rules).
    pub(super) async fn create_session_at(
        &self,
        req: CreateParams,
        client: ClientRef,
        fork: Option<(String, String)>,
        helper: Option<(crate::store::HelperSpec, crate::store::rows::SessionApproval)>,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let ask = super::git::GitAsk::of(&req);
        let cfg = &self.shared().config;
        let provider_name = req.provider.unwrap_or_else(|| cfg.default_provider().as_str().to_string());
        let provider = ProviderKind::parse(&provider_name).ok_or_else(|| {
            EngineError::new(
                ErrorKind::Config,
                format!("unknown provider \"{provider_name}\"; use claude (or anthropic), openai or gemini"),
            )
        })?;
        let model = req
            .model
            .filter(|m| !m.trim().is_empty())
            .or_else(|| cfg.app.model.clone().filter(|_| req_provider_matches_config(cfg, provider)))
            .unwrap_or_else(|| provider.default_model().to_string());
        // None given (a client on another machine, whose own directory
        // means nothing here): the home of the daemon's user.
        let cwd = match req.cwd {
            Some(c) if !c.is_empty() => c,
            _ => std::env::var("HOME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "/".into()),
        };
        if !Path::new(&cwd).is_absolute() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("cwd must be an absolute path, got \"{cwd}\""),
            ));
        }
        if fork.is_none() && !Path::new(&cwd).is_dir() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("{cwd} does not exist or is not a directory; a session works in an existing directory"),
            ));
        }
        check_root(&cwd, req.allow_broad_root)?;
        req.sampling.check().map_err(|e| EngineError::new(ErrorKind::InvalidParams, e))?;
        // A new session with no hook to run is not started until it is used.
        let home = crate::tools::confine::host().and_then(|h| h.home.as_deref());
        let start_hooks = fork.is_none() && cfg.hooks.may_apply(Path::new(&cwd), home);
        let _names = self.shared().names.lock().await;
        if let Some(name) = &req.name {
            self.check_name(name, None).await?;
        }
        let id = self.shared().clock.new_id("s");
        let created_ms = self.shared().clock.now_ms();
        // Git mode: the session's branch and worktree first; it works in
        // the worktree, at the same place relative to the repository.
        let mut git = match fork.is_none() && self.wants_git(&ask, &cwd) {
            true => Some(self.start_git(&ask, &cwd, &id).await?),
            false => None,
        };
        let fork = fork.or_else(|| git.as_ref().and_then(|g| g.fork.clone()));
        let cwd = git.as_ref().map(|g| g.started.cwd.display().to_string()).unwrap_or(cwd);
        let mut ops = vec![StoreOp::CreateSession {
            id: id.clone(),
            name: req.name.clone(),
            cwd: cwd.clone(),
            provider: provider.as_str().into(),
            model: model.clone(),
            created_ms,
        }];
        if !req.sampling.is_empty() {
            ops.push(StoreOp::set_sampling(&id, &req.sampling));
        }
        let created = EventKind::SessionCreated {
            name: req.name,
            cwd,
            provider: provider.as_str().into(),
            model,
            sampling: req.sampling,
        };
        let mut events = vec![(Some(client.clone()), created)];
        if let Some((from, node)) = fork {
            ops.push(StoreOp::ForkSession { id: id.clone(), from: from.clone(), node: node.clone() });
            events.push((Some(client), EventKind::SessionForked { from, node }));
        }
        if let Some((nodes, head)) = git.as_mut().and_then(|g| g.restored.take()) {
            ops.extend(nodes);
            ops.push(StoreOp::SetHead { session_id: id.clone(), head_id: head });
        }
        if let Some((spec, approval)) = &helper {
            let json = |v| serde_json::to_string(v).unwrap_or_default();
            let (parent_id, helper) = (spec.of.parent.clone(), serde_json::to_string(spec).unwrap_or_default());
            ops.push(StoreOp::SetHelper { session_id: id.clone(), parent_id, helper });
            ops.push(StoreOp::SetApproval { session_id: id.clone(), approval: json(approval) });
        }
        if let Some(g) = &git {
            let session = g.session();
            let json = serde_json::to_string(&session).unwrap_or_default();
            ops.push(StoreOp::SetGit { session_id: id.clone(), git: json });
            let forge_proto::GitSession { repo, branch, base, worktree } = session;
            let from_commit = g.from_commit.clone();
            events.push((None, EventKind::GitSessionStarted { repo, branch, base, worktree, from_commit }));
        }
        let batch = crate::session::machine::pipeline::first_batch(&id, ops, events, created_ms);
        if let Err(e) = self.shared().writer.write(batch).await {
            if let Some(g) = &git {
                self.abandon_git(g, &id).await;
            }
            return Err(EngineError::blocked(&e.to_string()));
        }
        drop(_names);
        if start_hooks {
            // Its `SessionStart` hooks have run (and are journaled) before
            // the creator hears of it.
            self.handle(&id).await?.request(|reply| SessionCmd::Start { reply }).await?;
        }
        self.created_info(&id).await
    }

    /// A new session's info, with what its folder brings (its project's
    /// MCP servers started, what waits for trust, notices).
    async fn created_info(&self, id: &str) -> Result<SessionInfo, EngineError> {
        let mut info = self.session_info(id).await?;
        self.start_project_servers(id, Path::new(&info.cwd));
        info.untrusted = self.untrusted(Path::new(&info.cwd));
        info.tools_waiting = self.tools_waiting(Path::new(&info.cwd));
        if let Some(home) = self.shared().db.parent() {
            info.notices.extend(crate::hooks::upgrade_notice(&self.shared().config.hooks, home));
        }
        if let Some(u) = &info.untrusted {
            tracing::info!(session = %id, dir = %u.dir, ignored = ?u.provides, "a folder's own hooks and servers are ignored until trusted");
        }
        Ok(info)
    }

    /// A new session sharing `selector`'s path up to `node` (its head if
    /// none), in the same directory with the same model, made by the
    /// origin's machine in one step (`machine/fork.rs`). With
    /// `restore_files`, the files move from the origin's head to the fork
    /// node's state first (`force`: even those changed outside Forge), and
    /// the fork exists only if they did.
    pub async fn fork(&self, mut params: ForkParams, client: ClientRef) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let handle = self.handle_for(&params.session).await?;
        params.session = handle.id.clone();
        params.name = params.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
        // The name is held until the fork that takes it exists.
        let _names = self.shared().names.lock().await;
        if let Some(name) = &params.name {
            self.check_name(name, None).await?;
        }
        let id = handle.request(|reply| SessionCmd::Fork { params, client, reply }).await?;
        drop(_names);
        self.created_info(&id).await
    }

    /// A whole session as JSON lines (see [`crate::export`]).
    pub async fn export(&self, selector: &str) -> Result<Vec<serde_json::Value>, EngineError> {
        let id = self.resolve(selector).await?;
        let row = self.shared().store.session(&id).await?.ok_or_else(|| EngineError::not_found(&id))?;
        crate::export::export(&self.shared().store, &row)
            .await?
            .into_iter()
            .map(|l| serde_json::to_value(l).map_err(|e| EngineError::internal(e.to_string())))
            .collect()
    }

    /// A session exported elsewhere, with its ids: refused if this store
    /// has the session, one of its nodes, or its name already.
    pub async fn import(
        &self,
        lines: Vec<serde_json::Value>,
        cwd: Option<String>,
        allow_broad_root: bool,
    ) -> Result<SessionInfo, EngineError> {
        self.check_running()?;
        let lines = lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_value(l).map_err(|e| {
                    EngineError::new(ErrorKind::InvalidParams, format!("line {} of the export: {e}", i + 1))
                })
            })
            .collect::<Result<Vec<crate::export::Line>, _>>()?;
        let mut import = crate::export::plan_import(lines)?;
        if let Some(StoreOp::CreateSession { cwd: root, .. }) = import.ops.first_mut() {
            if let Some(new) = cwd {
                if !Path::new(&new).is_dir() {
                    return Err(EngineError::new(ErrorKind::InvalidParams, format!("{new} is not a directory")));
                }
                *root = new;
            }
            check_root(root, allow_broad_root).map_err(|e| {
                EngineError::new(
                    e.kind,
                    format!(
                        "{}; or import it into a directory of your choice: forgectl import FILE --cwd DIR",
                        e.message
                    ),
                )
            })?;
        }
        let store = &self.shared().store;
        let _names = self.shared().names.lock().await;
        if store.session(&import.id).await?.is_some() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!(
                    "session {} is here already (it was exported from this daemon, or imported before); remove it first (`forgectl session rm {}`) to import it again",
                    import.id, import.id
                ),
            ));
        }
        if let Some(name) = &import.name {
            self.check_name(name, None).await?;
        }
        let taken = store.existing_nodes(&import.nodes).await?;
        if let Some(node) = taken.first() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("{} of its messages are here already (node {node}, of another session)", taken.len()),
            ));
        }
        self.shared()
            .writer
            .write(WriteBatch { ops: import.ops })
            .await
            .map_err(|e| EngineError::blocked(&e.to_string()))?;
        self.session_info(&import.id).await
    }

    pub(super) async fn check_name(&self, name: &str, owner: Option<&str>) -> Result<(), EngineError> {
        crate::session::machine::check_session_name(name)?;
        crate::session::answers::check_name_free(self.shared(), name, owner).await
    }
}

/// Refuses a session directory too broad to work in, unless the user
/// means it.
pub(super) fn check_root(cwd: &str, allow_broad_root: bool) -> Result<(), EngineError> {
    if allow_broad_root {
        return Ok(());
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    match crate::tools::roots::too_broad(Path::new(cwd), home.as_deref()) {
        Some(why) => Err(EngineError::new(ErrorKind::BroadRoot, crate::tools::roots::refusal(cwd, &why))),
        None => Ok(()),
    }
}

pub(super) fn req_provider_matches_config(cfg: &ForgeConfig, provider: ProviderKind) -> bool {
    cfg.default_provider() == provider
}
