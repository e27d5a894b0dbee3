//! The app's key and event handling, without a terminal.
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use forge_proto::{EventKind, SessionEvent};

use super::*;
use crate::transcript::DisplayItem;

fn press(app: &mut App, code: KeyCode) -> Vec<Action> {
    app.on_key(KeyEvent::from(code))
}

fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

#[test]
fn type_send_and_leave_insert_mode() {
    let mut app = App::new("s", UiOptions::default());
    press(&mut app, KeyCode::Char('i'));
    typed(&mut app, "hello");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    typed(&mut app, "world");
    let actions = press(&mut app, KeyCode::Enter);
    assert!(matches!(&actions[..], [Action::Send(m)] if m.text() == "hello\nworld"), "{actions:?}");
    assert!(press(&mut app, KeyCode::Enter).is_empty(), "an empty draft sends nothing");
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.mode(), InputMode::Normal);
}

#[test]
fn commands_become_actions_or_notices_never_crashes() {
    let mut app = App::new("s", UiOptions::default());
    press(&mut app, KeyCode::Char(':'));
    typed(&mut app, "model gpt-5.4");
    let actions = press(&mut app, KeyCode::Enter);
    assert_eq!(actions, vec![super::configure(None, Some("gpt-5.4".into()))]);
    press(&mut app, KeyCode::Char('/'));
    typed(&mut app, "frobnicate");
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert!(
        matches!(app.transcript.items.last(), Some(DisplayItem::Notice { text, .. }) if text.contains("unknown command"))
    );
    press(&mut app, KeyCode::Char(':'));
    typed(&mut app, "model");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.mode(), InputMode::ModelSelect, "/model alone opens the picker");
    press(&mut app, KeyCode::Char('j'));
    let actions = press(&mut app, KeyCode::Enter);
    assert!(matches!(&actions[..], [Action::Configure(p)] if p.model.is_some() && p.provider.is_some()), "{actions:?}");
}

#[test]
fn ctrl_c_cancels_a_running_turn_and_esc_then_q_leaves() {
    let mut app = App::new("s", UiOptions::default());
    let started = EventKind::TurnStarted {
        message_id: "m".into(),
        text: "t".into(),
        provider: "p".into(),
        model: "m".into(),
        continued: false,
        images: Vec::new(),
    };
    app.on_event(&SessionEvent { session_id: "s".into(), seq: 1, ts_ms: 0, client: None, kind: started });
    let actions = app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert_eq!(actions, vec![Action::Cancel]);
    press(&mut app, KeyCode::Char('i'));
    // Esc and q arriving together read as Alt+q.
    let actions = app.on_key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::ALT));
    assert_eq!(actions, vec![Action::Quit]);
    assert!(app.should_quit());
}

#[test]
fn typing_during_a_turn_steers_it_and_ctrl_t_queues_instead() {
    let mut app = App::new("s", UiOptions::default());
    let started = EventKind::TurnStarted {
        message_id: "m".into(),
        text: "t".into(),
        provider: "p".into(),
        model: "m".into(),
        continued: false,
        images: Vec::new(),
    };
    app.on_event(&SessionEvent { session_id: "s".into(), seq: 1, ts_ms: 0, client: None, kind: started });
    press(&mut app, KeyCode::Char('i'));
    typed(&mut app, "use v2");
    let actions = press(&mut app, KeyCode::Enter);
    assert!(matches!(&actions[..], [Action::Steer(m)] if m.text() == "use v2"), "{actions:?}");
    app.on_key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL));
    typed(&mut app, "then tests");
    let actions = press(&mut app, KeyCode::Enter);
    assert!(matches!(&actions[..], [Action::Send(m)] if m.text() == "then tests"), "{actions:?}");
}

#[test]
fn a_paste_lands_in_the_draft_with_its_lines_and_never_sends() {
    let mut app = App::new("s", UiOptions::default());
    app.on_paste("line one\r\nline two\n");
    assert_eq!(app.mode(), InputMode::Insert, "pasting in Normal mode starts typing");
    assert_eq!(app.input.draft().text(), "line one\nline two\n");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char(':'));
    app.on_paste("quit\nrm -rf /");
    assert!(press(&mut app, KeyCode::Enter).contains(&Action::Quit), "a command takes the first pasted line only");
}

#[test]
fn o_opens_a_new_line_and_keeps_the_draft() {
    let mut app = App::new("s", UiOptions::default());
    press(&mut app, KeyCode::Char('i'));
    typed(&mut app, "first");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('o'));
    typed(&mut app, "second");
    assert_eq!(app.input.draft().text(), "first\nsecond");
}

#[test]
fn images_attach_by_command_or_by_pasting_their_path() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shot = dir.path().join("shot.png");
    std::fs::write(&shot, b"\x89PNG\r\n\x1a\n").unwrap_or_else(|e| panic!("{e}"));
    let mut app = App::new("s", UiOptions::default());
    app.run_command(Command::Image(Some(shot.display().to_string())));
    assert_eq!(app.attached.len(), 1);
    app.on_paste(&format!("'{}'", shot.display()));
    assert_eq!(app.attached.len(), 2, "a pasted image path attaches it");
    assert!(app.input.draft().text().is_empty(), "and is not typed");
    app.on_paste("just words");
    assert_eq!(app.attached.len(), 2);
    app.run_command(Command::Image(Some(dir.path().join("gone.png").display().to_string())));
    assert_eq!(app.attached.len(), 2, "a missing file is said, not attached");
    app.run_command(Command::Image(Some("clear".into())));
    assert!(app.attached.is_empty());
}

#[test]
fn ctrl_v_asks_for_the_clipboards_image_and_it_is_attached() {
    let mut app = App::new("s", UiOptions::default());
    press(&mut app, KeyCode::Char('i'));
    let actions = app.on_key(KeyEvent::new(KeyCode::Char('v'), KeyModifiers::CONTROL));
    assert_eq!(actions, vec![Action::PasteImage]);
    let shot = crate::attach::Attachment {
        name: Some("clipboard.png".into()),
        data: "UE5H".into(),
        bytes: 3,
        mime_type: None,
    };
    app.attached_one(Ok(shot));
    assert_eq!(crate::attach::summary(&app.attached).as_deref(), Some("+1 image"));
    app.attached_one(Err("the clipboard holds no image".into()));
    assert_eq!(app.attached.len(), 1, "a failed read attaches nothing");
}
