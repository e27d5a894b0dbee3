//! The input state machine: Normal, Insert, Command and ModelSelect, each
//! carrying the draft so it survives every mode change. Mode-specific
//! operations are reachable only through a proof token (`InsertToken`,
//! `CommandToken`) that exists only while the mode is current, and their
//! results are proofs too: a `QueuedUserMessage` is a non-blank message
//! taken from Insert mode, an `EnteredCommand` a line entered in Command
//! mode.
//!
//! This state is the client's own: two TUIs on one session each have their
//! own draft and mode.

use crate::draft::DraftInput;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputState {
    Normal(DraftInput),
    Insert(DraftInput),
    Command {
        draft: DraftInput,
        command: DraftInput,
    },
    ModelSelect {
        draft: DraftInput,
        selected: usize,
    },
    /// The tree view (`/tree`): `cursor` is the row selected.
    Tree {
        draft: DraftInput,
        cursor: usize,
    },
    /// The rewind picker (`/rewind`): `cursor` is the turn selected.
    Rewind {
        draft: DraftInput,
        cursor: usize,
    },
}

/// The public view of the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMode {
    Normal,
    Insert,
    Command,
    ModelSelect,
    Tree,
    Rewind,
}

impl Default for InputState {
    fn default() -> Self {
        InputState::Normal(DraftInput::default())
    }
}

/// Proof that the input is in Insert mode.
#[derive(Debug)]
pub struct InsertToken(());

/// Proof that the input is in Command mode.
#[derive(Debug)]
pub struct CommandToken(());

/// Proof that a non-blank message was taken from the draft, ready to send.
#[derive(Debug, PartialEq, Eq)]
pub struct QueuedUserMessage {
    text: String,
}

impl QueuedUserMessage {
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Proof that a command line was entered in Command mode.
#[derive(Debug, PartialEq, Eq)]
pub struct EnteredCommand {
    raw: String,
}

impl EnteredCommand {
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// A command of one's own typed as a command: sent as the message
    /// `/name args` (the daemon makes it the command's prompt).
    pub fn into_message(self) -> QueuedUserMessage {
        QueuedUserMessage { text: format!("/{}", self.raw.trim()) }
    }
}

impl InputState {
    pub fn mode(&self) -> InputMode {
        match self {
            InputState::Normal(_) => InputMode::Normal,
            InputState::Insert(_) => InputMode::Insert,
            InputState::Command { .. } => InputMode::Command,
            InputState::ModelSelect { .. } => InputMode::ModelSelect,
            InputState::Tree { .. } => InputMode::Tree,
            InputState::Rewind { .. } => InputMode::Rewind,
        }
    }

    pub fn draft(&self) -> &DraftInput {
        match self {
            InputState::Normal(d) | InputState::Insert(d) => d,
            InputState::Command { draft, .. }
            | InputState::ModelSelect { draft, .. }
            | InputState::Tree { draft, .. }
            | InputState::Rewind { draft, .. } => draft,
        }
    }

    fn take_draft(&mut self) -> DraftInput {
        match std::mem::take(self) {
            InputState::Normal(d) | InputState::Insert(d) => d,
            InputState::Command { draft, .. }
            | InputState::ModelSelect { draft, .. }
            | InputState::Tree { draft, .. }
            | InputState::Rewind { draft, .. } => draft,
        }
    }

    pub fn enter_tree_mode(&mut self, cursor: usize) {
        let draft = self.take_draft();
        *self = InputState::Tree { draft, cursor };
    }

    pub fn enter_rewind_mode(&mut self, cursor: usize) {
        let draft = self.take_draft();
        *self = InputState::Rewind { draft, cursor };
    }

    /// Insert mode with `text` as the draft; returns the draft it replaced.
    pub fn enter_insert_mode_with(&mut self, text: &str) -> String {
        let old = self.take_draft();
        let mut d = DraftInput::new(text);
        d.move_cursor_end();
        *self = InputState::Insert(d);
        old.text().to_string()
    }

    pub fn enter_normal_mode(&mut self) {
        let d = self.take_draft();
        *self = InputState::Normal(d);
    }

    /// Insert mode with the cursor where it was.
    pub fn enter_insert_mode(&mut self) {
        let d = self.take_draft();
        *self = InputState::Insert(d);
    }

    pub fn enter_insert_mode_at_end(&mut self) {
        let mut d = self.take_draft();
        d.move_cursor_end();
        *self = InputState::Insert(d);
    }

    pub fn enter_command_mode(&mut self) {
        let draft = self.take_draft();
        *self = InputState::Command { draft, command: DraftInput::default() };
    }

    pub fn enter_model_select_mode(&mut self, selected: usize) {
        let draft = self.take_draft();
        *self = InputState::ModelSelect { draft, selected };
    }

    /// Restores a draft (e.g. a message the daemon refused, so no typing
    /// is lost).
    pub fn restore_draft(&mut self, text: &str) {
        let mut d = self.take_draft();
        if d.is_blank() {
            d = DraftInput::new(text);
        }
        *self = InputState::Insert(d);
    }

    pub fn insert_token(&self) -> Option<InsertToken> {
        matches!(self, InputState::Insert(_)).then_some(InsertToken(()))
    }

    pub fn command_token(&self) -> Option<CommandToken> {
        matches!(self, InputState::Command { .. }).then_some(CommandToken(()))
    }

    pub fn insert_mode(&mut self, _token: InsertToken) -> InsertMode<'_> {
        InsertMode { input: self }
    }

    pub fn command_mode(&mut self, _token: CommandToken) -> CommandMode<'_> {
        CommandMode { input: self }
    }
}

/// Insert-mode operations; only reachable with an [`InsertToken`].
pub struct InsertMode<'a> {
    input: &'a mut InputState,
}

impl InsertMode<'_> {
    pub fn edit(&mut self, f: impl FnOnce(&mut DraftInput)) {
        if let InputState::Insert(d) = self.input {
            f(d);
        }
    }

    /// Takes the draft as a message to send, unless it is blank; Insert
    /// mode stays, with an empty draft.
    pub fn queue_message(self) -> Option<QueuedUserMessage> {
        match self.input {
            InputState::Insert(d) if !d.is_blank() => Some(QueuedUserMessage { text: d.take() }),
            _ => None,
        }
    }
}

/// Command-mode operations; only reachable with a [`CommandToken`].
pub struct CommandMode<'a> {
    input: &'a mut InputState,
}

impl CommandMode<'_> {
    pub fn edit(&mut self, f: impl FnOnce(&mut DraftInput)) {
        if let InputState::Command { command, .. } = self.input {
            f(command);
        }
    }

    pub fn command_text(&self) -> &str {
        match &*self.input {
            InputState::Command { command, .. } => command.text(),
            _ => "",
        }
    }

    /// Takes the entered line and returns to Normal mode. A blank line is
    /// no command.
    pub fn take_command(self) -> Option<EnteredCommand> {
        let raw = match self.input {
            InputState::Command { command, .. } => command.take(),
            _ => String::new(),
        };
        self.input.enter_normal_mode();
        let raw = raw.trim().trim_start_matches(['/', ':']).trim().to_string();
        (!raw.is_empty()).then_some(EnteredCommand { raw })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draft_survives_every_mode_change() {
        let mut s = InputState::default();
        s.enter_insert_mode();
        let t = s.insert_token();
        assert!(t.is_some());
        if let Some(t) = t {
            s.insert_mode(t).edit(|d| d.insert_str("half a thought"));
        }
        s.enter_command_mode();
        assert_eq!(s.mode(), InputMode::Command);
        assert!(s.insert_token().is_none(), "no insert operations outside Insert mode");
        s.enter_normal_mode();
        s.enter_model_select_mode(0);
        s.enter_insert_mode_at_end();
        assert_eq!(s.draft().text(), "half a thought");
        assert_eq!(s.draft().cursor(), 14);
    }

    #[test]
    fn only_a_non_blank_draft_becomes_a_message() {
        let mut s = InputState::default();
        s.enter_insert_mode();
        let msg = s.insert_token().and_then(|t| s.insert_mode(t).queue_message());
        assert_eq!(msg, None);
        if let Some(t) = s.insert_token() {
            s.insert_mode(t).edit(|d| d.insert_str("  hello  "));
        }
        let msg = s.insert_token().and_then(|t| s.insert_mode(t).queue_message());
        assert_eq!(msg.map(|m| m.text().to_string()), Some("  hello  ".into()));
        assert!(s.draft().is_blank(), "sent text leaves the draft");
        assert_eq!(s.mode(), InputMode::Insert);
    }

    #[test]
    fn a_command_is_taken_without_its_prefix_and_returns_to_normal() {
        let mut s = InputState::Normal(DraftInput::new("draft"));
        s.enter_command_mode();
        if let Some(t) = s.command_token() {
            let mut c = s.command_mode(t);
            c.edit(|d| d.insert_str("/model  gpt-5 "));
            assert_eq!(c.command_text(), "/model  gpt-5 ");
        }
        let cmd = s.command_token().and_then(|t| s.command_mode(t).take_command());
        assert_eq!(cmd.map(|c| c.raw().to_string()), Some("model  gpt-5".into()));
        assert_eq!(s.mode(), InputMode::Normal);
        assert_eq!(s.draft().text(), "draft");
        s.enter_command_mode();
        assert_eq!(s.command_token().and_then(|t| s.command_mode(t).take_command()), None);
    }
}
