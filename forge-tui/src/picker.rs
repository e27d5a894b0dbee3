//! The session picker `forge` opens with no argument: every session with
//! its name, directory, model, state and last activity; Enter attaches, n
//! starts a new one here, r renames, d removes (after a y), q leaves.

use crossterm::event::{Event, EventStream, KeyCode, KeyEventKind, KeyModifiers};
use forge_client::ForgeClient;
use forge_client::jsonrpsee::async_client::Client;
use forge_proto::SessionInfo;
use forge_proto::params::{CreateParams, RenameParams};
use futures::StreamExt;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::UiOptions;
use crate::draft::DraftInput;
use crate::theme::{Part, Theme};

#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    None,
    Rename(DraftInput),
    ConfirmRemove,
}

pub struct Picker {
    pub sessions: Vec<SessionInfo>,
    pub selected: usize,
    pub prompt: Prompt,
    pub message: Option<String>,
    pub now_ms: i64,
}

/// What a key asks for.
#[derive(Debug, PartialEq)]
pub enum PickerAction {
    None,
    Attach(String),
    New,
    Rename(String, Option<String>),
    Remove(String),
    Quit,
}

impl Picker {
    pub fn on_key(&mut self, code: KeyCode, ctrl: bool) -> PickerAction {
        if ctrl && code == KeyCode::Char('c') {
            return PickerAction::Quit;
        }
        let current = self.sessions.get(self.selected).map(|s| s.id.clone());
        match &mut self.prompt {
            Prompt::Rename(draft) => {
                match code {
                    KeyCode::Esc => self.prompt = Prompt::None,
                    KeyCode::Enter => {
                        let name = draft.text().trim().to_string();
                        self.prompt = Prompt::None;
                        if let Some(id) = current {
                            return PickerAction::Rename(id, (!name.is_empty()).then_some(name));
                        }
                    }
                    KeyCode::Backspace => draft.delete_char(),
                    KeyCode::Char(c) => draft.enter_char(c),
                    _ => {}
                }
                return PickerAction::None;
            }
            Prompt::ConfirmRemove => {
                self.prompt = Prompt::None;
                if code == KeyCode::Char('y')
                    && let Some(id) = current
                {
                    return PickerAction::Remove(id);
                }
                self.message = Some("not removed".into());
                return PickerAction::None;
            }
            Prompt::None => {}
        }
        match code {
            KeyCode::Char('q') | KeyCode::Esc => PickerAction::Quit,
            KeyCode::Char('j') | KeyCode::Down => {
                self.selected = (self.selected + 1).min(self.sessions.len().saturating_sub(1));
                PickerAction::None
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.selected = self.selected.saturating_sub(1);
                PickerAction::None
            }
            KeyCode::Enter => current.map(PickerAction::Attach).unwrap_or(PickerAction::New),
            KeyCode::Char('n') => PickerAction::New,
            KeyCode::Char('r') if current.is_some() => {
                let name = self.sessions.get(self.selected).and_then(|s| s.name.clone()).unwrap_or_default();
                self.prompt = Prompt::Rename(DraftInput::new(&name));
                PickerAction::None
            }
            KeyCode::Char('d') if current.is_some() => {
                self.prompt = Prompt::ConfirmRemove;
                PickerAction::None
            }
            _ => PickerAction::None,
        }
    }
}

fn ago(now_ms: i64, then_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}

pub fn draw(frame: &mut Frame, p: &Picker, theme: &Theme) {
    let g = theme.glyphs;
    let [list, status] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(frame.area());
    let mut lines = vec![Line::from(Span::styled(
        format!("  {:<16} {:<24} {:<26} {:<20} {}", "SESSION", "MODEL", "STATE", "ACTIVE", "DIRECTORY"),
        theme.style(Part::Dim),
    ))];
    for (i, s) in p.sessions.iter().enumerate() {
        let name = s.name.clone().unwrap_or_else(|| s.id.clone());
        let text = format!(
            "{} {:<16} {:<24} {:<26} {:<20} {}",
            if i == p.selected { g.pointer } else { " " },
            name,
            s.model,
            s.state.as_str(),
            ago(p.now_ms, s.updated_ms),
            s.cwd
        );
        lines.push(if i == p.selected {
            Line::from(Span::styled(text, theme.style(Part::Selected)))
        } else {
            Line::from(text)
        });
    }
    if p.sessions.is_empty() {
        lines.push(Line::from(Span::styled(
            "  no sessions yet: n starts one in this directory",
            theme.style(Part::Dim),
        )));
    }
    let block = theme.block().title(" forge: sessions ");
    frame.render_widget(Paragraph::new(lines).block(block), list);
    let help = match &p.prompt {
        Prompt::Rename(d) => format!("new name (empty clears it): {}", d.text()),
        Prompt::ConfirmRemove => "remove this session and its history? y to confirm".into(),
        Prompt::None => p
            .message
            .clone()
            .unwrap_or_else(|| "Enter: attach  n: new here  r: rename  d: remove  j/k: move  q: quit".into()),
    };
    frame.render_widget(Paragraph::new(Span::styled(help, theme.style(Part::StatusBar))), status);
}

/// Runs the picker; the chosen session's id, or None if the user left.
/// `keys` is the program's one key stream: a second one would race the
/// first for terminal replies.
/// `new_cwd`: where "new" makes a session (this directory; through
/// `--remote`, `--cwd` or the remote user's home).
pub async fn pick(
    client: &Client,
    options: &UiOptions,
    keys: &mut EventStream,
    new_cwd: Option<String>,
) -> anyhow::Result<Option<String>> {
    let theme = Theme::new(options);
    let mut term = ratatui::init();
    let result = pick_loop(&mut term, client, &theme, keys, new_cwd).await;
    ratatui::restore();
    result
}

async fn pick_loop(
    term: &mut ratatui::DefaultTerminal,
    client: &Client,
    theme: &Theme,
    keys: &mut EventStream,
    new_cwd: Option<String>,
) -> anyhow::Result<Option<String>> {
    let mut p = Picker { sessions: Vec::new(), selected: 0, prompt: Prompt::None, message: None, now_ms: 0 };
    let mut reload = true;
    loop {
        if reload {
            p.sessions = client.session_list(()).await?;
            p.sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
            p.selected = p.selected.min(p.sessions.len().saturating_sub(1));
            reload = false;
        }
        p.now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        term.draw(|f| draw(f, &p, theme))?;
        let Some(Ok(ev)) = keys.next().await else { return Ok(None) };
        let Event::Key(k) = ev else { continue };
        if k.kind == KeyEventKind::Release {
            continue;
        }
        match p.on_key(k.code, k.modifiers.contains(KeyModifiers::CONTROL)) {
            PickerAction::None => {}
            PickerAction::Quit => return Ok(None),
            PickerAction::Attach(id) => return Ok(Some(id)),
            PickerAction::New => {
                let cwd = new_cwd.clone();
                match client.session_create(CreateParams { cwd, ..Default::default() }).await {
                    Ok(info) => {
                        // The folder's own hooks and servers wait for the
                        // user's word: asked once, here.
                        if let Some(folder) = &info.untrusted {
                            p.message = Some(format!(
                                "{} provides {}: they run programs, and Forge ignores them until you trust the folder. t: trust it, any other key: not now",
                                folder.dir,
                                forge_client::terminal::safe(&folder.provides.join(", "))
                            ));
                            term.draw(|f| draw(f, &p, theme))?;
                            if let Some(Ok(Event::Key(k))) = keys.next().await
                                && k.code == crossterm::event::KeyCode::Char('t')
                            {
                                let _ = client.trust_add(folder.dir.clone()).await;
                            }
                        }
                        return Ok(Some(info.id));
                    }
                    Err(e) => p.message = Some(format!("cannot create a session: {e}")),
                }
            }
            PickerAction::Rename(id, name) => {
                if let Err(e) = client.session_rename(RenameParams { session: id, name }).await {
                    p.message = Some(format!("rename failed: {e}"));
                }
                reload = true;
            }
            PickerAction::Remove(id) => {
                match client.session_remove(id).await {
                    Ok(_) => p.message = Some("removed".into()),
                    Err(e) => p.message = Some(format!("not removed: {e}")),
                }
                reload = true;
            }
        }
    }
}
