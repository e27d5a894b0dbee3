//! Git mode: a finished turn whose commit waits for a user's word on
//! files its commands wrote that run something later (see `git_held.rs`).

use forge_proto::PendingApproval;

pub(crate) struct HeldWait {
    pub message_id: String,
    pub status: forge_proto::MessageStatus,
    /// The commit, its message written.
    pub commit: forge_git::TurnCommit,
    pub approval: PendingApproval,
    /// The seq of its `approval_requested`: shown once that is durable.
    pub approval_seq: u64,
    /// Each call's file (its path as the file system names it).
    pub paths: Vec<(String, std::path::PathBuf)>,
}
