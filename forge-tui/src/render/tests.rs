use forge_proto::{ApprovalCall, EventKind, MessageStatus, SessionEvent};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};

use super::*;
use crate::app::UiOptions;

fn ev(seq: u64, kind: EventKind) -> SessionEvent {
    SessionEvent { session_id: "s1".into(), seq, ts_ms: 0, client: None, kind }
}

/// A session with a finished turn: markdown, a tool call and its result.
fn app(options: UiOptions) -> App {
    let mut app = App::new("s1", options);
    app.replaying = false;
    let answer = "## Plan\n\nI will **read** the file, then *fix* it:\n\n1. read `main.rs`\n2. patch it\n\n```rust\nfn main() {}\n```\n";
    let events = vec![
        EventKind::SessionCreated {
            name: Some("demo".into()),
            cwd: "/p".into(),
            provider: "claude".into(),
            model: "claude-sonnet-4-6".into(),
            sampling: Default::default(),
        },
        EventKind::TurnStarted {
            message_id: "m1".into(),
            text: "Fix the build, please".into(),
            provider: "claude".into(),
            model: "claude-sonnet-4-6".into(),
            continued: false,
            images: Vec::new(),
        },
        EventKind::TextDelta { text: answer.into() },
        EventKind::ToolCallStarted { index: 0, call_id: "c1".into(), name: "read_file".into() },
        EventKind::ToolCallArgs { index: 0, fragment: "{\"path\":\"src/main.rs\"}".into() },
        EventKind::ToolRunning { call_id: "c1".into(), name: "read_file".into() },
        EventKind::ToolResult {
            call_id: "c1".into(),
            name: "read_file".into(),
            is_error: false,
            output: "fn main() {}\n".into(),
        },
        EventKind::StreamResumed { iteration: 1 },
        EventKind::TextDelta { text: "Done.".into() },
        EventKind::TurnFinished {
            message_id: "m1".into(),
            assistant_id: Some("a2".into()),
            status: MessageStatus::Complete,
            stop_reason: None,
            usage: Some(forge_proto::Usage { input_tokens: 120, output_tokens: 45, ..Default::default() }),
            error: None,
            error_kind: None,
            recovered: None,
        },
    ];
    for (i, k) in events.into_iter().enumerate() {
        app.on_event(&ev(i as u64 + 1, k));
    }
    app
}

fn screen(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap_or_else(|e| panic!("{e}"));
    let mut cache = RenderCache::default();
    term.draw(|f| {
        draw(f, app, &mut cache);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    term
}

fn key(app: &mut App, code: crossterm::event::KeyCode) {
    app.on_key(crossterm::event::KeyEvent::from(code));
}

fn type_str(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, crossterm::event::KeyCode::Char(c));
    }
}

#[test]
fn normal_mode_shows_the_conversation_and_status() {
    let app = app(UiOptions::default());
    insta::assert_snapshot!(screen(&app, 70, 34).backend());
}

#[test]
fn insert_mode_shows_the_draft_and_its_cursor() {
    let mut app = app(UiOptions::default());
    key(&mut app, crossterm::event::KeyCode::Char('i'));
    type_str(&mut app, "Now add a test 👩🏽‍💻");
    let mut term = screen(&app, 70, 20);
    insta::assert_snapshot!(term.backend());
    let pos = term.get_cursor_position().unwrap_or_else(|e| panic!("{e}"));
    // After "Now add a test " (15 columns) and a two-column emoji.
    // The input box starts on row 16; its first text row is 17.
    assert_eq!((pos.x, pos.y), (1 + 15 + 2, 17));
}

#[test]
fn command_mode_shows_the_command_line() {
    let mut app = app(UiOptions::default());
    key(&mut app, crossterm::event::KeyCode::Char(':'));
    type_str(&mut app, "model gpt-5");
    insta::assert_snapshot!(screen(&app, 70, 12).backend());
}

#[test]
fn the_model_picker_pops_over_the_conversation() {
    let mut app = app(UiOptions { reduced_motion: true, ..Default::default() });
    key(&mut app, crossterm::event::KeyCode::Tab);
    key(&mut app, crossterm::event::KeyCode::Char('j'));
    insta::assert_snapshot!(screen(&app, 70, 16).backend());
}

#[test]
fn the_approval_panel_lists_calls_with_risk_and_the_selected_diff() {
    let mut app = app(UiOptions::default());
    let calls = vec![
        ApprovalCall {
            call_id: "c2".into(),
            name: "apply_patch".into(),
            arguments: "{}".into(),
            risk: "medium".into(),
            summary: "--- a/src/main.rs\n+++ b/src/main.rs\n-fn main() {}\n+fn main() { run(); }".into(),
        },
        ApprovalCall {
            call_id: "c3".into(),
            name: "run_command".into(),
            arguments: "{}".into(),
            risk: "high".into(),
            summary: "run in the working directory: cargo test".into(),
        },
    ];
    app.on_event(&ev(20, EventKind::ApprovalRequested { approval_id: "ap1".into(), calls, helper: None }));
    key(&mut app, crossterm::event::KeyCode::Char(' '));
    let term = screen(&app, 80, 24);
    insta::assert_snapshot!(term.backend());
    // `a` approves only what is picked (the first call was unpicked).
    let actions = app.on_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('a')));
    assert!(matches!(&actions[..], [crate::app::Action::Answer { indices, .. }] if indices == &vec![2]), "{actions:?}");
}

#[test]
fn a_cleared_conversation_leaves_nothing_stale_on_screen() {
    let mut app = app(UiOptions::default());
    let mut term = Terminal::new(TestBackend::new(70, 20)).unwrap_or_else(|e| panic!("{e}"));
    let mut cache = RenderCache::default();
    let mut frame = |app: &App, cache: &mut RenderCache| {
        term.draw(|f| {
            draw(f, app, cache);
        })
        .unwrap_or_else(|e| panic!("{e}"));
        term.backend().buffer().content().iter().map(|c| c.symbol().to_string()).collect::<String>()
    };
    assert!(frame(&app, &mut cache).contains("Done."));
    app.on_event(&ev(20, EventKind::HistoryCleared {}));
    let shown = frame(&app, &mut cache);
    assert!(
        shown.contains("conversation cleared") && !shown.contains("Done.") && !shown.contains("Fix the build"),
        "{shown}"
    );
}

#[test]
fn ascii_only_draws_no_other_character() {
    let mut app = app(UiOptions { ascii_only: true, ..Default::default() });
    app.on_event(&ev(
        20,
        EventKind::ApprovalRequested {
            approval_id: "ap1".into(),
            calls: vec![ApprovalCall {
                call_id: "c2".into(),
                name: "write_file".into(),
                arguments: "{}".into(),
                risk: "medium".into(),
                summary: "create a.txt".into(),
            }],
            helper: None,
        },
    ));
    let term = screen(&app, 70, 34);
    let buf = term.backend().buffer();
    for cell in buf.content() {
        assert!(cell.symbol().is_ascii(), "non-ASCII {:?} on screen", cell.symbol());
    }
    insta::assert_snapshot!(term.backend());
}

#[test]
fn high_contrast_and_no_color_change_styles_not_text() {
    let plain = screen(&app(UiOptions::default()), 70, 34);
    let hc = screen(&app(UiOptions { high_contrast: true, ..Default::default() }), 70, 34);
    let mono = screen(&app(UiOptions { no_color: true, ..Default::default() }), 70, 34);
    let text = |t: &Terminal<TestBackend>| {
        t.backend().buffer().content().iter().map(|c| c.symbol().to_string()).collect::<String>()
    };
    assert_eq!(text(&plain), text(&hc));
    assert_eq!(text(&plain), text(&mono));
    // The user's header: cyan normally, light cyan and bold in high contrast, no colour with NO_COLOR.
    let cell = |t: &Terminal<TestBackend>| t.backend().buffer()[(0, 0)].clone();
    assert_eq!(cell(&plain).fg, Color::Cyan);
    assert_eq!(cell(&hc).fg, Color::LightCyan);
    assert!(cell(&hc).modifier.contains(Modifier::BOLD));
    assert!(mono.backend().buffer().content().iter().all(|c| c.fg == Color::Reset && c.bg == Color::Reset));
}
