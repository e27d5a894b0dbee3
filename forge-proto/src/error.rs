//! Forge's error codes. Standard JSON-RPC codes cover malformed input;
//! Forge's own errors use -32040..-32069 and always carry `data.kind`, a
//! stable string scripts can match on, and `data.retryable`.

#[cfg(any(feature = "server", feature = "client"))]
use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No session matches the id, prefix or name given.
    SessionNotFound,
    /// A prefix matched more than one session.
    SessionAmbiguous,
    /// The session cannot do that in its current state.
    SessionBusy,
    /// The name is taken by another session, or not a valid name.
    InvalidName,
    /// Bad input that passed JSON-RPC validation (empty message, ...).
    InvalidParams,
    /// The provider rejected the credentials, or none are configured.
    ProviderAuth,
    /// The provider rate-limited the request.
    ProviderRateLimited,
    /// The provider is overloaded or failed on its side.
    ProviderUnavailable,
    /// The provider could not be reached.
    ProviderUnreachable,
    /// The provider rejected the request or sent something unusable.
    ProviderError,
    /// An unknown provider or model, or another configuration problem.
    Config,
    /// The store cannot be written; the daemon refuses new work.
    PersistenceBlocked,
    /// The daemon is overloaded; retry shortly.
    Overloaded,
    /// The client speaks another protocol major version.
    ProtocolMismatch,
    /// The daemon is shutting down.
    ShuttingDown,
    /// There is no pending approval to answer (or it was answered already).
    ApprovalNotPending,
    /// The conversation no longer fits the model's context window (with
    /// Context Infinity off).
    ContextTooLong,
    /// A rewind would overwrite files changed outside Forge since Forge
    /// changed them (`force` overwrites them, keeping what they held).
    RewindConflict,
    /// No MCP server has that name (`mcp.list` lists them).
    McpServerNotFound,
    /// A `UserPromptSubmit` hook blocked the message (or failed): the
    /// message says which hook and why.
    HookBlocked,
    /// The session's directory is `/`, the home directory itself or a
    /// system directory (`allow_broad_root` if the user means it).
    BroadRoot,
    /// A bug or unexpected failure inside the daemon.
    Internal,
    /// A rewind would leave files it cannot restore (their content was
    /// never recorded: ignored by .gitignore, over 16 MiB, a secret, an
    /// interrupted call); the message names each with the reason, and
    /// nothing was written (`partial` goes on without them).
    RewindIncomplete,
    /// An MCP prompt (`/server:prompt`) or resource (`server:uri`) could
    /// not be had: unknown, arguments missing, or the server down or
    /// refusing; the message says which. Nothing was sent.
    McpRequestFailed,
    /// `git.merge` or `git.rebase` met a conflict (or the user's tree is
    /// not clean): nothing was changed.
    GitConflict,
    /// `git.merge` would bring files that need the user's word first
    /// (files that run code later, links out of the repository, large
    /// binaries): the message names each; nothing was changed, and
    /// `accept_marked` takes them.
    GitMarked,
}

impl ErrorKind {
    pub fn code(self) -> i32 {
        match self {
            Self::SessionNotFound => -32040,
            Self::SessionAmbiguous => -32041,
            Self::SessionBusy => -32042,
            Self::InvalidName => -32043,
            Self::InvalidParams => -32602,
            Self::ProviderAuth => -32044,
            Self::ProviderRateLimited => -32045,
            Self::ProviderUnavailable => -32046,
            Self::ProviderUnreachable => -32047,
            Self::ProviderError => -32048,
            Self::Config => -32049,
            Self::PersistenceBlocked => -32050,
            Self::Overloaded => -32051,
            Self::ProtocolMismatch => -32052,
            Self::ShuttingDown => -32053,
            Self::ApprovalNotPending => -32054,
            Self::ContextTooLong => -32055,
            Self::RewindConflict => -32056,
            Self::McpServerNotFound => -32057,
            Self::HookBlocked => -32058,
            Self::BroadRoot => -32059,
            Self::Internal => -32060,
            Self::RewindIncomplete => -32061,
            Self::McpRequestFailed => -32062,
            Self::GitConflict => -32063,
            Self::GitMarked => -32064,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionNotFound => "session_not_found",
            Self::SessionAmbiguous => "session_ambiguous",
            Self::SessionBusy => "session_busy",
            Self::InvalidName => "invalid_name",
            Self::InvalidParams => "invalid_params",
            Self::ProviderAuth => "provider_auth",
            Self::ProviderRateLimited => "provider_rate_limited",
            Self::ProviderUnavailable => "provider_unavailable",
            Self::ProviderUnreachable => "provider_unreachable",
            Self::ProviderError => "provider_error",
            Self::Config => "config",
            Self::PersistenceBlocked => "persistence_blocked",
            Self::Overloaded => "overloaded",
            Self::ProtocolMismatch => "protocol_mismatch",
            Self::ShuttingDown => "shutting_down",
            Self::ApprovalNotPending => "approval_not_pending",
            Self::ContextTooLong => "context_too_long",
            Self::RewindConflict => "rewind_conflict",
            Self::McpServerNotFound => "mcp_server_not_found",
            Self::HookBlocked => "hook_blocked",
            Self::BroadRoot => "broad_root",
            Self::Internal => "internal",
            Self::RewindIncomplete => "rewind_incomplete",
            Self::McpRequestFailed => "mcp_request_failed",
            Self::GitConflict => "git_conflict",
            Self::GitMarked => "git_marked",
        }
    }

    /// Whether the same call may succeed if simply tried again later.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Self::Overloaded | Self::ProviderRateLimited | Self::ProviderUnavailable | Self::ProviderUnreachable
        )
    }
}

/// The `data` member of a Forge error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorData {
    pub kind: String,
    pub retryable: bool,
}

/// Builds the JSON-RPC error object for a Forge error.
#[cfg(any(feature = "server", feature = "client"))]
pub fn rpc_error(kind: ErrorKind, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        kind.code(),
        message.into(),
        Some(ErrorData { kind: kind.as_str().to_string(), retryable: kind.retryable() }),
    )
}

/// Reads `data.kind` back out of an error object, if it is a Forge error.
#[cfg(any(feature = "server", feature = "client"))]
pub fn error_kind_of(err: &ErrorObjectOwned) -> Option<String> {
    let data = err.data()?;
    let parsed: ErrorData = serde_json::from_str(data.get()).ok()?;
    Some(parsed.kind)
}
