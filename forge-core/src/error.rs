//! The engine's error: a stable kind from the protocol plus a message that
//! says what happened and what to do.

use forge_proto::ErrorKind;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    pub kind: ErrorKind,
    pub message: String,
}

impl EngineError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn not_found(selector: &str) -> Self {
        Self::new(
            ErrorKind::SessionNotFound,
            format!("no session matches \"{selector}\" (by id, id prefix or name); `forgectl session list` shows them"),
        )
    }

    pub fn blocked(reason: &str) -> Self {
        Self::new(
            ErrorKind::PersistenceBlocked,
            format!(
                "the store cannot be written ({reason}); Forge refuses new work so that nothing is lost. {}",
                unblock_advice(reason)
            ),
        )
    }

    pub fn gone() -> Self {
        Self::new(ErrorKind::ShuttingDown, "the session stopped (removed, or forged is shutting down)")
    }
}

impl From<forge_git::GitError> for EngineError {
    fn from(e: forge_git::GitError) -> Self {
        use forge_git::GitError as G;
        let kind = match e {
            G::NotARepository { .. }
            | G::Bare { .. }
            | G::NoCommit { .. }
            | G::BadRef { .. }
            | G::BranchExists { .. }
            | G::NoCommitFor { .. }
            | G::NotATurn { .. } => ErrorKind::InvalidParams,
            G::Conflict { .. } | G::UserTreeDirty { .. } | G::NotOnBranch { .. } => ErrorKind::GitConflict,
            _ => ErrorKind::Internal,
        };
        EngineError::new(kind, e.to_string())
    }
}

impl From<crate::store::StoreError> for EngineError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::internal(format!("store read failed: {e}"))
    }
}

impl From<crate::provider::ProviderError> for EngineError {
    fn from(e: crate::provider::ProviderError) -> Self {
        Self::new(e.kind, e.message)
    }
}

/// What to do about a blocked journal, for its reason.
pub fn unblock_advice(reason: &str) -> &'static str {
    if reason.contains("was written back") {
        "Nothing is lost: run `forgectl journal reset` to go on with the database written back"
    } else if reason.contains("deleted or replaced") {
        "Run `forgectl journal reset`: the daemon still holds the database and writes it back to its path"
    } else {
        "Free disk space or fix the permissions of $FORGE_HOME/forge.db, then run `forgectl journal reset`"
    }
}

impl From<crate::forest::ForestError> for EngineError {
    fn from(e: crate::forest::ForestError) -> Self {
        match e {
            crate::forest::ForestError::NoSuchNode(_)
            | crate::forest::ForestError::Unnamed { .. }
            | crate::forest::ForestError::Ambiguous { .. } => EngineError::new(ErrorKind::InvalidParams, e.to_string()),
            crate::forest::ForestError::BrokenChain { .. } => EngineError::internal(e.to_string()),
        }
    }
}
