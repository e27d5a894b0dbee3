//! Every wire format through the real daemon against the mock: the exact
//! answer streams, thinking is kept apart, and what a provider needs to
//! continue (signatures, encrypted reasoning) goes back with tool results.

use forge_proto::usd;
use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, Recorded, Wire, token_text};
use serde_json::Value;

async fn start(mock: &MockServer, config: &str) -> Forge {
    let mut forge = Forge::new(mock);
    forge.write_config(config);
    forge.start().await;
    forge
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("src/file0.rs"), "fn main() {}\n").unwrap_or_else(|e| panic!("{e}"));
    dir
}

fn last_of(mock: &MockServer, wire: Wire) -> Recorded {
    mock.requests().into_iter().rev().find(|r| r.wire == wire).unwrap_or_else(|| panic!("no {wire:?} request"))
}

/// A thinking turn with a tool call: the answer streams exactly, and the
/// request that carries the tool result is returned to `check`.
async fn thinking_tool_turn(
    forge: &Forge,
    mock: &MockServer,
    provider: &str,
    cwd: &str,
    wire: Wire,
) -> (String, Value) {
    let id = forge.new_session(&["--provider", provider, "--cwd", cwd]).await;
    let plain = forge.ok(&["send", "-s", &id, "mock:tokens=40 hello"]).await;
    assert_eq!(plain.stdout, format!("{}\n", token_text(40)), "{provider}: the exact text");

    let r =
        forge.ok(&["send", "-s", &id, "--thinking", "mock:thinking=2 mock:tokens=3 mock:tool=read_file look"]).await;
    assert!(r.stdout.starts_with(&token_text(3)), "{provider}: {}", r.stdout);
    assert!(r.stdout.contains("The mock received 1 tool result(s): fn main() {}"), "{provider}: {}", r.stdout);
    assert!(r.stderr.contains("thought0 thought1"), "{provider}: thinking on stderr: {}", r.stderr);
    assert!(!r.stdout.contains("thought0"), "{provider}: thinking is not in the answer");
    (id, last_of(mock, wire).body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wire_format_streams_exactly_and_continues_tool_calls_with_what_it_needs() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = start(
        &mock,
        "[anthropic]\nthinking_enabled = true\nthinking_budget_tokens = 2048\n[openai]\nwire_api = \"responses\"\nreasoning_effort = \"low\"\n",
    )
    .await;
    let dir = project();
    let cwd = dir.path().display().to_string();

    // Claude with thinking: the signed block goes back first, unmodified.
    let (claude, body) = thinking_tool_turn(&forge, &mock, "claude", &cwd, Wire::Anthropic).await;
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_eq!(body["thinking"]["budget_tokens"], 2048);
    let answer = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(answer["content"][0]["type"], "thinking", "{answer}");
    assert_eq!(answer["content"][0]["thinking"], "thought0 thought1 ");
    assert_eq!(answer["content"][0]["signature"], "EqQBCgIYAhIM-mock-signature");
    let breakpoints = body.to_string().matches("cache_control").count();
    assert!((1..=4).contains(&breakpoints), "cache breakpoints: {breakpoints}");
    assert!(body["system"][0]["cache_control"].is_object(), "the system prompt is cached");
    // A redacted block goes back too, in its place after the thinking.
    forge.ok(&["send", "-s", &claude, "mock:thinking=1 mock:redacted mock:tool=read_file again"]).await;
    let body = last_of(&mock, Wire::Anthropic).body;
    let answer = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(answer["content"][1]["type"], "redacted_thinking", "{answer}");
    assert_eq!(answer["content"][1]["data"], forge_tests::mock::anthropic::REDACTED);
    // The cache was written once, then read.
    let events = forge.ok(&["--json", "attach", &claude, "--until-idle"]).await.json_lines();
    let usage: Vec<&Value> = events.iter().filter(|e| e["kind"] == "usage").map(|e| &e["usage"]).collect();
    assert_eq!(usage[0]["cache_write_tokens"], 2000, "{usage:?}");
    assert!(usage[1..].iter().all(|u| u["cache_read_tokens"] == 2000), "{usage:?}");

    // OpenAI Responses: stateless, encrypted reasoning carried back.
    let (_, body) = thinking_tool_turn(&forge, &mock, "openai", &cwd, Wire::Responses).await;
    assert_eq!(body["store"], false);
    assert_eq!(body["reasoning"]["effort"], "low");
    assert!(body["instructions"].as_str().is_some_and(|s| s.contains("Forge")), "the system prompt");
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let reasoning = input.iter().find(|i| i["type"] == "reasoning").cloned().unwrap_or_default();
    assert_eq!(reasoning["encrypted_content"], "gAAAA-mock-encrypted-reasoning", "{body}");
    let kinds: Vec<&str> = input.iter().filter_map(|i| i["type"].as_str()).collect();
    assert!(kinds.ends_with(&["reasoning", "message", "function_call", "function_call_output"]), "{kinds:?}");

    // Gemini: the call's thought signature goes back on the call.
    let (_, body) = thinking_tool_turn(&forge, &mock, "gemini", &cwd, Wire::Gemini).await;
    assert!(last_of(&mock, Wire::Gemini).path.contains("/v1beta/models/gemini-"), "the model is in the path");
    let model_turn = body["contents"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["role"] == "model"))
        .cloned()
        .unwrap_or_default();
    let call = model_turn["parts"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p.get("functionCall").is_some()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(call["thoughtSignature"], forge_tests::mock::gemini::CALL_SIGNATURE, "{model_turn}");
    assert_eq!(
        body["contents"].as_array().and_then(|c| c.last()).map(|c| c["parts"][0]["functionResponse"]["name"].clone()),
        Some(Value::from("read_file"))
    );
    // The stable prefix (system instruction, tools) is cached once and
    // named by every request instead of being sent again.
    assert!(body.get("systemInstruction").is_none() && body.get("tools").is_none(), "{body}");
    assert_eq!(body["cachedContent"], "cachedContents/mock-1");
    let creates: Vec<Recorded> = mock.requests().into_iter().filter(|r| r.path == "/v1beta/cachedContents").collect();
    assert_eq!(creates.len(), 1, "one cache for every request of the model");
    let cache = &creates[0].body;
    assert!(cache["systemInstruction"]["parts"][0]["text"].as_str().is_some_and(|s| s.contains("Forge")), "{cache}");
    assert!(cache["tools"][0]["functionDeclarations"].as_array().is_some_and(|d| !d.is_empty()));
    assert_eq!(cache["model"], "models/gemini-3.5-flash");
    assert_eq!(cache["ttl"], "3600s");
    assert!(creates[0].headers.iter().any(|(k, v)| k == "x-goog-api-key" && v == "mock-key-gemini"));
    let gemini_session = forge.ok(&["--json", "ps"]).await.json_lines().into_iter().find(|s| s["provider"] == "gemini");
    let gid = gemini_session.and_then(|s| s["id"].as_str().map(str::to_string)).unwrap_or_default();
    let events = forge.ok(&["--json", "attach", &gid, "--until-idle"]).await.json_lines();
    let cached: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "usage")
        .map(|e| e["usage"]["cache_read_tokens"].as_u64().unwrap_or(0))
        .collect();
    assert!(cached.len() >= 2 && cached.iter().all(|c| *c == 2000), "every response read the cache: {cached:?}");

    // The thinking of every provider is journaled as thinking, and the
    // signatures stay in history (not shown as text).
    let sessions = forge.ok(&["--json", "ps"]).await.json_lines();
    assert!(sessions.len() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_servers_get_chat_completions_by_default() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    // OPENAI_BASE_URL points at the mock: not OpenAI's own endpoint.
    let forge = start(&mock, "").await;
    let r = forge.ok(&["send", "--provider", "openai", "mock:tokens=25 hi"]).await;
    assert_eq!(r.stdout, format!("{}\n", token_text(25)));
    let req = last_of(&mock, Wire::OpenAi);
    assert_eq!(req.path, "/v1/chat/completions");
    assert!(mock.requests().iter().all(|r| r.wire != Wire::Responses));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_gemini_key_says_which_key_to_set() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.set_env("GEMINI_API_KEY", "bad-key");
    forge.start().await;
    let r = forge.ctl(&["send", "--provider", "gemini", "hello"]).await;
    assert_ne!(r.code, 0, "a refused key fails the turn");
    assert!(r.stderr.contains("GEMINI_API_KEY"), "{}", r.stderr);
    assert!(!r.stderr.contains("bad-key"), "the key is never shown: {}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_shows_tokens_and_cost_per_session_directory_and_model() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = start(&mock, "").await;
    let dir = project();
    let cwd = dir.path().display().to_string();
    // The default Claude model has a list price ($3 in, $15 out, $3.75 to
    // write the cache, $0.30 to read it): the first request writes 2000
    // tokens of cache, the second reads them; 40 out each.
    let id = forge.new_session(&["--name", "priced", "--cwd", &cwd]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=40 one"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=40 two"]).await;
    // A local model without a price.
    let local = forge.new_session(&["--provider", "openai", "--model", "llama-local"]).await;
    forge.ok(&["send", "-s", &local, "mock:tokens=5 hi"]).await;

    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let usage: Vec<&Value> = events.iter().filter(|e| e["kind"] == "usage").collect();
    assert_eq!(usage.len(), 2, "one usage event per response");
    assert_eq!(usage[0]["usage"]["output_tokens"], 40);
    // The cost is the list price of what the provider counted.
    let priced = |u: &Value| {
        let n = |k: &str| u[k].as_u64().unwrap_or(0) as f64;
        (n("input_tokens") * 3.0
            + n("cache_write_tokens") * 3.75
            + n("cache_read_tokens") * 0.3
            + n("output_tokens") * 15.0)
            / 1e6
    };
    let mut expected = 0.0;
    for (i, u) in usage.iter().enumerate() {
        let cost = u["cost_usd"].as_f64().unwrap_or_default();
        assert!((cost - priced(&u["usage"])).abs() < 1e-12, "{u}");
        expected += cost;
        assert_eq!(u["session"]["responses"], i as u64 + 1, "the session's totals so far");
    }
    assert_eq!(usage[0]["usage"]["cache_write_tokens"], 2000);
    assert_eq!(usage[1]["usage"]["cache_read_tokens"], 2000);
    let session_cost = usage[1]["session"]["cost_usd"].as_f64().unwrap_or_default();
    assert!((session_cost - expected).abs() < 1e-12);

    let report = forge.ok(&["--json", "usage"]).await.json_lines();
    let r = &report[0];
    assert_eq!(r["total"]["responses"], 3);
    assert_eq!(r["total"]["unpriced"], 1, "the local model has no price");
    assert!((r["total"]["cost_usd"].as_f64().unwrap_or_default() - expected).abs() < 1e-12, "{r}");
    assert_eq!(r["sessions"][0]["key"], id.as_str(), "the most expensive first");
    assert!(r["models"].as_array().is_some_and(|m| m.iter().any(|m| m["key"] == "openai/llama-local")), "{r}");
    assert!(r["cwds"].as_array().is_some_and(|c| c.iter().any(|c| c["key"] == cwd.as_str())), "{r}");

    let text = forge.ok(&["usage"]).await.stdout;
    assert!(text.contains(&format!("total: {} + unpriced", usd(expected))), "{text}");
    assert!(text.contains("claude/claude-sonnet-4-6"), "{text}");
    let one = forge.ok(&["--json", "usage", "priced", "--since", "1h"]).await.json_lines();
    assert_eq!(one[0]["total"]["responses"], 2, "one session, recent");
    let future = forge.ok(&["--json", "usage", "--since", "2999-01-01"]).await.json_lines();
    assert_eq!(future[0]["total"]["responses"], 0);
    let bad = forge.ctl(&["usage", "--since", "yesterday"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("YYYY-MM-DD"), "{}", bad.stderr);

    let show = forge.ok(&["session", "show", "priced"]).await.stdout;
    assert!(show.contains("(2000 from cache, 2000 written to it), 80 out"), "{show}");
    assert!(show.contains(&format!("cost:      {} estimated", usd(expected))), "{show}");
}

/// The request's conversation as text, for looking for ids and results.
fn body_text(mock: &MockServer, wire: Wire) -> String {
    last_of(mock, wire).body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_with_tool_calls_moves_between_every_provider() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let thinking = "[anthropic]\nthinking_enabled = true\nthinking_budget_tokens = 1024\n";
    let mut forge = start(&mock, &format!("{thinking}[openai]\nwire_api = \"responses\"\n")).await;
    let dir = project();
    let cwd = dir.path().display().to_string();
    let id = forge.new_session(&["--name", "hop", "--cwd", &cwd]).await;
    async fn turn(forge: &Forge, id: &str, text: &str) {
        let r = forge.ok(&["send", "-s", id, text]).await;
        assert!(r.stdout.contains("The mock received 1 tool result(s): fn main() {}"), "{text}: {}", r.stdout);
    }

    // Claude, thinking: a signed block and a call.
    turn(&forge, &id, "mock:thinking=2 mock:tool=read_file one").await;

    // OpenAI Responses gets Claude's call and result as its own items,
    // and none of Claude's thinking.
    let shown = forge.ok(&["model", "hop", "--provider", "openai"]).await.stdout;
    assert!(shown.contains("openai/gpt-5.4-mini"), "{shown}");
    turn(&forge, &id, "mock:thinking=1 mock:tool=read_file two").await;
    let body = last_of(&mock, Wire::Responses).body;
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let outputs = input.iter().filter(|i| i["type"] == "function_call_output").count();
    assert_eq!(outputs, 2, "Claude's result and its own: {body}");
    assert!(!body.to_string().contains("EqQBCgIYAhIM-mock-signature"), "Claude's signature stays out");

    // Chat Completions (the same daemon restarted with wire_api = chat).
    forge.write_config(&format!("{thinking}[openai]\nwire_api = \"chat\"\n"));
    forge.restart().await;
    turn(&forge, &id, "mock:tool=read_file three").await;
    let chat = last_of(&mock, Wire::OpenAi).body;
    let tool_msgs = chat["messages"].as_array().map(|m| m.iter().filter(|m| m["role"] == "tool").count());
    assert_eq!(tool_msgs, Some(3), "every earlier result, in Chat's shape: {chat}");
    assert!(!chat.to_string().contains("gAAAA-mock-encrypted-reasoning"), "Responses' reasoning stays out");

    // Gemini: every call and result, the functions named.
    forge.ok(&["model", "hop", "--provider", "gemini"]).await;
    turn(&forge, &id, "mock:thinking=1 mock:tool=read_file four").await;
    let g = last_of(&mock, Wire::Gemini).body;
    let parts: Vec<Value> = g["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .collect();
    let responses: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionResponse")).collect();
    assert_eq!(responses.len(), 4, "{g}");
    assert!(responses.iter().all(|r| r["name"] == "read_file"), "{g}");

    // Back to Claude: its own thinking goes back, signed; the others' not.
    forge.ok(&["model", "hop", "claude-sonnet-4-6", "--provider", "claude"]).await;
    let r = forge.ok(&["send", "-s", &id, "mock:tokens=7 done?"]).await;
    assert_eq!(r.stdout, format!("{}\n", token_text(7)));
    let text = body_text(&mock, Wire::Anthropic);
    assert_eq!(text.matches("EqQBCgIYAhIM-mock-signature").count(), 1, "Claude's own signed thinking, once");
    assert!(!text.contains("gAAAA-mock-encrypted-reasoning") && !text.contains("thoughtSignature"));
    let claude = last_of(&mock, Wire::Anthropic).body;
    let results = claude["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .count();
    assert_eq!(results, 4, "every call of every provider answered");

    // The history shows who answered what.
    let h = forge.ok(&["--json", "history", "hop"]).await.json_lines();
    let providers: Vec<&str> =
        h.iter().filter(|m| m["role"] == "assistant").filter_map(|m| m["provider"].as_str()).collect();
    for p in ["claude", "openai", "gemini"] {
        assert!(providers.contains(&p), "{providers:?}");
    }
}

/// Waits until `session` has a pending approval; returns it.
async fn pending(forge: &Forge, session: &str) -> Value {
    for _ in 0..400 {
        let list = forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(p) = list.into_iter().find(|p| p["session_id"] == session) {
            return p;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("no approval appeared for {session}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_budget_a_session_waits_for_a_user_before_the_next_turn() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    // 2,000 output tokens cost $0.03 and pass this budget; a 4-token answer
    // (about $0.01 of input) does not.
    let mut forge = start(&mock, "[app]\nsession_budget_usd = 0.02\n").await;
    let id = forge.new_session(&["--name", "thrifty"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2000 first"]).await;
    let before = mock.requests().len();

    // The next turn waits; the model is not asked.
    let sender = forge.ctl_cmd(&["send", "-s", &id, "mock:tokens=4 second"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let p = pending(&forge, &id).await;
    assert_eq!(p["calls"][0]["name"], "session_budget");
    assert!(p["calls"][0]["summary"].as_str().is_some_and(|s| s.contains("past its budget")), "{p}");
    assert_eq!(mock.requests().len(), before, "no request while it waits");
    // It survives a restart of the daemon, still waiting.
    forge.restart().await;
    let _ = sender.wait_with_output().await;
    let p = pending(&forge, &id).await;
    forge.ok(&["approve", &id, "--all"]).await;
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let last = events.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert_eq!(last["status"], "complete", "{last}");
    assert_eq!(mock.requests().len(), before + 1);
    assert_eq!(
        events.iter().filter(|e| e["kind"] == "approval_resolved" && e["approval_id"] == p["approval_id"]).count(),
        1
    );

    // Confirmed, it runs on until another budget's worth is spent; then a
    // denial ends the turn without asking the model.
    forge.ok(&["send", "-s", &id, "mock:tokens=2000 third"]).await;
    let sender = forge.ctl_cmd(&["send", "-s", &id, "mock:tokens=4 fourth"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    pending(&forge, &id).await;
    let asked = mock.requests().len();
    forge.ok(&["deny", &id]).await;
    let out = forge_tests::harness::Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_ne!(out.code, 0, "the turn did not run: {}", out.stderr);
    assert!(out.stderr.contains("budget"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), asked, "the model was not asked");
    let ps = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!(ps[0]["state"], "idle");
}

/// The budget is checked between the requests of one turn too: a tool
/// loop that passes it waits for a user before the model is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_passes_its_budget_between_tool_batches_waits_for_a_user() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = start(&mock, "[app]\nsession_budget_usd = 0.001\n").await;
    let id = forge.new_session(&["--name", "loop"]).await;
    let call = forge_tests::mock::tool_call("run_command", &serde_json::json!({"command": "true"}));
    let sender = forge
        .ctl_cmd(&["send", "-s", &id, &format!("mock:tokens=2000 {call} go")])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The command asks first (unless the sandbox runs it unasked).
    let mut p = pending(&forge, &id).await;
    if p["calls"][0]["name"] == "run_command" {
        forge.ok(&["approve", &id, "--all"]).await;
        while pending(&forge, &id).await["approval_id"] == p["approval_id"] {}
        p = pending(&forge, &id).await;
    }
    assert_eq!(p["calls"][0]["name"], "session_budget");
    let summary = p["calls"][0]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("budget of $0.0010 "), "an amount under a cent keeps its digits: {summary}");
    assert_eq!(mock.requests().len(), 1, "the model is not asked again while the turn waits");
    forge.ok(&["approve", &id, "--all"]).await;
    let out = forge_tests::harness::Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(mock.requests().len(), 2, "then the turn goes on");
}
