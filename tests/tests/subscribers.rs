//! Subscribers: a slow or stalled client never slows the session or other
//! clients, and still gets every event, exactly once, in order.

use std::time::{Duration, Instant};

use forge_tests::harness::{Forge, RawWs};
use forge_tests::mock::{MockOptions, MockServer, token_text};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_lags_catches_up_from_the_store_and_slows_nobody() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "flood"]).await;

    // A subscriber that will not read anything while the flood runs.
    let mut slow = RawWs::connect(&forge.socket).await;
    let sub =
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.subscribe", "params": {"session": id, "from_seq": 1}});
    slow.send(&sub.to_string()).await;

    // Many small writes: with a delay of 1 ms per chunk each delta is its own
    // event, far more than the subscriber's buffers hold.
    let tokens = 3000;
    let started = Instant::now();
    let r = forge.ok(&["send", "-s", "flood", &format!("mock:tokens={tokens} mock:delay=1 go")]).await;
    let took = started.elapsed();
    assert_eq!(r.stdout.trim_end(), token_text(tokens).trim_end());
    // Another client is served at once meanwhile and afterwards.
    let t = Instant::now();
    forge.ok(&["status"]).await;
    assert!(t.elapsed() < Duration::from_secs(2), "status took {:?}", t.elapsed());

    // Now the slow subscriber reads everything: contiguous seqs, no
    // duplicate, exact text, and it was told it lagged.
    let mut seqs = Vec::new();
    let mut text = String::new();
    let mut lagged = false;
    let mut finished = false;
    while !finished {
        let Some(frame) = slow.recv(Duration::from_secs(10)).await else { break };
        let v: Value = serde_json::from_str(&frame).unwrap_or(Value::Null);
        let item = &v["params"]["result"];
        match item["type"].as_str() {
            Some("event") => {
                seqs.push(item["seq"].as_u64().unwrap_or(0));
                if item["kind"] == "text_delta" {
                    text.push_str(item["text"].as_str().unwrap_or(""));
                }
                finished = item["kind"] == "turn_finished";
            }
            Some("lagged") => lagged = true,
            _ => {}
        }
    }
    assert!(finished, "the slow subscriber got the whole turn (took {took:?} for the sender)");
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "no gap, no duplicate");
    assert_eq!(text, token_text(tokens));
    assert!(lagged, "with {} events it must have lagged at least once", seqs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_clients_are_counted() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    forge.new_session(&["--name", "watched"]).await;
    let mut a = forge.ctl_cmd(&["attach", "watched"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    let mut b = forge.ctl_cmd(&["attach", "watched"]).spawn().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(forge.attached_clients(2).await, 2);
    let _ = a.kill().await;
    let _ = b.kill().await;
    assert_eq!(forge.attached_clients(0).await, 0, "detached clients are no longer counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgectl_blocked_on_its_stdout_still_prints_every_byte() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    // While its stdout pipe is full forgectl stops reading its
    // subscription: the daemon's writes to it block and its feed falls
    // back to the store.
    forge.start().await;
    forge.new_session(&["--name", "pipe"]).await;
    let (tokens, pad) = (600, 200); // ~120 KB: more than a pipe holds
    let msg = format!("mock:tokens={tokens} mock:pad={pad} mock:delay=1 go");
    let mut child = forge.ctl_cmd(&["send", "-s", "pipe", &msg]).spawn().unwrap_or_else(|e| panic!("{e}"));
    // Do not read its stdout until the turn is over.
    let mut idle = false;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let ps = forge.ok(&["--json", "ps"]).await.json_lines();
        if ps[0]["state"] == "idle" && ps[0]["message_count"] == 2 {
            idle = true;
            break;
        }
    }
    assert!(idle, "the turn finished while forgectl was blocked");
    let mut stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut out = String::new();
    use tokio::io::AsyncReadExt;
    stdout.read_to_string(&mut out).await.unwrap_or_else(|e| panic!("{e}"));
    let status = child.wait().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    assert_eq!(out.trim_end(), forge_tests::mock::padded_token_text(tokens, pad).trim_end());
}
