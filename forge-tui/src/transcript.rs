//! The transcript: what the TUI shows of a session, built only from the
//! session's events (replayed from the store on attach, then live), so two
//! TUIs and a `forgectl attach` on one session always agree.

use forge_proto::{
    ApprovalCall, EventKind, MessageStatus, OperationStateKind, RecoveryBadge, RecoveryCall, SessionEvent,
    ToolCallRecord, Usage,
};

/// One thing shown in the conversation pane.
#[derive(Debug, Clone, PartialEq)]
pub enum DisplayItem {
    User {
        text: String,
        from: Option<String>,
        queued: bool,
        mark: NodeMark,
    },
    Assistant(AssistantItem),
    Tool(ToolItem),
    /// Local messages: notifications, command output, errors. Never sent to
    /// the model.
    Notice {
        level: Level,
        text: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// Where a message is in the tree: its node (once known), which of its
/// siblings it is ("2/3"), and whether it is selected (Normal mode `K`/`J`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeMark {
    pub node: Option<String>,
    /// (position from 1, siblings in all), when it has siblings.
    pub branch: Option<(u32, u32)>,
    pub selected: bool,
}

impl NodeMark {
    pub fn of(node: &str) -> Self {
        NodeMark { node: Some(node.to_string()), ..Default::default() }
    }

    /// For render caches: changes whenever what is shown of it does.
    pub fn key(&self) -> u64 {
        let (at, of) = self.branch.unwrap_or((0, 0));
        (u64::from(at) << 33) | (u64::from(of) << 1) | u64::from(self.selected)
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssistantItem {
    pub mark: NodeMark,
    pub text: String,
    pub thinking: String,
    pub model: String,
    /// None while it streams.
    pub status: Option<MessageStatus>,
    pub error: Option<String>,
    pub recovered: Option<RecoveryBadge>,
    /// Bumped on every change: the renderer's cache key.
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolItem {
    pub call_id: String,
    pub name: String,
    pub args: String,
    pub output: String,
    pub running: bool,
    pub result: Option<ToolOutcome>,
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub is_error: bool,
    pub output: String,
}

/// A pending approval as the panel shows it, with the user's picks.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalView {
    pub approval_id: String,
    pub calls: Vec<ApprovalCall>,
    /// Picked for "approve selected" (all picked at first).
    pub picked: Vec<bool>,
    pub cursor: usize,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transcript {
    pub items: Vec<DisplayItem>,
    pub state: Option<OperationStateKind>,
    pub approval: Option<ApprovalView>,
    pub recovery: Option<Vec<RecoveryCall>>,
    pub awaiting_results: Option<Vec<ToolCallRecord>>,
    pub last_usage: Option<Usage>,
    /// The session's tokens and estimated cost, as of the last `usage`.
    pub spent: Option<forge_proto::UsageTotal>,
    pub provider: String,
    pub model: String,
    pub name: Option<String>,
    pub cwd: String,
    pub last_seq: u64,
    /// The provider request waits to be tried again (for the status line).
    pub retrying: Option<String>,
    /// Bumped whenever items are removed or reordered (not when they only
    /// grow or are appended): caches keyed by position start over.
    pub generation: u64,
    /// Calls of the answer being streamed, by index, for their arguments.
    streaming_calls: Vec<usize>,
    /// The log has a `head_moved`: replaying it does not give the path,
    /// which is read from the store instead.
    pub head_moved: bool,
}

impl Transcript {
    /// Shows the session's path as the store has it (after its head moved
    /// to another branch): its messages replace what the log replayed.
    /// Items from `live_from` on came in after the move was seen (a turn
    /// the move started, say): those the path read does not hold yet stay.
    pub fn show_path(&mut self, messages: &[forge_proto::HistoryMessage], live_from: Option<usize>) {
        let live: Vec<DisplayItem> = match live_from {
            Some(from) if from <= self.items.len() => self.items.split_off(from),
            _ => Vec::new(),
        };
        let known = |i: &DisplayItem| {
            let node = match i {
                DisplayItem::User { mark, .. } => mark.node.as_deref(),
                DisplayItem::Assistant(a) => a.mark.node.as_deref(),
                DisplayItem::Tool(t) => {
                    return messages.iter().any(|m| m.tool_calls.iter().any(|c| c.id == t.call_id));
                }
                DisplayItem::Notice { .. } => None,
            };
            node.is_some_and(|n| messages.iter().any(|m| m.id == n))
        };
        let live: Vec<DisplayItem> = live.into_iter().filter(|i| !known(i)).collect();
        // The newest notices stay (what the move answered, say).
        let mut notices: Vec<DisplayItem> =
            self.items.iter().rev().filter(|i| matches!(i, DisplayItem::Notice { .. })).take(3).cloned().collect();
        notices.reverse();
        self.items.clear();
        self.generation += 1;
        self.streaming_calls.clear();
        for m in messages {
            match m.role {
                forge_proto::Role::User => self.items.push(DisplayItem::User {
                    text: m.text.clone(),
                    from: m.client.as_ref().map(|c| c.name.clone()),
                    queued: false,
                    mark: NodeMark::of(&m.id),
                }),
                forge_proto::Role::Assistant => {
                    self.items.push(DisplayItem::Assistant(AssistantItem {
                        mark: NodeMark::of(&m.id),
                        text: m.text.clone(),
                        model: m.model.clone().unwrap_or_default(),
                        status: Some(m.status),
                        error: m.error.clone(),
                        recovered: m.recovered,
                        ..Default::default()
                    }));
                    for c in &m.tool_calls {
                        self.items.push(DisplayItem::Tool(ToolItem {
                            call_id: c.id.clone(),
                            name: c.name.clone(),
                            args: c.arguments.clone(),
                            ..Default::default()
                        }));
                    }
                }
                forge_proto::Role::Tool => {
                    let Some(r) = &m.tool_result else { continue };
                    let outcome = ToolOutcome { is_error: r.is_error, output: m.text.clone() };
                    let found = self.items.iter_mut().rev().find_map(|i| match i {
                        DisplayItem::Tool(t) if t.call_id == r.call_id && t.result.is_none() => Some(t),
                        _ => None,
                    });
                    match found {
                        Some(t) => {
                            t.result = Some(outcome);
                            t.version += 1;
                        }
                        None => self.items.push(DisplayItem::Tool(ToolItem {
                            call_id: r.call_id.clone(),
                            name: r.name.clone(),
                            result: Some(outcome),
                            ..Default::default()
                        })),
                    }
                }
                _ => {}
            }
        }
        self.items.extend(notices);
        self.items.push(DisplayItem::Notice {
            level: Level::Info,
            text: format!(
                "showing the path to {} ({} messages; /tree draws every branch)",
                messages.last().map(|m| m.id.as_str()).unwrap_or("nothing"),
                messages.len()
            ),
        });
        self.items.extend(live);
    }

    /// Marks each message with where it is among its siblings, from the
    /// session's tree as just read.
    pub fn mark_branches(&mut self, tree: &forge_proto::TreeInfo) {
        for item in &mut self.items {
            let mark = match item {
                DisplayItem::User { mark, .. } => mark,
                DisplayItem::Assistant(a) => &mut a.mark,
                _ => continue,
            };
            let branch = mark
                .node
                .as_deref()
                .and_then(|n| forge_client::tree::siblings(tree, n))
                .filter(|(all, _)| all.len() > 1)
                .map(|(all, at)| (at as u32 + 1, all.len() as u32));
            if mark.branch != branch {
                mark.branch = branch;
                if let DisplayItem::Assistant(a) = item {
                    a.version += 1;
                }
            }
        }
    }

    /// Selects the message of this node (none: clears the selection).
    /// Returns the item's index.
    pub fn select(&mut self, node: Option<&str>) -> Option<usize> {
        let mut found = None;
        for (i, item) in self.items.iter_mut().enumerate() {
            let mark = match item {
                DisplayItem::User { mark, .. } => mark,
                DisplayItem::Assistant(a) => &mut a.mark,
                _ => continue,
            };
            let selected = node.is_some() && mark.node.as_deref() == node;
            if selected {
                found = Some(i);
            }
            if mark.selected != selected {
                mark.selected = selected;
                if let DisplayItem::Assistant(a) = item {
                    a.version += 1;
                }
            }
        }
        found
    }

    /// The messages that are nodes, in order: (item index, node, is a
    /// user message).
    pub fn message_nodes(&self) -> Vec<(usize, String, bool)> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                DisplayItem::User { mark, .. } => mark.node.clone().map(|n| (i, n, true)),
                DisplayItem::Assistant(a) => a.mark.node.clone().map(|n| (i, n, false)),
                _ => None,
            })
            .collect()
    }

    /// Applies one event. Events arrive in `seq` order exactly once; an
    /// older one (a replay overlapping what was seen) is ignored.
    pub fn apply(&mut self, ev: &SessionEvent) {
        if ev.seq <= self.last_seq {
            return;
        }
        self.last_seq = ev.seq;
        let from = ev.client.as_ref().map(|c| c.name.clone());
        // Output, or the turn's end, means the retry is over.
        if !matches!(ev.kind, EventKind::Retrying { .. } | EventKind::CancelRequested {}) {
            self.retrying = None;
        }
        match &ev.kind {
            EventKind::SessionCreated { name, cwd, provider, model } => {
                self.name = name.clone();
                self.cwd = cwd.clone();
                self.provider = provider.clone();
                self.model = model.clone();
                self.state = Some(OperationStateKind::Idle);
            }
            EventKind::SessionRenamed { name } => self.name = name.clone(),
            EventKind::SessionConfigured { provider, model } => {
                self.provider = provider.clone();
                self.model = model.clone();
                let who = from.map(|f| format!(" (set by {f})")).unwrap_or_default();
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!("now using {provider}/{model}{who}"),
                });
            }
            EventKind::HistoryCleared {} => {
                self.items.clear();
                self.generation += 1;
                self.streaming_calls.clear();
                let who = from.map(|f| format!(" by {f}")).unwrap_or_default();
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!("conversation cleared{who}; earlier messages stay in the store"),
                });
            }
            EventKind::HeadMoved { .. }
            | EventKind::NodeEdited { .. }
            | EventKind::NodesDeleted { .. }
            | EventKind::NodeSplit { .. }
            | EventKind::BookmarkSet { .. }
            | EventKind::FilesRestored { .. }
            | EventKind::SessionForked { .. } => {
                if matches!(ev.kind, EventKind::HeadMoved { .. }) {
                    self.head_moved = true;
                }
                let text = match &ev.kind {
                    EventKind::HeadMoved { head, .. } => format!(
                        "moved to {} in the conversation tree (`forgectl tree` draws it)",
                        head.as_deref().unwrap_or("an empty conversation")
                    ),
                    EventKind::NodeEdited { node_id, new_node_id, in_place: true } if node_id == new_node_id => {
                        format!("{node_id} edited in place")
                    }
                    EventKind::NodeEdited { node_id, new_node_id, .. } => {
                        format!("{node_id} edited as a new branch {new_node_id}")
                    }
                    EventKind::NodesDeleted { node_ids, .. } => format!("{} message(s) deleted", node_ids.len()),
                    EventKind::NodeSplit { node_id, new_node_id, .. } => {
                        format!("{node_id} split; the rest is {new_node_id}")
                    }
                    EventKind::BookmarkSet { name, node_id: Some(n) } => format!("bookmark {name} -> {n}"),
                    EventKind::BookmarkSet { name, node_id: None } => format!("bookmark {name} deleted"),
                    EventKind::SessionForked { from, node } => format!("forked from {from} at {node}"),
                    EventKind::FilesRestored { node, files, recovered } => format!(
                        "{} file(s) put back as they were at {}{}",
                        files.len(),
                        node.as_deref().unwrap_or("the start"),
                        if *recovered { " (finished on restart: forged had stopped during the rewind)" } else { "" }
                    ),
                    _ => String::new(),
                };
                self.items.push(DisplayItem::Notice { level: Level::Info, text });
            }
            EventKind::MessageQueued { text, .. } => {
                self.items.push(DisplayItem::User {
                    text: text.clone(),
                    from,
                    queued: true,
                    mark: NodeMark::default(),
                });
            }
            EventKind::TurnStarted { provider, model, continued: true, .. } => {
                self.provider = provider.clone();
                self.model = model.clone();
                self.items.push(DisplayItem::Notice { level: Level::Info, text: "continuing from here".into() });
                self.start_answer();
                self.state = Some(OperationStateKind::Streaming);
            }
            EventKind::TurnStarted { message_id, text, provider, model, .. } => {
                // A queued message now runs: it moves to the end, unqueued.
                if let Some(pos) = self
                    .items
                    .iter()
                    .position(|i| matches!(i, DisplayItem::User { text: t, queued: true, .. } if t == text))
                {
                    self.items.remove(pos);
                    self.generation += 1;
                }
                self.provider = provider.clone();
                self.model = model.clone();
                self.items.push(DisplayItem::User {
                    text: text.clone(),
                    from,
                    queued: false,
                    mark: NodeMark::of(message_id),
                });
                self.start_answer();
                self.state = Some(OperationStateKind::Streaming);
            }
            EventKind::StreamResumed { .. } => {
                self.start_answer();
                self.state = Some(OperationStateKind::Streaming);
            }
            EventKind::TextDelta { text } => self.with_answer(|a| a.text.push_str(text)),
            EventKind::ThinkingDelta { text } => self.with_answer(|a| a.thinking.push_str(text)),
            EventKind::ToolCallStarted { index, call_id, name } => {
                self.items.push(DisplayItem::Tool(ToolItem {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    ..Default::default()
                }));
                let at = *index as usize;
                if self.streaming_calls.len() <= at {
                    self.streaming_calls.resize(at + 1, usize::MAX);
                }
                self.streaming_calls[at] = self.items.len() - 1;
            }
            EventKind::ToolCallArgs { index, fragment } => {
                if let Some(&i) = self.streaming_calls.get(*index as usize)
                    && let Some(DisplayItem::Tool(t)) = self.items.get_mut(i)
                {
                    t.args.push_str(fragment);
                    t.version += 1;
                }
            }
            EventKind::ApprovalRequested { approval_id, calls } => {
                self.close_answer();
                self.approval = Some(ApprovalView {
                    approval_id: approval_id.clone(),
                    picked: vec![true; calls.len()],
                    calls: calls.clone(),
                    cursor: 0,
                });
                self.state = Some(OperationStateKind::AwaitingApproval);
            }
            EventKind::ApprovalRulesChanged { mode, always_allow } => {
                let mut parts = Vec::new();
                if let Some(mode) = mode {
                    parts.push(format!("approval mode {mode}"));
                }
                if !always_allow.is_empty() {
                    parts.push(format!("always allowed: {}", always_allow.join(", ")));
                }
                let who = from.map(|f| format!(" by {f}")).unwrap_or_default();
                let text = if parts.is_empty() {
                    format!("approval rules reset to the configured ones{who}")
                } else {
                    format!("{}{who}", parts.join("; "))
                };
                self.items.push(DisplayItem::Notice { level: Level::Info, text });
            }
            EventKind::HookRan { event, command, tool, decision, reason, .. } => {
                // Allows are routine; blocks and errors are worth a line.
                if decision != "allow" {
                    let tool = tool.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
                    let reason = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                    let level = if decision == "error" { Level::Warn } else { Level::Info };
                    self.items.push(DisplayItem::Notice {
                        level,
                        text: format!("{event} hook{tool} `{command}` {decision}{reason}"),
                    });
                }
            }
            EventKind::ApprovalResolved { approved, denied, .. } => {
                self.approval = None;
                let who = from.map(|f| format!(" by {f}")).unwrap_or_default();
                let text = match (approved.len(), denied.len()) {
                    (_, 0) => format!("tool calls approved{who}"),
                    (0, _) => format!("tool calls denied{who}"),
                    (a, d) => format!("{a} tool call(s) approved, {d} denied{who}"),
                };
                self.items.push(DisplayItem::Notice { level: Level::Info, text });
                self.state = Some(OperationStateKind::ExecutingTools);
            }
            EventKind::ToolRecovery { calls } => {
                self.close_answer();
                self.recovery = Some(calls.clone());
                self.state = Some(OperationStateKind::ToolRecovery);
            }
            EventKind::AwaitingToolResults { calls } => {
                self.close_answer();
                self.awaiting_results = Some(calls.clone());
                self.state = Some(OperationStateKind::AwaitingToolResults);
            }
            EventKind::ToolRunning { call_id, .. } => {
                self.close_answer();
                if let Some(t) = self.tool(call_id) {
                    t.running = true;
                    t.version += 1;
                }
                self.state = Some(OperationStateKind::ExecutingTools);
            }
            EventKind::ToolOutput { call_id, text, .. } => {
                if let Some(t) = self.tool(call_id) {
                    t.output.push_str(text);
                    t.version += 1;
                }
            }
            EventKind::ToolResult { call_id, name, is_error, output } => {
                if self.tool(call_id).is_none() {
                    self.items.push(DisplayItem::Tool(ToolItem {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        ..Default::default()
                    }));
                }
                if let Some(t) = self.tool(call_id) {
                    t.running = false;
                    t.result = Some(ToolOutcome { is_error: *is_error, output: output.clone() });
                    t.version += 1;
                }
                if let Some(calls) = &mut self.awaiting_results {
                    calls.retain(|c| &c.id != call_id);
                    if calls.is_empty() {
                        self.awaiting_results = None;
                    }
                }
            }
            EventKind::Retrying { attempt, max_attempts, delay_ms, reason, .. } => {
                let line = forge_client::retrying_line(*attempt, *max_attempts, *delay_ms, reason);
                self.items.push(DisplayItem::Notice { level: Level::Warn, text: line.clone() });
                self.retrying = Some(line);
            }
            EventKind::Usage { session, .. } => self.spent = Some(session.clone()),
            EventKind::SummarizationStarted { messages, tokens_before, .. } => {
                self.state = Some(OperationStateKind::Summarizing);
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!("summarizing the {messages} oldest messages (about {tokens_before} tokens) to make room; the originals stay in history"),
                });
            }
            EventKind::SummarizationRetry { attempt, max_attempts, delay_ms, error } => {
                self.state = Some(OperationStateKind::SummarizationRetry);
                self.items.push(DisplayItem::Notice {
                    level: Level::Warn,
                    text: format!(
                        "summary failed ({error}); attempt {attempt}/{max_attempts} in {:.1}s",
                        *delay_ms as f64 / 1000.0
                    ),
                });
            }
            EventKind::SummarizationDone { span, .. } => {
                self.state = Some(OperationStateKind::Streaming);
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!(
                        "summarized: {} messages, about {} tokens down to {}",
                        span.messages, span.tokens_before, span.tokens_after
                    ),
                });
            }
            EventKind::ContextRestored { messages_restored, .. } => {
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!("the larger window takes {messages_restored} summarized messages back as they were"),
                });
            }
            EventKind::SummarizationFailed { error } => {
                self.items
                    .push(DisplayItem::Notice { level: Level::Error, text: format!("summarization failed: {error}") });
            }
            EventKind::CancelRequested {} => {
                let who = from.map(|f| format!(" by {f}")).unwrap_or_default();
                self.items.push(DisplayItem::Notice { level: Level::Info, text: format!("cancel requested{who}") });
            }
            EventKind::TurnFinished { status, error, usage, recovered, .. } => {
                let mut empty = false;
                self.with_answer(|a| {
                    a.status = Some(*status);
                    a.error = error.clone();
                    a.recovered = *recovered;
                    empty = a.text.is_empty() && a.thinking.is_empty() && a.error.is_none() && a.recovered.is_none();
                });
                if empty {
                    // Nothing to show (e.g. only tool calls): drop the empty answer.
                    if let Some(pos) = self.items.iter().rposition(|i| matches!(i, DisplayItem::Assistant(_))) {
                        self.items.remove(pos);
                        self.generation += 1;
                    }
                }
                self.last_usage = usage.clone().or(self.last_usage.take());
                self.approval = None;
                self.recovery = None;
                self.awaiting_results = None;
                self.streaming_calls.clear();
                self.state = Some(OperationStateKind::Idle);
            }
            // Another answer to the same message (`n` > 1): a sibling of
            // the one just given, shown after it.
            EventKind::ProviderRequest { iteration: 0, attempt: 1, .. }
                if self.items.iter().rev().find(|i| !matches!(i, DisplayItem::Notice { .. })).is_some_and(
                    |i| matches!(i, DisplayItem::Assistant(a) if a.status.is_some() || !a.text.is_empty()),
                ) =>
            {
                self.close_answer();
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: "another answer (a sibling branch):".into(),
                });
                self.start_answer();
            }
            // The answer just streamed is now this node.
            EventKind::AssistantNode { node_id, .. } => {
                let last = self.items.iter_mut().rev().find_map(|i| match i {
                    DisplayItem::Assistant(a) => Some(a),
                    _ => None,
                });
                if let Some(a) = last.filter(|a| a.mark.node.is_none()) {
                    a.mark.node = Some(node_id.clone());
                }
            }
            EventKind::ProviderRequest { .. }
            | EventKind::ProviderResponse { .. }
            | EventKind::ToolResultNode { .. }
            | EventKind::Done { .. }
            | EventKind::Error { .. } => {}
            EventKind::QueueCleared { dropped } => {
                self.items.retain(|i| !matches!(i, DisplayItem::User { queued: true, .. }));
                self.generation += 1;
                self.items.push(DisplayItem::Notice {
                    level: Level::Info,
                    text: format!("{dropped} queued message(s) dropped"),
                });
            }
            // Its `files_restored` says what moved.
            EventKind::RewindStarted { .. } | EventKind::Unknown => {}
        }
    }

    pub fn notify(&mut self, level: Level, text: impl Into<String>) {
        self.items.push(DisplayItem::Notice { level, text: text.into() });
    }

    /// The model's stream ended without the turn ending (tool calls follow):
    /// its answer is complete; an empty one is not shown.
    fn close_answer(&mut self) {
        let open = self.items.iter().rposition(|i| matches!(i, DisplayItem::Assistant(a) if a.status.is_none()));
        if let Some(i) = open
            && let DisplayItem::Assistant(a) = &mut self.items[i]
        {
            if a.text.is_empty() && a.thinking.is_empty() {
                self.items.remove(i);
                self.generation += 1;
            } else {
                a.status = Some(MessageStatus::Complete);
                a.version += 1;
            }
        }
    }

    fn start_answer(&mut self) {
        self.close_answer();
        self.streaming_calls.clear();
        self.items.push(DisplayItem::Assistant(AssistantItem { model: self.model.clone(), ..Default::default() }));
    }

    /// Changes the answer being streamed (opening one if none is).
    fn with_answer(&mut self, f: impl FnOnce(&mut AssistantItem)) {
        let is_open = |i: &DisplayItem| matches!(i, DisplayItem::Assistant(a) if a.status.is_none());
        if !self.items.iter().any(is_open) {
            self.start_answer();
        }
        if let Some(DisplayItem::Assistant(a)) = self.items.iter_mut().rev().find(|i| is_open(i)) {
            f(a);
            a.version += 1;
        }
    }

    fn tool(&mut self, call_id: &str) -> Option<&mut ToolItem> {
        self.items.iter_mut().rev().find_map(|i| match i {
            DisplayItem::Tool(t) if t.call_id == call_id => Some(t),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests;
