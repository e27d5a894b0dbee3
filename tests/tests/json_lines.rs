//! Newline-delimited JSON-RPC on the daemon's socket, as a script or an
//! editor plugin speaks it with no HTTP or WebSocket library: calls,
//! errors, and following a session with `session.subscribe`.

use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

struct Lines {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

impl Lines {
    async fn connect(forge: &Forge) -> Lines {
        let s = UnixStream::connect(&forge.socket).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let (read, write) = s.into_split();
        Lines { read: BufReader::new(read), write }
    }

    async fn send_raw(&mut self, line: &str) {
        self.write.write_all(format!("{line}\n").as_bytes()).await.unwrap_or_else(|e| panic!("write: {e}"));
    }

    /// The answer to a call, passing over notifications that come first.
    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()).await;
        loop {
            let line = self.recv().await.unwrap_or_else(|| panic!("no answer to {method}"));
            if line.get("method").is_none() {
                return line;
            }
        }
    }

    /// The next line as JSON; `None` when the daemon closed the connection.
    async fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(20), self.read.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("no line from the daemon in 20 s"))
            .unwrap_or_else(|e| panic!("read: {e}"));
        if n == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}")))
    }
}

async fn setup() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_errors_over_json_lines() {
    let (_mock, forge) = setup().await;
    let mut c = Lines::connect(&forge).await;
    let hello = json!({"protocol_version": 1, "client": {"name": "plugin", "version": "0.1", "kind": "editor"}});
    let r = c.call(1, "hello", hello).await;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["protocol_version"], 1);
    assert_eq!(r["result"]["server"]["name"], "forged");

    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().display().to_string();
    let r = c.call(2, "session.create", json!({"name": "lines", "cwd": cwd})).await;
    assert_eq!(r["result"]["name"], "lines");
    // String ids come back as they were sent.
    c.send_raw(r#"{"jsonrpc":"2.0","id":"a-1","method":"session.list","params":{}}"#).await;
    let r = c.recv().await.unwrap_or_default();
    assert_eq!(r["id"], "a-1");
    assert_eq!(r["result"][0]["name"], "lines");

    assert_eq!(c.call(3, "session.frobnicate", json!({})).await["error"]["code"], -32601);
    assert_eq!(c.call(4, "session.show", json!({"sesion": "x"})).await["error"]["code"], -32602);
    let r = c.call(5, "session.show", json!({"session": "nope"})).await;
    assert_eq!(r["error"]["data"]["kind"], "session_not_found");

    // A line that is not JSON: a parse error, and the connection goes on.
    c.send_raw("{this is not json").await;
    let r = c.recv().await.unwrap_or_default();
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);
    // JSON that is not a request.
    c.send_raw(r#"{"jsonrpc":"2.0","id":9,"result":true}"#).await;
    let r = c.recv().await.unwrap_or_default();
    assert_eq!((r["error"]["code"].as_i64(), r["id"].as_i64()), (Some(-32600), Some(9)), "{r}");
    // A notification (no id) gets no answer: the next line answers id 6.
    c.send_raw(r#"{"jsonrpc":"2.0","method":"session.list","params":{}}"#).await;
    assert_eq!(c.call(6, "daemon.status", json!({})).await["id"], 6);

    assert_eq!(c.call(7, "session.subscribe", json!(["lines"])).await["error"]["code"], -32602);
    let r = c.call(8, "session.subscribe", json!({"session": "nope"})).await;
    assert_eq!(r["error"]["data"]["kind"], "session_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_followed_over_json_lines_from_replay_to_live() {
    let (_mock, forge) = setup().await;
    let id = forge.new_session(&["--name", "follow"]).await;
    forge.ok(&["send", "-s", "follow", "mock:tokens=5 first"]).await;

    let mut c = Lines::connect(&forge).await;
    let r = c.call(1, "session.subscribe", json!({"session": "follow", "from_seq": 1})).await;
    let sub = r["result"].clone();
    assert!(sub.is_number(), "a subscription id: {r}");
    // The whole first turn from the store, then `live`.
    let mut seqs = Vec::new();
    loop {
        let n = c.recv().await.unwrap_or_default();
        assert_eq!(n["method"], "session.event");
        assert_eq!(n["params"]["subscription"], sub);
        let item = &n["params"]["result"];
        match item["type"].as_str() {
            Some("event") => seqs.push(item["seq"].as_u64().unwrap_or(0)),
            Some("live") => break,
            other => panic!("unexpected item {other:?}: {n}"),
        }
    }
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "replayed in order, none missing");

    // A second turn arrives live, every delta in order, exactly once.
    let mut other = Lines::connect(&forge).await;
    let r = other.call(1, "session.send", json!({"session": id, "text": "mock:tokens=20 second"})).await;
    assert!(r["result"]["seq"].is_number(), "{r}");
    let mut text = String::new();
    loop {
        let n = c.recv().await.unwrap_or_default();
        let item = &n["params"]["result"];
        let seq = item["seq"].as_u64().unwrap_or(0);
        assert_eq!(seq, seqs.last().copied().unwrap_or(0) + 1, "no gap, no duplicate: {n}");
        seqs.push(seq);
        match item["kind"].as_str() {
            Some("text_delta") => text.push_str(item["text"].as_str().unwrap_or("")),
            Some("turn_finished") => break,
            _ => {}
        }
    }
    assert_eq!(text, forge_tests::mock::token_text(20));

    let r = c.call(2, "session.unsubscribe", json!({"subscription": sub})).await;
    assert_eq!(r["result"], true);
    let r = c.call(3, "session.unsubscribe", json!({"subscription": sub})).await;
    assert_eq!(r["result"], false, "already gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_line_is_refused_and_the_connection_goes_on() {
    let (_mock, forge) = setup().await;
    let mut c = Lines::connect(&forge).await;
    let big = "x".repeat(9 * 1024 * 1024);
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {"name": big}}).to_string();
    c.send_raw(&line).await;
    let r = c.recv().await.unwrap_or_default();
    assert_eq!(r["error"]["code"], -32007, "{r}");
    assert!(c.call(2, "session.list", json!({})).await["result"].is_array());
}

/// A client that stops reading while a long answer streams (its socket
/// fills, so the daemon can no longer write to it at once) still gets every
/// event exactly once and in order on each of its subscriptions when it
/// reads again; the turn itself never waited for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_stops_reading_misses_nothing() {
    let (_mock, forge) = setup().await;
    forge.new_session(&["--name", "slow"]).await;
    let mut c = Lines::connect(&forge).await;
    let r = c.call(1, "session.subscribe", json!({"session": "slow"})).await;
    let live_only = r["result"].clone();
    assert!(live_only.is_number(), "{r}");
    let from_start = c.call(2, "session.subscribe", json!({"session": "slow", "from_seq": 1})).await["result"].clone();
    // About 3 MB of text, far more than the socket holds; c reads nothing.
    tokio::time::timeout(Duration::from_secs(60), forge.ok(&["send", "-s", "slow", "mock:tokens=3000 mock:pad=1000"]))
        .await
        .unwrap_or_else(|_| panic!("the turn waited for a client that does not read"));

    let mut seqs: std::collections::HashMap<String, Vec<u64>> = Default::default();
    let mut text: std::collections::HashMap<String, String> = Default::default();
    let mut finished = 0;
    while finished < 2 {
        let n = c.recv().await.unwrap_or_default();
        let sub = n["params"]["subscription"].to_string();
        let item = &n["params"]["result"];
        if item["type"] != "event" {
            continue;
        }
        let seq = item["seq"].as_u64().unwrap_or(0);
        let seen = seqs.entry(sub.clone()).or_default();
        if let Some(last) = seen.last() {
            assert_eq!(seq, last + 1, "subscription {sub}: no gap, no duplicate");
        }
        seen.push(seq);
        match item["kind"].as_str() {
            Some("text_delta") => text.entry(sub).or_default().push_str(item["text"].as_str().unwrap_or("")),
            Some("turn_finished") => finished += 1,
            _ => {}
        }
    }
    let expected = forge_tests::mock::padded_token_text(3000, 1000);
    for sub in [&live_only, &from_start] {
        assert!(text.get(&sub.to_string()) == Some(&expected), "subscription {sub} got the whole answer, exactly");
    }
    assert_eq!(seqs[&from_start.to_string()].first(), Some(&1), "replayed from the start");
}

/// `printf '...' | socat - UNIX-CONNECT:sock` sends its requests and then
/// shuts its sending side: it still gets every answer, its subscription
/// goes on, and once it closes the socket the daemon lets it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_sending_still_gets_answers_and_events() {
    let (_mock, forge) = setup().await;
    forge.new_session(&["--name", "half"]).await;
    let mut c = Lines::connect(&forge).await;
    c.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"session.show","params":{"session":"half"}}"#).await;
    c.send_raw(r#"{"jsonrpc":"2.0","id":2,"method":"session.subscribe","params":{"session":"half","from_seq":1}}"#)
        .await;
    c.write.shutdown().await.unwrap_or_else(|e| panic!("shutdown: {e}"));

    let mut answered = Vec::new();
    let mut live = false;
    while !(live && answered.len() == 2) {
        let n = c.recv().await.unwrap_or_else(|| panic!("closed early; answered {answered:?}"));
        if let Some(id) = n["id"].as_u64() {
            assert!(n["result"].is_object() || n["result"].is_number(), "{n}");
            answered.push(id);
        }
        live |= n["params"]["result"]["type"] == "live";
    }
    answered.sort();
    assert_eq!(answered, [1, 2]);

    forge.ok(&["send", "-s", "half", "mock:tokens=8 hi"]).await;
    let mut text = String::new();
    loop {
        let n = c.recv().await.unwrap_or_else(|| panic!("the subscription ended"));
        let item = &n["params"]["result"];
        match item["kind"].as_str() {
            Some("text_delta") => text.push_str(item["text"].as_str().unwrap_or("")),
            Some("turn_finished") => break,
            _ => {}
        }
    }
    assert_eq!(text, forge_tests::mock::token_text(8));

    drop(c);
    assert_eq!(forge.attached_clients(0).await, 0, "a client that closed the socket is no longer attached");
}

/// Followers that join while an answer streams, each at a different
/// moment, get the whole turn from the store and then live, every event
/// exactly once and in order: the hand-over from replay to the live writes
/// loses and repeats nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_joining_mid_stream_get_every_event_once() {
    let (_mock, forge) = setup().await;
    let id = forge.new_session(&["--name", "join"]).await;
    // About 0.3 s of streaming; the followers join within its first 0.11 s.
    let tokens = 300;
    let mut sender = Lines::connect(&forge).await;
    let r = sender
        .call(1, "session.send", json!({"session": id, "text": format!("mock:tokens={tokens} mock:delay=1")}))
        .await;
    assert!(r["result"]["seq"].is_number(), "{r}");
    let mut followers = Vec::new();
    for i in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(i * 7)).await;
        let mut c = Lines::connect(&forge).await;
        let r = c.call(1, "session.subscribe", json!({"session": "join", "from_seq": 1})).await;
        assert!(r["result"].is_number(), "{r}");
        followers.push(tokio::spawn(async move {
            let (mut seqs, mut text) = (Vec::new(), String::new());
            loop {
                let n = c.recv().await.unwrap_or_else(|| panic!("follower {i}: the connection closed"));
                let item = &n["params"]["result"];
                if item["type"] != "event" {
                    continue;
                }
                let seq = item["seq"].as_u64().unwrap_or(0);
                assert_eq!(seq, seqs.len() as u64 + 1, "follower {i}: no gap, no duplicate");
                seqs.push(seq);
                match item["kind"].as_str() {
                    Some("text_delta") => text.push_str(item["text"].as_str().unwrap_or("")),
                    Some("turn_finished") => return text,
                    _ => {}
                }
            }
        }));
    }
    let expected = forge_tests::mock::token_text(tokens);
    for (i, f) in followers.into_iter().enumerate() {
        let text = f.await.unwrap_or_else(|e| panic!("follower {i}: {e}"));
        assert!(text == expected, "follower {i} got the exact text");
    }
}
