//! The TUI's state and its pure update: keys, pastes and daemon items go
//! in; the state changes and [`Action`]s (requests for the daemon) come
//! out. Nothing here does I/O, so every behaviour is testable by feeding
//! keys.

use std::time::Duration;

use crossterm::event::KeyEvent;
use forge_proto::{ApprovalDecision, JournalHealth, OperationStateKind, SessionEvent};

use crate::command::{ApprovalChoice, Command, HELP};
use crate::input::{InputMode, InputState, QueuedUserMessage};
use crate::transcript::{Level, Transcript};

// Below `app`: the keys set `App`'s private state (`quit`).
mod keys;

/// Where the conversation pane is scrolled to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScrollState {
    /// Follows the newest content.
    #[default]
    AutoBottom,
    /// Stays where the user put it, counted in lines from the top.
    Manual { offset_from_top: usize },
}

/// Display options (`[app]` in config.toml, and `NO_COLOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UiOptions {
    pub ascii_only: bool,
    pub high_contrast: bool,
    pub reduced_motion: bool,
    /// Inline mode: no alternate screen; the transcript stays in the
    /// terminal's scrollback when `forge` exits.
    pub inline: bool,
    pub no_color: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    Connected,
    /// The daemon went away; the TUI keeps the draft and retries.
    Lost {
        reason: String,
    },
    /// The session no longer exists (removed); nothing to reconnect to.
    Gone,
}

/// An overlay's opening animation (none with `reduced_motion`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModalEffect {
    kind: ModalEffectKind,
    elapsed: Duration,
    duration: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModalEffectKind {
    /// Grows from the centre (the model picker).
    PopScale,
    /// Slides up from the bottom (the tree view, the rewind picker).
    SlideUp,
}

impl ModalEffect {
    pub fn pop_scale(duration: Duration) -> Self {
        Self { kind: ModalEffectKind::PopScale, elapsed: Duration::ZERO, duration }
    }
    pub fn slide_up(duration: Duration) -> Self {
        Self { kind: ModalEffectKind::SlideUp, elapsed: Duration::ZERO, duration }
    }
    pub fn kind(&self) -> ModalEffectKind {
        self.kind
    }
    pub fn advance(&mut self, by: Duration) {
        self.elapsed = (self.elapsed + by).min(self.duration);
    }
    /// 0.0 to 1.0, eased out.
    pub fn progress(&self) -> f32 {
        if self.duration.is_zero() {
            return 1.0;
        }
        let t = self.elapsed.as_secs_f32() / self.duration.as_secs_f32();
        1.0 - (1.0 - t.clamp(0.0, 1.0)).powi(3)
    }
    pub fn is_finished(&self) -> bool {
        self.elapsed >= self.duration
    }
}

/// A model the picker offers: (provider, model).
pub type ModelChoice = (String, String);

/// The models the picker lists until the daemon's catalog arrives
/// (`models.list`); `/model NAME` takes any other.
pub const MODELS: &[(&str, &str)] = &[
    ("claude", "claude-sonnet-4-6"),
    ("claude", "claude-opus-4-6"),
    ("claude", "claude-haiku-4-5"),
    ("openai", "gpt-5.4"),
    ("openai", "gpt-5.4-mini"),
    ("gemini", "gemini-3.5-pro"),
    ("gemini", "gemini-3.5-flash"),
];

/// What the daemon is asked to do.
#[derive(Debug, PartialEq)]
pub enum Action {
    Send(QueuedUserMessage),
    /// Attach the image on the clipboard (Ctrl+V, `/image paste`).
    PasteImage,
    /// Typed while a turn runs: joins it at its next step.
    Steer(QueuedUserMessage),
    Cancel,
    Answer {
        approval_id: String,
        decision: ApprovalDecision,
        indices: Vec<u32>,
    },
    Recover {
        resume: bool,
    },
    ToolResult {
        call_id: String,
        output: String,
        is_error: bool,
    },
    /// `session.configure` (its `session` filled in when sent).
    Configure(forge_proto::params::ConfigureParams),
    Clear,
    Context,
    /// `session.context_files` (its `session` filled in when sent).
    ContextFiles(forge_proto::params::ContextFilesParams),
    Journal,
    Summarize,
    Tools,
    /// Read the tree and open the tree view.
    Tree,
    /// Read the tree and open the rewind picker.
    RewindPick,
    /// Read the tree for the marks ("2/3") only.
    RefreshTree,
    /// Edit an earlier message (a new branch if anything replied to it).
    Edit {
        node: String,
        text: String,
    },
    /// A rewind (`node: None`: the last turn), or a checkout moving files.
    Rewind {
        node: Option<String>,
        /// Go on when some files cannot be restored.
        partial: bool,
    },
    Checkout {
        node: String,
    },
    Fork {
        node: Option<String>,
    },
    /// Switch between full-screen and inline display (the terminal is set
    /// up again).
    ToggleScreen,
    Quit,
}

/// A switch of provider or model.
fn configure(provider: Option<String>, model: Option<String>) -> Action {
    Action::Configure(forge_proto::params::ConfigureParams { provider, model, ..Default::default() })
}

pub struct App {
    pub session_id: String,
    pub transcript: Transcript,
    pub input: InputState,
    pub scroll: ScrollState,
    pub options: UiOptions,
    pub connection: Connection,
    pub journal: (JournalHealth, Option<String>),
    pub modal: Option<ModalEffect>,
    pub models: Vec<ModelChoice>,
    /// Replaying stored events; live once the daemon says so.
    pub replaying: bool,
    /// Lines of the conversation pane, for page scrolling (set on resize).
    pub page_lines: usize,
    /// Lines the conversation has at the current width (set when drawn).
    pub total_lines: usize,
    /// The session's tree as last read (`session.tree`).
    pub tree: Option<forge_proto::TreeInfo>,
    /// The selected message's node (`K`/`J`).
    pub selected: Option<String>,
    /// Editing an earlier message (`e`): its node, and the draft set
    /// aside for it.
    pub editing: Option<(String, String)>,
    /// How many items the transcript held when a head move was seen live
    /// (what came after stays when the path is read again).
    pub path_mark: Option<usize>,
    /// An item to bring into view at the next draw.
    pub focus: Option<usize>,
    /// The session's commands of one's own (`commands.list`).
    pub own_commands: Vec<forge_proto::CommandInfo>,
    /// What the session's MCP servers list, for `@server:uri`.
    pub mcp_resources: Vec<forge_proto::McpResourceInfo>,
    /// Images for the next message (`/image`, or a pasted image path).
    pub attached: Vec<crate::attach::Attachment>,
    /// While a turn runs, Enter queues the message instead of steering the
    /// turn with it (Ctrl-T switches).
    pub queue_next: bool,
    quit: bool,
}

impl App {
    pub fn new(session_id: &str, options: UiOptions) -> Self {
        Self {
            session_id: session_id.to_string(),
            transcript: Transcript::default(),
            input: InputState::default(),
            scroll: ScrollState::AutoBottom,
            options,
            connection: Connection::Connected,
            journal: (JournalHealth::Healthy, None),
            modal: None,
            models: MODELS.iter().map(|(p, m)| (p.to_string(), m.to_string())).collect(),
            replaying: true,
            page_lines: 20,
            total_lines: 0,
            tree: None,
            selected: None,
            editing: None,
            path_mark: None,
            focus: None,
            queue_next: false,
            own_commands: Vec::new(),
            mcp_resources: Vec::new(),
            attached: Vec::new(),
            quit: false,
        }
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    pub fn mode(&self) -> InputMode {
        self.input.mode()
    }

    pub fn state(&self) -> OperationStateKind {
        self.transcript.fold.state.unwrap_or(OperationStateKind::Idle)
    }

    pub fn on_event(&mut self, ev: &SessionEvent) {
        self.transcript.apply(ev);
    }

    pub fn notify(&mut self, level: Level, text: impl Into<String>) {
        self.transcript.notify(level, text);
    }

    pub fn enter_model_select_mode(&mut self) {
        let current = self.models.iter().position(|(_, m)| *m == self.transcript.fold.model).unwrap_or(0);
        self.input.enter_model_select_mode(current);
        self.modal = (!self.options.reduced_motion).then(|| ModalEffect::pop_scale(Duration::from_millis(700)));
    }

    /// An overlay from the bottom (the tree, the rewind picker) opens.
    pub fn slide_up(&mut self) {
        self.modal = (!self.options.reduced_motion).then(|| ModalEffect::slide_up(Duration::from_millis(300)));
    }

    /// Advances animations by one frame.
    pub fn tick(&mut self, elapsed: Duration) {
        if let Some(m) = &mut self.modal {
            m.advance(elapsed);
            if m.is_finished() {
                self.modal = None;
            }
        }
    }

    pub fn on_paste(&mut self, text: &str) {
        // A dropped image file arrives as its path: attach it.
        if let Some(path) = crate::attach::pasted_path(text) {
            return self.attach_image(&path);
        }
        match self.input.mode() {
            InputMode::Normal => {
                self.input.enter_insert_mode_at_end();
                self.on_paste(text);
            }
            InputMode::Insert => {
                if let Some(t) = self.input.insert_token() {
                    self.input.insert_mode(t).edit(|d| d.insert_str(text));
                }
            }
            InputMode::Command => {
                if let Some(t) = self.input.command_token() {
                    // A command is one line.
                    let line = text.lines().next().unwrap_or_default();
                    self.input.command_mode(t).edit(|d| d.insert_str(line));
                }
            }
            InputMode::ModelSelect | InputMode::Tree | InputMode::Rewind => {}
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let actions = self.handle_key(key);
        // An edit lives in Insert mode: left any other way than Enter or
        // Esc (Ctrl-C, Esc and a key at once), it is dropped, not kept
        // for the next message.
        if self.editing.is_some() && self.input.mode() != InputMode::Insert {
            self.drop_edit();
        }
        actions
    }

    /// A turn is under way: what is typed now steers it (or queues).
    pub fn turn_running(&self) -> bool {
        self.transcript.fold.running.is_some()
    }

    fn attach_image(&mut self, path: &std::path::Path) {
        self.attached_one(crate::attach::read(path));
    }

    /// An image read to attach (a file, or the clipboard), or why not.
    pub fn attached_one(&mut self, read: Result<crate::attach::Attachment, String>) {
        match read {
            Ok(a) => {
                self.notify(
                    Level::Info,
                    format!(
                        "{} attached to your next message (/image clear drops it)",
                        a.name.as_deref().unwrap_or("an image")
                    ),
                );
                self.attached.push(a);
            }
            Err(why) => self.notify(Level::Error, format!("not attached: {why}")),
        }
    }

    pub fn run_command(&mut self, cmd: Command) -> Vec<Action> {
        match cmd {
            Command::Quit => {
                self.quit = true;
                vec![Action::Quit]
            }
            Command::Help => {
                let width = HELP.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
                let text = HELP.iter().map(|(c, d)| format!("{c:width$}  {d}")).collect::<Vec<_>>().join("\n");
                self.notify(Level::Info, format!("commands (after : or /):\n{text}"));
                Vec::new()
            }
            Command::Screen => vec![Action::ToggleScreen],
            Command::Image(arg) => {
                match arg.as_deref() {
                    Some("clear") => {
                        self.attached.clear();
                        self.notify(Level::Info, "no image attached now");
                    }
                    Some("paste") => return vec![Action::PasteImage],
                    Some(path) => self.attach_image(std::path::Path::new(path)),
                    None if self.attached.is_empty() => {
                        self.notify(Level::Info, "no image attached; /image PATH attaches one to your next message")
                    }
                    None => {
                        let names: Vec<&str> =
                            self.attached.iter().map(|a| a.name.as_deref().unwrap_or("image")).collect();
                        self.notify(Level::Info, format!("attached to your next message: {}", names.join(", ")));
                    }
                }
                Vec::new()
            }
            Command::Cancel => vec![Action::Cancel],
            Command::Clear => vec![Action::Clear],
            Command::Context => vec![Action::Context],
            Command::ContextFiles { add, paths } => {
                let (add, remove) = if add { (paths, Vec::new()) } else { (Vec::new(), paths) };
                vec![Action::ContextFiles(forge_proto::params::ContextFilesParams {
                    add,
                    remove,
                    ..Default::default()
                })]
            }
            Command::Journal => vec![Action::Journal],
            Command::Summarize => vec![Action::Summarize],
            Command::Tools => vec![Action::Tools],
            Command::Model(None) => {
                self.enter_model_select_mode();
                Vec::new()
            }
            Command::Model(Some(model)) => vec![configure(None, Some(model))],
            Command::Provider(None) => {
                self.notify(
                    Level::Info,
                    format!("provider: {} (switch with /provider claude|openai|gemini)", self.transcript.fold.provider),
                );
                Vec::new()
            }
            Command::Provider(Some(p)) => vec![configure(Some(p), None)],
            Command::Sampling { top_p, value } => match crate::command::sampling_params(top_p, &value) {
                Ok(params) => vec![Action::Configure(params)],
                Err(usage) => {
                    self.notify(Level::Warn, format!("usage: {usage}"));
                    Vec::new()
                }
            },
            Command::Tool { id, result, is_error } => {
                vec![Action::ToolResult { call_id: id, output: result, is_error }]
            }
            Command::Recover { resume } => vec![Action::Recover { resume }],
            Command::Tree => vec![Action::Tree],
            Command::Undo { yes } => vec![Action::Rewind { node: None, partial: yes }],
            Command::Rewind { node: None, .. } => vec![Action::RewindPick],
            Command::Rewind { node: Some(node), yes } => vec![Action::Rewind { node: Some(node), partial: yes }],
            Command::Checkout { node, files: true } => vec![Action::Rewind { node: Some(node), partial: false }],
            Command::Checkout { node, files: false } => vec![Action::Checkout { node }],
            Command::Fork(node) => vec![Action::Fork { node }],
            Command::Approve(_) | Command::Deny if self.transcript.approval.is_none() => {
                self.notify(Level::Warn, "no tool call is waiting for approval");
                Vec::new()
            }
            Command::Approve(choice) => {
                let id = self.transcript.approval.as_ref().map(|a| a.approval_id.clone()).unwrap_or_default();
                let (decision, indices) = match choice {
                    ApprovalChoice::All => (ApprovalDecision::ApproveAll, vec![]),
                    ApprovalChoice::Selected(v) => (ApprovalDecision::ApproveSelected, v),
                };
                vec![Action::Answer { approval_id: id, decision, indices }]
            }
            Command::Deny => {
                let id = self.transcript.approval.as_ref().map(|a| a.approval_id.clone()).unwrap_or_default();
                vec![Action::Answer { approval_id: id, decision: ApprovalDecision::DenyAll, indices: vec![] }]
            }
            Command::Invalid { usage } => {
                self.notify(Level::Warn, format!("usage: {usage}"));
                Vec::new()
            }
            Command::Unknown(name) => {
                self.notify(Level::Warn, format!("unknown command `{name}`; /help lists them"));
                Vec::new()
            }
        }
    }

    fn scroll_by(&mut self, delta: isize) {
        let max = self.total_lines.saturating_sub(self.page_lines);
        let current = match self.scroll {
            ScrollState::AutoBottom => max,
            ScrollState::Manual { offset_from_top } => offset_from_top.min(max),
        };
        let next = current.saturating_add_signed(delta).min(max);
        self.scroll = if next >= max && delta > 0 {
            ScrollState::AutoBottom
        } else {
            ScrollState::Manual { offset_from_top: next }
        };
    }
}

#[cfg(test)]
mod tests;
