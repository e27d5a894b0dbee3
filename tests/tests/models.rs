//! The model catalog as a user meets it: `forgectl models`, `[[models]]`
//! for a local model, and requests sized to the model.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_local_model_is_listed_and_its_limits_size_the_request() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(
        "[[models]]\nname = \"llama3.2\"\nprovider = \"openai\"\ncontext_window = 8192\nmax_output_tokens = 1024\n",
    );
    forge.start().await;

    let listed = forge.ok(&["models", "--provider", "openai"]).await.stdout;
    let line = listed.lines().find(|l| l.starts_with("llama3.2")).unwrap_or_default();
    assert!(line.contains("8192") && line.contains("1024") && line.contains("config"), "{listed}");
    assert!(!listed.contains("claude"), "only OpenAI's: {listed}");
    let all = forge.ok(&["--json", "models"]).await.json_lines();
    assert!(all.iter().any(|m| m["name"] == "claude-sonnet-4-6" && m["context_window"].as_u64().is_some()));
    let sonnet = all.iter().find(|m| m["name"] == "claude-sonnet-4-6").cloned().unwrap_or_default();
    assert_eq!(sonnet["price"]["input"], 3.0, "list prices: {sonnet}");
    assert_eq!(sonnet["price"]["output"], 15.0);
    let claude = forge.ok(&["models", "--provider", "claude"]).await.stdout;
    let line = claude.lines().find(|l| l.starts_with("claude-sonnet-4-6 ")).unwrap_or_default();
    assert!(line.contains("3.00") && line.contains("15.00"), "{claude}");
    assert!(line_of(&listed, "llama3.2").contains(" - "), "no price known: {listed}");

    let id = forge.new_session(&["--provider", "openai", "--model", "llama3.2"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2 hi"]).await;
    let body = &mock.requests()[0].body;
    assert_eq!(body["max_tokens"], 1024, "the model's limit, not the 8192 default: {body}");
    let ctx = forge.ok(&["--json", "context", &id]).await.json_lines();
    assert_eq!(ctx[0]["context_window"], 8192);

    let bad = forge.ctl(&["models", "--provider", "acme"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("unknown provider"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_models_entry_stops_the_daemon_with_its_place() {
    let forge = Forge::bare();
    forge.write_config("[[models]]\nname = \"x\"\nprovider = \"acme\"\ncontext_window = 10\nmax_output_tokens = 5\n");
    let out = forge.spawn_daemon().wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml") && err.contains("[[models]] entry 1") && err.contains("acme"), "{err}");
}

fn line_of<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines().find(|l| l.starts_with(start)).unwrap_or_default()
}
