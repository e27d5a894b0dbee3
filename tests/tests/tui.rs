//! The real `forge` TUI in tmux against a real `forged` and the mock
//! provider: typing, streaming, leaving and re-attaching mid-stream from
//! another terminal, approving a tool call, surviving a daemon restart, and
//! staying responsive to keys during a delta flood.

use std::time::{Duration, Instant};

use forge_tests::harness::{Forge, bin};
use forge_tests::mock::{MockOptions, MockServer};
use forge_tests::tmux::Tmux;

const WAIT: Duration = Duration::from_secs(20);

/// One TUI test at a time: the flood test measures latency, and the
/// others would compete with it for the two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn setup() -> Option<(MockServer, Forge, tempfile::TempDir)> {
    if !Tmux::available() {
        forge_tests::harness::skipped("tui", "tmux is not installed (apt-get install tmux)");
        return None;
    }
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    Some((mock, forge, project))
}

/// A new session `name` in `project`, and `forge` attached to it in tmux
/// window `window`, ready for keys.
async fn attached(forge: &Forge, project: &tempfile::TempDir, name: &str, window: &str, size: (u16, u16)) -> Tmux {
    let cwd = project.path().display().to_string();
    forge.new_session(&["--cwd", &cwd, "--name", name]).await;
    let tmux = Tmux::start(window, &bin("forge"), &[name], &forge.client_env(), size.0, size.1);
    tmux.wait_for(window, "NORMAL", WAIT);
    tmux
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_stream_leave_reattach_mid_stream_and_approve_a_tool_call() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "tui", "one", (110, 32)).await;
    let env = forge.client_env();

    // Type a message; its answer streams slowly enough to leave mid-way.
    tmux.keys("one", &["i"]);
    tmux.type_text("one", "mock:tokens=120 mock:delay=25 Tell me a long story");
    tmux.keys("one", &["Enter"]);
    tmux.wait_for("one", "Tell me a long story", WAIT);
    tmux.wait_for("one", "streaming", WAIT);

    // Leave: the turn goes on in the daemon.
    tmux.keys("one", &["Escape", "q"]);
    let deadline = Instant::now() + WAIT;
    while !tmux.exited("one") {
        assert!(Instant::now() < deadline, "forge did not exit on q");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ps = forge.ok(&["ps"]).await.stdout;
    assert!(ps.contains("streaming"), "the turn keeps running after the TUI left:\n{ps}");

    // Re-attach from another terminal, mid-stream: the whole answer shows.
    tmux.new_window("two", &bin("forge"), &["tui"], &env);
    tmux.wait_for("two", "Tell me a long story", WAIT);
    let deadline = Instant::now() + WAIT;
    loop {
        let h = forge.ok(&["--json", "history", "tui"]).await.json_lines();
        if h.len() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the turn did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let screen = tmux.wait_for("two", "idle", WAIT);
    let h = forge.ok(&["--json", "history", "tui"]).await.json_lines();
    let answer = h[1]["text"].as_str().unwrap_or_default().to_string();
    let tail: String =
        answer.split_whitespace().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" ");
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&tail), "the re-attached TUI shows the answer to its end ({tail:?}):\n{screen}");

    // A tool call waits for approval; y in Normal mode approves it.
    tmux.keys("two", &["i"]);
    tmux.type_text("two", "mock:tool=write_file please write it");
    tmux.keys("two", &["Enter"]);
    tmux.wait_for("two", "approval needed", WAIT);
    tmux.wait_for("two", "write_file (medium risk)", WAIT);
    tmux.keys("two", &["Escape", "y"]);
    tmux.wait_for("two", "created out0.txt", WAIT);
    assert!(project.path().join("out0.txt").exists(), "the approved write happened");
    let screen = tmux.wait_for("two", "tool result(s)", WAIT);
    assert!(!screen.contains("approval needed"), "the panel is gone once answered:\n{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_elsewhere_disappears_and_a_daemon_restart_keeps_the_draft() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, mut forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "pair", "ui", (100, 30)).await;
    forge.ok(&["send", "--no-wait", "-s", "pair", "mock:tool=write_file go"]).await;
    tmux.wait_for("ui", "approval needed", WAIT);
    // Answered from a script: every TUI sees it resolved.
    forge.ok(&["approve", "pair", "--all"]).await;
    tmux.wait_for("ui", "approved by forgectl", WAIT);
    let screen = tmux.wait_for("ui", "tool result(s)", WAIT);
    assert!(!screen.contains("approval needed"), "{screen}");

    // The daemon goes away: the TUI says so and keeps the draft.
    tmux.keys("ui", &["i"]);
    tmux.type_text("ui", "a draft I am still writing");
    forge.terminate().await;
    tmux.wait_for("ui", "daemon gone", WAIT);
    forge.start().await;
    let screen = tmux.wait_for("ui", "reconnected", WAIT);
    assert!(screen.contains("a draft I am still writing"), "{screen}");
    // And it works again.
    tmux.keys("ui", &["Enter"]);
    tmux.wait_for("ui", "You said: “a draft I am still writing”", WAIT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_show_within_100ms_while_a_delta_flood_streams() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "flood", "ui", (100, 30)).await;
    forge.ok(&["send", "--no-wait", "-s", "flood", "mock:tokens=200000"]).await;
    tmux.wait_for("ui", "streaming", WAIT);
    tmux.keys("ui", &["i"]);
    tmux.wait_for("ui", "INSERT", WAIT);
    let mut took = Vec::new();
    let mut draft = String::new();
    for c in ["q", "w", "e", "r", "t", "y", "u", "o", "p", "z"] {
        draft.push_str(c);
        let typed = Instant::now();
        tmux.type_text("ui", c);
        let deadline = typed + Duration::from_secs(5);
        loop {
            let s = tmux.screen("ui");
            // The draft box holds what was typed so far.
            if s.lines().any(|l| l.starts_with(&format!("│{draft} "))) {
                break;
            }
            assert!(Instant::now() < deadline, "the key {c:?} never showed:\n{s}");
            std::thread::sleep(Duration::from_millis(2));
        }
        took.push(typed.elapsed());
    }
    took.sort();
    let median = took[took.len() / 2];
    eprintln!("key to screen during the flood: median {median:?}, max {:?}", took.last());
    let ps = forge.ok(&["ps"]).await.stdout;
    assert!(ps.contains("streaming"), "the flood was still running while keys were measured:\n{ps}");
    assert!(median < Duration::from_millis(100), "median key-to-screen time {median:?} ({took:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_lists_sessions_and_attaches_and_commands_reach_the_daemon() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let cwd = project.path().display().to_string();
    forge.new_session(&["--cwd", &cwd, "--name", "alpha"]).await;
    forge.new_session(&["--cwd", &cwd, "--name", "beta"]).await;
    forge.ok(&["send", "-s", "alpha", "touch alpha"]).await;
    let env = forge.client_env();
    let tmux = Tmux::start("ui", &bin("forge"), &[], &env, 120, 30);
    let screen = tmux.wait_for("ui", "forge: sessions", WAIT);
    assert!(screen.contains("alpha") && screen.contains("beta"), "{screen}");
    // Most recently active first: alpha, then beta.
    tmux.keys("ui", &["j", "Enter"]);
    tmux.wait_for("ui", "NORMAL  beta", WAIT);

    // /model goes through the daemon; every client sees the change.
    tmux.keys("ui", &[":"]);
    tmux.type_text("ui", "model claude-opus-4-6");
    tmux.keys("ui", &["Enter"]);
    tmux.wait_for("ui", "now using claude/claude-opus-4-6", WAIT);
    let show = forge.ok(&["--json", "session", "show", "beta"]).await.stdout;
    assert!(show.contains("claude-opus-4-6"), "{show}");
    // An unknown command answers with a notice, and the TUI goes on.
    tmux.keys("ui", &[":"]);
    tmux.type_text("ui", "frobnicate");
    tmux.keys("ui", &["Enter"]);
    tmux.wait_for("ui", "unknown command `frobnicate`", WAIT);
    tmux.keys("ui", &["/"]);
    tmux.type_text("ui", "tools");
    tmux.keys("ui", &["Enter"]);
    tmux.wait_for("ui", "write_file", WAIT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_terminal_mid_stream_leaves_the_turn_running() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "hup", "ui", (100, 30)).await;
    forge.ok(&["send", "--no-wait", "-s", "hup", "mock:tokens=60 mock:delay=25 keep going"]).await;
    tmux.wait_for("ui", "streaming", WAIT);
    tmux.kill_window("ui");
    let deadline = Instant::now() + WAIT;
    loop {
        let h = forge.ok(&["--json", "history", "hup"]).await.json_lines();
        if let Some(answer) = h.get(1) {
            assert_eq!(answer["status"], "complete", "{answer}");
            break;
        }
        assert!(Instant::now() < deadline, "the turn did not finish after the terminal closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = forge.ok(&["--json", "session", "show", "hup"]).await.stdout;
    assert!(status.contains("\"attached_clients\":0"), "the closed TUI detached: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_tree_and_checkout_from_the_tui_move_files_and_show_the_branch() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "branches", "tree", (120, 40)).await;
    let file = project.path().join("out0.txt");
    forge.ok(&["send", "-s", "branches", "first question"]).await;
    forge.ok(&["send", "--auto-approve", "-s", "branches", "mock:tool=write_file second question"]).await;
    tmux.wait_for("tree", "created out0.txt", WAIT);
    assert!(file.exists());

    // /undo takes the last turn back, its file included; the transcript
    // shows the path it is on now.
    tmux.keys("tree", &[":"]);
    tmux.type_text("tree", "undo");
    tmux.keys("tree", &["Enter"]);
    tmux.wait_for("tree", "rewound to", WAIT);
    let screen = tmux.wait_for("tree", "showing the path", WAIT);
    assert!(!screen.contains("second question"), "{screen}");
    assert!(!file.exists(), "the file the undone turn wrote is gone");

    // /tree opens the tree view with both branches; Esc closes it, and
    // /checkout ID files goes back with the file.
    tmux.keys("tree", &[":"]);
    tmux.type_text("tree", "tree");
    tmux.keys("tree", &["Enter"]);
    tmux.wait_for("tree", "the path to the head", WAIT);
    // The status line's mode may come a frame later.
    let view = tmux.wait_for("tree", " TREE ", WAIT);
    assert!(view.contains("second question") && view.contains("<- head") && view.contains(" TREE "), "{view}");
    tmux.keys("tree", &["Escape"]);
    let tree = forge.ok(&["--json", "branches", "branches"]).await.json_lines();
    let leaf = tree.iter().find(|b| b["head"] != true).and_then(|b| b["leaf"].as_str()).unwrap_or_default().to_string();
    tmux.keys("tree", &[":"]);
    tmux.type_text("tree", &format!("checkout {leaf} files"));
    tmux.keys("tree", &["Enter"]);
    // (The tree drawn above names the second question too: wait for the
    // answer to the checkout itself.)
    tmux.wait_for("tree", &format!("rewound to {leaf}"), WAIT);
    assert!(file.exists(), "its file came back");
    assert_eq!(forge.ok(&["--json", "history", "branches"]).await.json_lines().len(), 6);
}

/// `e` edits a message of the user's into a new branch, answered there;
/// the message then shows "2/2", and `[` goes back to the first version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_edits_a_message_into_a_branch_and_brackets_switch_versions() {
    let _serial = SERIAL.lock().await;
    let Some((_mock, forge, project)) = setup().await else { return };
    let tmux = attached(&forge, &project, "versions", "ver", (120, 40)).await;
    forge.ok(&["send", "-s", "versions", "first question"]).await;
    forge.ok(&["send", "-s", "versions", "second question"]).await;
    tmux.wait_for("ver", "You said: “second question”", WAIT);

    tmux.keys("ver", &["e"]);
    tmux.wait_for("ver", "editing your message", WAIT);
    tmux.type_text("ver", " rephrased");
    tmux.keys("ver", &["Enter"]);
    tmux.wait_for("ver", "You said: “second question rephrased”", WAIT);
    // The marks follow once the tree is read again (just after the turn).
    let screen = tmux.wait_for("ver", "[2/2]", WAIT);
    assert!(screen.contains("[2/2] › you"), "the edited message is the second of two versions: {screen}");
    assert_eq!(forge.ok(&["--json", "branches", "versions"]).await.json_lines().len(), 2);

    tmux.keys("ver", &["K", "K"]);
    tmux.keys("ver", &["["]);
    let screen = tmux.wait_for("ver", "[1/2]", WAIT);
    tmux.wait_for("ver", "You said: “second question”", WAIT);
    assert!(!screen.contains("rephrased”"), "the first version's branch is shown: {screen}");
    let history = forge.ok(&["--json", "history", "versions"]).await.json_lines();
    assert_eq!(history.last().and_then(|m| m["text"].as_str()).map(|t| t.contains("“second question”")), Some(true));
}
