//! Every provider failure reaches the user as a clear error, and the
//! session stays usable.

use forge_tests::harness::{Forge, walk};
use forge_tests::mock::{MockOptions, MockServer, token_text};

/// A daemon that reports the first failure (no retries: each case is
/// about what the user is told).
async fn setup() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[app]\nmax_retries = 0\n");
    forge.start().await;
    (mock, forge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_provider_is_retried_and_every_client_sees_the_retries() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    for provider in ["claude", "openai"] {
        let id = forge.new_session(&["--provider", provider]).await;
        let msg = format!("mock:status=529 mock:fail=2 mock:retry_after=0 mock:tokens=4 {provider}");
        let r = forge.ok(&["send", "-s", &id, &msg]).await;
        assert_eq!(r.stdout.trim_end(), token_text(4).trim_end(), "{provider}: the answer after two overloads");
        assert!(r.stderr.contains("retrying in 0.0s (attempt 2/5): overloaded"), "{provider}: {}", r.stderr);
        assert!(r.stderr.contains("(attempt 3/5)"), "{provider}: {}", r.stderr);
        let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
        let retries: Vec<_> = events.iter().filter(|e| e["kind"] == "retrying").collect();
        assert_eq!(retries.len(), 2, "{provider}: {events:?}");
        assert!(retries[0]["error"].as_str().unwrap_or_default().contains("Overloaded"), "{:?}", retries[0]);
        let finished = events.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
        assert_eq!(finished["status"], "complete", "{provider}: {finished}");
        let h = forge.ok(&["--json", "history", &id]).await.json_lines();
        assert_eq!(h.len(), 2, "{provider}: one question, one answer: {h:?}");
    }
    let attempts = mock.requests().len();
    assert_eq!(attempts, 6, "three attempts per provider");
}

/// (directive, expected error kind, words the message must contain)
const CASES: &[(&str, &str, &str)] = &[
    ("mock:status=401", "provider_auth", "authentication failed"),
    ("mock:status=429", "provider_rate_limited", "rate-limited"),
    ("mock:status=500", "provider_unavailable", "unavailable"),
    ("mock:status=529", "provider_unavailable", "Overloaded"),
    ("mock:status=400", "provider_error", "rejected the request"),
    ("mock:tokens=20 mock:midstream_error=5", "provider_unavailable", "mid-stream"),
    ("mock:tokens=20 mock:drop=5", "provider_error", "broke off"),
    ("mock:tokens=20 mock:malformed=5", "provider_error", "malformed"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_injected_failure_is_reported_and_the_session_goes_on() {
    let (_mock, forge) = setup().await;
    for provider in ["claude", "openai", "gemini"] {
        let id = forge.new_session(&["--provider", provider]).await;
        for (directive, kind, words) in CASES {
            let r = forge.ctl(&["send", "-s", &id, directive]).await;
            assert_eq!(r.code, 4, "{provider} {directive}: exit 4 for a failed turn; stderr: {}", r.stderr);
            assert!(
                r.stderr.to_lowercase().contains(&words.to_lowercase()),
                "{provider} {directive}: stderr should mention {words:?}: {}",
                r.stderr
            );
            assert!(!r.stderr.contains(").."), "{provider} {directive}: one full stop is enough: {}", r.stderr);
            let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
            let finished = events.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
            assert_eq!(finished["status"], "error");
            assert_eq!(finished["error_kind"], *kind, "{provider} {directive}: {finished}");
            // The session still works.
            let ok = forge.ok(&["send", "-s", &id, "mock:tokens=2 fine"]).await;
            assert_eq!(ok.stdout.trim_end(), token_text(2).trim_end());
        }
        // Partial text before a mid-stream failure is kept, marked errored.
        let h = forge.ok(&["--json", "history", &id]).await.json_lines();
        let errored: Vec<_> = h.iter().filter(|m| m["status"] == "error").collect();
        assert!(errored.iter().any(|m| m["text"] == token_text(5)), "{provider}: {errored:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_shows_in_errors_or_logs() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.set_env("ANTHROPIC_API_KEY", "sk-ant-supersecret-0123456789");
    forge.start().await;
    let r = forge.ctl(&["send", "mock:status=401"]).await;
    assert_eq!(r.code, 4);
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "the error says which key to set: {}", r.stderr);
    forge.terminate().await;
    let mut everything = r.stderr.clone();
    for entry in walk(forge.home.path()).into_iter().filter(|p| p.is_file()) {
        everything.push_str(&String::from_utf8_lossy(&std::fs::read(entry).unwrap_or_default()));
    }
    assert!(!everything.contains("supersecret"), "the key leaked into output, logs or the store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_send_says_which_variable_to_set() {
    let mut forge = Forge::bare();
    forge.start().await;
    let r = forge.ctl(&["--json", "send", "hello"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);
    let err = r.json_lines().pop().unwrap_or_default();
    assert_eq!(err["error"]["kind"], "provider_auth");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_is_a_clear_error() {
    let mut forge = Forge::bare();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(9);
    forge.set_env("OPENAI_BASE_URL", &format!("http://127.0.0.1:{port}/v1"));
    // One retry (after about 2 s), not the default four.
    forge.write_config("[app]\nmax_retries = 1\n");
    forge.start().await;
    let r = forge.ctl(&["send", "--provider", "openai", "hello"]).await;
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("cannot reach OpenAI"), "{}", r.stderr);
    assert!(r.stderr.contains("(attempt 2/2): unreachable"), "the retry is shown: {}", r.stderr);
    assert!(r.stderr.contains("gave up after 2 attempts"), "{}", r.stderr);
}
