//! What happened in a session: every kind of event (`EventKind`, tagged
//! by `kind` on the wire) and what the kinds carry that is theirs alone.

use serde::{Deserialize, Serialize};

use crate::types::{ApprovalCall, MessageStatus, RecoveryBadge, RecoveryCall, SummarySpan, Usage, UsageTotal};

/// What happened. Tagged by `kind` on the wire; clients must ignore kinds
/// they do not know (they decode as `unknown`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    SessionCreated {
        name: Option<String>,
        cwd: String,
        provider: String,
        model: String,
        /// The session's own `temperature` and `top_p`, if set.
        #[serde(flatten)]
        sampling: crate::Sampling,
    },
    SessionRenamed {
        name: Option<String>,
    },
    /// The session's provider or model changed (`session.configure`); the
    /// next request uses them.
    SessionConfigured {
        provider: String,
        model: String,
        /// The session's own `temperature` and `top_p` as they are now.
        #[serde(flatten)]
        sampling: crate::Sampling,
    },
    /// `session.clear`: the conversation starts afresh. Earlier messages
    /// stay in the store's tree but are no longer on the session's path.
    HistoryCleared {},
    /// The session's head moved to another node of its tree (`checkout`,
    /// an edit that branched, a delete or split that moved it).
    HeadMoved {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<String>,
    },
    /// A message was edited: in place (`node_id` is `new_node_id`) when it
    /// had no replies, else as a new sibling branch.
    NodeEdited {
        node_id: String,
        new_node_id: String,
        in_place: bool,
    },
    /// Nodes left the tree (`session.delete_node`): the node and, with
    /// `cascade`, everything under it; otherwise its children now hang
    /// from its parent.
    NodesDeleted {
        node_ids: Vec<String>,
        cascade: bool,
    },
    /// A message was cut in two at `at` (characters): `node_id` keeps the
    /// start, `new_node_id` (its child) the rest and the replies.
    NodeSplit {
        node_id: String,
        new_node_id: String,
        at: u64,
    },
    /// This session was forked from `from`: it shares that session's path
    /// up to `node` (its head at start).
    SessionForked {
        from: String,
        node: String,
    },
    /// Files were put back as they were at `node` (a rewind, or a checkout
    /// with `restore_files`).
    FilesRestored {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        files: Vec<crate::types::RestoredFile>,
        /// Finished on restart: the daemon stopped during the rewind that
        /// `rewind_started` announced.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        recovered: bool,
    },
    /// A rewind is about to move files (its intent, durable before the
    /// first file moves): `files` as `files_restored` will report them,
    /// `steps` what each is to hold. A daemon stopped before its
    /// `files_restored` finishes it on restart. With `conversation`, the
    /// head then moves to `node` (no `node`: the conversation is cleared).
    /// With `fork`, the rewind is a fork's `restore_files`: the new
    /// session `fork` (named `fork_name`) is made with its end, at `node`.
    RewindStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        conversation: bool,
        files: Vec<crate::types::RestoredFile>,
        steps: Vec<crate::types::RewindStep>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fork: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fork_name: Option<String>,
    },
    /// A bookmark was set (`node_id`) or deleted (no `node_id`).
    BookmarkSet {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_id: Option<String>,
    },
    /// A message arrived while a turn was running; it runs next.
    MessageQueued {
        message_id: String,
        text: String,
        position: u32,
    },
    /// Text to steer the running turn arrived: it joins the turn at its
    /// next safe point (`steer_applied`), or runs as the next message if
    /// the turn ends first.
    SteerQueued {
        message_id: String,
        text: String,
    },
    /// The steer entered the history (as a user message after the tool
    /// batch's results) and the turn's next request carries it.
    SteerApplied {
        message_id: String,
        text: String,
    },
    /// The turn's final answer validated against the send's
    /// `output_schema`: the parsed value (before `turn_finished`).
    StructuredOutput {
        message_id: String,
        output: serde_json::Value,
    },
    /// The model updated its plan (`update_plan`): the whole list of
    /// steps, each `pending`, `in_progress` or `completed`.
    PlanUpdated {
        steps: Vec<crate::PlanStep>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The model searched the web (the provider's own search).
    WebSearch {
        query: String,
    },
    /// A source the answer being streamed cites (kept with its node).
    Citation {
        url: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cited_text: Option<String>,
    },
    /// A user message entered the history and a turn began.
    TurnStarted {
        message_id: String,
        text: String,
        provider: String,
        model: String,
        /// Generation without a new user message (`session.send` with
        /// `continue`): `message_id` is the node the answer follows, and
        /// `text` is empty.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        continued: bool,
        /// The images the message carries.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<crate::images::ImageInfo>,
    },
    /// Assistant text. Concatenating every delta of a turn gives exactly the
    /// provider's text; consecutive deltas may be coalesced.
    TextDelta {
        text: String,
    },
    /// Model reasoning text, when the provider streams it.
    ThinkingDelta {
        text: String,
    },
    /// The model started a tool call (`index` numbers the answer's calls
    /// from 0). Its arguments follow as `tool_call_args` fragments.
    ToolCallStarted {
        index: u32,
        call_id: String,
        name: String,
    },
    /// A fragment of a tool call's JSON arguments; all fragments of a call,
    /// concatenated, are its arguments exactly as the provider sent them.
    ToolCallArgs {
        index: u32,
        fragment: String,
    },
    /// Tool calls wait for a user's decision; any client may answer with
    /// `approval.answer`. Nothing of the batch runs until then.
    ApprovalRequested {
        approval_id: String,
        calls: Vec<ApprovalCall>,
        /// A helper agent's session asks (shown to its parent's clients,
        /// whose answer to the parent goes to the helper).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        helper: Option<String>,
    },
    /// The approval was answered (by `client`); the first answer wins.
    ApprovalResolved {
        approval_id: String,
        approved: Vec<String>,
        denied: Vec<String>,
    },
    /// The session's own approval rules changed (`session.approval_rules`,
    /// or an "allow always" answer).
    ApprovalRulesChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<String>,
        always_allow: Vec<String>,
    },
    /// A hook ran (`[[hooks]]`, or a project's Claude settings): what ran,
    /// for which event and tool, and what it decided.
    HookRan {
        /// `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop` or
        /// `SessionStart`.
        event: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// `allow`, `block` or `error` (an error never allows).
        decision: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        duration_ms: u64,
    },
    /// The daemon stopped during this turn's tool calls; the session waits
    /// for a client to choose `session.recover` resume or discard.
    ToolRecovery {
        calls: Vec<RecoveryCall>,
    },
    /// Parse-only mode: the model called tools; a client submits each
    /// result with `session.tool_result`.
    AwaitingToolResults {
        calls: Vec<crate::types::ToolCallRecord>,
    },
    /// A tool call is about to run (written before it starts, so a crash
    /// mid-run is known).
    ToolRunning {
        call_id: String,
        name: String,
    },
    /// Output of a running tool (`stream`: `stdout` or `stderr`), as it
    /// comes; the result has the whole (capped) output.
    ToolOutput {
        call_id: String,
        stream: String,
        text: String,
    },
    /// A tool call's result, as the model will see it.
    ToolResult {
        call_id: String,
        name: String,
        is_error: bool,
        output: String,
    },
    /// Call `call_id`'s command left, in a repository under the roots,
    /// settings or hooks that git would run outside the sandbox (when the
    /// user runs `git status` there, or a shell prompt does): each was
    /// undone (`what` says how); the tool result says so to the model too.
    GitSettingsUndone {
        call_id: String,
        undone: Vec<GitUndone>,
    },
    /// The model continues the turn with the tool results (a new stream).
    StreamResumed {
        iteration: u32,
    },
    /// The turn waits for MCP servers still starting (the first turns
    /// after forged starts), at most `timeout_seconds` (`[mcp]
    /// startup_timeout_seconds`), so the model is offered their tools.
    McpWaiting {
        servers: Vec<String>,
        timeout_seconds: u64,
    },
    /// The wait is over: `not_started` lists the servers still starting,
    /// whose tools this request goes without.
    McpWaited {
        waited_ms: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        not_started: Vec<String>,
    },
    /// `/name` in the message just recorded is a command of the project in
    /// `dir`, which the user has not trusted: it goes to the model as text
    /// (said once a session; `forgectl trust DIR` honours the project's
    /// commands).
    CommandIgnored {
        name: String,
        dir: String,
    },
    /// A `task` call started helper agent `helper` (a session of its own:
    /// `attach` follows it) as agent type `agent`.
    HelperStarted {
        call_id: String,
        helper: String,
        description: String,
        agent: String,
    },
    /// The helper of `call_id` ended; its answer is the call's result.
    /// `cost_usd` is what it spent, counted in this session's usage too.
    HelperFinished {
        call_id: String,
        helper: String,
        status: MessageStatus,
        cost_usd: f64,
    },
    /// Git mode: the session has its branch and worktree (in its first
    /// batch); `from_commit` when it resumes a commit of another session.
    GitSessionStarted {
        repo: String,
        branch: String,
        base: String,
        worktree: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_commit: Option<String>,
    },
    /// Git mode: the turn started by `message_id` is commit `commit` on
    /// `branch`, holding `files` and the session state; `status` is how
    /// the turn ended (a cancelled or failed turn commits what it kept).
    GitCommitted {
        message_id: String,
        commit: String,
        branch: String,
        #[serde(default)]
        files: Vec<String>,
        status: MessageStatus,
    },
    /// Git mode: the turn `message_id` stopped for the user (`reason`
    /// `awaiting_approval`), or the user answered (`approved`, `denied`):
    /// what the worktree holds is commit `commit` on `branch`, its state
    /// file saying so, before anything runs on. The turn's own commit
    /// (`git_committed`) comes at its end.
    GitCheckpoint {
        message_id: String,
        commit: String,
        branch: String,
        #[serde(default)]
        files: Vec<String>,
        reason: String,
        approval_id: String,
    },
    /// Git mode: a checkout moved the session's branch to `commit` (its
    /// files with it); the tip it left, `previous`, is kept on `kept`
    /// (`refs/forge/session/<id>/prev-N`).
    GitBranchMoved {
        branch: String,
        commit: String,
        previous: String,
        kept: String,
    },
    /// Git mode: the turn could not be committed; its changes stay in the
    /// worktree and go into the next turn's commit.
    GitCommitFailed {
        message_id: String,
        error: String,
    },
    /// The provider request failed before any output with an error worth
    /// retrying (rate limit, overload, unavailable, unreachable): attempt
    /// `attempt` of `max_attempts` starts after `delay_ms`.
    Retrying {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        /// In a few words: `overloaded`, `rate limited`, ...
        reason: String,
        /// The full error of the attempt that failed.
        error: String,
    },
    /// A provider response ended: its tokens and estimated cost, and the
    /// session's totals so far.
    Usage {
        message_id: String,
        provider: String,
        model: String,
        usage: Usage,
        /// Absent when the model has no known price.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        session: UsageTotal,
    },
    /// The next request would not fit the model's window (or passes
    /// `[context] summarize_at` of it): the oldest span that must leave is
    /// being summarized before the turn goes on.
    SummarizationStarted {
        /// The turn waiting for it (none when a client asked for it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The span's first and last nodes and its size.
        first: String,
        last: String,
        messages: u64,
        tokens_before: u64,
    },
    /// A summary request failed; attempt `attempt` of `max_attempts`
    /// starts after `delay_ms`.
    SummarizationRetry {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error: String,
    },
    /// The summary is stored (node `summary_id`); requests send it in place
    /// of the span from now on.
    SummarizationDone {
        summary_id: String,
        span: SummarySpan,
    },
    /// A switch to a larger window put summarized messages back into what
    /// requests send (`summary_id`: the summary still in force, if any).
    ContextRestored {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_id: Option<String>,
        messages_restored: u64,
    },
    /// Summarization gave up after its last attempt.
    SummarizationFailed {
        error: String,
    },
    /// A client asked to cancel the running turn.
    CancelRequested {},
    /// The turn ended. `assistant_id` is the history node holding the answer
    /// (absent if nothing was produced). `status` says how it ended.
    TurnFinished {
        message_id: String,
        assistant_id: Option<String>,
        status: TurnStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Human-readable error, for `status: error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Stable error kind (see the error table), for `status: error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_kind: Option<String>,
        /// Set when the daemon recovered this answer from its journal after
        /// a stop or a store failure (see `RecoveryBadge`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovered: Option<RecoveryBadge>,
    },
    /// A sampling parameter asked for (`parameter`: `temperature` or
    /// `top_p`) is not sent as asked to `model`: clamped into the range
    /// its provider takes (`sent`), or left out (`sent` absent) where the
    /// model refuses it. Said once per session, model and parameter.
    SamplingAdjusted {
        model: String,
        parameter: String,
        asked: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<f64>,
        /// Why, in words.
        reason: String,
    },
    /// `model` does not answer: it is deprecated (`reason`
    /// `deprecated`) or its provider no longer knows it (`not_found`);
    /// `fallback` answers in its place from now on. Said once per
    /// session and model.
    ModelFallback {
        model: String,
        fallback: String,
        reason: String,
        /// The provider's own words, for `not_found`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A deprecated model with no fallback known still answers: the user
    /// should move to another (said once per session and model).
    ModelDeprecated {
        model: String,
    },
    /// The session's active files changed: `files` is the list now;
    /// `added` and `removed` by the model (`update_context`) or a client,
    /// `gone` left because they no longer exist.
    ActiveFilesChanged {
        files: Vec<crate::ActiveFile>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        added: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removed: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gone: Vec<String>,
        /// Left because they grew past the room active files have in the
        /// model's window.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        too_large: Vec<String>,
    },
    /// A provider call starts: one per answer the model gives in a turn
    /// (a retry of the same call is another attempt of it).
    ProviderRequest {
        message_id: String,
        /// 0 for the turn's first answer, one more after each tool batch.
        iteration: u32,
        /// From 1; more after a transient failure (see `retrying`).
        attempt: u32,
        provider: String,
        model: String,
        /// Messages the request holds (after summaries and coalescing).
        messages: u32,
        /// Tool definitions it offers.
        tools: u32,
        max_output_tokens: u32,
    },
    /// The provider finished its answer (complete, not cut off).
    ProviderResponse {
        message_id: String,
        iteration: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// An answer became a node of the tree (under `parent_id`).
    AssistantNode {
        node_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_id: Option<String>,
        status: TurnStatus,
        /// Tool calls it asks for.
        tool_calls: u32,
    },
    /// A tool's result became a node of the tree.
    ToolResultNode {
        node_id: String,
        call_id: String,
        name: String,
        is_error: bool,
    },
    /// The generation ended well: `nodes` are the nodes it appended (every
    /// answer and tool result; for `n` > 1 the sibling answers).
    Done {
        message_id: String,
        nodes: Vec<String>,
    },
    /// The generation ended otherwise: `error_kind` is `generation_aborted`
    /// when a client cancelled it, else the error's kind. `nodes` are what
    /// it appended before.
    Error {
        message_id: String,
        error_kind: String,
        error: String,
        nodes: Vec<String>,
    },
    /// A queued message was dropped by a cancel with `drop_queued`.
    QueueCleared {
        dropped: u32,
    },
    #[serde(other)]
    Unknown,
}

impl EventKind {
    /// The kind's wire name (`"text_delta"`), as serde writes it.
    pub fn name(&self) -> &'static str {
        crate::tag::tag_of(self, "kind").unwrap_or("unknown")
    }
}

/// How a turn ended: the status its answer gets in the history.
pub use crate::types::MessageStatus as TurnStatus;

/// One thing a command left that git would have run, and what became of
/// it (`took out core.fsmonitor = ...`, `removed`, `put back as it was`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitUndone {
    /// Relative to the session's directory when under it.
    pub path: String,
    pub what: String,
}
