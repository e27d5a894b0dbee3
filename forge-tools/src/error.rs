//! What can go wrong with a tool call. Every variant becomes a tool result
//! the model sees (marked as an error): the conversation goes on.

use std::path::PathBuf;
use std::time::Duration;

/// Why the sandbox refused a path: which rule denied what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DenialReason {
    #[error("`{0}` contains `..`; paths may not climb out of the working directory")]
    ParentComponent(String),
    #[error(
        "`{path}` is outside the allowed roots ({roots}); use a path inside them, relative to the working directory or absolute"
    )]
    OutsideRoots { path: String, roots: String },
    #[error("`{path}` goes through a symbolic link (`{link}`); links are not followed")]
    Symlink { path: String, link: String },
    #[error("`{path}` matches the denied pattern `{pattern}`")]
    Denied { path: String, pattern: String },
    #[error("`{path}` is a hard link (its other names may be outside the allowed roots)")]
    HardLink { path: String },
    #[error(
        "`{0}` is inside `.git` or a bare repository: its configuration and hooks run programs outside the sandbox, so no tool writes there (use the git tools)"
    )]
    GitInternals(String),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("bad arguments: {message}")]
    BadArgs { message: String },
    #[error("{tool} timed out after {elapsed:?}")]
    Timeout { tool: String, elapsed: Duration },
    #[error("sandbox: {0}")]
    SandboxViolation(DenialReason),
    #[error("{tool} failed: {message}")]
    ExecutionFailed { tool: String, message: String },
    #[error("cancelled")]
    Cancelled,
    #[error("there is no tool named `{name}`")]
    UnknownTool { name: String },
    #[error("a tool named `{name}` is already registered")]
    DuplicateTool { name: String },
    #[error("the tool call id `{id}` is used twice in one answer")]
    DuplicateToolCallId { id: String },
    #[error("patch failed for {file}: {message}")]
    PatchFailed { file: PathBuf, message: String },
    #[error("{file} changed since it was last read: {reason}")]
    StaleFile { file: PathBuf, reason: String },
}
