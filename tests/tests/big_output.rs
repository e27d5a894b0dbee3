//! A command that prints hundreds of megabytes: the session stays usable,
//! no event is larger than a client can take, and replay works.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_megabytes_of_output_leave_the_session_replayable() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string(), "--name", "big"]).await;
    let flood = forge_tests::mock::tool_call(
        "run_command",
        &json!({"command": "head -c 200000000 /dev/zero | tr '\\0' x; echo; echo done"}),
    );
    let sent = forge.ok(&["send", "--auto-approve", "-s", "big", &format!("{flood} go")]).await;
    let tail = |s: &str| s.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect::<String>();
    assert!(
        sent.stdout.contains("truncated"),
        "the result says it was cut: stdout …{} stderr …{}",
        tail(&sent.stdout),
        tail(&sent.stderr)
    );
    let events = forge.ok(&["--json", "attach", &id, "--from", "1", "--until-idle"]).await;
    let lines: Vec<&str> = events.stdout.lines().collect();
    let largest = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    assert!(largest <= 4 * 1024 * 1024 + 1024, "an event of {largest} bytes");
    let shown: usize = events
        .json_lines()
        .iter()
        .filter(|e| e["kind"] == "tool_output")
        .map(|e| e["text"].as_str().map(str::len).unwrap_or(0))
        .sum();
    assert!(shown > 1024 * 1024 && shown < 10 * 1024 * 1024, "live output journaled: {shown} bytes");
    // Cut at the live-output cap, or (a session busy elsewhere takes the
    // pieces slower than the command prints) said to be skipped.
    assert!(
        events.stdout.contains("the rest is not shown") || events.stdout.contains("bytes of live output skipped"),
        "the cut of the live output is said"
    );
    let finished = events.json_lines().iter().any(|e| e["kind"] == "turn_finished");
    assert!(finished, "the turn finished: …{}", tail(&events.stdout));
    // The result the model got says how much was cut.
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let said = "[stdout truncated: the command printed 200,000,006 bytes,";
    assert!(history.iter().any(|m| m["text"].as_str().is_some_and(|t| t.contains(said))), "{history:?}");
    // And the session goes on.
    forge.ok(&["send", "-s", "big", "mock:tokens=2 still there"]).await;
}
