//! The provider's own web search (`[tools.web_search]`): off unless
//! enabled; enabled, Claude's requests offer it with the configured
//! domains and limit, the search is shown as it happens, and the sources
//! the answer cites are kept with its node and shown by every client.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn search_tool(mock: &MockServer) -> Option<Value> {
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let mut tool = body["tools"].as_array()?.iter().find(|t| t["type"] == "web_search_20250305").cloned()?;
    // (The last tool carries the cache breakpoint, which the API allows.)
    tool.as_object_mut()?.remove("cache_control");
    Some(tool)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_enabled_claude_session_searches_and_cites_its_sources() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[tools.web_search]\nenabled = true\nmax_uses = 3\nallowed_domains = [\"example.com\"]\n");
    forge.start().await;
    let out = forge.ok(&["send", "--name", "web", "mock:search what is forge?"]).await;
    assert!(out.stderr.contains("searching the web: forge daemon"), "{}", out.stderr);
    assert!(out.stdout.ends_with("\nSources:\n  [1] Forge mock result https://example.com/forge\n"), "{}", out.stdout);
    assert_eq!(
        search_tool(&mock),
        Some(
            json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["example.com"]})
        )
    );

    // Kept with the answer's node: history shows them, and counts the search.
    let history = forge.ok(&["history", "web"]).await.stdout;
    assert!(history.contains("  [1] Forge mock result https://example.com/forge"), "{history}");
    let json = forge.ok(&["--json", "history", "web"]).await.json_lines();
    let answer = json.iter().rfind(|m| m["role"] == "assistant").cloned().unwrap_or(Value::Null);
    assert_eq!(answer["citations"][0]["url"], "https://example.com/forge", "{answer}");
    assert_eq!(answer["citations"][0]["cited_text"], "Forge is a local coding-agent daemon.");
    assert_eq!(answer["usage"]["web_search_requests"], 1, "{answer}");

    // The events every client follows say so too.
    let events = forge.ok(&["--json", "attach", "web", "--from", "1", "--until-idle"]).await.json_lines();
    assert!(events.iter().any(|e| e["kind"] == "web_search" && e["query"] == "forge daemon"), "{events:?}");
    assert!(events.iter().any(|e| e["kind"] == "citation" && e["title"] == "Forge mock result"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_is_off_by_default_and_where_the_policy_refuses_it() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let out = forge.ok(&["send", "mock:search what is forge?"]).await;
    assert!(search_tool(&mock).is_none(), "not offered unless enabled");
    assert!(!out.stdout.contains("Sources:"), "{}", out.stdout);

    let mut denied = Forge::new(&mock);
    denied.write_config("[tools.web_search]\nenabled = true\n[tools.approval]\ndenylist = [\"web_search\"]\n");
    denied.start().await;
    denied.ok(&["send", "mock:search hi"]).await;
    assert!(search_tool(&mock).is_none(), "the denylist keeps it off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_on_the_responses_api_searches_and_cites_too() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(
        "[openai]\nwire_api = \"responses\"\n[tools.web_search]\nenabled = true\nallowed_domains = [\"example.com\"]\n",
    );
    forge.start().await;
    let out = forge.ok(&["send", "--provider", "openai", "mock:search what is forge?"]).await;
    assert!(out.stderr.contains("searching the web: forge daemon"), "{}", out.stderr);
    assert!(out.stdout.contains("\nSources:\n  [1] Forge mock result https://example.com/forge\n"), "{}", out.stdout);
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let tool = body["tools"].as_array().and_then(|t| t.iter().find(|t| t["type"] == "web_search").cloned());
    assert_eq!(tool, Some(json!({"type": "web_search", "filters": {"allowed_domains": ["example.com"]}})), "{body}");
    // Chat Completions has no such tool: not offered there.
    let mut chat = Forge::new(&mock);
    chat.write_config("[tools.web_search]\nenabled = true\n");
    chat.start().await;
    chat.ok(&["send", "--provider", "openai", "mock:search hi"]).await;
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    assert!(!body.to_string().contains("web_search"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_grounds_its_answer_in_google_search_and_sends_the_search_back() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[tools.web_search]\nenabled = true\n");
    forge.start().await;
    let out = forge.ok(&["send", "--name", "g", "--provider", "gemini", "mock:search what is forge?"]).await;
    assert!(out.stderr.contains("searching the web: forge daemon"), "{}\n{}", out.stderr, mock.last_turn_request());
    assert!(out.stdout.contains("\nSources:\n  [1] Forge mock result https://example.com/forge\n"), "{}", out.stdout);
    // Offered in the prefix Gemini caches (system, tools, tool config).
    let prefix = mock.requests().into_iter().find(|r| r.path == "/v1beta/cachedContents").map(|r| r.body);
    let prefix = prefix.unwrap_or(Value::Null);
    let tools = prefix["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.contains(&json!({"googleSearch": {}})), "{prefix}");
    assert_eq!(prefix["toolConfig"]["includeServerSideToolInvocations"], true);
    // The next turn sends the search the API ran back with the answer.
    forge.ok(&["send", "-s", "g", "and then?"]).await;
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let parts = body["contents"][1]["parts"].as_array().cloned().unwrap_or_default();
    assert!(parts.iter().any(|p| p["toolCall"]["id"] == "mock-search"), "{body}");
    let history = forge.ok(&["--json", "history", "g"]).await.json_lines();
    let answer = history.iter().find(|m| m["role"] == "assistant").cloned().unwrap_or(Value::Null);
    assert_eq!(answer["citations"][0]["url"], "https://example.com/forge", "{answer}");
    assert_eq!(answer["usage"]["web_search_requests"], 1, "{answer}");

    // A domain list Gemini cannot honour keeps the search off there.
    let mut limited = Forge::new(&mock);
    limited.write_config("[tools.web_search]\nenabled = true\nallowed_domains = [\"docs.rs\"]\n");
    limited.start().await;
    limited.ok(&["send", "--provider", "gemini", "mock:search hi"]).await;
    let prefixes: Vec<Value> =
        mock.requests().into_iter().filter(|r| r.path == "/v1beta/cachedContents").map(|r| r.body).collect();
    assert!(prefixes.last().is_some_and(|p| !p.to_string().contains("googleSearch")), "{prefixes:?}");
}
