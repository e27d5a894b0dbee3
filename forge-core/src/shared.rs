//! What every session shares: the store, the journal writer, the
//! providers, the tools and MCP servers, the configuration, the prompt
//! template and the trusted folders. The engine makes it once; each
//! session's shell holds an `Arc` of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::ForgeConfig;
use crate::journal::JournalWriter;
use crate::provider::ProviderClient;
use crate::store::Store;

/// What every session actor shares.
pub(crate) struct Shared {
    pub db: PathBuf,
    pub store: Store,
    pub writer: JournalWriter,
    pub providers: ProviderClient,
    /// The built-in tools.
    pub tools: Arc<crate::tools::ToolRegistry>,
    /// The MCP servers and their tools.
    pub mcp: forge_mcp::McpHub,
    pub config: Arc<ForgeConfig>,
    /// The system prompt's template (rendered per session).
    pub prompt: Arc<crate::prompt::PromptTemplate>,
    /// The folders whose own hooks and MCP servers the user trusts.
    pub trust: crate::trust::TrustStore,
    /// The project tools (`.forge/tools/*.toml`) the user approved.
    pub tool_approvals: crate::project_tools::ToolApprovals,
    /// Repositories' maps, built in the background.
    pub repo_maps: crate::repo_map::RepoMaps,
    /// The time and ids sessions write (the system's; tests script it).
    pub clock: crate::ids::Clock,
    /// The sessions' records of their roots (what collecting the store
    /// must keep).
    pub trackers: crate::snapshot::Trackers,
    /// Held while a session's name is checked and given (by creation, an
    /// import or a rename), so two sessions never get one name.
    pub names: Arc<tokio::sync::Mutex<()>>,
}

impl Shared {
    pub(crate) fn db_path(&self) -> &Path {
        &self.db
    }

    /// The tools `session` (working in `cwd`) offers now: the built-in
    /// ones, its MCP servers' (MCP names hold `__`, so they never clash
    /// with these) and its project's approved tools (one whose name is
    /// taken is not offered); and the project tools' digest, which changes
    /// when they do.
    pub(crate) fn tools_for(&self, session: &str, cwd: &Path) -> (Arc<crate::tools::ToolRegistry>, String) {
        let project = self.tool_approvals.offered(cwd);
        let digest = project.digest.clone();
        (self.tools_with(session, project), digest)
    }

    /// The built-in tools, `session`'s MCP servers' and `project`'s.
    pub(crate) fn tools_with(
        &self,
        session: &str,
        project: crate::project_tools::Offered,
    ) -> Arc<crate::tools::ToolRegistry> {
        let mcp = self.mcp.tools(Some(session));
        if mcp.is_empty() && project.tools.is_empty() {
            return self.tools.clone();
        }
        let mut all = (*self.tools).clone();
        for tool in mcp {
            if let Err(e) = all.register(tool) {
                tracing::warn!("MCP tool not offered: {e}");
            }
        }
        for tool in project.tools {
            if let Err(e) = all.register(tool) {
                tracing::warn!("project tool not offered: {e}");
            }
        }
        Arc::new(all)
    }

    /// `tools` as a session offers them: a helper agent's only those its
    /// agent type lists; the `task` tool (with the agent types of `cwd`)
    /// while helpers may go one deeper.
    pub(crate) fn with_helpers(
        &self,
        tools: Arc<crate::tools::ToolRegistry>,
        helper: Option<&crate::store::HelperSpec>,
        agents: &[crate::agents::AgentType],
    ) -> Arc<crate::tools::ToolRegistry> {
        let task = self.config.tools.task.clone().unwrap_or_default();
        let max_depth = task.max_depth.unwrap_or(crate::tools::config::TaskConfig::DEFAULT_MAX_DEPTH);
        let depth = helper.map_or(0, |h| h.of.depth);
        let offer_task = task.enabled != Some(false)
            && depth < max_depth
            && helper.and_then(|h| h.tools.as_ref()).is_none_or(|t| t.iter().any(|n| n == crate::agents::TASK_TOOL));
        let allowed = helper.and_then(|h| h.tools.as_ref());
        if !offer_task && allowed.is_none() {
            return tools;
        }
        let mut all = (*tools).clone();
        if let Some(allowed) = allowed {
            // `server__*` names every tool of an MCP server.
            all.retain(|name| {
                allowed
                    .iter()
                    .any(|a| a == name || a.strip_suffix('*').is_some_and(|p| p.ends_with("__") && name.starts_with(p)))
            });
        }
        if offer_task {
            all.retain(|name| name != crate::agents::TASK_TOOL);
            let _ = all.register(Arc::new(crate::agents::TaskTool::new(agents)));
        }
        Arc::new(all)
    }

    /// The map of the repository `cwd` is in, for session `session` (its
    /// provider and model write the summaries unless configured), as last
    /// built; a build starts in the background when one is due.
    pub(crate) fn repo_map(&self, cwd: &Path, session: &str, provider: &str, model: &str) -> Option<Arc<str>> {
        self.repo_maps.current(&self.config, cwd, || {
            let where_ = cwd.display().to_string();
            let asker = crate::repo_map::asker_for(&self.config, session, &where_, provider, model)?;
            let deps = crate::repo_map::Deps {
                store: self.store.clone(),
                writer: self.writer.clone(),
                providers: self.providers.clone(),
                config: self.config.clone(),
            };
            Some((deps, asker))
        })
    }
}
