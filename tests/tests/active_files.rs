//! Active files as a user and the model keep them: `forgectl context
//! add|remove`, the model's `update_context` tool, their whole text in
//! every request, the budget and the read limit, a file that disappears,
//! and a git session committing the list with its state.

use forge_tests::harness::{Forge, git};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};

async fn started(config: &str) -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(config);
    forge.start().await;
    (mock, forge)
}

/// The text of every message of an Anthropic request, in order.
fn texts(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
            _ => String::new(),
        })
        .collect()
}

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_a_user_adds_go_whole_with_every_request_until_removed_or_gone() {
    let (mock, forge) = started("[tools.read_file]\nmax_file_read_bytes = 2000\n").await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = dir.path().display().to_string();
    write(dir.path(), "lib.rs", "pub fn answer() -> u32 { 42 }\n");
    // A key in a file never reaches the model (the daemon knows this one).
    write(dir.path(), "env.txt", "key = mock-key-anthropic\n");
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    write(dir.path(), "notes.md", "# Notes\nremember the milk\n");
    write(dir.path(), "big.txt", &"x".repeat(5000));
    std::fs::write(dir.path().join("blob.bin"), [0u8, 1, 2, 3, 0, 9]).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &cwd]).await;

    let added = forge.ctl(&["context", "add", &id, "lib.rs", "notes.md", "big.txt", "blob.bin", "env.txt"]).await;
    assert_eq!(added.code, 1, "some were refused: {}", added.stderr);
    if made {
        let pipe = forge.ctl(&["context", "add", &id, "pipe"]).await;
        assert!(pipe.stderr.contains("pipe: not a regular file"), "a FIFO is refused, not opened: {}", pipe.stderr);
    }
    assert!(added.stdout.contains("added lib.rs") && added.stdout.contains("added notes.md"), "{}", added.stdout);
    assert!(added.stderr.contains("big.txt: 5000 bytes, over the read limit"), "{}", added.stderr);
    assert!(added.stderr.contains("blob.bin: binary"), "{}", added.stderr);

    forge.ok(&["send", "-s", &id, "mock:tokens=2 what does answer return"]).await;
    let body = mock.requests().last().map(|r| r.body.clone()).unwrap_or_default();
    let t = texts(&body);
    let block = t.iter().position(|m| m.contains("<active-files>")).unwrap_or_else(|| panic!("no block: {t:?}"));
    assert!(t[block].contains("pub fn answer() -> u32 { 42 }") && t[block].contains("remember the milk"));
    assert!(t[block].contains("key = ") && !t[block].contains("mock-key-anthropic"), "redacted: {}", t[block]);
    assert_eq!(block + 1, t.len() - 1, "just before the question: {t:?}");
    let shown = forge.ok(&["context", &id]).await.stdout;
    assert!(shown.contains("active files") && shown.contains("lib.rs (30 bytes)"), "{shown}");

    // A change is in the next request; a file gone leaves with a notice.
    write(dir.path(), "lib.rs", "pub fn answer() -> u32 { 43 }\n");
    std::fs::remove_file(dir.path().join("notes.md")).unwrap_or_else(|e| panic!("{e}"));
    let sent = forge.ok(&["send", "-s", &id, "mock:tokens=2 and now"]).await;
    assert!(sent.stderr.contains("notes.md no longer exists"), "{}", sent.stderr);
    let last = mock.requests().last().map(|r| texts(&r.body).join("\n")).unwrap_or_default();
    assert!(last.contains("{ 43 }") && !last.contains("remember the milk"), "{last}");

    forge.ok(&["context", "remove", &id, "lib.rs", "env.txt"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2 without"]).await;
    let last = mock.requests().last().map(|r| texts(&r.body).join("\n")).unwrap_or_default();
    assert!(!last.contains("<active-files>"), "{last}");
    let json = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert!(json[0].get("active_files").is_none(), "{}", json[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_too_large_for_the_window_is_refused_with_the_sizes() {
    let config =
        "[[models]]\nname = \"tiny\"\nprovider = \"claude\"\ncontext_window = 6000\nmax_output_tokens = 1000\n";
    let (_mock, forge) = started(config).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(dir.path(), "long.txt", &"words and more words\n".repeat(900));
    let id = forge.new_session(&["--cwd", &dir.path().display().to_string(), "--model", "tiny"]).await;
    let r = forge.ctl(&["context", "add", &id, "long.txt"]).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("would not fit") && r.stderr.contains("tokens"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_adds_two_files_which_the_next_request_and_the_git_commit_hold() {
    let (mock, forge) = started("").await;
    let repo = forge_tests::harness::git_repository(&[("a.rs", "fn a() {}\n"), ("b.rs", "fn b() {}\n")]);
    let p = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &p.display().to_string()]).await;
    let call = tool_call("update_context", &json!({"add": ["a.rs", "b.rs"]}));
    let sent = forge.ok(&["send", "-s", &id, &format!("{call} keep both in view")]).await;
    assert!(sent.stderr.contains("active files: added a.rs, b.rs"), "no approval asked: {}", sent.stderr);
    // The request after the tool's result holds both files whole.
    let after = mock.last_turn_request();
    assert!(after.contains("<active-files>") && after.contains("fn a() {}") && after.contains("fn b() {}"), "{after}");
    let branch = format!("forge/session/{id}");
    let state = git(p, &["show", &format!("{branch}:.forge/sessions/{id}.json")]);
    let state: Value = serde_json::from_str(&state).unwrap_or_else(|e| panic!("{e}: {state}"));
    let files: Vec<&str> =
        state["active_files"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(files, ["a.rs", "b.rs"], "{state}");
}
