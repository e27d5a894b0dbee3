//! The model's plan (`update_plan`) through the real daemon: journaled as
//! `plan_updated`, shown by `forgectl plan`, kept across a restart.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_the_model_keeps_is_shown_and_survives_a_restart() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&[]).await;
    let none = forge.ok(&["plan", &id]).await;
    assert!(none.stderr.contains("has no plan"), "{}", none.stderr);

    let plan = json!({"plan": [
        {"step": "read the parser", "status": "completed"},
        {"step": "fix the off-by-one", "status": "in_progress"},
        {"step": "add a test", "status": "pending"}
    ], "explanation": "found the bug"});
    // No approval: the plan changes nothing on disk.
    forge.ok(&["send", "-s", &id, &format!("{} go", tool_call("update_plan", &plan))]).await;
    let shown = forge.ok(&["plan", &id]).await.stdout;
    assert_eq!(shown, "[x] read the parser\n[>] fix the off-by-one\n[ ] add a test\n(found the bug)\n");

    forge.restart().await;
    let p: Value = serde_json::from_str(forge.ok(&["--json", "plan", &id]).await.stdout.trim()).unwrap_or_default();
    assert_eq!(p["steps"][1]["status"], "in_progress", "{p}");
    assert_eq!(p["note"], "found the bug");

    // A plan the tool refuses (two steps in progress) changes nothing.
    let bad = json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]});
    forge.ok(&["send", "-s", &id, &format!("{} again", tool_call("update_plan", &bad))]).await;
    let p: Value = serde_json::from_str(forge.ok(&["--json", "plan", &id]).await.stdout.trim()).unwrap_or_default();
    assert_eq!(p["steps"].as_array().map(Vec::len), Some(3), "{p}");
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("at most one step is in_progress"), "the model is told why");
}
