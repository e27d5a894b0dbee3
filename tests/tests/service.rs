//! forged as a systemd user service: socket activation (the listening
//! socket passed as descriptor 3 through `LISTEN_FDS`) and `sd_notify`
//! readiness.

use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_passed_through_listen_fds_is_served_and_readiness_is_notified() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // systemd's side: the socket exists, and a client connects, before
    // the daemon runs at all.
    if let Some(parent) = forge.socket.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    let listener = std::os::unix::net::UnixListener::bind(&forge.socket).unwrap_or_else(|e| panic!("bind: {e}"));
    let notify_path = dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap_or_else(|e| panic!("{e}"));
    notify.set_read_timeout(Some(Duration::from_secs(20))).unwrap_or_else(|e| panic!("{e}"));
    let early = tokio::net::UnixStream::connect(&forge.socket).await.unwrap_or_else(|e| panic!("connect: {e}"));

    forge.start_activated(&listener, Some(&notify_path));
    drop(listener);
    let mut buf = [0u8; 64];
    let n = notify.recv(&mut buf).unwrap_or_else(|e| panic!("no readiness notification: {e}"));
    assert_eq!(&buf[..n], b"READY=1");

    // The connection made before forged started is answered.
    let (read, mut write) = early.into_split();
    let hello = r#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{}}"#;
    write.write_all(format!("{hello}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(20), BufReader::new(read).read_line(&mut line))
        .await
        .unwrap_or_else(|_| panic!("no answer"))
        .unwrap_or_else(|e| panic!("{e}"));
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    assert!(answer["result"]["pid"].is_u64(), "{line}");
    let id = forge.new_session(&[]).await;
    forge.ok(&["send", "-s", &id, "hello mock:tokens=3"]).await;

    // Stopping leaves systemd's socket where it is.
    assert_eq!(forge.terminate().await, Some(0));
    let n = notify.recv(&mut buf).unwrap_or_else(|e| panic!("no stopping notification: {e}"));
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(forge.socket.exists(), "the socket belongs to systemd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_install_writes_the_user_units_and_status_logs_and_stop_work() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let config = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    forge.set_env("XDG_CONFIG_HOME", &config.path().display().to_string());
    forge.start().await;
    let r = forge.ok(&["daemon", "install", "--no-start"]).await;
    let units = config.path().join("systemd/user");
    let socket = std::fs::read_to_string(units.join("forged.socket")).unwrap_or_default();
    let service = std::fs::read_to_string(units.join("forged.service")).unwrap_or_default();
    assert!(socket.contains("ListenStream=%t/forge/forged.sock") && socket.contains("SocketMode=0600"), "{socket}");
    let forged = forge_tests::harness::bin("forged");
    let forged = std::fs::canonicalize(&forged).unwrap_or(forged);
    assert!(service.contains(&format!("ExecStart={} --foreground", forged.display())), "{service}");
    assert!(service.contains("Type=notify"), "{service}");
    assert!(r.stderr.contains("systemctl --user enable --now forged.socket"), "{}", r.stderr);

    let status = forge.ok(&["--json", "daemon", "status"]).await.json_lines();
    assert!(status[0]["pid"].is_u64(), "{status:?}");
    let logs = forge.ok(&["daemon", "logs", "-n", "5"]).await.stdout;
    assert!(logs.contains("forged started"), "{logs}");
    forge.ok(&["daemon", "stop"]).await;
    assert!(forge.wait_exit().await, "the daemon stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_socket_systemd_passed() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    if let Some(parent) = forge.socket.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    let listener = std::os::unix::net::UnixListener::bind(&forge.socket).unwrap_or_else(|e| panic!("bind: {e}"));
    // The unit's idea of the path differs from the socket unit's.
    let elsewhere = forge.data_dir().join("forged.sock");
    forge.start_activated_with(&listener, None, &elsewhere);
    drop(listener);
    forge.wait_ready().await;
    let status = forge.ok(&["status"]).await.stdout;
    let line = status.lines().find(|l| l.starts_with("socket:")).unwrap_or_default();
    assert!(line.ends_with(&forge.socket.display().to_string()), "{status}");
    // Clients that find the daemon by its home find that socket too.
    let lock = std::fs::read_to_string(forge.data_dir().join("daemon.lock")).unwrap_or_default();
    assert!(lock.contains(&forge.socket.display().to_string()), "{lock}");
    assert_eq!(forge.terminate().await, Some(0));
}
