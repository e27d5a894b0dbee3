//! The transcript: what the TUI shows of a session, built only from the
//! session's events (replayed from the store on attach, then live), so two
//! TUIs and a `forgectl attach` on one session always agree.

use forge_client::fold::Fold;
pub use forge_client::fold::Level;
use forge_proto::{ApprovalCall, EventKind, MessageStatus, RecoveryBadge, SessionEvent};

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
    /// The web searches the provider ran for it, and the sources it cites
    /// (url, title).
    pub searched: Vec<String>,
    pub sources: Vec<(String, String)>,
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
    /// The session as its events tell it (state, model, usage, what waits),
    /// read the same way `forgectl` and the ACP bridge read it.
    pub fold: Fold,
    /// The pending approval (the fold's) with the user's picks.
    pub approval: Option<ApprovalView>,
    /// Bumped whenever items are removed or reordered (not when they only
    /// grow or are appended): caches keyed by position start over.
    pub generation: u64,
    /// Items of the calls of the answer being streamed, by call id.
    streaming_calls: Vec<(String, usize)>,
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
                    return messages.iter().any(|m| m.meta.tool_calls.iter().any(|c| c.id == t.call_id));
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
                    text: with_images(&m.text, &m.meta.images),
                    from: m.meta.client.as_ref().map(|c| c.name.clone()),
                    queued: false,
                    mark: NodeMark::of(&m.id),
                }),
                forge_proto::Role::Assistant => {
                    self.items.push(DisplayItem::Assistant(AssistantItem {
                        mark: NodeMark::of(&m.id),
                        text: m.text.clone(),
                        model: m.meta.model.clone().unwrap_or_default(),
                        status: Some(m.status),
                        error: m.meta.error.clone(),
                        recovered: m.meta.recovered,
                        sources: m.meta.citations.iter().map(|c| (c.url.clone(), c.title.clone())).collect(),
                        ..Default::default()
                    }));
                    for c in &m.meta.tool_calls {
                        self.items.push(DisplayItem::Tool(ToolItem {
                            call_id: c.id.clone(),
                            name: c.name.clone(),
                            args: c.arguments.clone(),
                            ..Default::default()
                        }));
                    }
                }
                forge_proto::Role::Tool => {
                    let Some(r) = &m.meta.tool_result else { continue };
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
    /// The approval shown is the one the fold says waits (helpers may ask
    /// several at once: each in turn); the user's picks stay while it does.
    fn follow_approval(&mut self) {
        let pending = self.fold.approval.as_ref();
        if pending.map(|a| &a.approval_id) == self.approval.as_ref().map(|a| &a.approval_id) {
            return;
        }
        self.approval = pending.map(|a| ApprovalView {
            approval_id: a.approval_id.clone(),
            picked: vec![true; a.calls.len()],
            calls: a.calls.clone(),
            cursor: 0,
        });
    }

    pub fn apply(&mut self, ev: &SessionEvent) {
        let Some(seen) = self.fold.apply(ev) else { return };
        let from = ev.client.as_ref().map(|c| c.name.clone());
        if seen.sibling {
            self.close_answer();
        }
        if let Some(n) = seen.notice.filter(|n| !n.routine) {
            self.items.push(DisplayItem::Notice { level: n.level, text: n.text });
        }
        match &ev.kind {
            EventKind::HistoryCleared {} => {
                // Only the notice that says so stays.
                let notice = self.items.pop();
                self.items.clear();
                self.items.extend(notice);
                self.generation += 1;
                self.streaming_calls.clear();
            }
            EventKind::MessageQueued { text, .. } | EventKind::SteerQueued { text, .. } => {
                self.items.push(DisplayItem::User {
                    text: text.clone(),
                    from,
                    queued: true,
                    mark: NodeMark::default(),
                });
            }
            EventKind::TurnStarted { continued: true, .. } | EventKind::StreamResumed { .. } => self.start_answer(),
            EventKind::TurnStarted { message_id, text, images, .. } => {
                // A queued message now runs: it moves to the end, unqueued.
                self.runs(seen.was_queued, text, from, message_id);
                if !images.is_empty()
                    && let Some(DisplayItem::User { text: shown, .. }) = self.items.last_mut()
                {
                    *shown = with_images(shown, images);
                }
                self.start_answer();
            }
            // A steer joins the turn: it moves to the end, unqueued; the
            // answer goes on below it.
            EventKind::SteerApplied { message_id, text } => self.runs(true, text, from, message_id),
            EventKind::ProviderRequest { .. } if seen.sibling => self.start_answer(),
            EventKind::TextDelta { text } => self.with_answer(|a| a.text.push_str(text)),
            EventKind::ThinkingDelta { text } => self.with_answer(|a| a.thinking.push_str(text)),
            EventKind::WebSearch { query } => self.with_answer(|a| a.searched.push(query.clone())),
            EventKind::Citation { url, title, .. } => self.with_answer(|a| {
                if !a.sources.iter().any(|(u, _)| u == url) {
                    a.sources.push((url.clone(), title.clone()));
                }
            }),
            EventKind::ToolCallStarted { call_id, name, .. } => {
                self.items.push(DisplayItem::Tool(ToolItem {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    ..Default::default()
                }));
                self.streaming_calls.push((call_id.clone(), self.items.len() - 1));
            }
            EventKind::ToolCallArgs { fragment, .. } => {
                let at = seen.call_id.and_then(|id| self.streaming_calls.iter().find(|(c, _)| *c == id));
                if let Some(&(_, i)) = at
                    && let Some(DisplayItem::Tool(t)) = self.items.get_mut(i)
                {
                    t.args.push_str(fragment);
                    t.version += 1;
                }
            }
            EventKind::ApprovalRequested { .. } => {
                self.close_answer();
                self.follow_approval();
            }
            EventKind::ApprovalResolved { .. } => self.follow_approval(),
            EventKind::ToolRecovery { .. } | EventKind::AwaitingToolResults { .. } => self.close_answer(),
            EventKind::ToolRunning { call_id, .. } => {
                self.close_answer();
                if let Some(t) = self.tool(call_id) {
                    t.running = true;
                    t.version += 1;
                }
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
            }
            EventKind::TurnFinished { status, error, recovered, .. } => {
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
                self.approval = None;
                self.streaming_calls.clear();
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
            EventKind::QueueCleared { .. } => {
                // The notice that says so stays.
                self.items.retain(|i| !matches!(i, DisplayItem::User { queued: true, .. }));
                self.generation += 1;
            }
            _ => {}
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

    /// A user message enters the conversation; one shown as waiting
    /// (`was_queued`) moves to the end, no longer marked.
    fn runs(&mut self, was_queued: bool, text: &str, from: Option<String>, message_id: &str) {
        if was_queued
            && let Some(pos) = self
                .items
                .iter()
                .position(|i| matches!(i, DisplayItem::User { text: t, queued: true, .. } if t == text))
        {
            self.items.remove(pos);
            self.generation += 1;
        }
        self.items.push(DisplayItem::User {
            text: text.to_string(),
            from,
            queued: false,
            mark: NodeMark::of(message_id),
        });
    }

    fn start_answer(&mut self) {
        self.close_answer();
        self.streaming_calls.clear();
        self.items.push(DisplayItem::Assistant(AssistantItem { model: self.fold.model.clone(), ..Default::default() }));
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

/// A user message as shown: a placeholder line per image, then the text.
fn with_images(text: &str, images: &[forge_proto::ImageInfo]) -> String {
    let mut lines: Vec<String> = images.iter().map(forge_proto::ImageInfo::placeholder).collect();
    if !text.is_empty() || lines.is_empty() {
        lines.push(text.to_string());
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests;
