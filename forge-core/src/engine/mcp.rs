//! What a user brings from MCP servers into a message: `/server:prompt
//! args` becomes the prompt's text (`prompts/get`), and each resource
//! named in `resources` (`server:uri`) is read and added after the text.
//! Done before the message reaches the session, so the session journals
//! and the model sees the text as sent, and a server that cannot answer
//! refuses the send with nothing sent.

use forge_proto::params::SendParams;
use forge_proto::{CommandInfo, ErrorKind, McpResourceInfo};

use super::Engine;
use crate::error::EngineError;

/// The most resources one message may carry.
const MAX_RESOURCES: usize = 20;

impl Engine {
    /// Expands an MCP prompt and reads the resources of `params` for
    /// session `id`. A message that names neither costs no I/O.
    pub(super) async fn mcp_input(&self, id: &str, params: &mut SendParams) -> Result<(), EngineError> {
        let mcp = &self.shared().mcp;
        if let Some(text) = params.text.as_deref()
            && let Some((server, prompt, rest)) = prompt_call(text)
            && mcp.prompts(Some(id)).iter().any(|p| p.server == server && p.prompt.name == prompt)
            && !self.own_command(id, &format!("{server}:{prompt}")).await?
        {
            let expanded = mcp.prompt_text(Some(id), server, prompt, rest).await.map_err(failed)?;
            if expanded.trim().is_empty() {
                return Err(EngineError::new(
                    ErrorKind::McpRequestFailed,
                    format!("MCP server `{server}` gave an empty prompt for `{prompt}`; nothing was sent"),
                ));
            }
            params.text = Some(expanded);
        }
        if params.resources.is_empty() {
            return Ok(());
        }
        if params.resources.len() > MAX_RESOURCES {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!("{} resources given; a message carries at most {MAX_RESOURCES}", params.resources.len()),
            ));
        }
        let mut parts = Vec::new();
        for named in std::mem::take(&mut params.resources) {
            let Some((server, uri)) = named.split_once(':').filter(|(s, u)| !s.is_empty() && !u.is_empty()) else {
                return Err(EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("`{named}` is not `server:uri` (`forgectl mcp resources` lists them)"),
                ));
            };
            parts.push(mcp.resource_text(Some(id), server, uri).await.map_err(failed)?);
        }
        let text = params.text.take().unwrap_or_default();
        let sep = if text.is_empty() { "" } else { "\n\n" };
        params.text = Some(format!("{text}{sep}{}", parts.join("\n\n")));
        Ok(())
    }

    /// Whether a command of one's own is named `name` (it wins over an MCP
    /// prompt of the same name, as the user's own files do).
    async fn own_command(&self, id: &str, name: &str) -> Result<bool, EngineError> {
        let row = self.shared().store.session(id).await?.ok_or_else(|| EngineError::not_found(id))?;
        let cwd = std::path::Path::new(&row.cwd);
        let trusted = self.shared().trust.trusts(cwd);
        Ok(crate::slash_commands::load(cwd, trusted).iter().any(|c| c.info.name == name))
    }

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

/// `/server:prompt rest` → (server, prompt, rest).
fn prompt_call(text: &str) -> Option<(&str, &str, &str)> {
    let text = text.trim_start().strip_prefix('/')?;
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let (server, prompt) = word.split_once(':')?;
    (!server.is_empty() && !prompt.is_empty()).then_some((server, prompt, rest))
}

fn failed(e: forge_mcp::ExtraError) -> EngineError {
    let kind = match e {
        forge_mcp::ExtraError::UnknownServer(_) => ErrorKind::McpServerNotFound,
        forge_mcp::ExtraError::Failed(_) => ErrorKind::McpRequestFailed,
    };
    EngineError::new(kind, format!("{e}; nothing was sent"))
}

#[cfg(test)]
mod tests {
    use super::prompt_call;

    #[test]
    fn a_prompt_call_is_slash_server_colon_prompt() {
        assert_eq!(prompt_call("/gh:review 12 tests"), Some(("gh", "review", "12 tests")));
        assert_eq!(prompt_call("  /gh:review"), Some(("gh", "review", "")));
        assert_eq!(prompt_call("/review 12"), None);
        assert_eq!(prompt_call("/:x"), None);
        assert_eq!(prompt_call("gh:review"), None);
    }
}
