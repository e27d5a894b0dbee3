//! The daemon process: one per socket, stale sockets, permissions,
//! autostart, configuration errors, graceful shutdown.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use forge_tests::harness::{Forge, Ran};
use forge_tests::mock::{MockOptions, MockServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let mut forge = Forge::bare();
    forge.start().await;
    let second = forge.spawn_daemon();
    let out = tokio::time::timeout(Duration::from_secs(10), second.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the second daemon did not exit"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already running"), "{err}");
    assert!(err.contains(&format!("pid {}", forge.pid().unwrap_or(0))), "names the pid: {err}");
    // The first one is unaffected.
    forge.ok(&["status"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_per_home_whatever_socket_a_client_computes() {
    let mut forge = Forge::bare();
    forge.start().await;
    // A second daemon on the same home, on another socket (a terminal
    // without XDG_RUNTIME_DIR computes another path): refused at once,
    // naming where the first one listens.
    let elsewhere = forge.home.path().join("other").join("forged.sock");
    let mut cmd = tokio::process::Command::new(forge_tests::harness::bin("forged"));
    cmd.env("FORGE_HOME", forge.data_dir()).arg("--socket").arg(&elsewhere);
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    let out = tokio::time::timeout(Duration::from_secs(10), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("the second daemon did not exit"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already running") && err.contains(&forge.socket.display().to_string()), "{err}");
    assert!(!elsewhere.exists(), "the second daemon never listened");
    // A client that names no socket, in a terminal whose runtime directory
    // differs (or is unset), finds the running daemon through the home
    // instead of autostarting a second one.
    for xdg in [Some(forge.home.path().join("xdg")), None] {
        let mut plain = forge.ctl_autostart_cmd(&["status"]);
        plain.env_remove("FORGE_SOCKET");
        match &xdg {
            Some(dir) => plain.env("XDG_RUNTIME_DIR", dir),
            None => plain.env_remove("XDG_RUNTIME_DIR"),
        };
        let r = Ran::from(plain.output().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(!r.stderr.contains("started forged"), "no second daemon: {}", r.stderr);
        assert!(
            r.stdout.contains(&format!("pid {}", forge.pid().unwrap_or(0))),
            "the first daemon answers: {}",
            r.stdout
        );
    }
    forge.ok(&["status"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_from_a_killed_daemon_is_cleaned_up() {
    let mut forge = Forge::bare();
    forge.start().await;
    forge.kill9().await;
    assert!(forge.socket.exists(), "kill -9 leaves the socket file behind");
    forge.start().await;
    forge.ok(&["status"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_to_its_user() {
    let mut forge = Forge::bare();
    forge.start().await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode(&forge.socket), 0o600);
    assert_eq!(mode(forge.socket.parent().unwrap_or(&forge.socket)), 0o700);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgectl_starts_the_daemon_when_none_runs() {
    let forge = Forge::bare();
    // Not ctl_cmd: that one passes --no-autostart.
    let mut plain = tokio::process::Command::new(forge_tests::harness::bin("forgectl"));
    plain.env("FORGE_HOME", forge.home.path()).env("FORGE_SOCKET", &forge.socket).arg("status");
    plain.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let r = Ran::from(plain.output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("started forged"), "{}", r.stderr);
    assert!(r.stdout.contains("uptime"), "{}", r.stdout);
    // Stop it again (it is not our child).
    forge.ok(&["shutdown"]).await;
    let again = forge.ctl(&["status"]).await;
    assert_eq!(again.code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_error_names_the_file_line_and_key() {
    let forge = Forge::bare();
    forge.write_config("[app]\nmodel = \"x\"\nmdoel = \"y\"\n");
    let child = forge.spawn_daemon();
    let out = child.wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml") && err.contains("line 3") && err.contains("mdoel"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_running_turns_and_keeps_them() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    forge.new_session(&["--name", "s"]).await;
    forge.ok(&["send", "--no-wait", "-s", "s", "mock:tokens=5000 mock:delay=3 long"]).await;
    forge.wait_for_session("s", "streaming", |s| s["state"] == "streaming" && s["last_seq"].as_u64() > Some(4)).await;
    let r = forge.ok(&["shutdown"]).await;
    assert!(r.stdout.contains("stopped"), "{}", r.stdout);
    assert_eq!(forge.terminate().await, Some(0), "a clean exit");
    forge.start().await;
    let h = forge.ok(&["--json", "history", "s"]).await.json_lines();
    assert_eq!(h.len(), 2);
    assert_eq!(h[1]["status"], "cancelled");
    assert!(h[1]["error"].as_str().unwrap_or("").contains("shut down"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_pid_version_uptime_and_sessions() {
    let mut forge = Forge::bare();
    forge.start().await;
    forge.new_session(&[]).await;
    let s = forge.ok(&["--json", "status"]).await.json_lines();
    assert_eq!(s[0]["pid"].as_u64(), forge.pid().map(u64::from));
    assert_eq!(s[0]["sessions"], 1);
    assert_eq!(s[0]["journal"], "healthy");
    assert!(s[0]["version"].is_string() && s[0]["uptime_ms"].is_u64());
}
