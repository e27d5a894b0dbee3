//! The Forge engine: sessions and their operation state machine, providers,
//! the SQLite store and its single journal writer, configuration.
//!
//! It knows no sockets and no terminal: `forged` serves it over JSON-RPC,
//! and tests drive it directly.

pub mod agents;
pub mod catalog;
pub mod config;
pub mod context;
pub mod daemon_config;
pub mod effective_config;
pub mod engine;
pub mod error;
pub mod event_size;
pub mod export;
pub mod forest;
pub mod hooks;
pub mod ids;
pub mod images;
pub mod instructions;
pub mod journal;
pub mod librarian;
pub mod project_tools;
pub mod prompt;
pub mod provider;
pub mod provider_kind;
pub mod redact;
mod repo_map;
pub mod rewind;
pub mod sampling;
pub mod session;
mod shared;
pub mod slash_commands;
pub mod snapshot;
pub mod store;
pub mod trust;
/// The tools live in their own crate; this name keeps their paths.
pub use forge_tools as tools;

pub use engine::{Engine, EngineOptions, EventFeed, FeedItem};
pub use error::EngineError;
pub use session::live::LiveTap;
