//! What the MCP servers offer a session's user: their prompts as
//! commands (`/server:prompt args`, expanded on a message's way in, see
//! `session/machine/input.rs`) and their resources.

use forge_proto::{CommandInfo, McpResourceInfo};

use super::Engine;
use crate::error::EngineError;

impl Engine {
    /// The MCP prompts session `id` can use, as commands.
    pub(super) fn mcp_commands(&self, id: &str) -> Vec<CommandInfo> {
        self.shared()
            .mcp
            .prompts(Some(id))
            .into_iter()
            .map(|p| CommandInfo {
                name: format!("{}:{}", p.server, p.prompt.name),
                description: p.prompt.description.clone(),
                argument_hint: p.prompt.argument_hint(),
                model: None,
                allowed_tools: Vec::new(),
                source: "mcp".into(),
            })
            .collect()
    }

    /// `mcp.resources`: what the servers (those `session` sees) list.
    pub async fn mcp_resources(&self, session: Option<&str>) -> Result<Vec<McpResourceInfo>, EngineError> {
        let session = match session {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        Ok(self
            .shared()
            .mcp
            .resources(session.as_deref())
            .into_iter()
            .map(|r| McpResourceInfo {
                server: r.server,
                uri: r.resource.uri,
                name: r.resource.name,
                description: r.resource.description,
                mime_type: r.resource.mime_type,
            })
            .collect())
    }
}
