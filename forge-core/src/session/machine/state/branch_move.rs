//! A git session's checkout while its branch moves (`MovingBranch`, see
//! `git_commit.rs`).

use forge_proto::ClientRef;

use crate::provider::ChatMessage;
use crate::session::Reply;

/// A checkout of a git session, waiting for its branch to move.
pub(crate) struct BranchMove {
    pub job: u64,
    pub node: String,
    /// The conversation up to `node`, for the head's move.
    pub path: Vec<ChatMessage>,
    pub client: ClientRef,
    pub reply: Reply<forge_proto::SessionInfo>,
}
