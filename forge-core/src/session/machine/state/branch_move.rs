//! A git session's checkout or rewind while its branch moves
//! (`MovingBranch`, see `git_commit.rs`).

use forge_proto::{ClientRef, RewindResult, SessionInfo};

use crate::provider::ChatMessage;
use crate::session::Reply;

/// A checkout or rewind of a git session, waiting for its branch to move.
pub(crate) struct BranchMove {
    pub job: u64,
    /// Where the head goes (`None`: the conversation starts afresh).
    pub node: Option<String>,
    /// The conversation up to `node`, for the head's move.
    pub path: Vec<ChatMessage>,
    pub client: ClientRef,
    pub reply: MoveReply,
}

/// Who waits for the move, and with what answer.
pub(crate) enum MoveReply {
    Checkout(Reply<SessionInfo>),
    /// Undo or rewind: answered with the rewind's result.
    Rewind(Reply<RewindResult>, Box<RewindResult>),
    /// `git.rebase`: the conversation stays.
    Rebase(Reply<forge_proto::GitRebased>),
}
