//! Keys, by input mode: what each does to the state and which [`Action`]s
//! it asks for (the tree view's and the rewind picker's are in
//! `branches.rs`).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use forge_proto::{ApprovalDecision, OperationStateKind};

use super::{Action, App, ScrollState, configure};
use crate::command::Command;
use crate::input::{InputMode, InputState};
use crate::transcript::Level;

impl App {
    pub(super) fn handle_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return self.interrupt();
        }
        // Esc followed quickly by a key reaches us as Alt+key (terminals
        // send both at once): outside Normal mode, treat it as the two keys.
        if key.modifiers.contains(KeyModifiers::ALT)
            && let KeyCode::Char(c) = key.code
            && matches!(self.input.mode(), InputMode::Insert | InputMode::Command)
        {
            self.input.enter_normal_mode();
            return self.handle_key(KeyEvent::new(KeyCode::Char(c), key.modifiers - KeyModifiers::ALT));
        }
        match self.input.mode() {
            InputMode::Normal => self.normal_key(key),
            InputMode::Insert => self.insert_key(key),
            InputMode::Command => self.command_key(key),
            InputMode::ModelSelect => self.model_key(key),
            InputMode::Tree => self.tree_key(key),
            InputMode::Rewind => self.rewind_key(key),
        }
    }

    /// Ctrl+C: stop the running turn, or leave edit modes; never a silent
    /// exit with work in flight.
    fn interrupt(&mut self) -> Vec<Action> {
        if !matches!(self.state(), OperationStateKind::Idle) {
            return vec![Action::Cancel];
        }
        if self.input.mode() != InputMode::Normal {
            self.input.enter_normal_mode();
            return Vec::new();
        }
        self.notify(Level::Info, "nothing is running; q or /quit leaves (the session stays in forged)");
        Vec::new()
    }

    fn normal_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let approval = self.transcript.approval.is_some();
        match key.code {
            KeyCode::Char('q') if !ctrl => {
                self.quit = true;
                return vec![Action::Quit];
            }
            KeyCode::Char('i') => self.input.enter_insert_mode(),
            KeyCode::Char('a') if !approval => self.input.enter_insert_mode_at_end(),
            KeyCode::Char('A') => self.input.enter_insert_mode_at_end(),
            // As in vim: a new line below (the draft is never thrown away).
            KeyCode::Char('o') => {
                let has_text = !self.input.draft().text().is_empty();
                self.input.enter_insert_mode_at_end();
                if has_text && let Some(t) = self.input.insert_token() {
                    self.input.insert_mode(t).edit(|d| d.enter_char('\n'));
                }
            }
            KeyCode::Char(':' | '/') => self.input.enter_command_mode(),
            KeyCode::Tab => self.enter_model_select_mode(),
            KeyCode::Char('d') if ctrl => self.scroll_by(self.page_lines as isize / 2),
            KeyCode::Char('u') if ctrl => self.scroll_by(-(self.page_lines as isize / 2)),
            KeyCode::Char('j') | KeyCode::Down if !approval => self.scroll_by(1),
            KeyCode::Char('k') | KeyCode::Up if !approval => self.scroll_by(-1),
            KeyCode::PageDown => self.scroll_by(self.page_lines as isize),
            KeyCode::PageUp => self.scroll_by(-(self.page_lines as isize)),
            KeyCode::Char('g') | KeyCode::Home => self.scroll = ScrollState::Manual { offset_from_top: 0 },
            KeyCode::Char('G') | KeyCode::End => self.scroll = ScrollState::AutoBottom,
            KeyCode::Char('K') => self.select_step(-1),
            KeyCode::Char('J') => self.select_step(1),
            KeyCode::Esc if self.selected.is_some() => self.clear_selection(),
            KeyCode::Char('[') => return self.switch_sibling(-1),
            KeyCode::Char(']') => return self.switch_sibling(1),
            KeyCode::Char('e') if !approval => return self.edit_message(),
            _ if approval => return self.approval_key(key),
            _ => {}
        }
        Vec::new()
    }

    /// Keys of the approval panel (Normal mode, while one is pending).
    fn approval_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(view) = &mut self.transcript.approval else { return Vec::new() };
        let id = view.approval_id.clone();
        match key.code {
            KeyCode::Char('y') => {
                return vec![Action::Answer {
                    approval_id: id,
                    decision: ApprovalDecision::ApproveAll,
                    indices: vec![],
                }];
            }
            KeyCode::Char('n') => {
                return vec![Action::Answer { approval_id: id, decision: ApprovalDecision::DenyAll, indices: vec![] }];
            }
            KeyCode::Char('a') | KeyCode::Enter => {
                let indices: Vec<u32> =
                    view.picked.iter().enumerate().filter(|(_, p)| **p).map(|(i, _)| i as u32 + 1).collect();
                let decision =
                    if indices.is_empty() { ApprovalDecision::DenyAll } else { ApprovalDecision::ApproveSelected };
                return vec![Action::Answer { approval_id: id, decision, indices }];
            }
            KeyCode::Char(' ') => {
                if let Some(p) = view.picked.get_mut(view.cursor) {
                    *p = !*p;
                }
            }
            KeyCode::Char('j') | KeyCode::Down => {
                view.cursor = (view.cursor + 1).min(view.calls.len().saturating_sub(1))
            }
            KeyCode::Char('k') | KeyCode::Up => view.cursor = view.cursor.saturating_sub(1),
            _ => {}
        }
        Vec::new()
    }

    fn insert_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(token) = self.input.insert_token() else { return Vec::new() };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let mut mode = self.input.insert_mode(token);
        match key.code {
            KeyCode::Esc if self.editing.is_some() => self.drop_edit(),
            KeyCode::Esc => self.input.enter_normal_mode(),
            KeyCode::Enter if alt || shift || ctrl => mode.edit(|d| d.enter_char('\n')),
            KeyCode::Enter => {
                if let Some(msg) = mode.queue_message() {
                    self.scroll = ScrollState::AutoBottom;
                    if let Some((node, set_aside)) = self.editing.take() {
                        self.input.enter_insert_mode_with(&set_aside);
                        self.input.enter_normal_mode();
                        return vec![Action::Edit { node, text: msg.text().to_string() }];
                    }
                    if self.turn_running() && !self.queue_next {
                        return vec![Action::Steer(msg)];
                    }
                    return vec![Action::Send(msg)];
                }
            }
            KeyCode::Char('t') if ctrl => self.queue_next = !self.queue_next,
            // A terminal pastes text only: an image comes from the clipboard.
            KeyCode::Char('v') if ctrl => return vec![Action::PasteImage],
            KeyCode::Char('w') if ctrl => mode.edit(|d| d.delete_word_backwards()),
            KeyCode::Char('u') if ctrl => mode.edit(|d| d.clear()),
            KeyCode::Char('a') if ctrl => mode.edit(|d| d.reset_cursor()),
            KeyCode::Char('e') if ctrl => mode.edit(|d| d.move_cursor_end()),
            KeyCode::Char('j') if ctrl => mode.edit(|d| d.enter_char('\n')),
            KeyCode::Char(c) if !ctrl => mode.edit(|d| d.enter_char(c)),
            KeyCode::Backspace => mode.edit(|d| d.delete_char()),
            KeyCode::Delete => mode.edit(|d| d.delete_char_forward()),
            KeyCode::Left => mode.edit(|d| d.move_cursor_left()),
            KeyCode::Right => mode.edit(|d| d.move_cursor_right()),
            KeyCode::Home => mode.edit(|d| d.reset_cursor()),
            KeyCode::End => mode.edit(|d| d.move_cursor_end()),
            KeyCode::Tab => {
                let resources = &self.mcp_resources;
                mode.edit(|d| {
                    let before = &d.text()[..d.cursor_byte()];
                    let rest = crate::mentions::complete(before, resources).unwrap_or_else(|| "    ".into());
                    d.insert_str(&rest);
                });
            }
            _ => {}
        }
        Vec::new()
    }

    fn command_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(token) = self.input.command_token() else { return Vec::new() };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let mut mode = self.input.command_mode(token);
        match key.code {
            KeyCode::Esc => self.input.enter_normal_mode(),
            KeyCode::Enter => {
                if let Some(cmd) = mode.take_command() {
                    let name = cmd.raw().split_whitespace().next().unwrap_or_default();
                    if self.own_commands.iter().any(|c| c.name == name) {
                        self.scroll = ScrollState::AutoBottom;
                        return vec![Action::Send(cmd.into_message())];
                    }
                    return self.run_command(Command::parse(cmd.raw()));
                }
            }
            // Completes a command of one's own from what is typed.
            KeyCode::Tab => {
                let typed = mode.command_text().to_string();
                let found: Vec<&str> =
                    self.own_commands.iter().map(|c| c.name.as_str()).filter(|n| n.starts_with(&typed)).collect();
                if let [one] = found[..] {
                    let rest = one[typed.len()..].to_string();
                    mode.edit(|d| d.insert_str(&format!("{rest} ")));
                }
            }
            KeyCode::Backspace if mode.command_text().is_empty() => self.input.enter_normal_mode(),
            KeyCode::Backspace => mode.edit(|d| d.delete_char()),
            KeyCode::Char('w') if ctrl => mode.edit(|d| d.delete_word_backwards()),
            KeyCode::Char(c) if !ctrl => mode.edit(|d| d.enter_char(c)),
            KeyCode::Left => mode.edit(|d| d.move_cursor_left()),
            KeyCode::Right => mode.edit(|d| d.move_cursor_right()),
            KeyCode::Home => mode.edit(|d| d.reset_cursor()),
            KeyCode::End => mode.edit(|d| d.move_cursor_end()),
            KeyCode::Delete => mode.edit(|d| d.delete_char_forward()),
            _ => {}
        }
        Vec::new()
    }

    fn model_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let InputState::ModelSelect { selected, .. } = &mut self.input else { return Vec::new() };
        match key.code {
            KeyCode::Esc | KeyCode::Tab => self.close_model_select(),
            KeyCode::Char('j') | KeyCode::Down => *selected = (*selected + 1).min(self.models.len().saturating_sub(1)),
            KeyCode::Char('k') | KeyCode::Up => *selected = selected.saturating_sub(1),
            KeyCode::Enter => {
                let picked = self.models.get(*selected).cloned();
                self.close_model_select();
                if let Some((provider, model)) = picked {
                    return vec![configure(Some(provider), Some(model))];
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn close_model_select(&mut self) {
        self.input.enter_normal_mode();
        self.modal = None;
    }
}
