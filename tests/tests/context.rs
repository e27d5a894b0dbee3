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
    for what in ["/clear", "/summarize", "forgectl summarize", "[context] infinity", "FORGE_CONTEXT_INFINITY"] {
        assert!(message.contains(what), "the error names {what}: {message}");
    }
    assert!(stderr.contains("Context Infinity is off"), "{stderr}");
    assert_eq!(mock.requests().len(), done, "the refused request was never sent");
    let ctx = forge.ok(&["context", &id]).await.stdout;
    assert!(ctx.contains("input tokens, as the provider counted them"), "{ctx}");
    // What the error offers works: a summary asked for makes room.
    forge.ok(&["summarize", &id]).await;
    forge.ok(&["attach", &id, "--until-idle"]).await;
    let r = forge.ctl(&["send", "-s", &id, "after the summary mock:tokens=5"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
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

/// A 4,000-token model without tools (so the system prompt leaves room).
const SMALL: &str = "[tools]\nmode = \"disabled\"\n[[models]]\nname = \"small\"\nprovider = \"claude\"\ncontext_window = 4000\nmax_output_tokens = 500\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_infinity_on_forty_turns_fit_a_small_window_and_nothing_is_forgotten() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    // Tools on: the small window gets the core ones only.
    forge.write_config(SMALL.trim_start_matches("[tools]\nmode = \"disabled\"\n"));
    forge.start().await;
    let id = forge.new_session(&["--model", "small"]).await;
    for i in 0..40 {
        let r = forge.ctl(&["send", "-s", &id, &format!("turn {i} mock:tokens=300")]).await;
        assert_eq!(r.code, 0, "turn {i}: {}", r.stderr);
        assert_eq!(r.stdout, format!("{}\n", forge_tests::mock::token_text(300)), "turn {i} answered in full");
    }
    // No request went over the window (the mock counts a token per 4 bytes).
    for (i, req) in mock.requests().iter().enumerate() {
        let tokens = serde_json::to_vec(&req.body).map(|b| b.len() / 4).unwrap_or(0);
        assert!(tokens <= 4000, "request {i} is about {tokens} tokens");
    }
    // Every original message is in history; the summaries are beside it.
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(h.len(), 80, "40 questions and 40 answers");
    assert!(h.iter().all(|m| m["role"] != "summary"));
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let done: Vec<&serde_json::Value> = events.iter().filter(|e| e["kind"] == "summarization_done").collect();
    assert!(done.len() >= 3, "summarized along the way: {}", done.len());
    let usage = events.iter().filter(|e| e["kind"] == "usage").count();
    assert_eq!(usage, 40 + done.len(), "summaries are counted in usage too");
    let span = &done[0]["span"];
    assert!(span["tokens_after"].as_u64() < span["tokens_before"].as_u64(), "{span}");
    let ctx = forge.ok(&["--json", "context", &id]).await.json_lines();
    assert!(ctx[0]["summary_id"].is_string(), "{}", ctx[0]);
    let offered = ctx[0]["tools_offered"].as_array().map(Vec::len).unwrap_or(0);
    assert!((1..10).contains(&offered) && ctx[0]["tools_withheld"].to_string().contains("git_log"), "{}", ctx[0]);
    let tools = mock.requests().last().map(|r| r.body["tools"].as_array().map(Vec::len)).unwrap_or_default();
    assert_eq!(tools, Some(offered), "requests offer the same core tools");
    assert!(ctx[0]["summarized_messages"].as_u64().unwrap_or(0) > 40, "{}", ctx[0]);
    let text = forge.ok(&["context", &id]).await.stdout;
    assert!(text.contains("sent as their summary"), "{text}");
    // The last request carried the summary, not the first turns.
    let last = mock
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body["messages"].is_array())
        .unwrap_or_else(|| panic!("no request"));
    let sent = last.body["messages"].to_string();
    assert!(sent.contains("summarized here") && !sent.contains("turn 0 mock"), "{sent}");

    // kill -9 during a summary loses nothing: the turn finishes after a restart.
    let ctl = forge.ctl_cmd(&["send", "--no-wait", "-s", &id, "after the crash mock:tokens=300"]).output().await;
    assert!(ctl.is_ok());
    forge.kill9().await;
    forge.start().await;
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let last = events.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert!(last["status"] == "complete" || last["status"] == "interrupted", "{last}");
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert!(h.iter().any(|m| m["text"] == "after the crash mock:tokens=300"), "the message is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_on_request_stands_for_all_but_the_newest_exchange() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "asked"]).await;
    let none = forge.ctl(&["summarize", "asked"]).await;
    assert_ne!(none.code, 0);
    assert!(none.stderr.contains("nothing to summarize"), "{}", none.stderr);
    for i in 0..3 {
        forge.ok(&["send", "-s", &id, &format!("question {i} mock:tokens=20")]).await;
    }
    let r = forge.ok(&["--json", "summarize", "asked"]).await.json_lines();
    assert_eq!(r[0]["messages"], 4, "two exchanges; the newest stays");
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    assert!(events.iter().any(|e| e["kind"] == "summarization_done"), "the summary lands");
    let ctx = forge.ok(&["--json", "context", &id]).await.json_lines();
    assert_eq!(ctx[0]["summarized_messages"], 4);
    let text = forge.ok(&["context", &id]).await.stdout;
    assert!(text.contains("summary 1 (") && text.contains("the first 4 messages"), "{text}");
    let span = forge.ok(&["context", &id, "--span", "1"]).await.stdout;
    assert!(
        span.contains("the 4 original messages") && span.contains("question 0") && span.contains("question 1"),
        "{span}"
    );
    let bad = forge.ctl(&["context", &id, "--span", "2"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("1 summaries"), "{}", bad.stderr);
    forge.ok(&["send", "-s", &id, "next mock:tokens=3"]).await;
    let last =
        mock.requests().into_iter().rev().find(|r| r.body["messages"].is_array()).unwrap_or_else(|| panic!("none"));
    let sent = last.body["messages"].to_string();
    assert!(sent.contains("summarized here") && sent.contains("question 2") && !sent.contains("question 0"), "{sent}");
    assert_eq!(forge.ok(&["--json", "history", &id]).await.json_lines().len(), 8, "the originals stay");

    // A fork shares the summarized path, and its summary with it.
    let fork = forge.ok(&["--json", "fork", &id, "--name", "forked"]).await.json_lines();
    let fork_id = fork[0]["id"].as_str().unwrap_or_default().to_string();
    let ctx = forge.ok(&["--json", "context", &fork_id]).await.json_lines();
    assert_eq!(ctx[0]["summarized_messages"], 4, "{ctx:?}");
    let found = forge.ok(&["recall", &fork_id, "question"]).await.stdout;
    assert!(found.contains("question 0"), "the fork recalls the shared summary's facts: {found}");
    forge.ok(&["send", "-s", &fork_id, "in the fork mock:tokens=3"]).await;
    let last =
        mock.requests().into_iter().rev().find(|r| r.body["messages"].is_array()).unwrap_or_else(|| panic!("none"));
    let sent = last.body["messages"].to_string();
    assert!(sent.contains("summarized here") && !sent.contains("question 0"), "the fork sends the summary: {sent}");

    // Removing the origin leaves the fork its summary and its facts.
    forge.ok(&["session", "rm", &id]).await;
    let ctx = forge.ok(&["--json", "context", &fork_id]).await.json_lines();
    assert_eq!(ctx[0]["summarized_messages"], 4, "{ctx:?}");
    let found = forge.ok(&["recall", &fork_id, "question"]).await.stdout;
    assert!(found.contains("question 0"), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_small_large_puts_the_original_messages_back() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(SMALL);
    forge.start().await;
    let id = forge.new_session(&["--name", "trip"]).await;
    for i in 0..8 {
        forge.ok(&["send", "-s", &id, &format!("turn {i} mock:tokens=300")]).await;
    }
    let sent = |mock: &MockServer| {
        mock.requests().into_iter().rev().find(|r| r.body["messages"].is_array()).map(|r| r.body["messages"].clone())
    };
    let large = sent(&mock).unwrap_or_default();
    assert!(!large.to_string().contains("summarized here"), "the large window takes everything");

    forge.ok(&["model", "trip", "small"]).await;
    forge.ok(&["send", "-s", &id, "on the small one mock:tokens=5"]).await;
    let small = sent(&mock).unwrap_or_default().to_string();
    assert!(small.contains("summarized here") && !small.contains("turn 0 mock"), "{small}");

    forge.ok(&["model", "trip", "claude-sonnet-4-6"]).await;
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let restored = events.iter().find(|e| e["kind"] == "context_restored").cloned().unwrap_or_default();
    assert!(restored["messages_restored"].as_u64().unwrap_or(0) >= 2, "{restored}");
    assert!(restored.get("summary_id").is_none(), "all of it: {restored}");
    // What was restored stays restored across a restart.
    forge.restart().await;
    forge.ok(&["send", "-s", &id, "back on the large one mock:tokens=5"]).await;
    let back = sent(&mock).unwrap_or_default();
    assert!(!back.to_string().contains("summarized here"));
    // Exactly the original messages, in order, then the new exchange.
    let texts = |v: &serde_json::Value| -> Vec<(String, String)> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let text: String =
                    m["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
                (m["role"].as_str().unwrap_or_default().to_string(), text)
            })
            .collect()
    };
    let (before, after) = (texts(&large), texts(&back));
    assert_eq!(after[..before.len()], before[..], "the originals, as they were");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_finds_what_a_summarized_span_said_and_cites_its_message() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "lib"]).await;
    forge.ok(&["send", "-s", &id, "We'll serve the API on port 8431, see src/server.rs mock:tokens=5"]).await;
    forge.ok(&["send", "-s", &id, "question 1 mock:tokens=5"]).await;
    forge.ok(&["send", "-s", &id, "question 2 mock:tokens=5"]).await;
    let none = forge.ok(&["recall", "lib", "port"]).await.stdout;
    assert!(none.starts_with("nothing recalled"), "nothing is summarized yet: {none}");
    forge.ok(&["summarize", "lib"]).await;
    forge.ok(&["attach", &id, "--until-idle"]).await;

    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let first = history[0]["id"].as_str().unwrap_or_default().to_string();
    let found = forge.ok(&["--json", "recall", "lib", "which", "port?"]).await.json_lines();
    let hits = found[0]["hits"].as_array().cloned().unwrap_or_default();
    let decision = hits.iter().find(|h| h["kind"] == "decision").unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(decision["node_id"], first.as_str(), "the hit cites the user's message");
    assert!(decision["fact"].as_str().unwrap_or_default().contains("port 8431"), "{decision}");
    let file = forge.ok(&["recall", "lib", "server.rs"]).await.stdout;
    assert!(file.contains("[file] src/server.rs") && file.contains(&first), "{file}");

    // The model finds it too, through the recall tool, and reads the original.
    forge.ok(&["send", "-s", &id, r#"mock:tool=recall:{"query":"port"} which port was it?"#]).await;
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let result = history.iter().rev().find(|m| m["role"] == "tool").unwrap_or_else(|| panic!("{history:?}"));
    let text = result["text"].as_str().unwrap_or_default();
    assert!(text.contains("port 8431") && text.contains(&first), "{text}");
}

/// Polls `forgectl ps --json` until the session is in `state`.
async fn wait_for_state(forge: &Forge, id: &str, state: &str) {
    for _ in 0..200 {
        let ps = forge.ok(&["--json", "ps"]).await.json_lines();
        if ps.iter().any(|s| s["id"] == id && s["state"] == state) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{id} never reached {state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_summary_loses_nothing_and_the_summary_is_written_after_the_restart() {
    // Replies without directives (the summary's) crawl; the turns say
    // `mock:delay=0`.
    let mock = MockServer::start(MockOptions { default_delay_ms: 400, ..Default::default() })
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(SMALL);
    forge.start().await;
    let id = forge.new_session(&["--name", "crash"]).await;
    for i in 0..8 {
        forge.ok(&["send", "-s", &id, &format!("turn {i} mock:tokens=300 mock:delay=0")]).await;
    }
    // The small window needs a summary before the next turn.
    forge.ok(&["model", "crash", "small"]).await;
    forge.ok(&["send", "--no-wait", "-s", &id, "after the switch mock:tokens=5 mock:delay=0"]).await;
    wait_for_state(&forge, &id, "summarizing").await;
    forge.ok(&["send", "--no-wait", "-s", &id, "queued behind it mock:tokens=5 mock:delay=0"]).await;
    wait_for_state(&forge, &id, "summarizing_with_queued").await;
    // The queued message goes to the model it was sent for.
    let switch = forge.ctl(&["model", "crash", "claude-sonnet-4-6"]).await;
    assert_ne!(switch.code, 0);
    assert!(
        switch.stderr.contains("wait behind the running turn") && switch.stderr.contains("--drop-queued"),
        "{}",
        switch.stderr
    );
    forge.kill9().await;

    forge.start().await;
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let started = events.iter().filter(|e| e["kind"] == "summarization_started").count();
    assert_eq!(started, 2, "the summary was started again after the restart");
    assert_eq!(events.iter().filter(|e| e["kind"] == "summarization_done").count(), 1);
    let finished: Vec<_> = events.iter().filter(|e| e["kind"] == "turn_finished").collect();
    let last_two: Vec<_> = finished.iter().rev().take(2).map(|e| e["status"].as_str().unwrap_or_default()).collect();
    assert_eq!(last_two, ["complete", "complete"], "both messages answered");
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(h.len(), 20, "8 exchanges and the two after the crash, every original kept");
    assert!(h.iter().any(|m| m["text"] == "queued behind it mock:tokens=5 mock:delay=0"));
    let ctx = forge.ok(&["--json", "context", &id]).await.json_lines();
    assert_eq!(ctx[0]["summaries"].as_array().map(Vec::len), Some(1), "{}", ctx[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_instructions_are_in_every_request_after_summaries_too() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config(SMALL);
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(repo.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(repo.path().join("AGENTS.md"), "Always run `make check`.\n").unwrap_or_else(|e| panic!("{e}"));
    let cwd = repo.path().display().to_string();
    let id = forge.new_session(&["--model", "small", "--cwd", &cwd]).await;
    for i in 0..12 {
        forge.ok(&["send", "-s", &id, &format!("turn {i} mock:tokens=300")]).await;
    }
    let turns: Vec<_> =
        mock.requests().into_iter().filter(|r| r.body["messages"].to_string().contains("mock:tokens=300")).collect();
    assert_eq!(turns.len(), 12);
    let summarized = turns.iter().filter(|r| r.body["messages"].to_string().contains("summarized here")).count();
    assert!(summarized >= 3, "summaries were in force for most turns: {summarized}");
    for r in &turns {
        let system = r.body["system"].to_string();
        assert!(system.contains("make check"), "AGENTS.md in every request: {system}");
    }
}
