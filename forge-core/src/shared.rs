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
    /// The time and ids sessions write (the system's; tests script it).
    pub clock: crate::ids::Clock,
}

impl Shared {
    pub(crate) fn db_path(&self) -> &Path {
        &self.db
    }

    /// The tools `session` offers now: the built-in ones and its MCP
    /// servers' (MCP names hold `__`, so they never clash with these).
    pub(crate) fn tools_for(&self, session: &str) -> Arc<crate::tools::ToolRegistry> {
        let mcp = self.mcp.tools(Some(session));
        if mcp.is_empty() {
            return self.tools.clone();
        }
        let mut all = (*self.tools).clone();
        for tool in mcp {
            if let Err(e) = all.register(tool) {
                tracing::warn!("MCP tool not offered: {e}");
            }
        }
        Arc::new(all)
    }
}
