//! What a user brings from MCP servers into a message: a server's prompts
//! are `/server:prompt` commands (listed with the user's own, expanded by
//! the daemon through `prompts/get`), and its resources attach to a
//! message (`forgectl send --resource server:uri`).

use std::time::Duration;

use forge_tests::harness::{Forge, bin};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::Value;

/// A daemon with the test server as `t`, ready, and a session.
async fn setup() -> (MockServer, Forge, tempfile::TempDir, String) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = project.path().join("server.log").display().to_string();
    forge.write_config(&format!(
        "[[mcp.servers]]\nname = \"t\"\ncommand = {:?}\nargs = [\"--log\", {log:?}]\n",
        bin("forge-mcp-test").display().to_string(),
    ));
    forge.start().await;
    let mut last = Vec::new();
    for _ in 0..600 {
        last = forge.ok(&["--json", "mcp"]).await.json_lines();
        if last.iter().any(|s| s["name"] == "t" && s["state"] == "ready") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(last.iter().any(|s| s["state"] == "ready"), "the server never became ready: {last:?}");
    let cwd = project.path().display().to_string();
    let id = forge.new_session(&["--cwd", &cwd]).await;
    (mock, forge, project, id)
}

/// The text of the last user message the model was sent.
fn last_user_text(mock: &MockServer) -> String {
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.iter().rev().find(|m| m["role"] == "user").cloned().unwrap_or(Value::Null);
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

fn error_of(lines: &[Value]) -> (String, String) {
    let e = lines.iter().find(|l| l["type"] == "error").unwrap_or_else(|| panic!("no error: {lines:?}"));
    (e["error"]["kind"].as_str().unwrap_or("").into(), e["error"]["message"].as_str().unwrap_or("").into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_prompts_are_slash_commands_expanded_by_the_daemon() {
    let (mock, forge, _project, id) = setup().await;

    let listed = forge.ok(&["--json", "commands", &id]).await.json_lines();
    let review = listed.iter().find(|c| c["name"] == "t:review").unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(review["source"], "mcp");
    assert_eq!(review["argument_hint"], "<pr> [focus]");
    assert_eq!(review["description"], "Review a pull request");
    assert!(listed.iter().any(|c| c["name"] == "t:hello"), "{listed:?}");
    let shown = forge.ok(&["mcp"]).await.stdout;
    assert!(shown.contains("prompts: /t:review /t:hello"), "{shown}");

    forge.ok(&["send", "-s", &id, "/t:review 12 the error paths"]).await;
    assert_eq!(last_user_text(&mock), "Review pull request 12, focusing on the error paths.");
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let user = history.iter().rfind(|m| m["role"] == "user").cloned().unwrap_or(Value::Null);
    assert_eq!(user["text"], "Review pull request 12, focusing on the error paths.", "history shows what was sent");

    // A required argument left out: refused, with the usage, nothing sent.
    let sent_before = mock.requests().len();
    let r = forge.ctl(&["--json", "send", "-s", &id, "/t:review"]).await;
    assert_ne!(r.code, 0);
    let (kind, message) = error_of(&r.json_lines());
    assert_eq!(kind, "mcp_request_failed");
    assert!(message.contains("/t:review needs `pr` (usage: /t:review <pr> [focus])"), "{message}");
    assert_eq!(mock.requests().len(), sent_before, "nothing reached the model");

    // What names no prompt is sent as typed.
    forge.ok(&["send", "-s", &id, "/t:nothing here"]).await;
    assert_eq!(last_user_text(&mock), "/t:nothing here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_attached_to_a_message_is_read_and_added_after_it() {
    let (mock, forge, _project, id) = setup().await;

    let listed = forge.ok(&["mcp", "resources"]).await.stdout;
    assert!(listed.contains("t:test://notes.txt  notes: The team's notes"), "{listed}");
    let json = forge.ok(&["--json", "mcp", "resources"]).await.json_lines();
    assert!(json.iter().any(|r| r["uri"] == "test://logo.png" && r["mime_type"] == "image/png"), "{json:?}");

    forge
        .ok(&["send", "-s", &id, "--resource", "t:test://notes.txt", "--resource", "t:test://logo.png", "when?"])
        .await;
    let text = last_user_text(&mock);
    assert_eq!(
        text,
        "when?\n\n<mcp-resource server=\"t\" uri=\"test://notes.txt\">\nship on Friday\n</mcp-resource>\n\n\
         <mcp-resource server=\"t\" uri=\"test://logo.png\">\n[8 bytes of image/png; not shown to the model]\n</mcp-resource>"
    );

    // A resource the server does not have, or a server there is not:
    // refused, saying which, and nothing sent.
    let sent_before = mock.requests().len();
    let r = forge.ctl(&["--json", "send", "-s", &id, "--resource", "t:test://gone", "x"]).await;
    let (kind, message) = error_of(&r.json_lines());
    assert_eq!(kind, "mcp_request_failed");
    assert!(message.contains("Resource not found") && message.contains("nothing was sent"), "{message}");
    let r = forge.ctl(&["--json", "send", "-s", &id, "--resource", "nope:test://x", "x"]).await;
    assert_eq!(error_of(&r.json_lines()).0, "mcp_server_not_found");
    let r = forge.ctl(&["--json", "send", "-s", &id, "--resource", "no-colon", "x"]).await;
    assert_eq!(error_of(&r.json_lines()).0, "invalid_params");
    assert_eq!(mock.requests().len(), sent_before, "nothing reached the model");
}

/// The user's first command starts forged and names a prompt of a server
/// still starting: the message waits for the server's prompts, and the
/// model gets the prompt, not the literal text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_prompt_after_an_autostart_waits_for_its_server() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = Forge::new(&mock);
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    forge.write_config(&format!(
        "[[mcp.servers]]\nname = \"t\"\ncommand = {:?}\nargs = [\"--slow-start-ms\", \"2000\"]\n",
        bin("forge-mcp-test").display().to_string(),
    ));
    let cwd = project.path().display().to_string();
    let send = forge.ctl_autostart_cmd(&["send", "--cwd", &cwd, "/t:review 12 the error paths"]).output();
    let out = tokio::time::timeout(Duration::from_secs(60), send)
        .await
        .unwrap_or_else(|_| panic!("send did not finish"))
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // Stop the daemon it started (it is not this test's child).
    forge.ok(&["shutdown"]).await;
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("started forged"), "{stderr}");
    assert_eq!(last_user_text(&mock), "Review pull request 12, focusing on the error paths.");
}

/// An editor's `/server:prompt args` (ACP sends a prompt with no turn
/// running as a steer) reaches the model expanded, as from forgectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editors_prompt_naming_a_server_prompt_reaches_the_model_expanded() {
    let (mock, forge, project, _id) = setup().await;
    let mut acp = forge
        .ctl_cmd(&["acp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("forgectl acp: {e}"));
    let mut stdin = acp.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let stdout = acp.stdout.take().unwrap_or_else(|| panic!("stdout"));
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let mut call = async |id: u64, method: &str, params: Value| -> Value {
        let line = format!("{}\n", serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        tokio::io::AsyncWriteExt::write_all(&mut stdin, line.as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("the bridge closed stdout"));
            let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if msg.get("method").is_none() && msg["id"] == id {
                assert!(msg.get("error").is_none(), "{method}: {msg}");
                return msg["result"].clone();
            }
        }
    };
    call(1, "initialize", serde_json::json!({"protocolVersion": 1, "clientCapabilities": {}})).await;
    let cwd = project.path().display().to_string();
    let new = call(2, "session/new", serde_json::json!({"cwd": cwd, "mcpServers": []})).await;
    let session = new["sessionId"].as_str().unwrap_or_default().to_string();
    let prompt = serde_json::json!([{"type": "text", "text": "/t:review 7 naming"}]);
    let done = call(3, "session/prompt", serde_json::json!({"sessionId": session, "prompt": prompt})).await;
    assert_eq!(done["stopReason"], "end_turn");
    assert_eq!(last_user_text(&mock), "Review pull request 7, focusing on naming.");
    let _ = acp.kill().await;
}
