//! The conversation tree in the TUI: selecting a message (`K`/`J`),
//! switching to its other versions (`[`/`]`, "2/3"), editing an earlier
//! message of the user's (`e`), the tree view (`/tree`) and the rewind
//! picker (`/rewind`). All of it works from the tree as last read
//! (`session.tree`), kept in `App::tree`.

use crossterm::event::{KeyCode, KeyEvent};
use forge_proto::{OperationStateKind, Role, TreeInfo, TreeNode};

use crate::app::{Action, App};
use crate::input::InputState;
use crate::transcript::{DisplayItem, Level};

/// What to open once the tree has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeOpen {
    /// Nothing: the marks ("2/3") are brought up to date.
    Nothing,
    View,
    Rewind,
}

/// A turn the rewind picker offers: rewinding puts the conversation and
/// the files back as they were before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindRow {
    /// The user message that starts the turn.
    pub message: String,
    pub preview: String,
    /// Where the rewind goes: the node before the message (none: the
    /// conversation's start).
    pub target: Option<String>,
    /// Files the turn's tools changed.
    pub files: Vec<String>,
}

/// The path from the root to the head, as the tree says.
fn path(tree: &TreeInfo) -> Vec<&TreeNode> {
    let mut out = Vec::new();
    let mut at = tree.head.as_deref();
    while let Some(id) = at {
        let Some(n) = tree.nodes.iter().find(|n| n.id == id) else { break };
        out.push(n);
        at = n.parent_id.as_deref();
        if out.len() > tree.nodes.len() {
            break;
        }
    }
    out.reverse();
    out
}

/// The turns on the path, newest first, with the files each changed.
pub fn rewind_rows(tree: &TreeInfo) -> Vec<RewindRow> {
    let path = path(tree);
    let mut rows = Vec::new();
    for (i, n) in path.iter().enumerate().filter(|(_, n)| n.role == Role::User) {
        let mut files: Vec<String> = Vec::new();
        for later in path[i + 1..].iter().take_while(|m| m.role != Role::User) {
            for f in &later.files {
                if !files.contains(f) {
                    files.push(f.clone());
                }
            }
        }
        rows.push(RewindRow { message: n.id.clone(), preview: n.preview.clone(), target: n.parent_id.clone(), files });
    }
    rows.reverse();
    rows
}

impl App {
    /// The tree was read: marks and selection follow it, and the view or
    /// picker asked for opens.
    pub fn on_tree(&mut self, tree: TreeInfo, open: TreeOpen) {
        self.transcript.mark_branches(&tree);
        // A view open on the tree read before keeps its cursor on the same
        // node (rows move when the tree grows).
        let old = self.tree.as_ref();
        match &mut self.input {
            InputState::Tree { cursor, .. } if open == TreeOpen::Nothing => {
                let at = old.and_then(|t| forge_client::tree::rows(t).get(*cursor).map(|(id, _)| id.clone()));
                let rows = forge_client::tree::rows(&tree);
                *cursor = at.and_then(|id| rows.iter().position(|(r, _)| *r == id)).unwrap_or(*cursor);
                *cursor = (*cursor).min(rows.len().saturating_sub(1));
            }
            InputState::Rewind { cursor, .. } if open == TreeOpen::Nothing => {
                let at = old.and_then(|t| rewind_rows(t).get(*cursor).map(|r| r.message.clone()));
                let rows = rewind_rows(&tree);
                *cursor = at.and_then(|id| rows.iter().position(|r| r.message == id)).unwrap_or(*cursor);
                *cursor = (*cursor).min(rows.len().saturating_sub(1));
            }
            _ => {}
        }
        match open {
            TreeOpen::Nothing => {}
            TreeOpen::View if tree.nodes.is_empty() => self.notify(Level::Info, "the tree is empty"),
            TreeOpen::View => {
                let rows = forge_client::tree::rows(&tree);
                let cursor = rows.iter().position(|(id, _)| Some(id) == tree.head.as_ref()).unwrap_or(0);
                self.input.enter_tree_mode(cursor);
                self.slide_up();
            }
            TreeOpen::Rewind if rewind_rows(&tree).is_empty() => {
                self.notify(Level::Info, "nothing to rewind: the conversation has no turn")
            }
            TreeOpen::Rewind => {
                self.input.enter_rewind_mode(0);
                self.slide_up();
            }
        }
        self.tree = Some(tree);
    }

    /// The path was read again (after the head moved): the selection
    /// stays on its message if that is still shown.
    pub fn on_path(&mut self, messages: &[forge_proto::HistoryMessage]) {
        self.transcript.show_path(messages, self.path_mark.take());
        if let Some(tree) = &self.tree {
            self.transcript.mark_branches(tree);
        }
        self.focus = self.transcript.select(self.selected.as_deref());
        if self.focus.is_none() {
            self.selected = None;
        }
    }

    /// `K` / `J`: the previous or next message becomes the selected one.
    pub(crate) fn select_step(&mut self, step: isize) {
        let nodes = self.transcript.message_nodes();
        if nodes.is_empty() {
            return self.notify(Level::Info, "no message to select yet");
        }
        let at = self.selected.as_ref().and_then(|s| nodes.iter().position(|(_, n, _)| n == s));
        let next = match at {
            None => nodes.len() - 1,
            Some(i) => i.saturating_add_signed(step).min(nodes.len() - 1),
        };
        let node = nodes[next].1.clone();
        self.focus = self.transcript.select(Some(&node));
        self.selected = Some(node);
    }

    pub(crate) fn clear_selection(&mut self) {
        self.selected = None;
        self.transcript.select(None);
    }

    /// The message `[`, `]` and `e` act on: the selected one, else the
    /// last. With `user`, a message of the user's: the selected one, or
    /// the one a selected answer answers.
    fn target(&self, user: bool) -> Option<String> {
        let nodes = self.transcript.message_nodes();
        let upto = match self.selected.as_ref().and_then(|s| nodes.iter().position(|(_, n, _)| n == s)) {
            Some(at) => at + 1,
            None => nodes.len(),
        };
        nodes[..upto].iter().rev().find(|(_, _, u)| *u || !user).map(|(_, n, _)| n.clone())
    }

    fn idle_for(&mut self, what: &str) -> bool {
        let idle = matches!(self.state(), OperationStateKind::Idle);
        if !idle {
            self.notify(Level::Warn, format!("a turn is running; {what} once it has ended (or cancel it)"));
        }
        idle
    }

    /// `[` / `]`: shows the message's previous or next version (a sibling
    /// in the tree), with the rest of that branch.
    pub(crate) fn switch_sibling(&mut self, step: isize) -> Vec<Action> {
        // Nothing selected: the last message that has other versions.
        let with_versions = self.transcript.items.iter().rev().find_map(|i| match i {
            DisplayItem::User { mark, .. } if mark.branch.is_some() => mark.node.clone(),
            DisplayItem::Assistant(a) if a.mark.branch.is_some() => a.mark.node.clone(),
            _ => None,
        });
        let node = match &self.selected {
            Some(_) => self.target(false),
            None => with_versions.or_else(|| self.target(false)),
        };
        let Some(node) = node else {
            self.notify(Level::Info, "no message to switch yet");
            return Vec::new();
        };
        let Some(tree) = &self.tree else {
            self.notify(Level::Info, "reading the tree; try again in a moment");
            return vec![Action::RefreshTree];
        };
        let Some((all, at)) = forge_client::tree::siblings(tree, &node) else {
            return vec![Action::RefreshTree];
        };
        if all.len() < 2 {
            self.notify(
                Level::Info,
                "this message has no other version: e edits one of yours into a new branch, and sending the same message again gives another answer",
            );
            return Vec::new();
        }
        let Some(next) = at.checked_add_signed(step).filter(|i| *i < all.len()) else {
            let end = if step < 0 { "first" } else { "last" };
            self.notify(Level::Info, format!("this is the {end} of its {} versions", all.len()));
            return Vec::new();
        };
        let sibling = all[next].id.clone();
        let leaf = forge_client::tree::newest_leaf(tree, &sibling);
        if !self.idle_for("switch versions") {
            return Vec::new();
        }
        self.selected = Some(sibling);
        vec![Action::Checkout { node: leaf }]
    }

    /// `e`: the message goes into the draft; Enter sends it as an edit.
    pub(crate) fn edit_message(&mut self) -> Vec<Action> {
        let Some(node) = self.target(true) else {
            self.notify(Level::Info, "no message of yours to edit yet");
            return Vec::new();
        };
        if !self.idle_for("edit") {
            return Vec::new();
        }
        let text = self.transcript.items.iter().find_map(|i| match i {
            DisplayItem::User { text, mark, .. } if mark.node.as_deref() == Some(node.as_str()) => Some(text.clone()),
            _ => None,
        });
        let Some(text) = text else { return Vec::new() };
        let set_aside = self.input.enter_insert_mode_with(&text);
        self.notify(
            Level::Info,
            "editing your message: Enter sends it as a new branch and answers it there (the original stays: [ and ] switch); Esc drops the edit",
        );
        self.editing = Some((node, set_aside));
        Vec::new()
    }

    /// Esc while editing: the edit is dropped, the draft set aside is back.
    pub(crate) fn drop_edit(&mut self) {
        if let Some((_, draft)) = self.editing.take() {
            self.input.enter_insert_mode_with(&draft);
            self.notify(Level::Info, "edit dropped");
        }
        self.input.enter_normal_mode();
    }

    /// Keys of the tree view.
    pub(crate) fn tree_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let InputState::Tree { cursor, .. } = &self.input else { return Vec::new() };
        let cursor = *cursor;
        let Some(tree) = &self.tree else {
            self.input.enter_normal_mode();
            return Vec::new();
        };
        let rows = forge_client::tree::rows(tree);
        let Some((id, _)) = rows.get(cursor) else {
            self.input.enter_normal_mode();
            return Vec::new();
        };
        let row_of = |node: &str| rows.iter().position(|(r, _)| r == node);
        let node = tree.nodes.iter().find(|n| &n.id == id);
        let moved = match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                self.input.enter_normal_mode();
                return Vec::new();
            }
            // Enter: the conversation moves there; f: its files too;
            // F: a new session forked there.
            KeyCode::Enter | KeyCode::Char('f' | 'F') => {
                let node = id.clone();
                self.input.enter_normal_mode();
                if key.code == KeyCode::Char('F') {
                    return vec![Action::Fork { node: Some(node) }];
                }
                if !self.idle_for("check out") {
                    return Vec::new();
                }
                return match key.code {
                    KeyCode::Enter => vec![Action::Checkout { node }],
                    _ => vec![Action::Rewind { node: Some(node), partial: false }],
                };
            }
            KeyCode::Char('j') | KeyCode::Down => Some((cursor + 1).min(rows.len().saturating_sub(1))),
            KeyCode::Char('k') | KeyCode::Up => Some(cursor.saturating_sub(1)),
            KeyCode::Char('g') | KeyCode::Home => Some(0),
            KeyCode::Char('G') | KeyCode::End => Some(rows.len().saturating_sub(1)),
            // Up to the message this one answers.
            KeyCode::Char('h') | KeyCode::Left => node.and_then(|n| n.parent_id.as_deref()).and_then(row_of),
            // Down to its first reply.
            KeyCode::Char('l') | KeyCode::Right => tree
                .nodes
                .iter()
                .find(|n| n.parent_id.as_ref() == Some(id) && n.role != Role::Summary)
                .and_then(|n| row_of(&n.id)),
            KeyCode::Char(c @ ('[' | ']')) => forge_client::tree::siblings(tree, id).and_then(|(all, at)| {
                let next = if c == '[' { at.checked_sub(1) } else { Some(at + 1) };
                next.and_then(|i| all.get(i)).and_then(|n| row_of(&n.id))
            }),
            _ => None,
        };
        if let (Some(to), InputState::Tree { cursor, .. }) = (moved, &mut self.input) {
            *cursor = to;
        }
        Vec::new()
    }

    /// Keys of the rewind picker.
    pub(crate) fn rewind_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let InputState::Rewind { cursor, .. } = &mut self.input else { return Vec::new() };
        let rows = self.tree.as_ref().map(rewind_rows).unwrap_or_default();
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.input.enter_normal_mode(),
            KeyCode::Char('j') | KeyCode::Down => *cursor = (*cursor + 1).min(rows.len().saturating_sub(1)),
            KeyCode::Char('k') | KeyCode::Up => *cursor = cursor.saturating_sub(1),
            KeyCode::Enter => {
                let picked = rows.get(*cursor).cloned();
                let newest = *cursor == 0;
                self.input.enter_normal_mode();
                let Some(row) = picked else { return Vec::new() };
                if !self.idle_for("rewind") {
                    return Vec::new();
                }
                return match row.target {
                    Some(node) => vec![Action::Rewind { node: Some(node), partial: false }],
                    // Before the first message: that is an undo of the
                    // only turn left, or of all of them one by one.
                    None if newest => vec![Action::Rewind { node: None, partial: false }],
                    None => {
                        self.notify(
                            Level::Warn,
                            "rewinding to before the very first message: /undo the turns one by one, or /clear to start afresh (nothing is deleted)",
                        );
                        Vec::new()
                    }
                };
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyEvent};
    use forge_proto::{HistoryMessage, MessageStatus, TreeInfo, TreeNode};

    use super::*;
    use crate::app::UiOptions;
    use crate::input::InputMode;

    fn node(id: &str, parent: Option<&str>, role: Role, on_path: bool, created_ms: i64) -> TreeNode {
        TreeNode {
            id: id.into(),
            parent_id: parent.map(Into::into),
            role,
            preview: format!("text of {id}"),
            status: MessageStatus::Complete,
            created_ms,
            replies: 0,
            on_path,
            bookmarks: Vec::new(),
            files: Vec::new(),
            system_prompt: None,
        }
    }

    /// u1 → a1 → u2 → (a2 | a2b → u3 → a3): the head at a2, on the
    /// first of two answers to u2; the second goes on.
    fn tree() -> TreeInfo {
        let mut tool = node("t1", Some("a1"), Role::Tool, true, 3);
        tool.files = vec!["src/lib.rs".into()];
        TreeInfo {
            session_id: "s".into(),
            head: Some("a2".into()),
            forked_from: None,
            nodes: vec![
                node("u1", None, Role::User, true, 1),
                node("a1", Some("u1"), Role::Assistant, true, 2),
                tool,
                node("u2", Some("t1"), Role::User, true, 4),
                node("a2", Some("u2"), Role::Assistant, true, 5),
                node("a2b", Some("u2"), Role::Assistant, false, 6),
                node("u3", Some("a2b"), Role::User, false, 7),
                node("a3", Some("u3"), Role::Assistant, false, 8),
            ],
        }
    }

    fn message(id: &str, role: Role) -> HistoryMessage {
        serde_json::from_value(serde_json::json!({
            "id": id, "role": role, "text": format!("text of {id}"), "status": "complete", "created_ms": 0
        }))
        .unwrap_or_else(|e| panic!("history message: {e}"))
    }

    /// An app showing the path u1 … a2, with the tree read.
    fn app() -> App {
        let mut app = App::new("s", UiOptions::default());
        app.on_path(&[
            message("u1", Role::User),
            message("a1", Role::Assistant),
            message("u2", Role::User),
            message("a2", Role::Assistant),
        ]);
        app.on_tree(tree(), TreeOpen::Nothing);
        app
    }

    fn press(app: &mut App, code: KeyCode) -> Vec<Action> {
        app.on_key(KeyEvent::from(code))
    }

    #[test]
    fn an_answer_with_a_sibling_shows_1_of_2_and_brackets_switch_to_the_other_branch() {
        let mut app = app();
        let marks: Vec<Option<(u32, u32)>> = app
            .transcript
            .items
            .iter()
            .filter_map(|i| match i {
                DisplayItem::Assistant(a) => Some(a.mark.branch),
                _ => None,
            })
            .collect();
        assert_eq!(marks, [None, Some((1, 2))], "the last answer is the first of two");
        assert!(press(&mut app, KeyCode::Char('[')).is_empty(), "there is nothing before the first");
        let actions = press(&mut app, KeyCode::Char(']'));
        assert_eq!(actions, vec![Action::Checkout { node: "a3".into() }], "the other answer's branch, to its end");
        assert_eq!(app.selected.as_deref(), Some("a2b"));
    }

    #[test]
    fn k_and_j_select_messages_and_e_edits_the_selected_one_as_a_branch() {
        let mut app = app();
        press(&mut app, KeyCode::Char('i'));
        for c in "half typed".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        press(&mut app, KeyCode::Esc);
        for _ in 0..4 {
            press(&mut app, KeyCode::Char('K'));
        }
        assert_eq!(app.selected.as_deref(), Some("u1"), "K stops at the first message");
        press(&mut app, KeyCode::Char('J'));
        press(&mut app, KeyCode::Char('e'));
        assert_eq!(app.mode(), InputMode::Insert);
        assert_eq!(app.input.draft().text(), "text of u1", "e on an answer edits the message it answers");
        for c in " again".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        let actions = press(&mut app, KeyCode::Enter);
        assert_eq!(actions, vec![Action::Edit { node: "u1".into(), text: "text of u1 again".into() }]);
        assert_eq!(app.input.draft().text(), "half typed", "the draft set aside is back");
    }

    #[test]
    fn an_edit_left_with_ctrl_c_does_not_turn_the_next_message_into_an_edit() {
        let mut app = app();
        press(&mut app, KeyCode::Char('e'));
        app.on_key(KeyEvent::new(KeyCode::Char('c'), crossterm::event::KeyModifiers::CONTROL));
        assert!(app.editing.is_none());
        press(&mut app, KeyCode::Char('i'));
        press(&mut app, KeyCode::Char('x'));
        let actions = press(&mut app, KeyCode::Enter);
        assert!(matches!(&actions[..], [Action::Send(m)] if m.text() == "x"), "{actions:?}");
    }

    #[test]
    fn a_tree_read_while_the_view_is_open_keeps_the_cursor_on_its_node() {
        let mut app = app();
        app.on_tree(tree(), TreeOpen::View);
        let mut grown = tree();
        // A new root sorts first and shifts every row.
        grown.nodes.insert(0, node("u0", None, Role::User, false, 0));
        app.on_tree(grown, TreeOpen::Nothing);
        let actions = press(&mut app, KeyCode::Enter);
        assert_eq!(actions, vec![Action::Checkout { node: "a2".into() }]);
    }

    #[test]
    fn the_tree_slides_up_unless_motion_is_reduced() {
        let mut app = app();
        app.on_tree(tree(), TreeOpen::View);
        assert_eq!(app.modal.map(|m| m.kind()), Some(crate::app::ModalEffectKind::SlideUp));
        app.tick(std::time::Duration::from_millis(400));
        assert!(app.modal.is_none(), "over after 300 ms");
        let mut still = App::new("s", UiOptions { reduced_motion: true, ..Default::default() });
        still.on_tree(tree(), TreeOpen::View);
        assert_eq!(still.mode(), InputMode::Tree);
        assert!(still.modal.is_none());
    }

    #[test]
    fn esc_drops_an_edit_and_gives_the_draft_back() {
        let mut app = app();
        press(&mut app, KeyCode::Char('e'));
        assert_eq!(app.input.draft().text(), "text of u2", "without a selection, the last message of the user's");
        let actions = press(&mut app, KeyCode::Esc);
        assert!(actions.is_empty());
        assert_eq!(app.mode(), InputMode::Normal);
        assert!(app.editing.is_none());
        assert_eq!(app.input.draft().text(), "");
    }

    #[test]
    fn the_tree_view_moves_with_hjkl_and_enter_checks_out() {
        let mut app = app();
        app.on_tree(tree(), TreeOpen::View);
        assert_eq!(app.mode(), InputMode::Tree);
        let at = |app: &App| match &app.input {
            InputState::Tree { cursor, .. } => {
                forge_client::tree::rows(app.tree.as_ref().unwrap_or_else(|| panic!("no tree")))[*cursor].0.clone()
            }
            _ => panic!("not in the tree view"),
        };
        assert_eq!(at(&app), "a2", "the view opens on the head");
        press(&mut app, KeyCode::Char(']'));
        assert_eq!(at(&app), "a2b");
        press(&mut app, KeyCode::Char('l'));
        assert_eq!(at(&app), "u3");
        press(&mut app, KeyCode::Char('h'));
        press(&mut app, KeyCode::Char('h'));
        assert_eq!(at(&app), "u2");
        press(&mut app, KeyCode::Char('k'));
        assert_eq!(at(&app), "t1");
        let actions = press(&mut app, KeyCode::Enter);
        assert_eq!(actions, vec![Action::Checkout { node: "t1".into() }]);
        assert_eq!(app.mode(), InputMode::Normal);
        // f: the files come along; F: a fork there.
        app.on_tree(tree(), TreeOpen::View);
        assert_eq!(
            press(&mut app, KeyCode::Char('f')),
            vec![Action::Rewind { node: Some("a2".into()), partial: false }]
        );
        app.on_tree(tree(), TreeOpen::View);
        assert_eq!(press(&mut app, KeyCode::Char('F')), vec![Action::Fork { node: Some("a2".into()) }]);
    }

    #[test]
    fn the_rewind_picker_lists_turns_with_their_files_and_rewinds_to_before_one() {
        let rows = rewind_rows(&tree());
        let listed: Vec<(&str, Option<&str>, usize)> =
            rows.iter().map(|r| (r.message.as_str(), r.target.as_deref(), r.files.len())).collect();
        assert_eq!(listed, [("u2", Some("t1"), 0), ("u1", None, 1)], "newest first; the first turn changed a file");
        let mut app = app();
        app.on_tree(tree(), TreeOpen::Rewind);
        assert_eq!(app.mode(), InputMode::Rewind);
        let actions = press(&mut app, KeyCode::Enter);
        assert_eq!(actions, vec![Action::Rewind { node: Some("t1".into()), partial: false }]);
    }
}
