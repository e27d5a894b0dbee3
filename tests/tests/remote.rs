//! Clients on "this machine" reaching a daemon on "another" only through a
//! real OpenSSH server on loopback (`--remote ssh://…`): every client
//! command, a long stream followed while the ssh process is killed twice
//! (the printed text compared with the remote history byte for byte), an
//! approval answered after a reconnect, and the TUI reconnecting by itself.
//! The remote daemon has its own `FORGE_HOME` and is started by the
//! bridge, as on a fresh remote machine.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_tests::harness::{Forge, Ran, bin, skipped};
use forge_tests::mock::{MockOptions, MockServer, token_text};
use forge_tests::sshd::Sshd;
use forge_tests::tmux::Tmux;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(60);

/// A daemon reached over ssh, and a client home of its own here.
struct Remote {
    _mock: MockServer,
    far: Forge,
    sshd: Sshd,
    here: tempfile::TempDir,
    project: tempfile::TempDir,
}

async fn remote(test: &str) -> Option<Remote> {
    let sshd = match Sshd::start() {
        Ok(s) => s,
        Err(why) => {
            skipped(test, &why);
            return None;
        }
    };
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let far = Forge::new(&mock);
    let here = tempfile::Builder::new().prefix("forge-here-").tempdir().unwrap_or_else(|e| panic!("{e}"));
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    Some(Remote { _mock: mock, far, sshd, here, project })
}

impl Remote {
    /// A client here: its own FORGE_HOME and socket (no daemon), and the
    /// remote in its environment.
    fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("FORGE_HOME".to_string(), self.here.path().display().to_string()),
            ("FORGE_SOCKET".to_string(), self.here.path().join("none.sock").display().to_string()),
        ];
        env.extend(self.sshd.client_env(&self.far));
        env
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("forgectl"));
        cmd.env_clear();
        for k in ["PATH", "HOME", "LANG", "USER"] {
            if let Ok(v) = std::env::var(k) {
                cmd.env(k, v);
            }
        }
        cmd.envs(self.env()).args(args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        cmd
    }

    async fn ctl(&self, args: &[&str]) -> Ran {
        let out = tokio::time::timeout(WAIT, self.cmd(args).output())
            .await
            .unwrap_or_else(|_| panic!("forgectl {args:?} did not finish"))
            .unwrap_or_else(|e| panic!("forgectl: {e}"));
        Ran::from(out)
    }

    async fn ok(&self, args: &[&str]) -> Ran {
        let r = self.ctl(args).await;
        assert_eq!(r.code, 0, "forgectl --remote {args:?}:\nstdout: {}\nstderr: {}", r.stdout, r.stderr);
        r
    }

    fn cwd(&self) -> String {
        self.project.path().display().to_string()
    }

    /// Stops the far daemon (through its own socket, not ssh).
    async fn stop(&self) {
        self.far.ctl(&["shutdown"]).await;
    }
}

/// A running forgectl whose output is collected as it comes.
struct Running {
    child: tokio::process::Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    fn spawn(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn forgectl: {e}"));
        let collect = |mut r: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
            let text = Arc::new(Mutex::new(String::new()));
            let t = text.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = r.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    t.lock().unwrap_or_else(|p| p.into_inner()).push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
            text
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap_or_else(|| panic!("stdout"))));
        let stderr = collect(Box::new(child.stderr.take().unwrap_or_else(|| panic!("stderr"))));
        Running { child, stdout, stderr }
    }

    fn out(&self) -> String {
        self.stdout.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn err(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn wait_until(&self, what: &str, cond: impl Fn(&Running) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !cond(self) {
            assert!(Instant::now() < deadline, "waited for {what}:\nstdout: {}\nstderr: {}", self.out(), self.err());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn finish(mut self) -> (i32, String, String) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("forgectl did not finish:\nstdout: {}\nstderr: {}", self.out(), self.err()))
            .unwrap_or_else(|e| panic!("{e}"));
        // The readers drain what is left.
        tokio::time::sleep(Duration::from_millis(50)).await;
        (status.code().unwrap_or(-1), self.out(), self.err())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_command_works_through_remote_and_paths_are_the_remotes() {
    let Some(r) = remote("remote::every_client_command").await else { return };
    let check = r.ok(&["remote", "check", &r.sshd.url()]).await;
    assert!(check.stdout.contains("forgectl --remote") && check.stdout.contains("forged"), "{}", check.stdout);

    // The bridge starts the far daemon; the session lives there.
    let created = r.ok(&["session", "new", "--cwd", &r.cwd(), "--name", "far"]).await;
    assert!(!created.stdout.trim().is_empty(), "{created:?}");
    let sent = r.ok(&["send", "-s", "far", "hello there mock:tokens=5"]).await;
    assert_eq!(sent.stdout.trim_end_matches('\n'), token_text(5), "{sent:?}");
    assert!(r.ok(&["ps"]).await.stdout.contains("far"));
    assert!(r.ok(&["history", "far"]).await.stdout.contains("hello there"));
    r.ok(&["tree", "far"]).await;
    r.ok(&["attach", "far", "--until-idle"]).await;
    r.ok(&["status"]).await;
    // The same session seen on the far machine's own socket.
    assert!(r.far.ok(&["history", "far"]).await.stdout.contains("hello there"));

    // An image from this machine, the tree, a rewind and a fork.
    let png = r.here.path().join("dot.png");
    let dot = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    std::fs::write(&png, base64::Engine::decode(&base64::engine::general_purpose::STANDARD, dot).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));
    r.ok(&["send", "-s", "far", "--image", &png.display().to_string(), "what is this mock:tokens=3"]).await;
    assert!(r.far.ok(&["history", "far", "--json"]).await.stdout.contains("image"));
    r.ok(&["undo", "far", "--yes"]).await;
    r.ok(&["fork", "far", "--name", "far2"]).await;
    assert!(r.ok(&["ps"]).await.stdout.contains("far2"));

    // Steer a running turn from here.
    r.ok(&["send", "--no-wait", "-s", "far", "mock:tokens=300 mock:delay=10 long one"]).await;
    r.ok(&["steer", "far", "and also this"]).await;
    r.ok(&["attach", "far", "--from", "live", "--until-idle"]).await;
    assert!(r.far.ok(&["history", "far"]).await.stdout.contains("and also this"));

    // Paths name the remote's directories.
    let rel = r.ctl(&["session", "new", "--cwd", "relative/dir"]).await;
    assert_eq!(rel.code, 2, "{rel:?}");
    assert!(rel.stderr.contains("absolute path") && rel.stderr.contains(&r.sshd.url()), "{}", rel.stderr);
    let missing = r.ctl(&["session", "new", "--cwd", "/no/such/dir/here"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.contains("does not exist"), "{}", missing.stderr);
    // None given: the remote user's home, too broad without saying so.
    let home = r.ctl(&["session", "new"]).await;
    assert_eq!(home.code, 1, "{home:?}");
    assert!(home.stderr.contains("home directory"), "{}", home.stderr);
    let trust = r.ctl(&["trust"]).await;
    assert_eq!(trust.code, 2, "{trust:?}");
    assert!(trust.stderr.contains("--dir"), "{}", trust.stderr);

    // What cannot go through --remote says why...
    let url = r.sshd.url();
    for args in [&["completions", "bash"][..], &["daemon", "install"], &["doctor"]] {
        let mut with = vec!["--remote", url.as_str()];
        with.extend_from_slice(args);
        let refused = r.ctl(&with).await;
        assert_eq!(refused.code, 2, "{args:?}: {refused:?}");
        assert!(refused.stderr.contains("does not apply here"), "{args:?}: {}", refused.stderr);
    }
    // ... but an exported FORGE_REMOTE leaves it to this machine.
    let here = r.ctl(&["completions", "bash"]).await;
    assert_eq!(here.code, 0, "{}", here.stderr);
    let both = r.ctl(&["--remote", &url, "--socket", "/tmp/x.sock", "ps"]).await;
    assert_eq!(both.code, 2, "{both:?}");
    assert!(both.stderr.contains("--remote and --socket"), "{}", both.stderr);
    let socket = r.ctl(&["--socket", "/tmp/forge-none.sock", "--no-autostart", "ps"]).await;
    assert_eq!(socket.code, 3, "--socket wins over FORGE_REMOTE: {socket:?}");
    assert!(socket.stderr.contains("/tmp/forge-none.sock"), "{}", socket.stderr);
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_cannot_work_says_what_to_install() {
    let Some(r) = remote("remote::remote_check_failures").await else { return };
    let mut cmd = r.cmd(&["remote", "check", &r.sshd.url()]);
    cmd.env("FORGE_REMOTE_BIN", "/opt/nowhere/forgectl");
    let out = Ran::from(cmd.output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("not on") && out.stderr.contains("FORGE_REMOTE_BIN"), "{}", out.stderr);
    // A client says the same when its link cannot come up.
    let mut cmd = r.cmd(&["ps"]);
    cmd.env("FORGE_REMOTE_BIN", "/opt/nowhere/forgectl");
    let out = Ran::from(cmd.output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("--remote-bin"), "{}", out.stderr);
    // No daemon there and --no-autostart: nothing is started.
    let out = r.ctl(&["--no-autostart", "ps"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("no forged is running"), "{}", out.stderr);
    // ssh itself cannot log in: its words, and what to try.
    let mut cmd = r.cmd(&["ps"]);
    cmd.env("FORGE_REMOTE", "ssh://127.0.0.1:1");
    let out = Ran::from(cmd.output().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("ssh"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_followed_over_ssh_loses_nothing_when_the_link_is_killed_twice() {
    let Some(r) = remote("remote::stream_survives_killed_links").await else { return };
    r.ok(&["session", "new", "--cwd", &r.cwd(), "--name", "long"]).await;
    let send = Running::spawn(r.cmd(&["send", "-s", "long", "mock:tokens=3000 mock:delay=3 a long answer"]));
    for (nth, at) in [(1, 2_000), (2, 9_000)] {
        send.wait_until("more of the stream", |s| s.out().len() > at).await;
        assert!(r.sshd.drop_links() > 0, "no ssh process to kill");
        send.wait_until("the reconnect", |s| s.err().matches("reconnected").count() >= nth).await;
    }
    let (code, out, err) = send.finish().await;
    assert_eq!(code, 0, "the turn's exit code across two reconnects: {err}");
    assert!(err.matches("dropped").count() >= 2, "the client said so: {err}");
    let expected = token_text(3000);
    assert_eq!(out.trim_end_matches('\n'), expected, "every word once, in order");
    // The remote's history holds the same bytes.
    let history = r.far.ok(&["history", "long", "--json"]).await.stdout;
    assert!(history.contains(&expected), "the remote history has the same text");
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_daemon_killed_mid_stream_is_a_dropped_link_and_send_ends_with_the_turns_code() {
    let Some(r) = remote("remote::far_daemon_killed").await else { return };
    r.ok(&["session", "new", "--cwd", &r.cwd(), "--name", "long"]).await;
    let send = Running::spawn(r.cmd(&["send", "-s", "long", "mock:tokens=3000 mock:delay=3 a long answer"]));
    send.wait_until("some of the stream", |s| s.out().len() > 2_000).await;
    // kill -9 of the far daemon, as a crash or the OOM killer would.
    let lock = std::fs::read_to_string(forge_proto::paths::home_lock(&r.far.data_dir())).unwrap_or_default();
    let pid: i32 = lock.lines().next().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
    assert!(pid > 0, "the far daemon's pid: {lock:?}");
    // SAFETY: kill(2) of the test's own far daemon.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (code, out, err) = send.finish().await;
    assert!(err.contains("dropped") && err.contains("reconnected"), "said and reconnected: {err}");
    assert!(err.contains("the turn was interrupted"), "{err}");
    assert_eq!(code, 5, "the interrupted turn's exit code, not a hang: {err}");
    assert!(out.len() > 2_000, "what was shown stays: {}", out.len());
    // The far daemon came back (started by the bridge) with the session.
    let history = r.far.ok(&["history", "long", "--json"]).await.stdout;
    assert!(history.contains("a long answer"), "{history}");
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_shown_before_a_drop_is_answered_after_it() {
    let Some(r) = remote("remote::approval_after_reconnect").await else { return };
    r.ok(&["session", "new", "--cwd", &r.cwd(), "--name", "ask"]).await;
    let send = Running::spawn(r.cmd(&["send", "-s", "ask", "mock:tool=write_file go"]));
    send.wait_until("the approval", |s| s.err().contains("approv")).await;
    assert!(r.sshd.drop_links() > 0);
    send.wait_until("the reconnect", |s| s.err().contains("reconnected")).await;
    r.ok(&["approve", "ask", "--all"]).await;
    let (code, _out, err) = send.finish().await;
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_dir(r.project.path()).is_ok_and(|d| d.count() > 0), "the approved call wrote its file");
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tui_through_remote_reconnects_by_itself_mid_stream() {
    if !Tmux::available() {
        skipped("remote::tui_reconnects", "tmux is not installed (apt-get install tmux)");
        return;
    }
    let Some(r) = remote("remote::tui_reconnects").await else { return };
    r.ok(&["session", "new", "--cwd", &r.cwd(), "--name", "tui"]).await;
    let tmux = Tmux::start("ui", &bin("forge"), &["tui"], &r.env(), 110, 32);
    tmux.wait_for("ui", "NORMAL", WAIT);
    r.ok(&["send", "--no-wait", "-s", "tui", "mock:tokens=1500 mock:delay=5 stream please"]).await;
    tmux.wait_for("ui", "streaming", WAIT);
    tmux.wait_for("ui", "w200", WAIT);
    assert!(r.sshd.drop_links() > 0);
    tmux.wait_for("ui", "link down", WAIT);
    tmux.wait_for("ui", "reconnected", WAIT);
    // The end of the answer arrives, once.
    let screen = tmux.wait_for("ui", "w1499", WAIT);
    assert_eq!(screen.matches("w1499").count(), 1, "{screen}");
    r.ok(&["attach", "tui", "--until-idle"]).await;
    let history = r.far.ok(&["history", "tui", "--json"]).await.stdout;
    assert!(history.contains(&token_text(1500)));
    tmux.keys("ui", &["q"]);
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_through_acp_remote_gets_every_update_across_a_drop() {
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let Some(r) = remote("remote::acp_across_a_drop").await else { return };
    let mut cmd = r.cmd(&["acp"]);
    cmd.stdin(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("forgectl acp: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let mut lines = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout"))).lines();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": r.cwd(), "mcpServers": []}}),
    ];
    let mut session = String::new();
    for req in requests {
        stdin.write_all(format!("{req}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
        loop {
            let line = tokio::time::timeout(WAIT, lines.next_line()).await.ok().and_then(Result::ok).flatten();
            let msg: Value = serde_json::from_str(&line.unwrap_or_default()).unwrap_or_default();
            if msg["id"] == req["id"] {
                assert!(msg.get("result").is_some(), "{msg}");
                if let Some(id) = msg["result"]["sessionId"].as_str() {
                    session = id.to_string();
                }
                break;
            }
        }
    }
    // A directory the far machine lacks: refused, saying the cwd is the remote's.
    let bad = json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "/no/such/place", "mcpServers": []}});
    stdin.write_all(format!("{bad}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let prompt = json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"sessionId": session,
        "prompt": [{"type": "text", "text": "mock:tokens=600 mock:delay=5 go"}]}});
    stdin.write_all(format!("{prompt}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let (mut text, mut thoughts, mut dropped, mut refused) = (String::new(), String::new(), false, None);
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line()).await.ok().and_then(Result::ok).flatten();
        let msg: Value =
            serde_json::from_str(&line.unwrap_or_else(|| panic!("no end of the prompt: {text}"))).unwrap_or_default();
        if msg["id"] == 3 {
            refused = Some(msg["error"]["message"].as_str().unwrap_or_default().to_string());
        }
        if msg["id"] == 4 {
            assert_eq!(msg["result"]["stopReason"], "end_turn", "{msg}");
            break;
        }
        let update = &msg["params"]["update"];
        match update["sessionUpdate"].as_str() {
            Some("agent_message_chunk") => text.push_str(update["content"]["text"].as_str().unwrap_or_default()),
            Some("agent_thought_chunk") => thoughts.push_str(update["content"]["text"].as_str().unwrap_or_default()),
            _ => {}
        }
        if !dropped && text.len() > 1000 {
            dropped = r.sshd.drop_links() > 0;
        }
    }
    assert!(dropped);
    assert_eq!(text, token_text(600), "every chunk once, in order");
    assert!(thoughts.contains("reconnected"), "{thoughts}");
    let refused = refused.unwrap_or_default();
    assert!(refused.contains("does not exist") && refused.contains("directory on ssh://"), "{refused}");
    drop(stdin);
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
    r.stop().await;
}
