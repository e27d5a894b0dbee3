//! A rewind's data (what `rewind.rs` moves through its stages).

use forge_proto::{ClientRef, RewindResult, RewindStep};

use crate::provider::ChatMessage;
use crate::session::Reply;

pub(crate) enum RewindStage {
    Planning,
    Journaling { steps: Vec<RewindStep> },
    Restoring,
}

/// A rewind in progress.
pub(crate) struct Rewinding {
    pub job: u64,
    pub stage: RewindStage,
    pub node: Option<String>,
    /// The conversation up to `node`, when the head moves there.
    pub path: Option<Vec<ChatMessage>>,
    pub result: RewindResult,
    pub client: ClientRef,
    /// Nobody waits for a rewind finished on restart.
    pub reply: Option<Reply<RewindResult>>,
    /// Overwrite files changed outside Forge (what they held is kept).
    pub force: bool,
    /// Go on when some files cannot be restored.
    pub partial: bool,
    pub recovered: bool,
    /// A fork's `restore_files`: the fork is made with the rewind's end.
    pub fork: Option<Box<Forking>>,
}

/// A fork to make: its id and name (the engine checked the name free and
/// holds it until the answer), the node it branches off, and who waits
/// for it (nobody, for one finished on restart).
pub(crate) struct Forking {
    pub id: String,
    pub name: Option<String>,
    pub node: String,
    pub client: ClientRef,
    pub reply: Option<Reply<String>>,
}
