//! What the shell reads again for its machine before a message (the
//! project's instructions, the tools, the hooks in force), and the images
//! a request names, read from the store once per turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::SessionActor;
use crate::instructions::ProjectInstructions;
use crate::shared::Shared;

impl SessionActor {
    /// Reads again what may have changed outside the session since its
    /// last message: the project's instruction files, the MCP servers'
    /// tools, the hooks in force.
    pub(super) fn refresh(&mut self) -> crate::session::machine::Refresh {
        let cwd = PathBuf::from(self.session.cwd());
        let trusted = self.shared.trust.trusts(&cwd);
        let (provider, model) = self.session.provider_model();
        let map = self.shared.repo_map(&cwd, self.session.id(), provider, model);
        let map_changed = map.as_deref() != self.repo_map.as_deref();
        let instructions_changed = self.instructions.changed(&cwd, &self.shared.config);
        let prompt = (instructions_changed || map_changed).then(|| {
            if instructions_changed {
                self.instructions = ProjectInstructions::load(&cwd, &self.shared.config);
            }
            self.repo_map = map;
            let map = self.repo_map.as_deref().unwrap_or("");
            let prompt: Arc<str> = format!("{}{}{map}", self.template, self.instructions.text).into();
            (prompt, self.instructions.files())
        });
        let version = self.shared.mcp.version();
        let project = self.shared.tool_approvals.offered(&cwd);
        // Agent types come with trust, or with their files.
        let agents = crate::agents::key(&cwd, trusted);
        let changed = version != self.tools_version || project.digest != self.project_tools || agents != self.agents;
        let (tools, agents) = match changed {
            false => (None, None),
            true => {
                self.tools_version = version;
                self.project_tools = project.digest.clone();
                self.agents = agents;
                let tools = self.shared.tools_with(self.session.id(), project);
                let agents: Arc<[crate::agents::AgentType]> = crate::agents::load(&cwd, trusted).into();
                (Some(self.shared.with_helpers(tools, self.session.helper(), &agents)), Some(agents))
            }
        };
        let hooks = hooks_for(&self.shared, self.session.id(), &cwd);
        let starting = self.shared.mcp.starting(Some(self.session.id()));
        let active = self.session.active_files_now();
        // Git mode: the hooks directory the repository's configuration
        // names, whose files the file tools ask before writing.
        let git_hooks = self.session.row().git.as_ref().and_then(|g| forge_git::hooks_path(Path::new(&g.worktree)));
        crate::session::machine::Refresh { prompt, tools, agents, hooks, starting, active, git_hooks }
    }

    /// The bytes of the request's images (the machine holds only what
    /// names them); those no longer sent are let go.
    pub(super) async fn fill_images(&mut self, request: &mut crate::provider::ChatRequest) {
        let named = request.messages.iter().flat_map(|m| m.images.iter()).count();
        if named == 0 {
            self.images.clear();
            return;
        }
        let mut kept = std::collections::HashMap::with_capacity(named);
        for part in request.messages.iter_mut().flat_map(|m| m.images.iter_mut()) {
            let hash = &part.info.hash;
            let data = match self.images.get(hash).or_else(|| kept.get(hash)) {
                Some(d) => Some(Arc::clone(d)),
                None => match self.shared.store.blob(hash).await {
                    Ok(Some(bytes)) => {
                        use base64::Engine as _;
                        Some(Arc::<str>::from(base64::engine::general_purpose::STANDARD.encode(bytes)))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(error = %e, image = %hash, "cannot read an image for the request");
                        None
                    }
                },
            };
            if let Some(d) = &data {
                kept.insert(hash.clone(), Arc::clone(d));
            }
            part.data = data;
        }
        self.images = kept;
    }
}

/// The hooks in force for a session working in `cwd`: the config's, and
/// a trusted project's own.
pub(super) fn hooks_for(shared: &Shared, session: &str, cwd: &Path) -> crate::hooks::HookSet {
    let home = crate::tools::confine::host().and_then(|h| h.home.clone());
    if !shared.config.hooks.may_apply(cwd, home.as_deref()) {
        return crate::hooks::HookSet::default();
    }
    let trusted = shared.trust.state(cwd).trusted();
    let (set, problems) = crate::hooks::HookSet::for_session(&shared.config.hooks, cwd, trusted, home.as_deref());
    for p in problems {
        tracing::warn!(session, "hooks: {p}");
    }
    set
}
