//! A summary's data (what `summarize.rs` moves along).

use forge_proto::SummarySpan;

use crate::provider::{ChatRequest, ProviderSettings};

/// A summary being written.
pub(crate) struct SummaryJob {
    /// The turn waiting for it (none when a client asked for it).
    pub message_id: Option<String>,
    /// The turn's stream to start after it (0 at the turn's start, more
    /// between tool batches).
    pub iteration: u32,
    pub span: SummarySpan,
    /// Where the span's new messages start on the path (those before it
    /// were summarized already): the Librarian reads `path[from..]`.
    pub from: usize,
    pub text: String,
    /// What the provider counted for the summary request.
    pub usage: Option<forge_proto::Usage>,
    pub attempt: u32,
    /// Waiting for `Timer::SummaryRetry`.
    pub waiting: bool,
    pub request: Box<(ProviderSettings, ChatRequest)>,
    /// The model's window when it started: a switch to a larger one while
    /// it is written puts spans back once it is done.
    pub window: u64,
}
