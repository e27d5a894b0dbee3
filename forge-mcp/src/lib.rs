//! Forge's MCP client. Each `[[mcp.servers]]` entry is a long-lived
//! connection (a child process over stdio, or streamable HTTP) owned by a
//! task that lists the server's tools, follows `tools/list_changed`, and
//! starts the server again with backoff when it fails. Its prompts and
//! resources are listed too (a user brings them into a message). Its tools become
//! Forge tools named `server__tool`, which sessions offer the model next
//! to the built-in ones and run through the same approvals and journal.

pub mod config;
mod connect;
mod content;
mod extras;
mod http;
mod hub;
mod server;
mod signals;
mod stdio;
mod tool;

pub use config::{McpConfig, McpServerConfig};
pub use extras::{MAX_RESOURCE_BYTES, PromptArg, PromptEntry, ResourceEntry};
pub use http::LazyHttp;
pub use hub::{ExtraError, McpHub, PromptReport, ResourceReport, ServerReport, ToolReport, UnknownServer};
pub use tool::{McpTool, exposed_name};
