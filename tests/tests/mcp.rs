//! MCP tool servers: a test server (stdio and streamable HTTP) whose tools
//! the model is offered as `server__tool`, called through the same
//! approvals and journal as the built-in ones; a server that changes its
//! tools, crashes, hangs or is restarted by hand; servers stopped with the
//! daemon.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forge_tests::harness::{Forge, bin};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};

struct Setup {
    mock: MockServer,
    forge: Forge,
    project: tempfile::TempDir,
    /// The test server's log: a line per start and per call.
    log: PathBuf,
    notes: PathBuf,
}

/// A daemon with the test server as `t` over stdio; `extra` goes into
/// its `[[mcp.servers]]` entry.
async fn setup(extra: &str) -> Setup {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = project.path().join("server.log");
    let notes = project.path().join("notes.txt");
    forge.write_config(&format!(
        "[[mcp.servers]]\nname = \"t\"\ncommand = {:?}\nargs = [\"--log\", {:?}, \"--notes\", {:?}]\n{extra}\n",
        bin("forge-mcp-test").display().to_string(),
        log.display().to_string(),
        notes.display().to_string(),
    ));
    forge.start().await;
    Setup { mock, forge, project, log, notes }
}

impl Setup {
    async fn session(&self, name: &str) -> String {
        let cwd = self.project.path().display().to_string();
        self.forge.new_session(&["--cwd", &cwd, "--name", name]).await
    }

    /// The last tool result of a turn that calls `tool` with `args`.
    async fn call(&self, session: &str, tool: &str, args: Value) -> (String, bool) {
        let turn = format!("{} go", tool_call(tool, &args));
        let events = self.forge.ok(&["--json", "send", "--auto-approve", "-s", session, &turn]).await.json_lines();
        let result = events
            .iter()
            .rev()
            .find(|e| e["kind"] == "tool_result")
            .unwrap_or_else(|| panic!("no tool result: {events:?}"));
        (result["output"].as_str().unwrap_or("").to_string(), result["is_error"] == true)
    }

    fn starts(&self) -> Vec<u32> {
        server_starts(&self.log)
    }
}

fn server_starts(log: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| l.strip_prefix("start ")).filter_map(|p| p.trim().parse().ok()).collect()
}

fn calls_of(log: &Path, tool: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|l| l.starts_with(&format!("call {tool} "))).count()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

/// Polls `forgectl mcp --json` until `server` satisfies `ok`.
async fn wait_mcp(forge: &Forge, server: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        let list = forge.ok(&["--json", "mcp"]).await.json_lines();
        if let Some(s) = list.into_iter().find(|s| s["name"] == server) {
            if ok(&s) {
                return s;
            }
            last = s;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("MCP server {server} never became {what}: {last}");
}

fn tool_names(server: &Value) -> Vec<String> {
    server["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str().map(String::from)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_tools_are_offered_called_approved_and_counted() {
    let s = setup("").await;
    let ready = wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    assert_eq!(ready["transport"], "stdio");
    assert_eq!(ready["server_info"], "forge-mcp-test 1.0.0");
    let names = tool_names(&ready);
    for name in ["t__echo", "t__note", "t__slow", "t__crash", "t__grow"] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    let human = s.forge.ok(&["mcp"]).await.stdout;
    assert!(human.contains("t: ready") && human.contains("t__echo (read-only)"), "{human}");
    // `tools.list` shows them with their approval rule.
    let tools = s.forge.rpc("tools.list", json!({})).await["result"].clone();
    let rule =
        |name: &str| tools.as_array().into_iter().flatten().find(|t| t["name"] == name).map(|t| t["approval"].clone());
    assert_eq!(rule("t__echo"), Some(json!("run")), "read-only runs: {tools}");
    assert_eq!(rule("t__note"), Some(json!("ask")), "side-effecting asks");

    let id = s.session("m").await;
    // A read-only tool runs without a question; the model was offered it
    // with the server's schema.
    let (out, err) = s.call(&id, "t__echo", json!({"text": "hi there"})).await;
    assert_eq!((out.as_str(), err), ("echo: hi there", false));
    let offered = s.mock.requests().last().map(|r| r.body.clone()).unwrap_or_default();
    let text = offered.to_string();
    assert!(text.contains("t__echo") && text.contains("Says the text back."), "{text}");

    // A side-effecting one waits for an approval that names the server.
    let turn = format!("{} go", tool_call("t__note", &json!({"text": "remember"})));
    let sender = s.forge.ctl_cmd(&["send", "-s", &id, &turn]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let mut pending = Value::Null;
    for _ in 0..400 {
        let list = s.forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(p) = list.into_iter().find(|p| p["session_id"] == id.as_str()) {
            pending = p;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(pending["calls"][0]["name"], "t__note", "{pending}");
    assert!(pending["calls"][0]["summary"].as_str().unwrap_or("").contains("MCP server `t`"), "{pending}");
    assert_eq!(calls_of(&s.log, "note"), 0, "nothing is called before the answer");
    s.forge.ok(&["approve", &id, "--all"]).await;
    let done = sender.wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(done.status.success());
    assert_eq!(std::fs::read_to_string(&s.notes).unwrap_or_default(), "remember\n");

    // Arguments that do not fit the schema never reach the server.
    let (out, err) = s.call(&id, "t__echo", json!({"text": 5})).await;
    assert!(err && out.contains("input schema") && out.contains("/text"), "{out}");
    assert_eq!(calls_of(&s.log, "echo"), 1);
    // A failure the server reports, and content that is not text.
    let (out, err) = s.call(&id, "t__fail", json!({})).await;
    assert!(err && out.contains("it failed on purpose"), "{out}");
    let (out, err) = s.call(&id, "t__picture", json!({})).await;
    assert!(!err && out.contains("[image 1: image/png, 70 bytes, shown to the model]"), "{out}");
    assert!(out.contains("a tiny picture"), "{out}");
    // The picture goes to the model in the result (Claude: an image block).
    let body: Value = serde_json::from_str(&s.mock.last_turn_request()).unwrap_or(Value::Null);
    let result = body["messages"]
        .as_array()
        .and_then(|m| {
            m.iter().rev().find_map(|m| m["content"].as_array()?.iter().find(|b| b["type"] == "tool_result").cloned())
        })
        .unwrap_or(Value::Null);
    assert_eq!(result["content"][1]["type"], "image", "{result}");
    assert_eq!(result["content"][1]["source"]["media_type"], "image/png");
    let history = s.forge.ok(&["history", &id]).await.stdout;
    assert!(history.contains("[image 1×1 PNG, 1 KiB]"), "{history}");

    let after = wait_mcp(&s.forge, "t", "counted", |v| v["calls"] == 4).await;
    assert_eq!(after["restarts"], 0);
    // The calls are journaled like built-in ones: the history holds them.
    let history = s.forge.ok(&["--json", "history", &id]).await.stdout;
    assert!(history.contains("echo: hi there") && history.contains("noted: remember"), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_changes_its_tools_is_listed_again() {
    let s = setup("").await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let id = s.session("g").await;
    let (out, _) = s.call(&id, "t__grow", json!({})).await;
    assert_eq!(out, "grew a tool");
    wait_mcp(&s.forge, "t", "grown", |v| tool_names(v).contains(&"t__extra".to_string())).await;
    // The next turn offers it, and it works.
    let (out, err) = s.call(&id, "t__extra", json!({})).await;
    assert_eq!((out.as_str(), err), ("extra works", false));
    let offered = s.mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(offered.contains("t__extra"), "{offered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_is_started_again_and_calls_meanwhile_fail_clearly() {
    // Each start takes 1.5 s: the window after a crash is wide enough to
    // call into.
    let mut s = setup("startup_timeout_seconds = 20\n").await;
    s.forge.terminate().await;
    // The first daemon's server may have started, or be starting: wait
    // until whatever it started is gone, then count from there.
    for _ in 0..100 {
        if s.starts().iter().all(|p| !alive(*p)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = s.starts().len();
    s.forge.write_config(
        &std::fs::read_to_string(s.forge.data_dir().join("config.toml"))
            .unwrap_or_default()
            .replace("args = [", "args = [\"--slow-start-ms\", \"1500\", "),
    );
    s.forge.start().await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let first: Vec<u32> = s.starts().split_off(before);
    assert_eq!(first.len(), 1, "one process: {first:?}");
    let id = s.session("c").await;
    let (out, err) = s.call(&id, "t__crash", json!({})).await;
    assert!(err && out.contains("MCP server `t`"), "{out}");
    let (out, err) = s.call(&id, "t__echo", json!({"text": "now?"})).await;
    assert!(
        err && (out.contains("is down") || out.contains("is restarting")) && out.contains("the call was not made"),
        "{out}"
    );
    let down = s.forge.ok(&["--json", "mcp"]).await.json_lines();
    assert!(down[0]["error"].as_str().unwrap_or("").contains("crashing on purpose"), "stderr explains: {down:?}");
    let back = wait_mcp(&s.forge, "t", "ready again", |v| v["state"] == "ready").await;
    assert!(back["restarts"].as_u64() >= Some(1), "{back}");
    assert_eq!(s.starts().len(), before + 2);
    assert!(!alive(first[0]), "the crashed process is gone");
    let (out, err) = s.call(&id, "t__echo", json!({"text": "again"})).await;
    assert_eq!((out.as_str(), err), ("echo: again", false));

    // By hand: a new process, a clear error for an unknown name.
    let r = s.forge.ok(&["mcp", "restart", "t"]).await;
    assert!(r.stdout.contains("restarting MCP server `t`"), "{}", r.stdout);
    wait_mcp(&s.forge, "t", "restarted", |v| v["state"] == "ready" && v["restarts"].as_u64() >= Some(2)).await;
    assert_eq!(s.starts().len(), before + 3);
    let bad = s.forge.ctl(&["--json", "mcp", "restart", "nope"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stdout.contains("mcp_server_not_found") && bad.stderr.contains("forgectl mcp"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_hangs_times_out_and_the_server_lives_on() {
    let s = setup("tool_timeout_seconds = 1\n").await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let id = s.session("s").await;
    let started = std::time::Instant::now();
    let (out, err) = s.call(&id, "t__slow", json!({"seconds": 30})).await;
    assert!(err && out.contains("timed out"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let (out, err) = s.call(&id, "t__echo", json!({"text": "still here"})).await;
    assert_eq!((out.as_str(), err), ("echo: still here", false));
    assert_eq!(s.starts().len(), 1, "no restart for a slow call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_stop_with_the_daemon_and_an_interrupted_call_is_not_run_again() {
    let mut s = setup("").await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let first = s.starts();
    s.forge.terminate().await;
    assert!(!alive(first[0]), "a graceful stop stops the server");

    // kill -9 right after a side-effecting MCP call did its work.
    s.forge.set_env("FORGE_CRASH_AFTER_TOOL", "t__note");
    s.forge.start().await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let id = s.session("k").await;
    let turn = format!("{} go", tool_call("t__note", &json!({"text": "once"})));
    let r = s.forge.ctl(&["send", "--auto-approve", "-s", &id, &turn]).await;
    assert_ne!(r.code, 0, "the daemon died mid-turn");
    s.forge.kill9().await;
    let second = *s.starts().last().unwrap_or(&0);
    for _ in 0..200 {
        if !alive(second) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!alive(second), "a killed daemon's server dies with it");

    s.forge.set_env("FORGE_CRASH_AFTER_TOOL", "");
    s.forge.start().await;
    let recovery = s.forge.ok(&["--json", "recover", &id, "--resume"]).await.json_lines();
    assert!(recovery[0]["not_rerun"].as_array().is_some_and(|c| c.len() == 1), "not run again: {recovery:?}");
    s.forge.ok(&["attach", &id, "--from", "live", "--until-idle"]).await;
    assert_eq!(std::fs::read_to_string(&s.notes).unwrap_or_default(), "once\n", "the note was made once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_with_a_bearer_token_serves_tools() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url_file = dir.path().join("url");
    let log = dir.path().join("http.log");
    let mut server = tokio::process::Command::new(bin("forge-mcp-test"))
        .arg("--http")
        .arg(&url_file)
        .arg("--log")
        .arg(&log)
        .args(["--token", "secret-token-123"])
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut url = String::new();
    for _ in 0..400 {
        url = std::fs::read_to_string(&url_file).unwrap_or_default();
        if !url.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let mut forge = Forge::new(&mock);
    forge.set_env("REMOTE_MCP_TOKEN", "secret-token-123");
    forge.write_config(&format!(
        "[[mcp.servers]]\nname = \"remote\"\nurl = {url:?}\nbearer_token_env_var = \"REMOTE_MCP_TOKEN\"\nheaders = {{ \"X-Team\" = \"forge\" }}\n"
    ));
    forge.start().await;
    let ready = wait_mcp(&forge, "remote", "ready", |v| v["state"] == "ready").await;
    assert_eq!(ready["transport"], "http");
    assert_eq!(ready["target"], url.as_str());
    let id = forge.new_session(&["--name", "h"]).await;
    let turn = format!("{} go", tool_call("remote__echo", &json!({"text": "over http"})));
    let out = forge.ok(&["--json", "send", "-s", &id, &turn]).await.json_lines();
    let result = out.iter().find(|e| e["kind"] == "tool_result").cloned().unwrap_or_default();
    assert_eq!(result["output"], "echo: over http", "{out:?}");
    // The token is never shown.
    let config = forge.ok(&["config", "check"]).await;
    assert!(config.stdout.contains("X-Team = \"<set>\""), "{}", config.stdout);
    assert!(!config.stdout.contains("secret-token-123") && !config.stdout.contains("forge\""), "{}", config.stdout);
    let _ = server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_sandbox_true_writes_only_in_its_cwd() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = setup(&format!("sandbox = true\ncwd = {:?}", work.path().display().to_string())).await;
    let status = s.forge.ok(&["--json", "sandbox"]).await.json_lines();
    if status.first().and_then(|v| v["mode"].as_str()) != Some("kernel") {
        forge_tests::harness::skipped("mcp", "commands are not confined on this machine");
        return;
    }
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let id = s.session("boxed").await;
    let (out, is_error) = s.call(&id, "t__echo", json!({"text": "hi"})).await;
    assert_eq!((out.as_str(), is_error), ("echo: hi", false), "the server works in its sandbox");
    s.call(&id, "t__note", json!({"text": "escaped"})).await;
    assert!(!s.notes.exists(), "the server could not write outside its cwd");
    assert!(!s.log.exists(), "nor its log there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_mcp_servers_start_only_once_the_folder_is_trusted() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let log = project.path().join("server.log").display().to_string();
    let servers = serde_json::json!({"mcpServers": {"proj": {"command": bin("forge-mcp-test").display().to_string(), "args": ["--log", log]}}});
    std::fs::write(project.path().join(".mcp.json"), servers.to_string()).unwrap_or_else(|e| panic!("{e}"));
    // A freshly cloned project: its server does not start, and the new
    // session says why.
    let out = forge.ctl(&["--json", "session", "new", "--cwd", &dir]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("MCP servers in .mcp.json (1)"), "{}", out.stderr);
    let id = out.json_lines().first().and_then(|i| i["id"].as_str().map(str::to_string)).unwrap_or_default();
    let list = forge.ok(&["--json", "mcp", "-s", &id]).await.json_lines();
    assert!(!list.iter().any(|s| s["name"] == "proj"), "not started untrusted: {list:?}");
    forge.ok(&["trust", &dir]).await;
    let id = forge.new_session(&["--cwd", &dir]).await;
    let list = forge.ok(&["--json", "mcp", "-s", &id]).await.json_lines();
    assert!(
        list.iter().any(|s| s["name"] == "proj" && s["session_id"] == id.as_str()),
        "started once trusted: {list:?}"
    );
}

/// A daemon (not started) whose server `t` answers `initialize` only after
/// `slow_ms`; `top` goes into `[mcp]`.
fn slow_server(mock: &MockServer, slow_ms: u64, top: &str) -> (Forge, tempfile::TempDir) {
    let forge = Forge::new(mock);
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    forge.write_config(&format!(
        "[mcp]\n{top}\n[[mcp.servers]]\nname = \"t\"\ncommand = {:?}\nargs = [\"--slow-start-ms\", \"{slow_ms}\"]\n",
        bin("forge-mcp-test").display().to_string(),
    ));
    (forge, project)
}

/// The user's first command starts forged and sends at once: the turn
/// waits for the server still starting, says so, and the model gets its
/// tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_send_after_autostart_waits_for_a_slow_server_and_uses_its_tool() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let (forge, project) = slow_server(&mock, 3000, "");
    let cwd = project.path().display().to_string();
    let turn = format!("{} go", tool_call("t__echo", &json!({"text": "first"})));
    let send = forge.ctl_autostart_cmd(&["send", "--auto-approve", "--cwd", &cwd, &turn]).output();
    let out = tokio::time::timeout(Duration::from_secs(60), send)
        .await
        .unwrap_or_else(|_| panic!("send did not finish"))
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // Stop the daemon it started (it is not this test's child).
    forge.ok(&["shutdown"]).await;
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("started forged"), "{stderr}");
    assert!(stderr.contains("waiting for MCP server t to start (up to 10 s)"), "{stderr}");
    assert!(stderr.contains("tool t__echo done: echo: first"), "the model got the tool: {stderr}");
    let offered = mock.requests().first().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(offered.contains("t__echo"), "the first request offers it: {offered}");
}

/// `[mcp] startup_timeout_seconds` bounds the wait: past it the turn goes
/// on without the server's tools and says which server it gave up on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slower_than_the_wait_is_named_and_the_turn_goes_on() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let (mut forge, project) = slow_server(&mock, 20_000, "startup_timeout_seconds = 1");
    forge.start().await;
    let cwd = project.path().display().to_string();
    let id = forge.new_session(&["--cwd", &cwd]).await;
    let turn = format!("{} go", tool_call("t__echo", &json!({"text": "x"})));
    let r = forge.ctl(&["send", "--auto-approve", "-s", &id, &turn]).await;
    assert!(r.stderr.contains("waiting for MCP server t to start (up to 1 s)"), "{}", r.stderr);
    assert!(
        r.stderr.contains("MCP server t still starting after") && r.stderr.contains("without its tools"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("tool t__echo failed"), "{}", r.stderr);
    let events = forge.ok(&["--json", "attach", &id, "--from", "1", "--until-idle"]).await.json_lines();
    let waited = events.iter().find(|e| e["kind"] == "mcp_waited").cloned().unwrap_or_default();
    assert_eq!(waited["not_started"], json!(["t"]), "{events:?}");
    assert!(waited["waited_ms"].as_u64().is_some_and(|ms| (900..10_000).contains(&ms)), "{waited}");
}

/// A result too large for one message fails at once saying so (it used
/// to wait for the call's timeout and say "timed out"); one just under
/// the limit arrives, and the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_too_large_is_named_at_once_not_timed_out() {
    let s = setup("tool_timeout_seconds = 120\n").await;
    wait_mcp(&s.forge, "t", "ready", |v| v["state"] == "ready").await;
    let id = s.session("big").await;
    let (out, err) = s.call(&id, "t__big", json!({"bytes": 12_000_000})).await;
    assert!(!err && out.starts_with("xxxx"), "12 MB arrives: {}", &out[..out.len().min(200)]);
    let (out, err) = s.call(&id, "t__big", json!({"bytes": 17 * 1024 * 1024})).await;
    assert!(err, "{out}");
    assert!(
        out.contains("MCP server `t` sent a result of 17.0 MiB, more than the 16 MiB") && !out.contains("timed out"),
        "{out}"
    );
    let (out, err) = s.call(&id, "t__echo", json!({"text": "still here"})).await;
    assert_eq!((out.as_str(), err), ("echo: still here", false));
    assert_eq!(s.starts().len(), 1, "no restart");
}
