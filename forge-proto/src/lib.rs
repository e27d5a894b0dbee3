//! The Forge wire protocol.
//!
//! Everything a client and `forged` exchange is defined here once: the
//! table of JSON-RPC methods ([`methods`]: from it the server trait with
//! the `server` feature, the client with `client`, and the schema), each
//! method's params ([`params`]) and result, the [`events::SessionEvent`] stream, the error codes and their
//! stable `kind` strings. This crate knows nothing of the engine and holds
//! no transport: it only describes what travels on the socket (the client
//! is `forge-client`).

pub mod active_files;
pub mod calls;
pub mod commands;
pub mod context;
pub mod error;
mod event_kind;
pub mod events;
pub mod git;
pub mod helpers;
mod history;
pub mod images;
pub mod methods;
pub mod params;
pub mod paths;
pub mod schema;
pub mod store;
mod tag;
pub mod tree_edits;
pub mod trust;
pub mod types;
pub mod usage;
pub mod web;

pub use active_files::{ActiveFile, ContextFilesResult, RefusedFile};
pub use commands::{CommandInfo, PlanInfo, PlanStep};
pub use context::{ContextInfo, RepoMapInfo};
pub use error::{ErrorData, ErrorKind};
pub use events::{EventKind, GitUndone, SessionEvent, SubscriptionItem, TurnStatus};
pub use git::{GitCommit, GitDiff, GitKept, GitLog, GitMerged, GitRebased, GitSession, GitShown};
pub use helpers::{AgentInfo, HelperOf};
pub use history::*;
pub use images::{ImageData, ImageInfo, ImageInput, MAX_FILE_SHOWN, SessionFile};
pub use store::{StoreGcResult, StoreSession, StoreStatus};
pub use trust::{FolderTrust, ProjectTool, ProjectTools};
pub use types::*;
pub use usage::*;
pub use web::Citation;

/// The protocol version spoken by this build. A client states the version it
/// speaks in `hello`; the daemon refuses a different major version with
/// `protocol_mismatch`. Bump on any incompatible change to methods or events;
/// adding methods, optional fields or event kinds is compatible.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest JSON-RPC message the daemon accepts or sends (8 MiB).
pub const MAX_MESSAGE_BYTES: u32 = 8 * 1024 * 1024;
