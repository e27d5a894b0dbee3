//! Steering a running turn (`forgectl steer`) through the real daemon:
//! the text joins the turn after the tool batch under way and the next
//! request carries it; one sent while an answer streams waits for the
//! turn to end and runs next; a crash before the boundary keeps it.

use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};

async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

/// Waits for the session's pending approval (the turn is inside a tool
/// batch then).
async fn pending_approval(forge: &Forge, id: &str) -> Value {
    for _ in 0..400 {
        let list = forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(p) = list.into_iter().find(|p| p["session_id"] == id) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no approval came in 10 s");
}

fn last_user_text(body: &Value) -> String {
    body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_during_a_tool_batch_reaches_the_next_request() {
    let (mock, forge) = started().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &dir.path().display().to_string()]).await;
    let call = tool_call("write_file", &json!({"path": "a.txt", "content": "a\n"}));
    let sender =
        forge.ctl_cmd(&["send", "-s", &id, &format!("{call} write it")]).spawn().unwrap_or_else(|e| panic!("{e}"));
    pending_approval(&forge, &id).await;

    let steered = forge.ok(&["--json", "steer", &id, "also mention the weather"]).await;
    let r: Value = serde_json::from_str(steered.stdout.trim()).unwrap_or_default();
    assert_eq!(r["started"], Value::Null, "it waits for the turn: {r}");
    let requests_before = mock.requests().len();
    forge.ok(&["approve", &id, "--all"]).await;
    let done = sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));

    let requests = mock.requests();
    assert_eq!(requests.len(), requests_before + 1, "one more request, in the same turn");
    let next = last_user_text(&requests[requests.len() - 1].body);
    let result_at = next.find("tool_result").unwrap_or(usize::MAX);
    let steer_at = next.find("also mention the weather").unwrap_or(0);
    assert!(steer_at > result_at, "the steer comes after the tool results: {next}");

    // History shows where it came in: after the tool result, before the answer.
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let roles: Vec<(String, String)> = history
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").into(), m["text"].as_str().unwrap_or("").chars().take(24).collect()))
        .collect();
    let at = roles.iter().position(|(_, t)| t.starts_with("also mention")).unwrap_or_else(|| panic!("{roles:?}"));
    assert_eq!(roles[at].0, "user");
    assert_eq!(roles[at - 1].0, "tool", "{roles:?}");
    assert_eq!(roles[at + 1].0, "assistant", "{roles:?}");
    // Replay shows it too.
    let events = forge.ok(&["--json", "attach", &id, "--from", "1", "--until-idle"]).await.stdout;
    assert!(events.contains("steer_queued") && events.contains("steer_applied"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_sent_while_the_answer_streams_waits_and_runs_next() {
    let (mock, forge) = started().await;
    let id = forge.new_session(&[]).await;
    let sender = forge
        .ctl_cmd(&["send", "-s", &id, "mock:tokens=150 mock:delay=20 talk"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    forge.wait_for_session(&id, "streaming", |s| s["state"] == "streaming" && s["last_seq"].as_u64() > Some(6)).await;
    forge.ok(&["steer", &id, "and then stop"]).await;
    let done = sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(done.status.success());
    assert!(String::from_utf8_lossy(&done.stdout).contains(&forge_tests::mock::token_text(150)), "the answer is whole");
    forge.wait_for_session(&id, "idle after the steer", |s| s["state"] == "idle" && s["queued_messages"] == 0).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the streamed answer was not cut: the steer came as the next message");
    assert!(!requests[0].body.to_string().contains("and then stop"));
    assert!(requests[1].body.to_string().contains("and then stop"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_boundary_keeps_the_steer() {
    let (mock, mut forge) = started().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &dir.path().display().to_string()]).await;
    let call = tool_call("write_file", &json!({"path": "a.txt", "content": "a\n"}));
    let sender =
        forge.ctl_cmd(&["send", "-s", &id, &format!("{call} write it")]).spawn().unwrap_or_else(|e| panic!("{e}"));
    pending_approval(&forge, &id).await;
    forge.ok(&["steer", &id, "kept across the crash"]).await;
    forge.kill9().await;
    drop(sender);
    forge.restart().await;
    // The turn that was waiting ends as the user decides; the steer then
    // runs as the next message.
    let ps = forge.ok(&["--json", "ps"]).await.json_lines();
    let state = ps.iter().find(|s| s["id"] == id.as_str()).map(|s| s["state"].clone()).unwrap_or_default();
    match state.as_str() {
        Some("tool_recovery") => drop(forge.ok(&["recover", &id, "--discard"]).await),
        Some("awaiting_approval") => drop(forge.ok(&["deny", &id]).await),
        _ => {}
    }
    forge.wait_for_session(&id, "idle with the steer run", |s| s["state"] == "idle" && s["queued_messages"] == 0).await;
    let history = forge.ok(&["history", &id]).await.stdout;
    assert!(history.contains("kept across the crash"), "{history}");
    assert!(
        mock.requests().last().is_some_and(|r| r.body.to_string().contains("kept across the crash")),
        "the model got it"
    );
}
