//! The store deleted under a running daemon: what it acknowledged is
//! written back to disk within a moment, so neither a clean stop nor a
//! `kill -9` before `journal reset` loses it.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, token_text};
use serde_json::Value;

async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

/// Removes the files of the store whose names start with `prefix`.
fn remove(forge: &Forge, prefix: &str) {
    for e in std::fs::read_dir(forge.data_dir()).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            std::fs::remove_file(e.path()).unwrap_or_else(|err| panic!("rm: {err}"));
        }
    }
}

/// Waits (bounded) until the daemon's own periodic check has written the
/// store back, as `forgectl status` reports it (which checks nothing
/// itself).
async fn written_back(forge: &Forge) -> Value {
    for _ in 0..1000 {
        let s = forge.ok(&["--json", "status"]).await.json_lines().pop().unwrap_or_default();
        if s["journal_reason"].as_str().is_some_and(|r| r.contains("written back")) {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the daemon never wrote the store back")
}

async fn texts(forge: &Forge, session: &str) -> Vec<String> {
    let history = forge.ok(&["--json", "history", session]).await.json_lines();
    history.iter().map(|m| m["text"].as_str().unwrap_or("").trim_end().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_of_the_store_then_shutdown_keeps_every_session() {
    let (_mock, mut forge) = started().await;
    let a = forge.new_session(&["--name", "first"]).await;
    let b = forge.new_session(&["--name", "second"]).await;
    forge.ok(&["send", "-s", &a, "mock:tokens=4 one"]).await;
    forge.ok(&["send", "-s", &b, "mock:tokens=3 two"]).await;
    remove(&forge, "forge.db");
    let stop = forge.ok(&["shutdown"]).await;
    assert!(stop.stdout.contains("stopped"), "{}", stop.stdout);
    forge.wait_exit().await;
    assert!(forge.data_dir().join("forge.db").is_file(), "the store is back at its path");

    forge.start().await;
    let listed = forge.ok(&["--json", "session", "list"]).await.json_lines();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(texts(&forge, "first").await, ["mock:tokens=4 one", token_text(4).trim_end()]);
    assert_eq!(texts(&forge, "second").await, ["mock:tokens=3 two", token_text(3).trim_end()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_wal_then_kill_9_loses_no_acknowledged_turn() {
    let (_mock, mut forge) = started().await;
    let id = forge.new_session(&["--name", "w"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=4 kept"]).await;
    remove(&forge, "forge.db-wal");
    let status = written_back(&forge).await;
    assert_eq!(status["journal"], "blocked", "{status}");
    forge.kill9().await;

    forge.start().await;
    assert_eq!(texts(&forge, "w").await, ["mock:tokens=4 kept", token_text(4).trim_end()]);
}
