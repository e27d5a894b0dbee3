//! The socket: JSON-RPC errors for bad input, limits, and a daemon that
//! keeps serving whatever it is sent.

use forge_tests::harness::{Forge, raw_http};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

async fn setup() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {text:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_standard_json_rpc_errors() {
    let (_mock, forge) = setup().await;
    let r = parse(&forge.http(b"{not json").await);
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);

    let r = parse(&forge.http(br#"{"jsonrpc":"2.0","id":7}"#).await);
    assert_eq!(r["error"]["code"], -32600);

    let r = forge.rpc("session.frobnicate", json!({})).await;
    assert_eq!(r["error"]["code"], -32601);

    let r = forge.rpc("session.show", json!({"sesion": "x"})).await;
    assert_eq!(r["error"]["code"], -32602);

    let r = forge.rpc("session.show", json!({"session": "nope"})).await;
    assert_eq!(r["error"]["data"]["kind"], "session_not_found");
    let code = r["error"]["code"].as_i64().unwrap_or(0);
    assert!((-32099..=-32000).contains(&code), "Forge's own errors use the server range: {code}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_style_calls_work_without_a_handshake() {
    let (_mock, forge) = setup().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let r = forge.rpc("session.create", json!({"name": "viacurl", "cwd": project.path().display().to_string()})).await;
    assert_eq!(r["result"]["name"], "viacurl");
    let r = forge.rpc("session.list", json!({})).await;
    assert_eq!(r["result"][0]["name"], "viacurl");
    let r = forge.rpc("daemon.status", json!({})).await;
    assert_eq!(r["result"]["protocol_version"], forge_proto_version());
}

fn forge_proto_version() -> u64 {
    1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_protocol_version_is_refused_with_a_clear_kind() {
    let (_mock, forge) = setup().await;
    let r = forge
        .rpc(
            "hello",
            json!({"protocol_version": 999, "client": {"name": "old-plugin", "version": "0.0.1", "kind": "editor"}}),
        )
        .await;
    assert_eq!(r["error"]["data"]["kind"], "protocol_mismatch");
    assert!(r["error"]["message"].as_str().unwrap_or("").contains("999"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_answered_with_an_error() {
    let (_mock, forge) = setup().await;
    let big = "x".repeat(9 * 1024 * 1024);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {"name": big}}).to_string();
    let r = forge.http(body.as_bytes()).await;
    let v: Value = serde_json::from_str(&r).unwrap_or(Value::Null);
    assert_eq!(v["error"]["code"], -32007, "an error, not a crash: {:?}", &r[..r.len().min(200)]);
    // And it keeps serving.
    let r = forge.rpc("session.list", json!({})).await;
    assert!(r["result"].is_array());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_socket_does_not_disturb_other_clients() {
    let (_mock, forge) = setup().await;
    // Raw bytes that are not HTTP at all.
    for junk in
        [&b"\x00\x01\x02\xff\xfe garbage\r\n\r\n"[..], b"GET / HTTP/1.1\r\n\r\n", b"\r\n\r\n\r\n", &[0u8; 4096][..]]
    {
        let mut s = UnixStream::connect(&forge.socket).await.unwrap_or_else(|e| panic!("{e}"));
        let _ = s.write_all(junk).await;
        let _ = s.shutdown().await;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    }
    // A connection that says nothing and hangs around.
    let _idle = UnixStream::connect(&forge.socket).await;
    // Invalid UTF-8 inside a JSON-RPC body.
    let r = raw_http(&forge.socket, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}").await;
    assert!(r.contains("-32700") || r.contains("-32600") || r.contains("-32601"), "{r}");
    // A batch mixing good and bad entries.
    let r = parse(&forge.http(br#"[{"jsonrpc":"2.0","id":1,"method":"session.list"},{"bad":true}]"#).await);
    assert!(r.is_array() || r["error"].is_object(), "{r}");
    let ok = forge.ok(&["status"]).await;
    assert!(ok.stdout.contains("forged"), "{}", ok.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_switch_clear_context_and_tool_list_work_for_every_client() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "cfg"]).await;
    forge.ok(&["send", "-s", &id, "first message"]).await;

    let r = forge.rpc("session.configure", json!({"session": "cfg", "model": "claude-opus-4-6"})).await;
    assert_eq!(r["result"]["model"], "claude-opus-4-6", "{r}");
    let r = forge.rpc("session.configure", json!({"session": "cfg", "provider": "openai"})).await;
    assert_eq!(r["result"]["provider"], "openai", "{r}");
    let model = r["result"]["model"].as_str().unwrap_or_default().to_string();
    assert!(model.starts_with("gpt"), "a provider alone takes its default model: {r}");
    let bad = forge.rpc("session.configure", json!({"session": "cfg", "provider": "acme"})).await;
    assert!(bad["error"]["message"].as_str().unwrap_or_default().contains("unknown provider"), "{bad}");
    // The next turn goes to the new provider and model (the mock echoes its wire).
    forge.ok(&["send", "-s", &id, "second"]).await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(h.last().map(|m| m["model"].clone()), Some(json!(model)));

    let ctx = forge.rpc("session.context", json!({"session": "cfg"})).await;
    assert_eq!(ctx["result"]["messages"], 4, "{ctx}");
    assert!(ctx["result"]["estimated_tokens"].as_u64().unwrap_or(0) > 10, "{ctx}");
    assert!(ctx["result"]["context_window"].as_u64().is_some(), "{ctx}");

    let cleared = forge.rpc("session.clear", json!({"session": "cfg"})).await;
    assert_eq!(cleared["result"]["message_count"], 0, "{cleared}");
    let out = forge.ok(&["send", "-s", &id, "fresh start"]).await;
    assert!(
        out.stdout.contains("I was sent 1 message(s)"),
        "a cleared session sends only the new message: {}",
        out.stdout
    );
    let events = forge.ok(&["attach", &id, "--from", "1", "--until-idle"]).await.stdout;
    assert!(events.contains("now using openai/") && events.contains("conversation cleared"), "{events}");

    let tools = forge.rpc("tools.list", json!({})).await;
    let list = tools["result"].as_array().cloned().unwrap_or_default();
    let approval = |n: &str| list.iter().find(|t| t["name"] == n).map(|t| t["approval"].clone());
    assert_eq!(approval("read_file"), Some(json!("run")));
    assert_eq!(approval("write_file"), Some(json!("ask")));
}

/// `forgectl ... | head`: once the reader is gone, forgectl stops quietly
/// (no panic), even a follower that would otherwise wait forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_forgectl_quietly() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&[]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=50 hi"]).await;
    for args in [vec!["models"], vec!["attach", id.as_str(), "--from", "1"], vec!["history", id.as_str()]] {
        let mut child = forge.ctl_cmd(&args).spawn().unwrap_or_else(|e| panic!("{e}"));
        // The reader goes away before forgectl has written anything.
        drop(child.stdout.take());
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("{args:?}: forgectl kept running with no reader"))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}
