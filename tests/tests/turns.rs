//! Streaming turns end to end: the real forged and forgectl against the
//! mock provider.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, token_text};
use serde_json::Value;

async fn setup() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

fn kinds(events: &[Value]) -> Vec<String> {
    events.iter().filter_map(|e| e["kind"].as_str().map(str::to_string)).collect()
}

fn text_of(events: &[Value]) -> String {
    events.iter().filter(|e| e["kind"] == "text_delta").filter_map(|e| e["text"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_the_answer_and_records_history() {
    let (mock, forge) = setup().await;
    let r = forge.ok(&["send", "--name", "first", "mock:tokens=40 please"]).await;
    assert_eq!(r.stdout, format!("{}\n", token_text(40)));
    assert!(r.stderr.contains("session: s"), "new session id on stderr: {}", r.stderr);

    let h = forge.ok(&["--json", "history", "first"]).await.json_lines();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0]["role"], "user");
    assert_eq!(h[0]["text"], "mock:tokens=40 please");
    assert_eq!(h[1]["role"], "assistant");
    assert_eq!(h[1]["text"], token_text(40));
    assert_eq!(h[1]["status"], "complete");
    assert_eq!(h[1]["parent_id"], h[0]["id"], "history is a tree: the answer hangs under the question");

    // The request really was an Anthropic Messages stream with the key.
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.body["stream"], true);
    assert!(req.headers.iter().any(|(k, v)| k == "x-api-key" && v == "mock-key-anthropic"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_wire_format_streams_too_and_context_grows() {
    let (mock, forge) = setup().await;
    let id = forge.new_session(&["--provider", "openai", "--model", "gpt-test"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=5 one"]).await;
    let r = forge.ok(&["send", "-s", &id, "mock:tokens=7 two"]).await;
    assert_eq!(r.stdout.trim_end(), token_text(7).trim_end());
    let reqs = mock.requests();
    assert_eq!(reqs[1].path, "/v1/chat/completions");
    assert_eq!(reqs[1].body["model"], "gpt-test");
    let msgs = reqs[1].body["messages"].as_array().cloned().unwrap_or_default();
    // A local server may not know the `developer` role: the system prompt
    // goes as `system` to a custom base URL such as the mock's.
    assert_eq!(msgs[0]["role"], "system", "the system prompt comes first: {msgs:?}");
    assert_eq!(msgs.len(), 4, "then the first question and answer, and the second: {msgs:?}");
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["content"], token_text(5));
    assert!(reqs[1].headers.iter().any(|(k, v)| k == "authorization" && v == "Bearer mock-key-openai"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_attached_clients_see_identical_events_and_a_late_one_replays_exactly() {
    let (_mock, forge) = setup().await;
    let id = forge.new_session(&["--name", "shared"]).await;
    let a = forge.ctl_cmd(&["--json", "attach", "shared", "--from", "1"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let b = forge.ctl_cmd(&["--json", "attach", &id, "--from", "1"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    // Both follow before the turn starts.
    assert_eq!(forge.attached_clients(2).await, 2);
    forge.ok(&["send", "-s", "shared", "mock:tokens=200 mock:delay=2 go"]).await;
    forge.ok(&["cancel", "shared"]).await; // a no-op: shows up nowhere
    // Stop both followers and compare.
    let (mut a, mut b) = (a, b);
    let _ = a.start_kill();
    let _ = b.start_kill();
    let a = forge_tests::harness::Ran::from(a.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    let b = forge_tests::harness::Ran::from(b.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    let strip = |v: Vec<Value>| -> Vec<Value> { v.into_iter().filter(|e| e.get("seq").is_some()).collect() };
    let ea = strip(a.json_lines());
    let eb = strip(b.json_lines());
    assert!(!ea.is_empty());
    assert_eq!(ea, eb, "two attached clients received different event sequences");
    let seqs: Vec<u64> = ea.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "seq is contiguous from 1");
    assert_eq!(text_of(&ea), token_text(200), "coalesced deltas concatenate to the provider's exact text");
    assert_eq!(kinds(&ea).last().map(String::as_str), Some("turn_finished"));

    // A client attaching late from the middle replays exactly the tail.
    let from = seqs[seqs.len() / 2];
    let late = forge.ok(&["--json", "attach", "shared", "--from", &from.to_string(), "--until-idle"]).await;
    let el = strip(late.json_lines());
    assert_eq!(el, ea[(from - 1) as usize..].to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_a_restart_and_a_kill() {
    let (_mock, mut forge) = setup().await;
    forge.ok(&["send", "--name", "keep", "mock:tokens=3 before restart"]).await;
    forge.restart().await;
    forge.ok(&["send", "-s", "keep", "mock:tokens=4 after restart"]).await;
    forge.kill9().await;
    forge.start().await;
    let h = forge.ok(&["--json", "history", "keep"]).await.json_lines();
    let texts: Vec<&str> = h.iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "mock:tokens=3 before restart",
            token_text(3).as_str(),
            "mock:tokens=4 after restart",
            token_text(4).as_str()
        ]
    );
    let ps = forge.ok(&["--json", "ps"]).await.json_lines();
    assert_eq!(ps[0]["message_count"], 4);
    assert_eq!(ps[0]["state"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_killed_midway_is_recovered_as_an_interrupted_message() {
    let (mock, mut forge) = setup().await;
    let id = forge.new_session(&["--name", "crash"]).await;
    let follower =
        forge.ctl_cmd(&["--json", "attach", "crash", "--from", "1"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    forge.ok(&["send", "--no-wait", "-s", "crash", "mock:tokens=2000 mock:delay=5 long"]).await;
    // Midway: part of the answer is durable (and on its way to the follower).
    forge.wait_for_session("crash", "streaming with part of its answer", |s| s["last_seq"].as_u64() > Some(20)).await;
    forge.kill9().await;
    let seen = forge_tests::harness::Ran::from(follower.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    let shown = text_of(&seen.json_lines());
    assert!(!shown.is_empty(), "the client saw part of the answer before the kill");
    forge.start().await;
    // Restarting again, cleanly and not, must not recover it twice.
    forge.kill9().await;
    forge.start().await;
    forge.restart().await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(h.len(), 2, "exactly one recovered message: {h:?}");
    assert_eq!(h[1]["status"], "interrupted");
    let recovered = h[1]["text"].as_str().unwrap_or_default();
    assert!(recovered.starts_with(&shown), "everything shown before the kill is in the recovered message");
    assert!(token_text(2000).starts_with(recovered), "and nothing else");
    assert_eq!(h[1]["recovered"], "incomplete");

    // The next request carries the partial answer, honestly marked.
    forge.ok(&["send", "-s", &id, "mock:tokens=1 continue"]).await;
    let last = mock.requests().pop().unwrap_or_else(|| panic!("no request"));
    let msgs = last.body["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["role"], "assistant");
    let content = msgs[1]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(content.starts_with(recovered), "the model can continue from the partial answer");
    assert!(
        content.contains("interrupted"),
        "and is told it was interrupted: {}",
        &content[content.len().saturating_sub(200)..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_keeps_the_partial_answer_marked_cancelled() {
    let (_mock, forge) = setup().await;
    forge.new_session(&["--name", "c"]).await;
    let send = forge
        .ctl_cmd(&["send", "-s", "c", "mock:tokens=5000 mock:delay=3 slow"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Cancelled once part of the answer is durable.
    forge.wait_for_session("c", "streaming with part of its answer", |s| s["last_seq"].as_u64() > Some(8)).await;
    let r = forge.ok(&["cancel", "c"]).await;
    assert!(r.stdout.contains("cancelled the running turn"), "{}", r.stdout);
    let out = forge_tests::harness::Ran::from(send.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 5, "send exits 5 when its turn is cancelled: {}", out.stderr);
    assert!(out.stderr.contains("cancelled"), "{}", out.stderr);
    let h = forge.ok(&["--json", "history", "c"]).await.json_lines();
    assert_eq!(h[1]["status"], "cancelled");
    let partial = h[1]["text"].as_str().unwrap_or_default();
    assert!(!partial.is_empty() && token_text(5000).starts_with(partial));
    assert_eq!(out.stdout.trim_end(), partial.trim_end(), "what send printed is what was kept");
    // The cancel is attributed to the client that asked.
    let ev = forge.ok(&["--json", "attach", "c", "--until-idle"]).await.json_lines();
    let cancel = ev.iter().find(|e| e["kind"] == "cancel_requested").cloned().unwrap_or_default();
    assert_eq!(cancel["client"]["name"], "forgectl");
    // The session is usable afterwards.
    forge.ok(&["send", "-s", "c", "mock:tokens=2 again"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_send_cancels_its_turn_and_keeps_what_was_shown() {
    use tokio::io::AsyncReadExt;
    let (_mock, forge) = setup().await;
    forge.new_session(&["--name", "i"]).await;
    let mut send = forge
        .ctl_cmd(&["send", "-s", "i", "mock:tokens=5000 mock:delay=3 slow"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Interrupted once it has shown part of the answer.
    let mut stdout = send.stdout.take().unwrap_or_else(|| panic!("piped stdout"));
    let mut shown = vec![0u8; 64];
    let n = stdout.read(&mut shown).await.unwrap_or_else(|e| panic!("{e}"));
    shown.truncate(n);
    assert!(n > 0, "send printed part of the answer");
    let pid = send.id().unwrap_or_else(|| panic!("send is running")) as i32;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    stdout.read_to_end(&mut shown).await.unwrap_or_else(|e| panic!("{e}"));
    let out = forge_tests::harness::Ran::from(send.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 130, "send exits 130 when interrupted: {}", out.stderr);
    assert!(out.stderr.contains("cancelling the turn"), "{}", out.stderr);
    let h = forge.ok(&["--json", "history", "i"]).await.json_lines();
    assert_eq!(h[1]["status"], "cancelled");
    let partial = h[1]["text"].as_str().unwrap_or_default();
    assert!(!partial.is_empty() && token_text(5000).starts_with(partial));
    assert_eq!(String::from_utf8_lossy(&shown).trim_end(), partial.trim_end(), "what send printed is what was kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_during_a_turn_is_queued_and_runs_next() {
    let (_mock, forge) = setup().await;
    forge.new_session(&["--name", "q"]).await;
    let first = forge
        .ctl_cmd(&["send", "-s", "q", "mock:tokens=300 mock:delay=2 first"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The second message comes while the first turn runs.
    forge.wait_for_session("q", "running its first turn", |s| s["state"] == "streaming").await;
    let second = forge.ok(&["send", "-s", "q", "mock:tokens=3 second"]).await;
    assert!(second.stderr.contains("queued"), "the sender is told: {}", second.stderr);
    assert_eq!(second.stdout.trim_end(), token_text(3).trim_end());
    let first = forge_tests::harness::Ran::from(first.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(first.code, 0);
    assert_eq!(first.stdout.trim_end(), token_text(300).trim_end(), "never interleaved");
    let h = forge.ok(&["--json", "history", "q"]).await.json_lines();
    let texts: Vec<&str> = h.iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(texts[0], "mock:tokens=300 mock:delay=2 first");
    assert_eq!(texts[2], "mock:tokens=3 second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_renamed_found_by_prefix_and_removed() {
    let (_mock, forge) = setup().await;
    let a = forge.new_session(&["--name", "alpha"]).await;
    let b = forge.new_session(&[]).await;
    let ps = forge.ok(&["ps"]).await.stdout;
    assert!(ps.contains("alpha") && ps.contains(&b) && ps.contains("WAITING") && ps.contains("CLIENTS"), "{ps}");
    forge.ok(&["session", "rename", &b, "beta"]).await;
    let show = forge.ok(&["--json", "session", "show", "beta"]).await.json_lines();
    assert_eq!(show[0]["id"], b.as_str());
    let taken = forge.ctl(&["session", "rename", &a, "beta"]).await;
    assert_eq!(taken.code, 1);
    assert!(taken.stderr.contains("taken"), "{}", taken.stderr);
    let prefix = &a[..a.len() - 1];
    let by_prefix = forge.ok(&["--json", "session", "show", prefix]).await.json_lines();
    assert!(by_prefix[0]["id"] == a.as_str() || by_prefix.is_empty());
    forge.ok(&["session", "rm", "alpha"]).await;
    let missing = forge.ctl(&["--json", "history", "alpha"]).await;
    assert_eq!(missing.code, 1);
    let err = missing.json_lines().pop().unwrap_or_default();
    assert_eq!(err["error"]["kind"], "session_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_split_inside_lines_and_utf8_characters_arrive_intact() {
    let (_mock, forge) = setup().await;
    for provider in ["claude", "openai"] {
        for split in ["1", "7"] {
            let id = forge.new_session(&["--provider", provider]).await;
            let question = format!("mock:split={split} grüße 👋 日本語");
            let r = forge.ok(&["send", "-s", &id, &question]).await;
            assert!(
                r.stdout.contains("You said: \u{201c}grüße 👋 日本語\u{201d}"),
                "{provider} split={split}: {}",
                r.stdout
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_run_and_the_model_continues_with_their_results() {
    let (mock, forge) = setup().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(project.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.path().join("src/file0.rs"), "fn main() {}\n").unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().display().to_string();
    for provider in ["claude", "openai"] {
        let id = forge.new_session(&["--provider", provider, "--cwd", &cwd]).await;
        let r = forge.ok(&["send", "-s", &id, "mock:tokens=3 mock:tool=read_file mock:tool=teleport look"]).await;
        assert!(r.stdout.starts_with(&token_text(3)), "{provider}: {}", r.stdout);
        assert!(r.stdout.contains("The mock received 2 tool result(s)"), "{provider}: {}", r.stdout);
        assert!(r.stderr.contains("running tool read_file"), "{}", r.stderr);

        let h = forge.ok(&["--json", "history", &id]).await.json_lines();
        let roles: Vec<&str> = h.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, vec!["user", "assistant", "tool", "tool", "assistant"], "{provider}");
        let calls = h[1]["tool_calls"].as_array().cloned().unwrap_or_default();
        assert_eq!(calls[0]["arguments"], forge_tests::mock::tool_args(0, "read_file"), "{provider}: arguments exact");
        assert_eq!(h[2]["tool_result"]["call_id"], "call_mock_0");
        assert_eq!(h[2]["text"], "fn main() {}\n", "read_file read the file in the session's cwd");
        assert_eq!(h[3]["tool_result"]["is_error"], true, "an unknown tool is an error result: {}", h[3]);
        assert!(h[3]["text"].as_str().unwrap_or("").contains("no tool named `teleport`"));

        // The model got the results in its own wire format.
        let req = mock.requests().pop().unwrap_or_else(|| panic!("no request"));
        let text = req.body["messages"].to_string();
        assert!(text.contains("fn main() {}") && text.contains("call_mock_1"), "{provider}: {text}");

        let ev = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
        let kinds: Vec<&str> = ev.iter().filter_map(|e| e["kind"].as_str()).collect();
        for k in ["tool_call_started", "tool_running", "tool_result", "stream_resumed"] {
            assert!(kinds.contains(&k), "{provider}: no {k} in {kinds:?}");
        }
        assert_eq!(kinds.iter().filter(|k| **k == "turn_finished").count(), 1, "one turn");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_is_kept_apart_from_the_answer_and_shown_on_request() {
    let (_mock, forge) = setup().await;
    for provider in ["claude", "openai"] {
        let id = forge.new_session(&["--provider", provider]).await;
        let quiet = forge.ok(&["send", "-s", &id, "mock:thinking=3 mock:tokens=4 think first"]).await;
        assert_eq!(quiet.stdout, format!("{}\n", token_text(4)), "{provider}: stdout is the answer alone");
        assert!(!quiet.stderr.contains("thought0"), "{provider}: thinking only on request: {}", quiet.stderr);
        let shown = forge.ok(&["send", "-s", &id, "--thinking", "mock:thinking=3 mock:tokens=4 again"]).await;
        assert_eq!(shown.stdout, format!("{}\n", token_text(4)), "{provider}");
        assert!(
            shown.stderr.contains("forgectl: thinking: thought0 thought1 thought2 \n"),
            "{provider}: thinking on stderr: {}",
            shown.stderr
        );
        let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
        let thought: String =
            events.iter().filter(|e| e["kind"] == "thinking_delta").filter_map(|e| e["text"].as_str()).collect();
        assert_eq!(
            thought,
            "thought0 thought1 thought2 ".repeat(2),
            "{provider}: thinking is journaled as its own kind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_max_tool_iterations_ends_with_tool_iteration_limit_exceeded() {
    let mock = forge_tests::mock::MockServer::start(forge_tests::mock::MockOptions::default())
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = forge_tests::harness::Forge::new(&mock);
    forge.write_config("[tools]\nmax_tool_iterations = 0\n");
    forge.start().await;
    let id = forge.new_session(&[]).await;
    let r = forge.ctl(&["--json", "send", "-s", &id, "mock:tool=current_date what day is it"]).await;
    assert_ne!(r.code, 0);
    let finished = r.json_lines().into_iter().find(|e| e["kind"] == "turn_finished").unwrap_or_default();
    assert_eq!(finished["error_kind"], "tool_iteration_limit_exceeded", "{finished}");
    assert!(finished["error"].as_str().unwrap_or_default().contains("max_tool_iterations"), "{finished}");
}
