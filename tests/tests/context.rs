//! Context budgets: a conversation that outgrows the model's window is
//! refused before it is sent when Context Infinity is off, with an error
//! that says what to do; `forgectl context` shows the budget.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};

const TINY: &str =
    "[[models]]\nname = \"tiny\"\nprovider = \"claude\"\ncontext_window = 8000\nmax_output_tokens = 500\n";

/// Sends 1,000-token turns until one fails; returns how many succeeded
/// and the failure's JSON error.
async fn fill(forge: &Forge, id: &str) -> (usize, serde_json::Value, String) {
    for done in 0..12 {
        let r = forge.ctl(&["--json", "send", "-s", id, "mock:tokens=1000 more"]).await;
        if r.code != 0 {
            let finished = r.json_lines().into_iter().find(|e| e["kind"] == "turn_finished").unwrap_or_default();
            return (done, finished, r.stderr);
        }
    }
    panic!("twelve 1,000-token turns fit an 8,000-token window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_infinity_off_a_conversation_too_long_for_the_window_is_refused_before_it_is_sent() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(&format!("[context]\ninfinity = false\n{TINY}"));
    forge.start().await;
    let id = forge.new_session(&["--model", "tiny"]).await;

    let ctx = forge.ok(&["context", &id]).await.stdout;
    assert!(ctx.contains("of the 7500 the model takes") && ctx.contains("500 kept for the answer"), "{ctx}");
    assert!(ctx.contains("Context Infinity off"), "{ctx}");

    let (done, finished, stderr) = fill(&forge, &id).await;
    assert!(done >= 2, "some turns fit first: {done}");
    assert_eq!(finished["error_kind"], "context_too_long", "{finished}");
    let message = finished["error"].as_str().unwrap_or_default();
    for what in ["/clear", "[context] infinity", "FORGE_CONTEXT_INFINITY"] {
        assert!(message.contains(what), "the error names {what}: {message}");
    }
    assert!(stderr.contains("Context Infinity is off"), "{stderr}");
    assert_eq!(mock.requests().len(), done, "the refused request was never sent");
    let ctx = forge.ok(&["context", &id]).await.stdout;
    assert!(ctx.contains("input tokens, as the provider counted them"), "{ctx}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_decides_infinity_when_the_file_does_not() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(TINY);
    forge.set_env("FORGE_CONTEXT_INFINITY", "0");
    forge.start().await;
    let id = forge.new_session(&["--model", "tiny"]).await;
    let (_, finished, _) = fill(&forge, &id).await;
    assert_eq!(finished["error_kind"], "context_too_long");

    // The file wins over the environment.
    forge.terminate().await;
    forge.write_config(&format!("[context]\ninfinity = true\n{TINY}"));
    forge.start().await;
    let ctx = forge.ok(&["context", &id]).await.stdout;
    assert!(ctx.contains("Context Infinity on"), "{ctx}");
}
