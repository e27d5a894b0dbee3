//! `forgectl export` / `forgectl import`: a whole session, tree included,
//! from one daemon to another and back out exactly.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_session_imports_elsewhere_and_exports_the_same_lines() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut here = Forge::new(&mock);
    here.start().await;
    let id = here.new_session(&["--name", "trip"]).await;
    for q in ["first question mock:tokens=5", "second question mock:tokens=5", "third mock:tokens=3"] {
        here.ok(&["send", "-s", &id, q]).await;
    }
    let h = here.ok(&["--json", "history", &id]).await.json_lines();
    let second = h[2]["id"].as_str().unwrap_or_default().to_string();
    here.ok(&["edit", &id, &second, "second, rephrased mock:tokens=4"]).await;
    here.ok(&["bookmark", &id, "start", h[0]["id"].as_str().unwrap_or_default()]).await;
    here.ok(&["summarize", &id]).await;
    here.ok(&["attach", &id, "--until-idle"]).await;

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("trip.jsonl");
    here.ok(&["export", &id, "-o", &file.display().to_string()]).await;
    let exported = std::fs::read_to_string(&file).unwrap_or_default();
    let first: serde_json::Value = serde_json::from_str(exported.lines().next().unwrap_or("{}")).unwrap_or_default();
    assert_eq!((first["type"].as_str(), first["format"].as_str()), (Some("session"), Some("forge-session")));
    let again = here.ctl(&["import", &file.display().to_string()]).await;
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("here already"), "{}", again.stderr);

    let mut there = Forge::new(&mock);
    there.start().await;
    let imported = there.ok(&["--json", "import", &file.display().to_string()]).await.json_lines();
    assert_eq!(imported[0]["id"].as_str(), Some(id.as_str()));
    assert_eq!(imported[0]["name"].as_str(), Some("trip"));
    let out = there.ok(&["export", "trip"]).await.stdout;
    assert_eq!(out, exported, "export, import, export: the same lines");
    assert_eq!(
        there.ok(&["--json", "history", "trip"]).await.stdout,
        here.ok(&["--json", "history", &id]).await.stdout,
        "the same conversation"
    );
    assert_eq!(there.ok(&["tree", "trip"]).await.stdout, here.ok(&["tree", &id]).await.stdout, "the same tree");
    let found = there.ok(&["recall", "trip", "question"]).await.stdout;
    assert!(found.contains("first question"), "{found}");
    let replay = there.ok(&["--json", "attach", "trip", "--until-idle"]).await.json_lines();
    assert!(replay.iter().any(|e| e["kind"] == "summarization_done"), "the event log came along");
    // The imported session goes on.
    there.ok(&["send", "-s", "trip", "fourth mock:tokens=2"]).await;

    let md = here.ok(&["export", &id, "--format", "markdown"]).await.stdout;
    assert!(md.starts_with("# trip") && md.contains("## You\n\nsecond, rephrased"), "{md}");
    let bad = there.ctl(&["import", "/dev/null"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("not a Forge session export"), "{}", bad.stderr);
}

/// A line too large for one message to the daemon is refused before
/// anything is sent, saying which line and why (it was "connection lost").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_line_too_large_is_refused_with_its_size() {
    let mock = forge_tests::mock::MockServer::start(forge_tests::mock::MockOptions::default())
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = forge_tests::harness::Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("big.jsonl");
    let line = serde_json::json!({"type": "event", "text": "x".repeat(9 * 1024 * 1024)});
    std::fs::write(&file, format!("\n{line}\n")).unwrap_or_else(|e| panic!("{e}"));
    let r = forge.ctl(&["import", &file.display().to_string()]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("line 2 is 9.0 MiB") && r.stderr.contains("8 MiB"), "{}", r.stderr);
}
