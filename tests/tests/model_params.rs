//! Model parameters as a user sets them and as each provider receives
//! them: temperature and top_p per session and per turn (clamped or left
//! out per provider, with a notice), a deprecated model answered by its
//! fallback, `max_total_tokens`, and usage Forge estimates when a local
//! server counts nothing.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, Recorded, Wire};
use serde_json::Value;

async fn mock() -> MockServer {
    MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"))
}

/// The last request the mock had in wire format `wire`.
fn last_of(mock: &MockServer, wire: Wire) -> Value {
    let all: Vec<Recorded> = mock.requests().into_iter().filter(|r| r.wire == wire).collect();
    all.last().map(|r| r.body.clone()).unwrap_or_else(|| panic!("no {wire:?} request"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temperature_reaches_each_provider_within_its_range_or_is_left_out_with_a_notice() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.write_config("[app]\ntop_p = 0.9\n");
    forge.start().await;

    // Anthropic: 0 to 1, and temperature alone on current models.
    let claude = forge.new_session(&["--provider", "claude", "--temperature", "1.5"]).await;
    let sent = forge.ok(&["send", "-s", &claude, "mock:tokens=2 hi"]).await;
    let body = last_of(&mock, Wire::Anthropic);
    assert_eq!((body["temperature"].as_f64(), body.get("top_p")), (Some(1.0), None), "{body}");
    assert!(sent.stderr.contains("temperature 1.5 is sent to claude-sonnet-4-6 as 1"), "{}", sent.stderr);
    assert!(sent.stderr.contains("top_p 0.9 is not sent"), "{}", sent.stderr);
    let again = forge.ok(&["send", "-s", &claude, "mock:tokens=2 again"]).await;
    assert!(!again.stderr.contains("is sent to"), "said once: {}", again.stderr);

    // OpenAI's Chat Completions (a local model): as asked, 0 to 2.
    let local = forge.new_session(&["--provider", "openai", "--model", "llama3.2", "--temperature", "1.7"]).await;
    forge.ok(&["send", "-s", &local, "mock:tokens=2 hi"]).await;
    let body = last_of(&mock, Wire::OpenAi);
    assert_eq!((body["temperature"].as_f64(), body["top_p"].as_f64()), (Some(1.7), Some(0.9)), "{body}");
    // The turn's own comes first, and only for that turn.
    forge.ok(&["send", "-s", &local, "--temperature", "0.1", "mock:tokens=2 cold"]).await;
    assert_eq!(last_of(&mock, Wire::OpenAi)["temperature"].as_f64(), Some(0.1));
    forge.ok(&["send", "-s", &local, "mock:tokens=2 warm again"]).await;
    assert_eq!(last_of(&mock, Wire::OpenAi)["temperature"].as_f64(), Some(1.7));

    // Gemini: generationConfig, 0 to 2.
    let gemini = forge.new_session(&["--provider", "gemini", "--temperature", "1.9"]).await;
    forge.ok(&["send", "-s", &gemini, "mock:tokens=2 hi"]).await;
    let body = last_of(&mock, Wire::Gemini);
    assert_eq!(body["generationConfig"]["temperature"].as_f64(), Some(1.9), "{body}");
    assert_eq!(body["generationConfig"]["topP"].as_f64(), Some(0.9), "{body}");

    // A session's own sampling is set later too, kept across a restart,
    // and reset to the configuration's.
    let shown = forge.ok(&["model", &local, "--temperature", "0.3"]).await.stdout;
    assert!(shown.contains("temperature 0.3"), "{shown}");
    forge.restart().await;
    let info = forge.ok(&["--json", "session", "show", &local]).await.json_lines();
    assert_eq!(info[0]["temperature"].as_f64(), Some(0.3), "{}", info[0]);
    forge.ok(&["send", "-s", &local, "mock:tokens=2 after restart"]).await;
    assert_eq!(last_of(&mock, Wire::OpenAi)["temperature"].as_f64(), Some(0.3));
    forge.ok(&["model", &local, "--reset-sampling"]).await;
    forge.ok(&["send", "-s", &local, "mock:tokens=2 reset"]).await;
    assert_eq!(last_of(&mock, Wire::OpenAi).get("temperature"), None);

    let bad = forge.ctl(&["session", "new", "--temperature", "7"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("temperature must be between 0 and 2"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_reasoning_models_get_no_temperature_on_the_responses_api() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.write_config("[openai]\nwire_api = \"responses\"\n");
    forge.start().await;
    let id = forge.new_session(&["--provider", "openai", "--model", "gpt-5.4", "--temperature", "0.5"]).await;
    let sent = forge.ok(&["send", "-s", &id, "mock:tokens=2 hi"]).await;
    let body = last_of(&mock, Wire::Responses);
    assert_eq!(body.get("temperature"), None, "{body}");
    assert!(sent.stderr.contains("reasoning model"), "{}", sent.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_model_is_answered_by_its_fallback_and_max_total_tokens_sizes_the_request() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.write_config(
        "[[models]]\nname = \"old-local\"\nprovider = \"openai\"\ndeprecated = true\nfallback = \"llama3.2\"\n\n\
         [[models]]\nname = \"retired-coder\"\nprovider = \"openai\"\nfallback = \"llama3.2\"\n\n\
         [[models]]\nname = \"llama3.2\"\nprovider = \"openai\"\ncontext_window = 8192\nmax_output_tokens = 4096\nmax_total_tokens = 3000\n",
    );
    forge.start().await;
    let listed = forge.ok(&["models", "--provider", "openai"]).await.stdout;
    assert!(
        listed.lines().any(|l| l.starts_with("old-local") && l.contains("deprecated: llama3.2 answers")),
        "{listed}"
    );

    let old = forge.new_session(&["--provider", "openai", "--model", "old-local"]).await;
    let sent = forge.ok(&["send", "-s", &old, "mock:tokens=2 hi"]).await;
    let body = last_of(&mock, Wire::OpenAi);
    assert_eq!(body["model"], "llama3.2", "{body}");
    assert!(sent.stderr.contains("old-local is deprecated: llama3.2 answers in its place"), "{}", sent.stderr);
    // Input plus output within max_total_tokens: what the input leaves.
    let max = body["max_tokens"].as_u64().unwrap_or(0);
    assert!(max > 0 && max < 3000, "max_tokens {max} fits 3000 with the input");

    // The provider does not know it: the fallback answers, the turn goes on.
    let gone = forge.new_session(&["--provider", "openai", "--model", "retired-coder"]).await;
    let sent = forge.ok(&["send", "-s", &gone, "mock:tokens=3 hi"]).await;
    assert_eq!(sent.stdout.trim(), "w0 w1 w2", "{}", sent.stderr);
    assert!(sent.stderr.contains("does not know retired-coder"), "{}", sent.stderr);
    let models: Vec<String> = mock
        .requests()
        .iter()
        .filter(|r| r.wire == Wire::OpenAi)
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(models.ends_with(&["retired-coder".to_string(), "llama3.2".to_string()]), "{models:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_that_counts_nothing_is_counted_by_estimate_and_says_so() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--provider", "openai", "--model", "smollm2"]).await;
    forge.ok(&["send", "-s", &id, "mock:no_usage mock:tokens=20 count me"]).await;
    let report = forge.ok(&["--json", "usage"]).await.json_lines();
    let total = &report[0]["total"];
    assert_eq!((total["responses"].as_u64(), total["estimated"].as_u64()), (Some(1), Some(1)), "{total}");
    assert!(total["tokens"]["output_tokens"].as_u64().is_some_and(|n| n > 0), "{total}");
    let text = forge.ok(&["usage"]).await.stdout;
    assert!(text.contains("~") && text.contains("Forge's own estimate"), "{text}");
    let shown = forge.ok(&["session", "show", &id]).await.stdout;
    assert!(shown.contains("estimated by Forge"), "{shown}");
}
