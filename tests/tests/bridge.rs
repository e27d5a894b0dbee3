//! `forgectl bridge`: the daemon on stdin and stdout, for a client on
//! another machine (`ssh -T host forgectl bridge`): the daemon is started
//! if none runs, a request goes through and its answer comes back, and the
//! bridge ends once its stdin is closed and the answers are out.

use std::process::Stdio;
use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_starts_the_daemon_and_carries_the_protocol_both_ways() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = Forge::new(&mock);
    let mut bridge = forge.ctl_autostart_cmd(&["bridge"]);
    bridge.stdin(Stdio::piped());
    let mut child = bridge.spawn().unwrap_or_else(|e| panic!("spawn forgectl bridge: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let status = r#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{}}"#;
    stdin.write_all(format!("{status}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("no answer through the bridge"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_default();
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    assert!(answer["result"]["pid"].is_u64(), "the daemon answered through the bridge: {line}");
    // The far side hangs up: the bridge ends, the daemon runs on.
    drop(stdin);
    let ended = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap_or_else(|_| panic!("the bridge did not end after its stdin closed"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ended.success(), "{ended}");
    let ps = forge.ctl(&["status"]).await;
    assert_eq!(ps.code, 0, "the daemon it started runs on: {}", ps.stderr);
    forge.ctl(&["shutdown"]).await;
}
