//! `forgectl acp` as an editor sees it: a scripted ACP client speaking
//! JSON lines on the bridge's stdin/stdout (the wire format itself, not an
//! SDK). Sessions it makes are daemon sessions that `forgectl` sees and
//! answers too.

use std::process::Stdio;
use std::time::Duration;

use forge_tests::harness::{Forge, bin};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// A scripted editor.
struct Editor {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Everything the agent sent that was not a response, in order.
    seen: Vec<Value>,
}

impl Editor {
    fn start(forge: &Forge) -> Editor {
        let mut child = forge
            .ctl_cmd(&["acp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("forgectl acp: {e}"));
        let stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("stdout"));
        Editor { child, stdin, lines: BufReader::new(stdout).lines(), next_id: 1, seen: Vec::new() }
    }

    async fn write(&mut self, msg: Value) {
        let line = format!("{msg}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap_or_else(|e| panic!("write: {e}"));
        self.stdin.flush().await.unwrap_or_else(|e| panic!("flush: {e}"));
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the agent said nothing for 30 s; seen: {:?}", self.seen))
            .unwrap_or_else(|e| panic!("read: {e}"))
            .unwrap_or_else(|| panic!("the agent closed stdout; seen: {:?}", self.seen));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON from the agent: {line:?}: {e}"))
    }

    /// Sends a request without waiting for its answer; returns its id.
    async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.write(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// Reads until the answer to request `id`; what came before is kept
    /// in `seen`, and agent requests go to `on_request` (its value is the
    /// answer; `None` leaves the request unanswered for now).
    async fn answer_to(&mut self, id: u64, on_request: &mut dyn FnMut(&Value) -> Option<Value>) -> Value {
        loop {
            let msg = self.read().await;
            if msg.get("method").is_none() && msg["id"] == id {
                return msg;
            }
            if msg.get("method").is_some()
                && msg.get("id").is_some()
                && let Some(result) = on_request(&msg)
            {
                self.write(json!({"jsonrpc": "2.0", "id": msg["id"], "result": result})).await;
            }
            self.seen.push(msg);
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        let r = self.answer_to(id, &mut |_| None).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// The `session/update`s seen so far of one kind, then forgets them all.
    fn updates(&mut self, kind: &str) -> Vec<Value> {
        let all: Vec<Value> = std::mem::take(&mut self.seen);
        all.into_iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind)
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    async fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test-editor", "version": "1.0"}}),
        )
        .await
    }
}

fn text_of(chunks: &[Value]) -> String {
    chunks.iter().filter_map(|c| c["content"]["text"].as_str()).collect()
}

fn allow(option: &'static str) -> impl FnMut(&Value) -> Option<Value> {
    move |req: &Value| {
        (req["method"] == "session/request_permission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": option}}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_over_acp_drives_a_daemon_session_that_everyone_sees() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().display().to_string();
    let mut ed = Editor::start(&forge);

    let init = ed.initialize().await;
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentInfo"]["name"], "forge");
    let ext = init["_meta"]["forge"]["extensions"].to_string();
    assert!(ext.contains("_forge/tree") && ext.contains("_forge/rewind"), "{init}");

    // A new session is a daemon session, with modes and a model selector.
    let new = ed
        .call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [{"name": "t", "command": bin("forge-mcp-test").display().to_string(), "args": [], "env": []}]}),
        )
        .await;
    let id = new["sessionId"].as_str().unwrap_or_default().to_string();
    assert!(id.starts_with('s'), "{new}");
    assert_eq!(new["modes"]["currentModeId"], "default");
    assert_eq!(new["configOptions"][0]["id"], "model");
    let ps = forge.ok(&["--json", "ps"]).await.json_lines();
    assert!(ps.iter().any(|s| s["id"] == id.as_str() && s["cwd"] == cwd.as_str()), "{ps:?}");

    // A prompt streams the mock's answer and ends the turn.
    let r = ed
        .call("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "hello mock:tokens=5"}]}))
        .await;
    assert_eq!(r["stopReason"], "end_turn");
    let chunks = ed.updates("agent_message_chunk");
    assert_eq!(text_of(&chunks).trim_end(), "w0 w1 w2 w3 w4");

    // write_file asks through session/request_permission; allowed once.
    let write = |n: u32| {
        json!({"sessionId": id, "prompt": [{"type": "text", "text":
            format!("{} go", tool_call("write_file", &json!({"path": format!("f{n}.txt"), "content": format!("file {n}\n")})))}]})
    };
    let p = ed.send("session/prompt", write(1)).await;
    let mut asked = Vec::new();
    let r = ed
        .answer_to(p, &mut |req| {
            asked.push(req.clone());
            allow("allow_once")(req)
        })
        .await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let perm = &asked[0]["params"];
    assert_eq!(perm["sessionId"], id.as_str());
    assert_eq!(perm["toolCall"]["title"], "write_file f1.txt");
    assert_eq!(perm["toolCall"]["kind"], "edit");
    let options: Vec<&str> =
        perm["options"].as_array().into_iter().flatten().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(std::fs::read_to_string(project.path().join("f1.txt")).unwrap_or_default(), "file 1\n");
    let calls = ed.updates("tool_call_update");
    let done = calls.iter().find(|u| u["status"] == "completed").unwrap_or_else(|| panic!("{calls:?}"));
    let diff = done["content"].as_array().into_iter().flatten().find(|c| c["type"] == "diff");
    assert!(
        diff.is_some_and(|d| d["newText"] == "file 1\n" && d["path"].as_str().is_some_and(|p| p.ends_with("f1.txt"))),
        "{done}"
    );

    // The same question answered by `forgectl approve`: the editor's
    // request is withdrawn with $/cancel_request.
    let p = ed.send("session/prompt", write(2)).await;
    let question = loop {
        let msg = ed.read().await;
        if msg["method"] == "session/request_permission" {
            break msg;
        }
    };
    forge.ok(&["approve", &id, "--all"]).await;
    let cancel = loop {
        let msg = ed.read().await;
        if msg["method"] == "$/cancel_request" {
            break msg;
        }
    };
    assert_eq!(cancel["params"]["requestId"], question["id"], "{cancel}");
    // An editor answers a withdrawn request as cancelled.
    ed.write(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"outcome": {"outcome": "cancelled"}}})).await;
    let r = ed.answer_to(p, &mut |_| None).await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(project.path().join("f2.txt").exists());

    // Allow always: recorded for the session, shown by forgectl; the next
    // call runs without a question.
    let p = ed.send("session/prompt", write(3)).await;
    ed.answer_to(p, &mut allow("allow_always")).await;
    let approvals = forge.ok(&["approvals"]).await.stdout;
    assert!(approvals.contains(&id) && approvals.contains("always allowed: write_file"), "{approvals}");
    let p = ed.send("session/prompt", write(4)).await;
    let mut asked_again = false;
    ed.answer_to(p, &mut |_| {
        asked_again = true;
        None
    })
    .await;
    assert!(!asked_again && project.path().join("f4.txt").exists());

    // The editor's MCP server serves this session.
    let mcp = forge.ok(&["--json", "mcp", "--session", &id]).await.json_lines();
    assert!(mcp.iter().any(|s| s["name"] == "t" && s["session_id"] == id.as_str()), "{mcp:?}");
    for _ in 0..200 {
        let s = forge.ok(&["--json", "mcp", "--session", &id]).await.json_lines();
        if s.iter().any(|s| s["state"] == "ready") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let echo = json!({"sessionId": id, "prompt": [{"type": "text", "text": format!("{} go", tool_call("t__echo", &json!({"text": "from the editor"})))}]});
    ed.call("session/prompt", echo).await;
    let updates = ed.updates("tool_call_update");
    assert!(updates.iter().any(|u| u.to_string().contains("echo: from the editor")), "{updates:?}");

    // Modes and the model are the session's, as forgectl sees.
    ed.call("session/set_mode", json!({"sessionId": id, "modeId": "permissive"})).await;
    let show = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!(show[0]["approval_mode"], "permissive");
    let opts =
        ed.call("session/set_config_option", json!({"sessionId": id, "configId": "model", "value": "gpt-5.5"})).await;
    assert_eq!(opts["configOptions"][0]["currentValue"], "gpt-5.5", "{opts}");
    let show = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!((show[0]["provider"].as_str(), show[0]["model"].as_str()), (Some("openai"), Some("gpt-5.5")));

    // Cancel: the turn ends as cancelled.
    let p = ed
        .send(
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "mock:tokens=400 mock:delay=20"}]}),
        )
        .await;
    loop {
        let msg = ed.read().await;
        if msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    ed.notify("session/cancel", json!({"sessionId": id})).await;
    let r = ed.answer_to(p, &mut |_| None).await;
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");

    // A Forge extension.
    let tree = ed.call("_forge/tree", json!({"sessionId": id})).await;
    assert!(tree["nodes"].as_array().is_some_and(|n| n.len() > 10), "{tree}");
    let unknown = ed.send("_forge/nope", json!({})).await;
    let r = ed.answer_to(unknown, &mut |_| None).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");

    // Another editor (the first one closed) loads the session: its history
    // comes back as updates before the answer.
    drop(ed.stdin);
    let _ = ed.child.wait().await;
    let mut ed2 = Editor::start(&forge);
    ed2.initialize().await;
    ed2.call("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []})).await;
    let replay = std::mem::take(&mut ed2.seen);
    let kinds: Vec<&str> = replay.iter().filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"user_message_chunk") && kinds.contains(&"tool_call"), "{kinds:?}");
    let users: String = replay
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(users.contains("hello mock:tokens=5"), "{users}");
    assert!(replay.iter().any(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        && m["params"]["update"]["content"]["text"].as_str().map(str::trim_end) == Some("w0 w1 w2 w3 w4")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_in_an_untrusted_folder_asks_the_editor_once() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(dir.join(".claude")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(".claude/settings.json"), r#"{"hooks":{"Stop":[]}}"#).unwrap_or_else(|e| panic!("{e}"));
    let mut ed = Editor::start(&forge);
    ed.initialize().await;
    let id = ed.send("session/new", json!({"cwd": dir.display().to_string(), "mcpServers": []})).await;
    let created = ed.answer_to(id, &mut |_| None).await;
    assert!(created.get("error").is_none(), "{created}");
    // The agent asks whether to trust the folder; the editor says yes.
    let mut asked = None;
    for _ in 0..20 {
        let msg = ed.read().await;
        if msg["method"] == "session/request_permission" {
            asked = Some(msg);
            break;
        }
    }
    let asked = asked.unwrap_or_else(|| panic!("no trust question; seen {:?}", ed.seen));
    let title = asked["params"]["toolCall"]["title"].as_str().unwrap_or_default().to_string();
    assert!(title.starts_with("Trust "), "{asked}");
    ed.write(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "trust"}}}))
        .await;
    let dir_s = dir.display().to_string();
    let mut state = String::new();
    for _ in 0..100 {
        let shown = forge.ok(&["--json", "trust", "--show", &dir_s]).await.json_lines();
        state = shown.first().and_then(|t| t["state"].as_str()).unwrap_or_default().to_string();
        if state == "trusted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state, "trusted");
}

/// What an editor (or a broken one) may send that the bridge must
/// survive: bytes that are not UTF-8, a request that is not JSON-RPC 2.0,
/// a prompt too large for the daemon, a directory that does not exist,
/// and a prompt followed at once by the end of its input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_survives_bad_input_and_answers_it() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().display().to_string();
    let mut ed = Editor::start(&forge);
    ed.initialize().await;

    // Not UTF-8: read with replacement characters; the bridge goes on.
    ed.stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\xff\xfe\"}\n").await.unwrap_or_else(|e| panic!("{e}"));
    // JSON-RPC 1.0: answered with invalid request, not silence.
    ed.write(json!({"jsonrpc": "1.0", "id": 99, "method": "initialize", "params": {}})).await;
    let r = ed.answer_to(99, &mut |_| None).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");

    // A directory that does not exist is refused, saying so.
    let missing = project.path().join("no/such/dir").display().to_string();
    let id = ed.send("session/new", json!({"cwd": missing, "mcpServers": []})).await;
    let r = ed.answer_to(id, &mut |_| None).await;
    assert!(r["error"]["message"].as_str().is_some_and(|m| m.contains("does not exist")), "{r}");
    assert_eq!(r["error"]["code"], -32602, "invalid params, the editor's to fix: {r}");

    let new = ed.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    let session = new["sessionId"].as_str().unwrap_or_default().to_string();
    // A prompt over 8 MiB is refused with the reason, and the next works.
    let huge = "x".repeat(9 * 1024 * 1024);
    let id = ed.send("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": huge}]})).await;
    let r = ed.answer_to(id, &mut |_| None).await;
    assert!(r["error"]["message"].as_str().is_some_and(|m| m.contains("MiB")), "{r}");
    let r = ed
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again mock:tokens=2"}]}),
        )
        .await;
    assert_eq!(r["stopReason"], "end_turn");

    // A prompt, then the editor closes its end at once: the prompt still
    // reaches the daemon and its turn runs there.
    ed.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "last words mock:tokens=3"}]}),
    )
    .await;
    drop(ed.stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), ed.child.wait()).await;
    assert!(status.is_ok_and(|s| s.is_ok()), "the bridge exits once its input ends");
    forge
        .wait_for_session(&session, "the last prompt answered", |s| {
            s["state"] == "idle" && s["message_count"].as_u64() == Some(4)
        })
        .await;
    let history = forge.ok(&["--json", "history", &session]).await.json_lines();
    assert!(history.iter().any(|m| m["text"].as_str().is_some_and(|t| t.contains("last words"))), "{history:?}");
}

/// A prompt sent while another runs steers it (ACP lets a client prompt
/// again): it joins the running turn after its tool call, the model's next
/// request carries it, both prompts end with that turn, and the editor
/// gets the turn's updates once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_while_one_runs_steers_the_turn() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ed = Editor::start(&forge);
    ed.initialize().await;
    let new = ed.call("session/new", json!({"cwd": project.path().display().to_string(), "mcpServers": []})).await;
    let id = new["sessionId"].as_str().unwrap_or_default().to_string();

    let call = tool_call("write_file", &json!({"path": "a.txt", "content": "a\n"}));
    let first = ed
        .send("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": format!("{call} go")}]}))
        .await;
    let permission = loop {
        let msg = ed.read().await;
        if msg["method"] == "session/request_permission" {
            break msg;
        }
        ed.seen.push(msg);
    };
    let second = ed
        .send("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "steer: keep it short"}]}))
        .await;
    ed.write(json!({"jsonrpc": "2.0", "id": permission["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let msg = ed.read().await;
        if msg.get("method").is_none() && (msg["id"] == first || msg["id"] == second) {
            answers.push(msg);
        } else {
            ed.seen.push(msg);
        }
    }
    assert!(answers.iter().all(|a| a["result"]["stopReason"] == "end_turn"), "{answers:?}");
    let last = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(last.contains("steer: keep it short") && last.contains("tool_result"), "{last}");
    assert_eq!(mock.requests().len(), 2, "one turn, two requests");
    let text = text_of(&ed.updates("agent_message_chunk"));
    assert_eq!(text.matches("“steer: keep it short”. I was sent 4 message(s)").count(), 1, "updates sent once: {text}");
}

/// The model's plan reaches the editor as ACP `plan` updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_reaches_the_editor() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ed = Editor::start(&forge);
    ed.initialize().await;
    let new = ed.call("session/new", json!({"cwd": project.path().display().to_string(), "mcpServers": []})).await;
    let id = new["sessionId"].as_str().unwrap_or_default().to_string();
    let plan = json!({"plan": [{"step": "one", "status": "completed"}, {"step": "two", "status": "in_progress"}]});
    let text = format!("{} go", tool_call("update_plan", &plan));
    let r = ed.call("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": text}]})).await;
    assert_eq!(r["stopReason"], "end_turn");
    let plans = ed.updates("plan");
    assert_eq!(plans.len(), 1, "{plans:?}");
    assert_eq!(plans[0]["entries"][0]["content"], "one");
    assert_eq!(plans[0]["entries"][0]["status"], "completed");
    assert_eq!(plans[0]["entries"][1]["status"], "in_progress");
}

/// An editor is told the session's own commands, and `/name args` from it
/// expands as from forgectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_lists_and_runs_commands_of_ones_own() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let config = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(config.path().join("forge/commands")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.path().join("forge/commands/review.md"),
        "---\ndescription: Review a path\nargument-hint: <path>\n---\nReview $ARGUMENTS now.",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    forge.set_env("XDG_CONFIG_HOME", &config.path().display().to_string());
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ed = Editor::start(&forge);
    ed.initialize().await;
    let new = ed.call("session/new", json!({"cwd": project.path().display().to_string(), "mcpServers": []})).await;
    let id = new["sessionId"].as_str().unwrap_or_default().to_string();
    let r =
        ed.call("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "/review src/"}]})).await;
    assert_eq!(r["stopReason"], "end_turn");
    let announced = ed.updates("available_commands_update");
    let names: Vec<&str> = announced
        .iter()
        .flat_map(|u| u["availableCommands"].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"review") && names.contains(&"undo"), "{names:?}");
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("Review src/ now."), "{asked}");
}

/// An editor's image goes to the model with the prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editors_image_reaches_the_model() {
    const PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ed = Editor::start(&forge);
    let init = ed.initialize().await;
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["image"], true, "{init}");
    let new = ed.call("session/new", json!({"cwd": project.path().display().to_string(), "mcpServers": []})).await;
    let id = new["sessionId"].as_str().unwrap_or_default().to_string();
    let prompt = json!([{"type": "text", "text": "what is this?"},
                        {"type": "image", "data": PNG, "mimeType": "image/png", "uri": "file:///tmp/dot.png"}]);
    let r = ed.call("session/prompt", json!({"sessionId": id, "prompt": prompt})).await;
    assert_eq!(r["stopReason"], "end_turn");
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let user = &body["messages"][0]["content"];
    assert_eq!(user[0]["source"]["data"], PNG, "{body}");
    assert_eq!(user[1]["text"], "what is this?");
    let history = forge.ok(&["history", &id]).await.stdout;
    assert!(history.contains("[image dot.png, 1×1 PNG, 1 KiB]"), "{history}");

    // Loaded in another editor, the prompt comes back with its image.
    drop(ed.stdin);
    let _ = ed.child.wait().await;
    let mut ed2 = Editor::start(&forge);
    ed2.initialize().await;
    let cwd = project.path().display().to_string();
    ed2.call("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []})).await;
    let replay = std::mem::take(&mut ed2.seen);
    let image = replay.iter().find(|m| {
        m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
            && m["params"]["update"]["content"]["type"] == "image"
    });
    let image = image.map(|m| m["params"]["update"]["content"].clone()).unwrap_or_default();
    assert_eq!((image["data"].as_str(), image["mimeType"].as_str()), (Some(PNG), Some("image/png")), "{replay:?}");
}
