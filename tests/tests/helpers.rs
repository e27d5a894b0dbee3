//! Helper agents: a model that calls `task` twice in one answer gets two
//! helper sessions that run at once, both listed under their parent in
//! `ps` and followable while they run; the parent's next request carries
//! both answers, and their cost is the parent's too. Killing the daemon
//! mid-task and restarting reports the batch, and resuming it goes on
//! with the same helpers, losing neither's work.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer, token_text, tool_call};
use serde_json::{Value, json};

/// A message whose answer starts two helpers, each answering `tokens`
/// tokens `delay` ms apart.
fn two_tasks(tokens: usize, delay: u64) -> String {
    let task = |d: &str| {
        tool_call("task", &json!({"description": d, "prompt": format!("mock:tokens={tokens} mock:delay={delay} {d}")}))
    };
    format!("{} {} split the work", task("first half"), task("second half"))
}

/// Follows session `id` until it shows some answer text.
async fn first_text(forge: &Forge, id: &str) {
    use tokio::io::AsyncBufReadExt;
    let mut follower =
        forge.ctl_cmd(&["--json", "attach", id, "--from", "1"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let stdout = follower.stdout.take().unwrap_or_else(|| panic!("attach's stdout"));
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let seen = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("\"text_delta\"") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen.ok(), Some(true), "helper {id} streamed nothing");
    let _ = follower.start_kill();
}

fn helpers_of(ps: &[Value], parent: &str) -> Vec<Value> {
    ps.iter().filter(|s| s["helper"]["parent"] == parent).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_task_calls_run_two_helpers_at_once_and_the_parent_gets_both_answers() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let parent = forge.new_session(&["--name", "lead"]).await;
    let send = forge.ctl_cmd(&["send", "-s", "lead", &two_tasks(30, 60)]).spawn().unwrap_or_else(|e| panic!("{e}"));

    // Both helpers run at once, listed under the parent.
    let mut running = Vec::new();
    for _ in 0..400 {
        let ps = forge.ok(&["--json", "ps"]).await.json_lines();
        running = helpers_of(&ps, &parent);
        if running.len() == 2 && running.iter().all(|h| h["state"] == "streaming") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(running.len(), 2, "two helpers: {running:?}");
    assert!(running.iter().all(|h| h["state"] == "streaming"), "both stream at the same time: {running:?}");
    let descriptions: Vec<&str> = running.iter().filter_map(|h| h["helper"]["description"].as_str()).collect();
    assert!(descriptions.contains(&"first half") && descriptions.contains(&"second half"), "{descriptions:?}");
    let table = forge.ok(&["ps"]).await.stdout;
    let lead_line = table.lines().position(|l| l.starts_with(&parent)).unwrap_or(usize::MAX);
    let child = running[0]["id"].as_str().unwrap_or_default().to_string();
    let child_line = table.lines().position(|l| l.contains(&format!("└ {child}"))).unwrap_or(0);
    assert!(child_line > lead_line && lead_line != usize::MAX, "a helper is drawn under its parent:\n{table}");

    // Any client follows a helper live.
    let live = forge.ok(&["--json", "attach", &child, "--until-idle"]).await.json_lines();
    let text: String = live.iter().filter(|e| e["kind"] == "text_delta").filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(text, token_text(30), "the helper's answer, as it streamed");

    let out = forge_tests::harness::Ran::from(send.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(out.stdout.contains("The mock received 2 tool result(s)"), "{}", out.stdout);
    // The parent's next request carries both answers as the calls' results.
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let results: Vec<String> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].as_str().map(str::to_string).unwrap_or_else(|| b["content"].to_string()))
        .collect();
    assert_eq!(results.len(), 2, "{body}");
    assert!(results.iter().all(|r| r.contains(token_text(30).trim())), "{results:?}");
    // The helpers' requests: their task, under a system prompt that says
    // what they are, and no `task` tool of their own (depth 1).
    let helper_requests: Vec<Value> = mock
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b["system"].to_string().contains("You are a helper agent"))
        .collect();
    assert!(helper_requests.len() >= 2, "{} helper requests", helper_requests.len());
    for b in &helper_requests {
        let tools: Vec<&str> = b["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        assert!(!tools.contains(&"task") && tools.contains(&"read_file"), "{tools:?}");
    }

    // Events say which helper ran for which call; cost rolls up.
    let events = forge.ok(&["--json", "attach", "lead", "--from", "1", "--until-idle"]).await.json_lines();
    assert_eq!(events.iter().filter(|e| e["kind"] == "helper_started").count(), 2, "{events:?}");
    assert_eq!(events.iter().filter(|e| e["kind"] == "helper_finished" && e["status"] == "complete").count(), 2);
    let usage = |s: &str| {
        let forge = &forge;
        let s = s.to_string();
        async move { forge.ok(&["--json", "usage", &s]).await.json_lines()[0]["total"]["responses"].as_u64() }
    };
    assert_eq!(usage(&child).await, Some(1));
    assert_eq!(usage(&parent).await, Some(4), "the parent's two responses and each helper's one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_task_reports_the_batch_and_resuming_keeps_both_helpers_work() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let parent = forge.new_session(&["--name", "lead"]).await;
    forge.ok(&["send", "--no-wait", "-s", "lead", &two_tasks(200, 20)]).await;
    let mut helpers = Vec::new();
    for _ in 0..400 {
        let ps = forge.ok(&["--json", "ps"]).await.json_lines();
        helpers = helpers_of(&ps, &parent);
        if helpers.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // Each has shown some of its answer before the kill.
    for h in &helpers {
        let id = h["id"].as_str().unwrap_or_default();
        first_text(&forge, id).await;
    }
    assert_eq!(helpers.len(), 2);
    forge.kill9().await;
    forge.start().await;

    // Reported like an interrupted tool batch: both task calls listed.
    let lead = forge.wait_for_session("lead", "waiting on recovery", |s| s["state"] == "tool_recovery").await;
    assert_eq!(lead["state"], "tool_recovery");
    // Each helper kept what it had streamed.
    for h in &helpers {
        let id = h["id"].as_str().unwrap_or_default();
        let history = forge.ok(&["--json", "history", id]).await.json_lines();
        let kept = history.iter().rfind(|m| m["role"] == "assistant").map(|m| m["text"].to_string());
        assert!(kept.is_some_and(|t| t.contains("w0")), "helper {id} lost what it had shown: {history:?}");
    }
    // Resumed: the same helpers go on; the parent gets both answers.
    forge.ok(&["recover", "lead", "--resume"]).await;
    let done = forge.wait_for_session("lead", "idle", |s| s["state"] == "idle").await;
    assert_eq!(done["state"], "idle");
    let ps = forge.ok(&["--json", "ps"]).await.json_lines();
    assert_eq!(helpers_of(&ps, &parent).len(), 2, "no new helper was made");
    let history = forge.ok(&["--json", "history", "lead"]).await.json_lines();
    let last = history.last().cloned().unwrap_or(Value::Null);
    assert!(last["text"].as_str().is_some_and(|t| t.contains("2 tool result(s)")), "{last}");
    let results: Vec<&Value> = history.iter().filter(|m| m["role"] == "tool").collect();
    assert!(results.iter().all(|r| r["is_error"] != true), "{results:?}");
}

/// One `task` call as a message: `prompt` for a helper of type `agent`.
fn one_task(prompt: &str, agent: Option<&str>) -> String {
    let mut args = json!({"description": "a job", "prompt": prompt});
    if let Some(a) = agent {
        args["subagent_type"] = json!(a);
    }
    format!("{} go", tool_call("task", &args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helpers_approval_reaches_the_parents_client_and_its_answer_the_helper() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    forge.new_session(&["--name", "lead", "--cwd", &cwd]).await;
    let write = tool_call("write_file", &json!({"path": "note.txt", "content": "from the helper"}));
    // The client follows the parent only; the helper's write asks there.
    let out = forge.ok(&["send", "--auto-approve", "-s", "lead", &one_task(&format!("{write} write it"), None)]).await;
    assert!(out.stderr.contains("approved 1 tool call(s)"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.path().join("note.txt")).ok().as_deref(), Some("from the helper"));
    assert!(out.stdout.contains("The mock received 1 tool result(s)"), "{}", out.stdout);
    let events = forge.ok(&["--json", "attach", "lead", "--from", "1", "--until-idle"]).await.json_lines();
    let asked = events.iter().find(|e| e["kind"] == "approval_requested").cloned().unwrap_or(Value::Null);
    assert!(asked["helper"].is_string(), "the request names the helper: {asked}");
    assert!(events.iter().any(|e| e["kind"] == "approval_resolved"), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_type_limits_the_helpers_tools_and_an_unknown_one_is_an_error_result() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let agents = dir.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        agents.join("reader.md"),
        "---\nname: reader\ndescription: Reads code, changes nothing\ntools: Read, Grep\n---\nOnly read. Quote what you find.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cwd = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    forge.ok(&["trust", &cwd]).await;
    forge.new_session(&["--name", "lead", "--cwd", &cwd]).await;
    forge.ok(&["send", "-s", "lead", &one_task("mock:tokens=3 look around", Some("reader"))]).await;
    let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    let offered = bodies.iter().find(|b| b["system"].to_string().contains("Only read. Quote what you find."));
    let tools: Vec<&str> =
        offered.and_then(|b| b["tools"].as_array()).into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(tools, ["read_file", "search"], "the helper has its type's tools only");
    // The parent's task tool lists the type.
    let lead = bodies.iter().find(|b| !b["system"].to_string().contains("helper agent")).cloned().unwrap_or_default();
    let task = lead["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "task").cloned());
    assert!(task.is_some_and(|t| t["description"].to_string().contains("reader: Reads code")), "{lead}");

    forge.ok(&["send", "-s", "lead", &one_task("hi", Some("nobody"))]).await;
    let history = forge.ok(&["--json", "history", "lead"]).await.json_lines();
    let result = history.iter().rfind(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert_eq!(result["tool_result"]["is_error"], true, "{history:?}");
    assert!(result["text"].as_str().is_some_and(|t| t.contains("no agent type \"nobody\"")), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_parent_cancels_its_helper() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let parent = forge.new_session(&["--name", "lead"]).await;
    forge.ok(&["send", "--no-wait", "-s", "lead", &one_task("mock:tokens=2000 mock:delay=10 long", None)]).await;
    let mut helper = Value::Null;
    for _ in 0..400 {
        let ps = forge.ok(&["--json", "ps"]).await.json_lines();
        if let Some(h) = helpers_of(&ps, &parent).into_iter().next() {
            helper = h;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let id = helper["id"].as_str().unwrap_or_default().to_string();
    first_text(&forge, &id).await;
    forge.ok(&["cancel", "lead"]).await;
    let done = forge.wait_for_session(&id, "stopped", |s| s["state"] == "idle").await;
    assert_eq!(done["state"], "idle");
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(history.last().map(|m| m["status"].clone()), Some(json!("cancelled")), "{history:?}");
    let lead = forge.ok(&["--json", "history", "lead"]).await.json_lines();
    let result = lead.iter().rfind(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert!(result["text"].as_str().is_some_and(|t| t.contains("cancelled")), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helpers_approval_survives_a_restart_and_is_answered_through_the_parent() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let parent = forge.new_session(&["--name", "lead", "--cwd", &cwd]).await;
    let write = tool_call("write_file", &json!({"path": "after.txt", "content": "kept"}));
    forge.ok(&["send", "--no-wait", "-s", "lead", &one_task(&format!("{write} write it"), None)]).await;
    // The helper's approval is shown as the parent's.
    let waiting =
        forge.wait_for_session("lead", "waiting on the helper's approval", |s| s["waiting_on"] == "approval").await;
    assert_eq!(waiting["id"], parent.as_str());
    forge.kill9().await;
    forge.start().await;

    // The parent's batch is reported, not re-run: its own approval was none.
    forge.wait_for_session("lead", "waiting on recovery", |s| s["state"] == "tool_recovery").await;
    forge.ok(&["recover", "lead", "--resume"]).await;
    // The same helper asks again, through the parent.
    forge.wait_for_session("lead", "waiting on the helper's approval", |s| s["waiting_on"] == "approval").await;
    let ps = forge.ok(&["--json", "ps"]).await.json_lines();
    assert_eq!(helpers_of(&ps, &parent).len(), 1, "no second helper: {ps:?}");
    let pending = forge.ok(&["--json", "approvals"]).await.json_lines();
    assert_eq!(pending.len(), 1, "listed once: {pending:?}");
    forge.ok(&["approve", "lead", "--all"]).await;
    forge.wait_for_session("lead", "done", |s| s["state"] == "idle").await;
    assert_eq!(std::fs::read_to_string(dir.path().join("after.txt")).ok().as_deref(), Some("kept"));
    let history = forge.ok(&["--json", "history", "lead"]).await.json_lines();
    let result = history.iter().rfind(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert_eq!(result["tool_result"]["is_error"], false, "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_helpers_stop_at_their_parents_budget_with_one_approval() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    // Each request's input costs about $0.01: the parent's first answer
    // passes this budget on its own.
    forge.write_config("[app]\nsession_budget_usd = 0.0005\n");
    forge.start().await;
    let parent = forge.new_session(&["--name", "lead"]).await;
    let tasks: Vec<String> = (1..=8)
        .map(|i| {
            let prompt = format!("{} mock:tokens=50 part {i}", tool_call("read_file", &json!({"path": "a.txt"})));
            tool_call("task", &json!({"description": format!("part {i}"), "prompt": prompt}))
        })
        .collect();
    forge.ok(&["send", "--no-wait", "-s", "lead", &format!("{} split it", tasks.join(" "))]).await;
    // One approval for the family, the parent's; no helper asks its own.
    let (mut shown, mut waiting) = (Vec::new(), 0);
    for _ in 0..400 {
        shown = forge.ok(&["--json", "approvals"]).await.json_lines();
        let helpers = helpers_of(&forge.ok(&["--json", "ps"]).await.json_lines(), &parent);
        waiting = helpers.iter().filter(|h| h["state"] == "awaiting_approval").count();
        if !shown.is_empty() && waiting == 8 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(waiting, 8, "all eight helpers wait for the family's budget");
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["session_id"], parent.as_str());
    assert_eq!(shown[0]["calls"][0]["name"], "session_budget");
    assert_eq!(mock.requests().len(), 1, "no helper asked its model past the budget");
    forge.ok(&["deny", "lead"]).await;
    let events = forge.ok(&["--json", "attach", &parent, "--until-idle"]).await.json_lines();
    let last = events.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert_eq!(last["status"], "cancelled", "{last}");
    assert_eq!(events.iter().filter(|e| e["kind"] == "approval_requested").count(), 1, "one approval in all");
    assert_eq!(mock.requests().len(), 1, "nothing more was asked of any model");
    for h in helpers_of(&forge.ok(&["--json", "ps"]).await.json_lines(), &parent) {
        assert_eq!(h["state"], "idle", "{h}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_parallel_helpers_under_a_budget_overshoot_it_by_one_request_at_most() {
    // Slow answers: without reservations, all eight would pass the check
    // before any was charged.
    let opts = MockOptions { default_delay_ms: 20, ..MockOptions::default() };
    let mock = MockServer::start(opts).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[app]\nsession_budget_usd = 0.02\n");
    forge.start().await;
    let parent = forge.new_session(&["--name", "lead"]).await;
    let tasks: Vec<String> = (1..=8)
        .map(|i| {
            let prompt = format!("{} mock:tokens=40 part {i}", tool_call("read_file", &json!({"path": "a.txt"})));
            tool_call("task", &json!({"description": format!("part {i}"), "prompt": prompt}))
        })
        .collect();
    forge.ok(&["send", "--no-wait", "-s", "lead", &format!("{} split it", tasks.join(" "))]).await;
    let mut shown = Vec::new();
    for _ in 0..800 {
        shown = forge.ok(&["--json", "approvals"]).await.json_lines();
        if !shown.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(shown.len(), 1, "the family's one approval: {shown:?}");
    assert_eq!(shown[0]["calls"][0]["name"], "session_budget");
    let usage = forge.ok(&["--json", "usage", &parent]).await.json_lines();
    let spent = usage[0]["total"]["cost_usd"].as_f64().unwrap_or(f64::MAX);
    eprintln!("family spent ${spent:.4} before the approval");
    assert!(spent <= 0.025, "spent ${spent} before the approval, under a $0.02 budget: {usage:?}");
    forge.ok(&["deny", "lead"]).await;
    forge.ok(&["attach", &parent, "--until-idle"]).await;
}
