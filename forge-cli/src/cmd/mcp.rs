//! `forgectl mcp`: the MCP servers, their state, tools and prompts;
//! `forgectl mcp restart NAME`; `forgectl mcp resources`.

use forge_client::ForgeClient;
use forge_proto::McpServerInfo;
use forge_proto::params::{McpListParams, McpRestartParams};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

#[derive(Debug, clap::Subcommand)]
pub enum McpAction {
    /// Each server's state, tools and calls (the default)
    List,
    /// Connect to a server again now: a stdio server is stopped and
    /// started, a failed one is tried without waiting for its backoff
    Restart {
        /// The server's name, as in [[mcp.servers]]
        name: String,
    },
    /// The resources the servers list: `forgectl send --resource
    /// SERVER:URI` (or `@SERVER:URI` in the TUI) attaches one
    Resources,
}

pub async fn run(g: &Global, action: Option<McpAction>, session: Option<String>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    match action.unwrap_or(McpAction::List) {
        McpAction::List => {
            let servers = conn.client.mcp_list(McpListParams { session }).await?;
            if g.json {
                for s in &servers {
                    json_line(s);
                }
                return Ok(());
            }
            if servers.is_empty() {
                outln!("no MCP servers: add [[mcp.servers]] entries to config.toml (see `forged --check-config`)");
            }
            for (i, s) in servers.iter().enumerate() {
                if i > 0 {
                    outln!();
                }
                show(s);
            }
        }
        McpAction::Resources => {
            let resources = conn.client.mcp_resources(McpListParams { session }).await?;
            if g.json {
                for r in &resources {
                    json_line(r);
                }
                return Ok(());
            }
            if resources.is_empty() {
                outln!("no MCP server lists resources");
            }
            for r in &resources {
                let about = [r.name.as_str(), r.description.lines().next().unwrap_or("")]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                outln!("{}:{}  {about}", r.server, r.uri);
            }
        }
        McpAction::Restart { name } => {
            let s = conn.client.mcp_restart(McpRestartParams { name, session }).await?;
            if g.json {
                json_line(&s);
            } else {
                outln!("restarting MCP server `{}` (`forgectl mcp` shows when it is ready)", s.name);
            }
        }
    }
    Ok(())
}

fn show(s: &McpServerInfo) {
    let state = match (s.state.as_str(), s.retry_in_seconds) {
        ("failed", Some(secs)) => format!("failed, next attempt in {secs} s"),
        (state, _) => state.to_string(),
    };
    let owner = s.session_id.as_deref().map(|id| format!(" (session {id})")).unwrap_or_default();
    outln!("{}{owner}: {state}", s.name);
    outln!("  {}: {}", s.transport, s.target);
    if let Some(info) = &s.server_info {
        outln!("  server: {info}");
    }
    outln!("  calls: {}   restarts: {}", s.calls, s.restarts);
    if let Some(e) = &s.error {
        let label = if s.state == "failed" { "error" } else { "last error" };
        outln!("  {label}: {e}");
    }
    if !s.prompts.is_empty() {
        let names: Vec<String> = s.prompts.iter().map(|p| format!("/{}:{p}", s.name)).collect();
        outln!("  prompts: {}", names.join(" "));
    }
    if s.resources > 0 {
        outln!("  resources: {} (`forgectl mcp resources`)", s.resources);
    }
    if s.tools.is_empty() {
        outln!("  tools: none");
    } else {
        outln!("  tools:");
        for t in &s.tools {
            let ro = if t.read_only { " (read-only)" } else { "" };
            let desc = t.description.lines().next().unwrap_or("");
            outln!("    {}{ro}  {desc}", t.name);
        }
    }
}
