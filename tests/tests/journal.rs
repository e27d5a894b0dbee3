//! The crash-safe journal as users meet it: kill -9 at any moment loses
//! nothing anyone saw; a full disk blocks the daemon safely and a reset
//! brings it back; floods do not make it unresponsive.

use std::time::{Duration, Instant};

use forge_tests::harness::{Forge, SmallDisk};
use forge_tests::mock::{MockOptions, MockServer, token_text};
use serde_json::Value;

fn text_of(events: &[Value]) -> String {
    events.iter().filter(|e| e["kind"] == "text_delta").filter_map(|e| e["text"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_blocks_safely_and_a_reset_brings_the_daemon_back() {
    let Some(disk) = SmallDisk::mount("4m") else {
        forge_tests::harness::skipped("journal", "mounting a small tmpfs needs root; the disk-full test did not run");
        return;
    };
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock).with_data_dir(&disk.path);
    forge.start().await;
    forge.new_session(&["--name", "d"]).await;
    forge.ok(&["send", "-s", "d", "mock:tokens=50 before the disk fills"]).await;

    // The disk fills up while an answer streams.
    let question = "mock:tokens=20000 mock:pad=40 mock:delay=1 while full";
    let streaming = forge.ctl_cmd(&["send", "-s", "d", question]).spawn().unwrap_or_else(|e| panic!("{e}"));
    forge.wait_for_session("d", "streaming", |s| s["state"] == "streaming" && s["last_seq"].as_u64() > Some(12)).await;
    let filler = disk.fill();
    let r = forge_tests::harness::Ran::from(streaming.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(r.code, 1, "the streaming client is told the turn stopped: {}", r.stderr);
    assert!(r.stderr.contains("disk is full"), "{}", r.stderr);
    let shown = r.stdout.trim_end().to_string();
    assert!(!shown.is_empty(), "part of the answer was shown before the disk filled");

    let j = forge.ok(&["--json", "journal"]).await.json_lines();
    assert_eq!(j[0]["health"], "blocked");
    let reason = j[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("full") && reason.contains("forgectl journal reset"), "{reason}");
    let st = forge.ok(&["--json", "status"]).await.json_lines();
    assert_eq!(st[0]["journal"], "blocked");

    let refused = forge.ctl(&["--json", "send", "-s", "d", "mock:tokens=3 refused"]).await;
    assert_eq!(refused.code, 1);
    let err = refused.json_lines().pop().unwrap_or_default();
    assert_eq!(err["error"]["kind"], "persistence_blocked");
    assert!(err["error"]["message"].as_str().unwrap_or("").contains("journal reset"));

    // Reset fails while the disk is still full, and says why.
    let still = forge.ctl(&["journal", "reset"]).await;
    assert_eq!(still.code, 1, "{}", still.stdout);

    std::fs::remove_file(filler).unwrap_or_else(|e| panic!("{e}"));
    let reset = forge.ok(&["journal", "reset"]).await;
    assert!(reset.stdout.contains("writable again"), "{}", reset.stdout);
    let j = forge.ok(&["--json", "journal"]).await.json_lines();
    assert_eq!(j[0]["health"], "healthy");
    // The interrupted stream is recovered by the reset: none stays open.
    let mut open = Value::Null;
    for _ in 0..100 {
        open = forge.ok(&["--json", "journal"]).await.json_lines()[0]["open_streams"].clone();
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open, 0, "open streams after a reset with the session idle");

    // Work goes on; what was acknowledged before is intact; the interrupted
    // turn is recovered with its badge and holds everything shown.
    forge.ok(&["send", "-s", "d", "mock:tokens=4 after reset"]).await;
    let h = forge.ok(&["--json", "history", "d"]).await.json_lines();
    assert_eq!(h[1]["text"], token_text(50));
    assert_eq!(h[2]["text"], question);
    assert_eq!(h[3]["recovered"], "incomplete", "{}", h[3]);
    let why = h[3]["error"].as_str().unwrap_or_default();
    assert!(why.contains("could not be written") && !why.contains("forged stopped"), "forged never stopped: {why}");
    let kept = h[3]["text"].as_str().unwrap_or_default();
    assert!(kept.starts_with(&shown), "everything shown before the failure is kept");
    assert!(forge_tests::mock::padded_token_text(20000, 40).starts_with(kept));
    assert_eq!(h.last().map(|m| m["text"].clone()), Some(Value::String(token_text(4))));
    forge.terminate().await;
    // The store is not corrupted.
    let check =
        std::process::Command::new("sqlite3").arg(disk.path.join("forge.db")).arg("PRAGMA integrity_check;").output();
    if let Ok(out) = check {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success() || text.trim() == "ok", "integrity: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing_a_client_saw() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "crash"]).await;
    let iterations = 30;
    let mut expected_turns = 0;
    for i in 0..iterations {
        // A follower records exactly what a client was shown.
        let follower =
            forge.ctl_cmd(&["--json", "attach", "crash", "--from", "live"]).spawn().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(forge.attached_clients(1).await, 1, "the follower follows before the turn starts");
        forge.ok(&["send", "--no-wait", "-s", "crash", "mock:tokens=4000 mock:delay=1 stream"]).await;
        expected_turns += 1;
        // Different moments: from just after the start to deep into the stream.
        let delay = 20 + (i * 37 % 400) as u64;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        forge.kill9().await;
        let seen = forge_tests::harness::Ran::from(follower.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
        let shown = text_of(&seen.json_lines());
        forge.start().await;
        let h = forge.ok(&["--json", "history", &id]).await.json_lines();
        let answer = h.last().cloned().unwrap_or_default();
        if answer["role"] == "assistant" {
            let kept = answer["text"].as_str().unwrap_or_default();
            assert!(kept.starts_with(&shown), "iteration {i}: shown text missing from history");
            assert!(token_text(4000).starts_with(kept), "iteration {i}: corrupted text");
            assert!(answer["recovered"].is_string() || answer["status"] == "complete", "iteration {i}: {answer}");
        } else {
            assert!(shown.is_empty(), "iteration {i}: the client saw text that is not in the history");
        }
    }
    // Restarting again adds nothing twice.
    let before = forge.ok(&["--json", "history", &id]).await.json_lines();
    forge.kill9().await;
    forge.start().await;
    forge.restart().await;
    let after = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(before, after);
    let users = after.iter().filter(|m| m["role"] == "user").count();
    assert_eq!(users, expected_turns, "every message kept once");
    // Seqs in the event log are still contiguous.
    let ev = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let seqs: Vec<u64> = ev.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_200k_deltas_leaves_the_daemon_responsive() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    forge.new_session(&["--name", "flood"]).await;
    forge.new_session(&["--name", "calm"]).await;
    let tokens = 200_000;
    let flood = forge
        .ctl_cmd(&["send", "-s", "flood", &format!("mock:tokens={tokens} go")])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let calm = forge
        .ctl_cmd(&["send", "-s", "calm", "mock:tokens=50 mock:delay=5 steady"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut latencies = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        forge.ok(&["status"]).await;
        latencies.push(t.elapsed());
    }
    let flood = forge_tests::harness::Ran::from(flood.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    let calm = forge_tests::harness::Ran::from(calm.wait_with_output().await.unwrap_or_else(|e| panic!("{e}")));
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    assert!(median < Duration::from_millis(100), "status median {median:?} during the flood");
    assert_eq!(calm.code, 0);
    assert_eq!(calm.stdout.trim_end(), token_text(50).trim_end());
    assert_eq!(flood.code, 0, "{}", flood.stderr);
    assert!(flood.stdout.trim_end() == token_text(tokens).trim_end(), "the flooded text arrives complete and exact");
    let pid = forge.pid().unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(hwm_kb < 200 * 1024, "daemon peak memory {hwm_kb} kB");
}
