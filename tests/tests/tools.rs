//! Tool calls that change files wait for a user's decision, which any
//! client can give; the decision survives detaching and restarts.

use std::time::Duration;

use forge_tests::harness::{Forge, Ran};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

struct Setup {
    mock: MockServer,
    forge: Forge,
    project: tempfile::TempDir,
}

async fn setup() -> Setup {
    setup_with("").await
}

/// A daemon started with `config` as its config.toml, and a project directory.
async fn setup_with(config: &str) -> Setup {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    if !config.is_empty() {
        forge.write_config(config);
    }
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    Setup { mock, forge, project }
}

impl Setup {
    async fn session(&self, provider: &str, name: &str) -> String {
        let cwd = self.project.path().display().to_string();
        self.forge.new_session(&["--provider", provider, "--cwd", &cwd, "--name", name]).await
    }

    /// Waits until `session` has a pending approval; returns it.
    async fn pending(&self, session: &str) -> Value {
        for _ in 0..400 {
            let list = self.forge.ok(&["--json", "approvals"]).await.json_lines();
            if let Some(p) = list.into_iter().find(|p| p["session_id"] == session) {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no approval appeared for {session}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_from_a_second_client_lets_the_write_happen() {
    let s = setup().await;
    for provider in ["claude", "openai"] {
        let id = s.session(provider, &format!("w-{provider}")).await;
        let sender = s
            .forge
            .ctl_cmd(&["send", "-s", &id, "mock:tool=write_file please"])
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let p = s.pending(&id).await;
        assert_eq!(p["calls"][0]["name"], "write_file");
        assert_eq!(p["calls"][0]["risk"], "medium");
        assert!(p["calls"][0]["summary"].as_str().unwrap_or("").contains("create out0.txt"), "{p}");
        assert!(!s.project.path().join("out0.txt").exists(), "nothing runs before the answer");
        let ps = s.forge.ok(&["--json", "session", "show", &id]).await.json_lines();
        assert_eq!(ps[0]["state"], "awaiting_approval");
        assert_eq!(ps[0]["waiting_on"], "approval");

        let answer = s.forge.ok(&["approve", &id, "--all"]).await;
        assert!(answer.stdout.contains("approved 1"), "{}", answer.stdout);
        let out = Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stderr.contains("forgectl approve"), "the sender says how to answer: {}", out.stderr);
        let written = std::fs::read_to_string(s.project.path().join("out0.txt")).unwrap_or_default();
        assert_eq!(written, "hello from the mock \u{e9}\n");
        std::fs::remove_file(s.project.path().join("out0.txt")).unwrap_or_else(|e| panic!("{e}"));

        // Everyone saw who answered; a second answer finds nothing pending.
        let ev = s.forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
        let resolved = ev.iter().find(|e| e["kind"] == "approval_resolved").cloned().unwrap_or_default();
        let started = ev.iter().find(|e| e["kind"] == "turn_started").cloned().unwrap_or_default();
        assert_eq!(resolved["client"]["name"], "forgectl");
        assert_ne!(resolved["client"]["id"], started["client"]["id"], "answered by another client");
        let late = s.forge.ctl(&["--json", "approve", &id, "--all"]).await;
        assert_eq!(late.code, 1);
        assert_eq!(late.json_lines().pop().unwrap_or_default()["error"]["kind"], "approval_not_pending");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_does_not_run_and_the_model_is_told() {
    let s = setup().await;
    let id = s.session("claude", "deny").await;
    let sender =
        s.forge.ctl_cmd(&["send", "-s", &id, "mock:tool=write_file please"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    s.pending(&id).await;
    s.forge.ok(&["deny", &id]).await;
    let out = Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("denied by the user"), "the model got the denial: {}", out.stdout);
    assert!(!s.project.path().join("out0.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_survives_a_daemon_restart() {
    let mut s = setup().await;
    let id = s.session("openai", "restart").await;
    s.forge.ok(&["send", "--no-wait", "-s", &id, "mock:tool=write_file please"]).await;
    let before = s.pending(&id).await;
    s.forge.restart().await;
    let after = s.pending(&id).await;
    assert_eq!(before["approval_id"], after["approval_id"], "the same request, not a new one");
    s.forge.ok(&["approve", &id, "1"]).await;
    let follow = s.forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let last = follow.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert_eq!(last["status"], "complete", "{last}");
    assert!(s.project.path().join("out0.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_approve_answers_for_the_sender_but_never_past_the_denylist() {
    let s = setup().await;
    let id = s.session("claude", "auto").await;
    let out = s.forge.ok(&["send", "--auto-approve", "-s", &id, "mock:tool=write_file please"]).await;
    assert!(out.stderr.contains("--auto-approve"), "{}", out.stderr);
    assert!(s.project.path().join("out0.txt").exists());

    // With write_file on the denylist, nothing can approve it.
    let strict = setup_with("[tools.approval]\ndenylist = [\"write_file\"]\n").await;
    let cwd = strict.project.path().to_path_buf();
    let sid = strict.forge.new_session(&["--cwd", &cwd.display().to_string()]).await;
    let out = strict.forge.ok(&["send", "--auto-approve", "-s", &sid, "mock:tool=write_file please"]).await;
    assert!(out.stdout.contains("denylist"), "{}", out.stdout);
    assert!(!cwd.join("out0.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_streams_its_output_and_never_sees_the_api_keys() {
    let s = setup().await;
    let id = s.session("claude", "cmd").await;
    let out = s.forge.ok(&["send", "--auto-approve", "-s", &id, "mock:tool=run_command go"]).await;
    assert!(out.stderr.contains("running tool run_command"), "{}", out.stderr);
    let h = s.forge.ok(&["--json", "history", &id]).await.json_lines();
    let result = h.iter().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    let text = result["text"].as_str().unwrap_or_default();
    assert!(text.contains("exit status: 0") && text.contains("streamed"), "{text}");
    assert!(text.contains("k=\n"), "the daemon's API key is not in the command's environment: {text}");
    assert!(!text.contains("mock-key-anthropic"));
    let ev = s.forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let streamed: String =
        ev.iter().filter(|e| e["kind"] == "tool_output").filter_map(|e| e["text"].as_str()).collect();
    assert!(streamed.contains("streamed") && streamed.ends_with("done"), "live output reached clients: {streamed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_long_command_the_session_waits_and_never_reruns_it() {
    // The seed's prompt mode: even sandboxed commands ask.
    let mut s = setup_with("[tools.approval]\nmode = \"prompt\"\n").await;
    let id = s.session("claude", "killed").await;
    s.forge.ok(&["send", "--no-wait", "--auto-approve", "-s", &id, "mock:tool=run_command mock:sleep=30 go"]).await;
    // --no-wait returns before the approval: answer it like a script would.
    s.pending(&id).await;
    s.forge.ok(&["approve", &id, "--all"]).await;
    // Wait until the command is running (its first output is journaled).
    let mut running = false;
    for _ in 0..200 {
        let ev = s.forge.ok(&["--json", "session", "show", &id]).await.json_lines();
        if ev[0]["state"] == "executing_tools" {
            let log = s.forge.rpc("session.events", serde_json::json!({"session": id})).await;
            if log.to_string().contains("\"tool_output\"") {
                running = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(running, "the command started");
    s.forge.kill9().await;
    s.forge.start().await;

    let show = s.forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!(show[0]["state"], "tool_recovery");
    let events = s.forge.ok(&["attach", &id, "--until-idle"]).await;
    assert!(events.stdout.contains("forgectl recover"), "clients are told how to decide: {}", events.stdout);

    let r = s.forge.ok(&["--json", "recover", &id, "--resume"]).await.json_lines();
    assert_eq!(r[0]["rerun"].as_array().map(Vec::len), Some(0));
    assert_eq!(r[0]["not_rerun"].as_array().map(Vec::len), Some(1), "the interrupted command is not run again");
    let done = s.forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let last = done.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert_eq!(last["status"], "complete", "the model continued with the interruption as the result: {last}");
    let h = s.forge.ok(&["--json", "history", &id]).await.json_lines();
    let result = h.iter().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert!(result["text"].as_str().unwrap_or("").contains("not run again"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_shows_its_diff_for_approval_and_applies_once_approved() {
    let s = setup().await;
    std::fs::create_dir(s.project.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(s.project.path().join("src/file0.rs"), "fn main() {}\n").unwrap_or_else(|e| panic!("{e}"));
    let id = s.session("openai", "patch").await;
    let sender =
        s.forge.ctl_cmd(&["send", "-s", &id, "mock:tool=apply_patch fix it"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let p = s.pending(&id).await;
    let summary = p["calls"][0]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("-fn main() {}") && summary.contains("+fn main() { println!(\"patched\"); }"),
        "{summary}"
    );
    s.forge.ok(&["approve", &id, "1"]).await;
    let out = Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(s.project.path().join("src/file0.rs")).unwrap_or_default(),
        "fn main() { println!(\"patched\"); }\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_parse_only_mode_a_client_supplies_the_results_even_across_a_restart() {
    let Setup { mock, mut forge, .. } = setup_with(
        "[tools]\nmode = \"parse_only\"\n[[tools.definitions]]\nname = \"deploy\"\ndescription = \"Deploy the app\"\n[tools.definitions.parameters]\ntype = \"object\"\n",
    )
    .await;
    let id = forge.new_session(&["--name", "po"]).await;
    forge.ok(&["send", "--no-wait", "-s", &id, "mock:tool=deploy mock:tool=read_file go"]).await;
    let mut waiting = false;
    for _ in 0..200 {
        let s = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
        if s[0]["state"] == "awaiting_tool_results" {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(waiting, "the session waits for results");
    // Custom definitions are advertised alongside the built-ins.
    let req = mock.requests().pop().unwrap_or_else(|| panic!("no request"));
    assert!(req.body["tools"].to_string().contains("\"deploy\""), "{}", req.body["tools"]);

    let r = forge.ok(&["tool-result", &id, "call_mock_0", "deployed", "v2"]).await;
    assert!(r.stdout.contains("still waiting for: call_mock_1"), "{}", r.stdout);
    forge.restart().await;
    let s = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!(s[0]["state"], "awaiting_tool_results", "still waiting after a restart");
    let wrong = forge.ctl(&["tool-result", &id, "nope", "x"]).await;
    assert_eq!(wrong.code, 1);
    assert!(wrong.stderr.contains("call_mock_1"), "{}", wrong.stderr);
    forge.ok(&["tool-result", &id, "--error", "call_mock_1", "no such file"]).await;
    let done = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let last = done.iter().rev().find(|e| e["kind"] == "turn_finished").cloned().unwrap_or_default();
    assert_eq!(last["status"], "complete");
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let tools: Vec<&Value> = h.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools[0]["text"], "deployed v2");
    assert_eq!(tools[1]["tool_result"]["is_error"], true);
    assert!(h.last().map(|m| m["text"].as_str().unwrap_or("").contains("2 tool result(s)")).unwrap_or(false));
}

/// Parse-only mode keeps `[tools] max_tool_calls_per_batch`: a client is
/// asked for the first calls only, the others are answered as not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_parse_only_mode_the_calls_past_the_batch_limit_are_not_asked_for() {
    let Setup { mock: _mock, forge, .. } = setup_with(
        "[tools]\nmode = \"parse_only\"\nmax_tool_calls_per_batch = 1\n[[tools.definitions]]\nname = \"deploy\"\ndescription = \"Deploy the app\"\n[tools.definitions.parameters]\ntype = \"object\"\n",
    )
    .await;
    let id = forge.new_session(&["--name", "po1"]).await;
    forge.ok(&["send", "--no-wait", "-s", &id, "mock:tool=deploy mock:tool=deploy go"]).await;
    let mut asked = Vec::new();
    for _ in 0..200 {
        let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
        if let Some(e) = events.iter().find(|e| e["kind"] == "awaiting_tool_results") {
            asked = e["calls"].as_array().cloned().unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(asked.len(), 1, "only the first call is asked for: {asked:?}");
    forge.ok(&["tool-result", &id, "call_mock_0", "deployed"]).await;
    forge.ok(&["--json", "attach", &id, "--until-idle"]).await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let tools: Vec<&Value> = h.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2, "{h:?}");
    assert!(
        tools.iter().any(|t| t["text"].as_str().unwrap_or("").contains("at most 1 tool calls per answer")),
        "{tools:?}"
    );
    assert!(tools.iter().any(|t| t["text"] == "deployed"), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_timeout_is_stopped_and_reported() {
    let Setup { mock: _mock, forge, project } =
        setup_with("[tools.timeouts]\nshell_commands_seconds = 1\n[tools.approval]\nallowlist = [\"run_command\"]\n")
            .await;
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;
    let started = std::time::Instant::now();
    forge.ok(&["send", "-s", &id, "mock:tool=run_command mock:sleep=30 go"]).await;
    assert!(started.elapsed() < Duration::from_secs(20), "stopped long before the command would have ended");
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let result = h.iter().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert_eq!(result["tool_result"]["is_error"], true);
    assert!(result["text"].as_str().unwrap_or("").contains("timed out"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspect_tells_the_model_its_tools_rules_and_configured_limits() {
    let Setup { mock: _mock, forge, project } =
        setup_with("[tools.output]\nmax_bytes = 20000\n[tools.approval]\ndenylist = [\"web_fetch\"]\n").await;
    std::fs::write(project.path().join("big.txt"), "y".repeat(50_000)).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string(), "--model", "mock-model-7"]).await;
    forge.ok(&["send", "-s", &id, "mock:tool=introspect mock:tool=read_file:{\"path\":\"big.txt\"} go"]).await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let results: Vec<&Value> = h.iter().filter(|m| m["role"] == "tool").collect();
    let about: Value = serde_json::from_str(results[0]["text"].as_str().unwrap_or("")).unwrap_or_default();
    assert_eq!(about["session"]["model"], "mock-model-7", "{about}");
    assert_eq!(about["limits"]["output_max_bytes"], 20000);
    let rule = |name: &str| {
        about["tools"].as_array().into_iter().flatten().find(|t| t["name"] == name).map(|t| t["approval"].to_string())
    };
    assert!(rule("write_file").unwrap_or_default().contains("approve"), "{about}");
    assert!(rule("read_file").unwrap_or_default().contains("without asking"));
    assert!(rule("web_fetch").unwrap_or_default().contains("denylist"));
    // `[tools.output] max_bytes` cuts every result, saying so.
    let read = results[1]["text"].as_str().unwrap_or("");
    assert!(
        read.len() <= 20_000 && read.contains("of 50000 bytes shown"),
        "{}",
        &read[read.len().saturating_sub(80)..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_other_tool_runs_a_full_loop_through_the_daemon() {
    let Setup { mock, forge, project } = setup_with("[tools.approval]\nenabled = false\n").await;
    let dir = project.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("git: {e}"));
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "dev@example.com"]);
    git(&["config", "user.name", "Dev"]);
    std::fs::write(dir.join("a.txt"), "first line\n").unwrap_or_else(|e| panic!("{e}"));
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "initial commit"]);
    std::fs::write(dir.join("a.txt"), "changed\n").unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &dir.display().to_string()]).await;
    let page = format!("{}/page", mock.anthropic_url().trim_end_matches('/'));
    let calls = [
        ("current_date", json!({})),
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("git_log", json!({"max_count": 5})),
        ("git_show", json!({"rev": "HEAD"})),
        ("git_blame", json!({"path": "a.txt"})),
        ("git_restore", json!({"paths": ["a.txt"]})),
        ("write_file", json!({"path": "b.txt", "content": "bee"})),
        ("git_add", json!({"paths": ["b.txt"]})),
        ("git_commit", json!({"message": "add b"})),
        ("git_branch", json!({"create": "feature"})),
        ("git_checkout", json!({"branch": "feature"})),
        ("git_stash", json!({"action": "list"})),
        ("web_fetch", json!({"url": page})),
    ];
    let msg: String =
        calls.iter().map(|(n, a)| format!("mock:tool={n}:{} ", a.to_string().replace(' ', "\\u0020"))).collect();
    forge.ok(&["send", "-s", &id, &format!("{msg}go")]).await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let results: Vec<&Value> = h.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), calls.len());
    let text = |i: usize| results[i]["text"].as_str().unwrap_or("").to_string();
    for (i, (name, _)) in calls.iter().enumerate() {
        assert_eq!(results[i]["tool_result"]["name"], *name);
        assert_eq!(results[i]["tool_result"]["is_error"], false, "{name}: {}", text(i));
    }
    assert!(text(0).starts_with("20") && text(0).ends_with('Z'), "{}", text(0));
    assert!(text(1).contains("a.txt"), "status: {}", text(1));
    assert!(text(2).contains("+changed"), "diff: {}", text(2));
    assert!(text(3).contains("initial commit") && text(4).contains("first line"), "log/show");
    assert!(text(5).contains("Not Committed Yet") && text(5).contains("changed"), "blame: {}", text(5));
    assert!(text(13).contains("Forge mock page") && !text(13).contains("var x"), "web_fetch: {}", text(13));
    // The side effects happened, in order.
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap_or_default(), "first line\n", "restored");
    assert!(git(&["log", "--format=%s"]).starts_with("add b\n"));
    assert_eq!(git(&["branch", "--show-current"]).trim(), "feature");
    // The model saw every result and answered.
    assert!(h.last().map(|m| m["text"].as_str().unwrap_or("").contains("14 tool result(s)")).unwrap_or(false));
}

fn call(name: &str, args: Value) -> String {
    forge_tests::mock::tool_call(name, &args)
}

/// The daemon keeps its own files private (umask 077), but what the model
/// creates in a project gets the user's modes, as their own tools would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_the_model_creates_get_the_users_modes_not_the_daemons() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup().await;
    let id = s.session("claude", "modes").await;
    // This process's umask, which the daemon started from.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let umask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|m| u32::from_str_radix(m.trim(), 8).ok())
        .unwrap_or(0o022);
    let turns = [
        call("write_file", json!({"path": "made/by/write.txt", "content": "w\n"})),
        call("run_command", json!({"command": "mkdir -p cmd && echo c > cmd/by-command.txt"})),
    ];
    for t in &turns {
        s.forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{t} go")]).await;
    }
    let mode =
        |p: &str| std::fs::metadata(s.project.path().join(p)).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode("made/by/write.txt"), 0o666 & !umask);
    assert_eq!(mode("made/by"), 0o777 & !umask);
    assert_eq!(mode("cmd/by-command.txt"), 0o666 & !umask);
    assert_eq!(mode("cmd"), 0o777 & !umask);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_lets_a_sessions_later_calls_run_and_survives_a_restart() {
    let mut s = setup().await;
    let id = s.session("claude", "always").await;
    let write = |n: u32| {
        format!(
            "{} go",
            forge_tests::mock::tool_call("write_file", &json!({"path": format!("a{n}.txt"), "content": "x\n"}))
        )
    };
    let sender = s.forge.ctl_cmd(&["send", "-s", &id, &write(1)]).spawn().unwrap_or_else(|e| panic!("{e}"));
    s.pending(&id).await;
    let r = s.forge.ok(&["approve", &id, "--all", "--always"]).await;
    assert!(r.stdout.contains("without asking"), "{}", r.stdout);
    assert!(sender.wait_with_output().await.is_ok_and(|o| o.status.success()));
    let listed = s.forge.ok(&["approvals"]).await.stdout;
    assert!(listed.contains("always allowed: write_file"), "{listed}");

    // Later calls in this session run at once, after a restart too.
    s.forge.restart().await;
    let r = s.forge.ok(&["send", "-s", &id, &write(2)]).await;
    assert!(s.project.path().join("a2.txt").exists(), "ran without a question: {}", r.stderr);
    let other = s.session("claude", "other").await;
    let sender = s.forge.ctl_cmd(&["send", "-s", &other, &write(3)]).spawn().unwrap_or_else(|e| panic!("{e}"));
    s.pending(&other).await;
    s.forge.ok(&["deny", &other]).await;
    let _ = sender.wait_with_output().await;

    // Forgotten: it asks again.
    s.forge.ok(&["approvals", "--forget", &id]).await;
    let info = s.forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert!(info[0].get("always_allow").is_none(), "{info:?}");
    let sender = s.forge.ctl_cmd(&["send", "-s", &id, &write(4)]).spawn().unwrap_or_else(|e| panic!("{e}"));
    s.pending(&id).await;
    s.forge.ok(&["deny", &id]).await;
    let _ = sender.wait_with_output().await;
    assert!(!s.project.path().join("a4.txt").exists());
}

/// An approval for a `write_file` whose file exists says the call will
/// fail, rather than "create" (which would mislead the one approving it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_of_a_write_to_an_existing_file_says_it_will_fail() {
    let s = setup().await;
    let id = s.session("claude", "exists").await;
    std::fs::write(s.project.path().join("out0.txt"), "mine\n").unwrap_or_else(|e| panic!("{e}"));
    let sender =
        s.forge.ctl_cmd(&["send", "-s", &id, "mock:tool=write_file please"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let p = s.pending(&id).await;
    let summary = p["calls"][0]["summary"].as_str().unwrap_or("").to_string();
    assert!(summary.starts_with("out0.txt already exists: this call will fail"), "{p}");
    s.forge.ok(&["approve", &id, "--all"]).await;
    let out = Ran::from(sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("already exists"), "the model is told: {}", out.stderr);
    let kept = std::fs::read_to_string(s.project.path().join("out0.txt")).unwrap_or_default();
    assert_eq!(kept, "mine\n", "the file is as it was");
}
