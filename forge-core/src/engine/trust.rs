//! `trust.*`, and what a folder's trust starts for its sessions.

use std::path::Path;

use super::{Engine, mcp_config};
use crate::trust::{absolute, folder, project_mcp_servers};

/// `trust.*`.
impl Engine {
    pub fn trust_list(&self) -> Vec<forge_proto::FolderTrust> {
        let store = &self.shared().trust;
        store.list().iter().map(|r| folder(store, Path::new(&r.dir))).collect()
    }

    pub fn trust_show(&self, dir: &str) -> Result<forge_proto::FolderTrust, crate::error::EngineError> {
        Ok(folder(&self.shared().trust, &absolute(dir)?))
    }

    pub fn trust_add(&self, dir: &str) -> Result<forge_proto::FolderTrust, crate::error::EngineError> {
        let dir = absolute(dir)?;
        let store = &self.shared().trust;
        store.trust(&dir, crate::ids::now_ms()).map_err(|e| {
            crate::error::EngineError::new(
                forge_proto::ErrorKind::InvalidParams,
                format!("cannot trust {}: {e}", dir.display()),
            )
        })?;
        tracing::info!(dir = %dir.display(), "folder trusted");
        Ok(folder(store, &dir))
    }

    pub fn trust_revoke(&self, dir: &str) -> Result<forge_proto::FolderTrust, crate::error::EngineError> {
        let dir = absolute(dir)?;
        let store = &self.shared().trust;
        store
            .revoke(&dir)
            .map_err(|e| crate::error::EngineError::internal(format!("cannot write the trusted folders: {e}")))?;
        Ok(folder(store, &dir))
    }

    /// The project tools of the project `dir` is in, with their approvals.
    pub fn tools_project(&self, dir: &str) -> Result<forge_proto::ProjectTools, crate::error::EngineError> {
        let dir = absolute(dir)?;
        let taken = |name: &str| self.shared().tools.get(name).is_some();
        Ok(self.shared().tool_approvals.report(&dir, &taken))
    }

    /// The project tools of `cwd` not offered until the user approves them
    /// as they are now (for a new session's answer).
    pub(crate) fn tools_waiting(&self, cwd: &Path) -> Vec<forge_proto::ProjectTool> {
        let taken = |name: &str| self.shared().tools.get(name).is_some();
        let project = self.shared().tool_approvals.report(cwd, &taken);
        project.tools.into_iter().filter(|t| matches!(t.state.as_str(), "unapproved" | "changed")).collect()
    }

    /// Approves tool files as the user saw them.
    pub fn tools_approve(
        &self,
        p: forge_proto::params::ApproveToolsParams,
    ) -> Result<forge_proto::ProjectTools, crate::error::EngineError> {
        let dir = absolute(&p.dir)?;
        if p.files.is_empty() {
            return Err(crate::error::EngineError::new(forge_proto::ErrorKind::InvalidParams, "no tool file named"));
        }
        self.shared()
            .tool_approvals
            .approve(&dir, &p.files, crate::ids::now_ms())
            .map_err(|e| crate::error::EngineError::new(forge_proto::ErrorKind::InvalidParams, e))?;
        let files: Vec<&str> = p.files.iter().map(|f| f.file.as_str()).collect();
        tracing::info!(dir = %dir.display(), ?files, "project tools approved");
        self.tools_project(&p.dir)
    }

    /// Ends tool files' approval.
    pub fn tools_revoke(
        &self,
        p: forge_proto::params::RevokeToolsParams,
    ) -> Result<forge_proto::ProjectTools, crate::error::EngineError> {
        let dir = absolute(&p.dir)?;
        self.shared().tool_approvals.revoke(&dir, &p.files).map_err(crate::error::EngineError::internal)?;
        self.tools_project(&p.dir)
    }

    /// Starts the MCP servers a trusted folder's `.mcp.json` names for
    /// session `id` (working in `cwd`).
    /// (Not when the session has servers of its own already: started
    /// before, or an editor's.)
    pub(crate) fn start_project_servers(&self, id: &str, cwd: &Path) {
        let has_own = self.shared().mcp.report(Some(id)).iter().any(|r| r.session.is_some());
        if has_own || !self.shared().trust.state(cwd).trusted() {
            return;
        }
        let servers = project_mcp_servers(cwd);
        if servers.is_empty() {
            return;
        }
        match mcp_config(servers) {
            Ok(config) => self.shared().mcp.set_session_servers(id, config.servers),
            Err(e) => tracing::warn!(session = id, error = %e, "the project's MCP servers (.mcp.json) are not started"),
        }
    }

    /// What `cwd` provides that is ignored until trusted (for a new
    /// session's answer), if anything.
    pub(crate) fn untrusted(&self, cwd: &Path) -> Option<forge_proto::FolderTrust> {
        let f = folder(&self.shared().trust, cwd);
        matches!(f.state.as_str(), "untrusted" | "changed").then_some(f)
    }
}
