//! The escape suite, through the real daemon and `run_command`: what the
//! model runs stays in the session's roots whatever path it takes, cannot
//! read secrets or the store, reach the network or the daemon, exhaust
//! the machine, or outlive its call; and a confined command runs without
//! a prompt while leaving the sandbox always asks.
//!
//! Every test checks the kernel first and says so when it cannot confine
//! (no Landlock): then there is nothing to test, and with
//! `FORGE_REQUIRE_SANDBOX=1` (CI) the test fails instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forge_tests::harness::{Forge, bin};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::{Value, json};

struct Setup {
    _mock: MockServer,
    forge: Forge,
    project: tempfile::TempDir,
    id: String,
}

/// A daemon with `config`, a session in a fresh project; `None` where the
/// kernel cannot confine commands.
async fn setup(config: &str, env: &[(&str, &str)]) -> Option<Setup> {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    for (k, v) in env {
        forge.set_env(k, v);
    }
    if !config.is_empty() {
        forge.write_config(config);
    }
    forge.start().await;
    let status = forge.ok(&["--json", "sandbox"]).await.json_lines();
    if status.first().and_then(|s| s["mode"].as_str()) != Some("kernel") {
        require_or_skip(&format!("commands are not confined on this machine: {status:?}"));
        return None;
    }
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let id = forge.new_session(&["--cwd", &cwd]).await;
    Some(Setup { _mock: mock, forge, project, id })
}

impl Setup {
    fn dir(&self) -> PathBuf {
        self.project.path().canonicalize().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `command` as the model would, without approving anything;
    /// returns the tool result the model saw.
    async fn run(&self, command: &str) -> String {
        let directive = tool_call("run_command", &json!({"command": command}));
        self.forge.ok(&["send", "-s", &self.id, &format!("{directive} go")]).await;
        let h = self.forge.ok(&["--json", "history", &self.id]).await.json_lines();
        let result = h.iter().rev().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
        result["text"].as_str().unwrap_or_default().to_string()
    }
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_roots_are_refused_by_every_path() {
    writes_outside(&[]).await;
}

/// The kernels of Debian 12, Ubuntu 22.04 and RHEL 9 (Landlock ABI 2, 1
/// or none): the mount namespace carries the file boundary, alone or with
/// Landlock's older rules.
const OLDER_KERNELS: [&[(&str, &str)]; 2] =
    [&[("FORGE_SANDBOX_LANDLOCK_ABI", "2")], &[("FORGE_SANDBOX_LANDLOCK_ABI", "0")]];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_roots_are_refused_by_every_path_on_older_kernels() {
    for env in OLDER_KERNELS {
        writes_outside(env).await;
    }
}

async fn writes_outside(env: &[(&str, &str)]) {
    let Some(s) = setup("", env).await else { return };
    // Outside /tmp, which commands see as a private /tmp of their own: a
    // place they can see but not write.
    let outside = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
    let out = outside.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.join("target"), "original\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(s.dir().join("d")).unwrap_or_else(|e| panic!("{e}"));
    let rel = pathdiff(&out, &s.dir());
    let attempts = [
        format!("echo x > {}/direct", q(&out)),
        format!("echo x > {rel}/dotdot"),
        format!("ln -s {} link; echo x > link/symlink", q(&out)),
        format!("ln {}/target hard; echo changed > hard", q(&out)),
        format!("echo x > /proc/self/root{}/proc", out.display()),
        format!("mkdir -p {}/made", q(&out)),
        format!("mv d {}/moved", q(&out)),
    ];
    let text = s.run(&attempts.join("; ")).await;
    // A rename race: one loop swaps the directory for a link outside
    // while the other writes through its name.
    let race = format!(
        "mkdir -p r; (i=0; while [ $i -lt 300 ]; do mv r r.real; ln -s {} r; rm r; mv r.real r; i=$((i+1)); done) & \
         i=0; while [ $i -lt 300 ]; do echo x > r/race$i 2>/dev/null; i=$((i+1)); done; wait",
        q(&out)
    );
    s.run(&race).await;
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    left.sort();
    assert_eq!(left, vec!["target".to_string()], "nothing was made outside the roots");
    assert_eq!(std::fs::read_to_string(out.join("target")).unwrap_or_default(), "original\n");
    // A checkout under /tmp puts the outside behind the command's private
    // /tmp: not even there. Elsewhere it is there, and the kernel refuses.
    if !["/tmp", "/var/tmp", "/dev/shm"].iter().any(|p| out.starts_with(p)) {
        assert!(s.dir().join("d").is_dir(), "nothing was moved out");
        assert!(
            text.contains("--- sandbox ---") && text.contains(&format!("write to {}/direct", out.display())),
            "{text}"
        );
        assert!(text.contains("\"sandbox\": false"), "the model is told how to ask: {text}");
    }
    // Inside the roots and in $TMPDIR, commands work as usual.
    let ok = s.run("echo made > inside.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
    assert!(ok.contains("exit status: 0") && !ok.contains("--- sandbox ---"), "{ok}");
    assert_eq!(std::fs::read_to_string(s.dir().join("inside.txt")).unwrap_or_default(), "made\n");
}

/// `to` relative to `from`, through `..`.
fn pathdiff(to: &Path, from: &Path) -> String {
    let depth = from.components().count() - 1;
    let up = vec![".."; depth].join("/");
    format!("{up}{}", to.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_directory_is_read_only_for_commands() {
    let Some(s) = setup("", &[]).await else { return };
    std::fs::create_dir(s.dir().join(".git")).unwrap_or_else(|e| panic!("{e}"));
    let text = s.run("touch .git/planted; echo ok > src.txt").await;
    assert!(!s.dir().join(".git/planted").exists(), "{text}");
    assert!(s.dir().join("src.txt").exists(), "{text}");
    assert!(text.contains("`.git` is read-only for commands"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_the_store_cannot_be_read() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let h = home.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(h.join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(h.join("notes.txt"), "HOME-NOTES\n").unwrap_or_else(|e| panic!("{e}"));
    let home_s = h.display().to_string();
    let Some(s) = setup("", &[("HOME", &home_s)]).await else { return };
    let db = s.forge.data_dir().join("forge.db");
    let text = s
        .run(&format!(
            "cat {}/.ssh/id_ed25519; cat ~/.ssh/id_*; cat {}/notes.txt; head -c 64 {} | od -c | head -2",
            q(&h),
            q(&h),
            q(&db)
        ))
        .await;
    assert!(!text.contains("PRIVATE-KEY-MATERIAL"), "{text}");
    assert!(!text.contains("HOME-NOTES"), "the home directory is not readable: {text}");
    assert!(!text.contains("SQLite"), "the store is not readable: {text}");
    // Refused, or not even there (a home in /tmp is behind the command's
    // private /tmp).
    assert!(text.contains(&format!("read of {}/.ssh/id_ed25519", home_s)) || text.contains("No such file"), "{text}");
}

/// A loopback listener that records whether anyone connected.
fn listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
    (l, port)
}

fn connect_probe(target: &str) -> String {
    format!("{} __forge-probe connect-tcp {target}", q(&bin("forged")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_denied_by_default_and_localhost_is_only_loopback() {
    let Some(s) = setup("", &[]).await else { return };
    let (l, port) = listener();
    let text = s
        .run(&format!(
            "{}; curl -sS -m 5 http://example.com/ 2>&1 | head -1",
            connect_probe(&format!("127.0.0.1:{port}"))
        ))
        .await;
    assert!(text.contains("refused:"), "{text}");
    assert!(l.accept().is_err(), "nobody connected to the test's listener");
    assert!(text.contains("commands have no network access"), "the model is told why: {text}");

    let Some(s) = setup("[tools.sandbox]\nnetwork = \"localhost\"\n", &[]).await else { return };
    let text =
        s.run(&format!("{}; {}", connect_probe(&format!("127.0.0.1:{port}")), connect_probe("192.0.2.7:443"))).await;
    assert!(text.contains(&format!("connected to 127.0.0.1:{port}")), "{text}");
    assert!(l.accept().is_ok(), "the loopback listener was reached");
    assert!(text.contains("[forge sandbox] refused connect to 192.0.2.7:443"), "{text}");
    assert!(text.contains("network: connect to 192.0.2.7:443"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_a_fork_bomb_and_a_memory_hog() {
    let config =
        "[tools.sandbox]\nmax_processes = 64\nmax_memory_mb = 256\n[tools.timeouts]\nshell_commands_seconds = 20\n";
    let Some(s) = setup(config, &[]).await else { return };
    let bomb = s
        .run("n=0; while [ $n -lt 300 ]; do sleep 7.3131 & n=$((n+1)); done 2>/dev/null; echo alive $(grep -ls '7\\.3131' /proc/[0-9]*/cmdline | wc -l)")
        .await;
    let alive: Option<usize> = bomb.lines().find_map(|l| l.strip_prefix("alive ")).and_then(|n| n.trim().parse().ok());
    assert!(
        bomb.contains("[forge sandbox] stopped")
            || bomb.contains("process start(s) refused")
            || alive.is_some_and(|n| n <= 64),
        "the process limit held: {bomb}"
    );
    let hog = s.run("awk 'BEGIN { s = \"x\"; while (1) s = s s }'").await;
    assert!(!hog.contains("exit status: 0"), "{hog}");
    assert!(hog.contains("out of memory") || hog.contains("memory"), "{hog}");
    // The daemon is fine.
    s.forge.ok(&["status"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_timeout_is_killed_with_all_it_started() {
    let Some(s) = setup("[tools.timeouts]\nshell_commands_seconds = 2\n", &[]).await else { return };
    let text = s.run("setsid sleep 4242.5 & (sleep 4242.5 &); nohup sleep 4242.5 >/dev/null 2>&1 & sleep 4242.5").await;
    assert!(text.contains("timed out"), "{text}");
    let mut left = true;
    for _ in 0..100 {
        left = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten().any(|e| {
                    std::fs::read(e.path().join("cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("4242.5"))
                })
            })
            .unwrap_or(false);
        if !left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!left, "every process the command started is gone, setsid ones too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setuid_programs_gain_nothing_and_the_daemon_cannot_be_driven() {
    let Some(s) = setup("", &[]).await else { return };
    let mut command = "grep NoNewPrivs /proc/self/status".to_string();
    // SAFETY: plain system call.
    let root = unsafe { libc::getuid() } == 0;
    if root {
        // A copy of id(1) that would run as nobody.
        let id = s.dir().join("suid-id");
        std::fs::copy("/usr/bin/id", &id).unwrap_or_else(|e| panic!("{e}"));
        let status = std::process::Command::new("chown").arg("65534").arg(&id).status();
        let _ = std::process::Command::new("chmod").arg("4755").arg(&id).status();
        if status.is_ok_and(|s| s.success()) {
            command.push_str("; echo euid=$(./suid-id -u)");
        }
    }
    command.push_str(&format!("; {} __forge-probe connect-unix {}", q(&bin("forged")), q(&s.forge.socket)));
    let text = s.run(&command).await;
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(!text.contains("euid=65534"), "the setuid bit was ignored: {text}");
    assert!(text.contains("refused:"), "the daemon's socket is out of reach: {text}");
    // Even a command the user let out of the sandbox cannot drive the
    // daemon: forged refuses its own descendants.
    let probe = format!("{} __forge-probe connect-unix {}", q(&bin("forged")), q(&s.forge.socket));
    let directive = tool_call("run_command", &json!({"command": probe, "sandbox": false}));
    s.forge.ok(&["send", "--auto-approve", "-s", &s.id, &format!("{directive} go")]).await;
    let h = s.forge.ok(&["--json", "history", &s.id]).await.json_lines();
    let out = h.iter().rev().find(|m| m["role"] == "tool").map(|m| m["text"].to_string()).unwrap_or_default();
    assert!(out.contains("refused: closed by the peer"), "forged refused the connection itself: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confined_commands_run_without_a_prompt_and_leaving_the_sandbox_asks() {
    let Some(s) = setup("", &[]).await else { return };
    let text = s.run("echo hello-from-the-sandbox").await;
    assert!(text.contains("hello-from-the-sandbox"), "ran without anyone approving: {text}");

    let directive = tool_call("run_command", &json!({"command": "touch /tmp/forge-outside-probe", "sandbox": false}));
    s.forge.ok(&["send", "--no-wait", "-s", &s.id, &format!("{directive} go")]).await;
    let mut pending: Option<Value> = None;
    for _ in 0..400 {
        let list = s.forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(p) = list.into_iter().find(|p| p["session_id"] == s.id.as_str()) {
            pending = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let p = pending.unwrap_or_else(|| panic!("running outside the sandbox asks first"));
    let summary = p["calls"][0]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("OUTSIDE the sandbox"), "the approval says so: {summary}");
    s.forge.ok(&["deny", &s.id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgectl_sandbox_test_refuses_every_escape() {
    sandbox_test_refuses_every_escape(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgectl_sandbox_test_refuses_every_escape_on_older_kernels() {
    for env in OLDER_KERNELS {
        sandbox_test_refuses_every_escape(env).await;
        // And a command runs confined without a prompt there.
        let Some(s) = setup("", env).await else { return };
        let text = s.run("echo hello-from-an-older-kernel").await;
        assert!(text.contains("hello-from-an-older-kernel") && text.contains("exit status: 0"), "{env:?}: {text}");
        let shown = s.forge.ok(&["sandbox"]).await.stdout;
        assert!(shown.contains("a mount namespace of the granted trees only"), "{env:?}: {shown}");
    }
}

async fn sandbox_test_refuses_every_escape(env: &[(&str, &str)]) {
    let Some(s) = setup("", env).await else { return };
    let out = s.forge.ctl(&["sandbox", "test"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("every probe had the expected outcome"), "{}", out.stdout);
    let rows = s.forge.ok(&["--json", "sandbox", "test"]).await.json_lines();
    assert!(rows.len() >= 15, "{rows:?}");
    for r in &rows {
        assert_eq!(r["ok"], true, "{r}");
    }
    for probe in [
        "write outside through a rename race",
        "chmod a setuid file",
        "create a setuid file",
        "send a datagram or a descriptor to a Unix socket outside the roots",
    ] {
        assert!(rows.iter().any(|r| r["probe"] == probe && r["outcome"] == "refused"), "{probe}: {rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_tools_change_git_but_their_hooks_stay_in_the_sandbox() {
    let Some(s) = setup("", &[]).await else { return };
    let dir = s.dir();
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let escaped = outside.path().join("hook-escaped");
    let git = |args: &[&str]| {
        let ok =
            std::process::Command::new("git").args(args).current_dir(&dir).output().is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["config", "user.name", "T"]);
    let hook = dir.join(".git/hooks/pre-commit");
    std::fs::write(&hook, format!("#!/bin/sh\necho x > {} || true\n", q(&escaped))).unwrap_or_else(|e| panic!("{e}"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
    let calls =
        [tool_call("git_add", &json!({"paths": ["a.txt"]})), tool_call("git_commit", &json!({"message": "boxed"}))];
    s.forge.ok(&["send", "--auto-approve", "-s", &s.id, &format!("{} {} go", calls[0], calls[1])]).await;
    let log = std::process::Command::new("git").args(["log", "--format=%s"]).current_dir(&dir).output();
    let log = log.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    assert_eq!(log, "boxed\n", "the git tools wrote .git");
    assert!(!escaped.exists(), "the commit's hook could not write outside the roots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_kernel_confinement_forge_says_so_and_every_command_asks() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = Forge::new(&mock);
    forge.write_config("[tools.sandbox]\nmode = \"paths-only\"\n[tools.approval]\nmode = \"auto\"\n");
    // forgectl starts the daemon itself (no --no-autostart), as a user's
    // would; it says the daemon cannot confine commands.
    let mut cmd = tokio::process::Command::new(bin("forgectl"));
    cmd.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in forge.client_env() {
        cmd.env(k, v);
    }
    let out = cmd.arg("status").stdin(std::process::Stdio::null()).output().await.unwrap_or_else(|e| panic!("{e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("commands are not confined by the kernel"), "{stderr}");
    assert!(stdout.contains("sandbox:   paths-only"), "{stdout}");
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;
    let directive = tool_call("run_command", &json!({"command": "echo unconfined"}));
    forge.ok(&["send", "--no-wait", "-s", &id, &format!("{directive} go")]).await;
    let mut asked = false;
    for _ in 0..400 {
        let list = forge.ok(&["--json", "approvals"]).await.json_lines();
        if list.iter().any(|p| p["session_id"] == id.as_str()) {
            asked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(asked, "an unconfined command asks even in auto mode");
    forge.ok(&["deny", &id]).await;
    // The escape suite says first that commands are not confined and
    // would ask, runs none of its command probes unconfined, and passes.
    let suite = forge.ctl(&["sandbox", "test"]).await;
    assert_eq!(suite.code, 0, "{}", suite.stdout);
    let first = suite.stdout.lines().next().unwrap_or_default();
    assert!(first.contains("NOT confined") && first.contains("asks you first"), "{}", suite.stdout);
    assert!(!suite.stdout.contains("FAILED") && suite.stdout.contains("paths-only"), "{}", suite.stdout);
    let asks = suite.stdout.lines().filter(|l| l.contains("asks first")).count();
    assert!(asks >= 20, "every command probe asks first: {}", suite.stdout);
    assert!(suite.stdout.contains("write .git/config with a file tool"), "Forge's own refusals are still tested");
    // The doctor names the cause and the fix.
    let doctor = forge.ctl(&["doctor"]).await;
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("sandbox  NO") && doctor.stdout.contains("fix: remove `mode = \"paths-only\"`"),
        "{}",
        doctor.stdout
    );
    forge.ok(&["shutdown"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_user_namespaces_forge_names_the_setting_and_every_command_asks() {
    // forged in a user namespace of its own whose limit of nested ones is
    // 0: what `user.max_user_namespaces = 0` (or Ubuntu's AppArmor
    // restriction) does to a daemon, without touching this machine's.
    let probe = std::process::Command::new("unshare")
        .args(["-U", "-r", "sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        require_or_skip("unshare cannot make a user namespace with its own limits here");
        return;
    }
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[tools.approval]\nmode = \"auto\"\n");
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.env_clear();
    for k in ["PATH", "HOME", "LANG", "TMPDIR"] {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in forge.client_env() {
        cmd.env(k, v);
    }
    cmd.args(["-U", "-r", "sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\""])
        .arg(bin("forged"))
        .arg("--socket")
        .arg(&forge.socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut daemon = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
    forge.wait_ready().await;
    let status = forge.ok(&["--json", "sandbox"]).await.json_lines();
    let s = status.first().cloned().unwrap_or_default();
    assert_eq!(s["mode"], "unavailable", "{s}");
    let reason = s["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("user.max_user_namespaces = 0") && reason.contains("network"), "{reason}");
    let suite = forge.ctl(&["sandbox", "test"]).await;
    assert_eq!(suite.code, 0, "{}", suite.stdout);
    assert!(suite.stdout.lines().next().unwrap_or_default().contains("NOT confined"), "{}", suite.stdout);
    assert!(!suite.stdout.contains("FAILED"), "{}", suite.stdout);
    let doctor = forge.ctl(&["doctor"]).await;
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(doctor.stdout.contains("sudo sysctl user.max_user_namespaces="), "{}", doctor.stdout);
    // A command asks, even in auto mode.
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;
    let directive = tool_call("run_command", &json!({"command": "echo asked"}));
    forge.ok(&["send", "--no-wait", "-s", &id, &format!("{directive} go")]).await;
    let mut asked = false;
    for _ in 0..400 {
        if forge.ok(&["--json", "approvals"]).await.json_lines().iter().any(|p| p["session_id"] == id.as_str()) {
            asked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(asked, "an unconfined command asks first");
    forge.ok(&["deny", &id]).await;
    forge.ok(&["shutdown"]).await;
    let _ = daemon.wait().await;
}

/// Whether a process whose command line holds `marker` is alive.
fn alive(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read(e.path().join("cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_flood_stays_at_max_processes_and_nothing_outlives_the_timeout() {
    let config = "[tools.sandbox]\nmax_processes = 64\n[tools.timeouts]\nshell_commands_seconds = 4\n";
    let Some(s) = setup(config, &[]).await else { return };
    // Thousands of sleeping children (bounded, never a fork bomb).
    let flood = format!("{} __forge-probe flood 3000", q(&bin("forged")));
    let text = s.run(&flood).await;
    let started: Option<u64> = text
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    assert!(started.is_some_and(|n| n < 64), "the flood stopped at max_processes: {text}");
    assert!(text.contains("timed out after 4 s and was stopped"), "{text}");
    let killed: Option<u64> =
        text.split("was stopped: ").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok());
    assert!(
        killed.is_some_and(|k| k >= started.unwrap_or(0) && k <= 64),
        "the result says how many were killed: {text}"
    );
    let mut left = usize::MAX;
    for _ in 0..100 {
        left = alive("__forge-probe flood");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "nothing the command started is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_bounded_for_the_whole_command() {
    let config = "[tools.sandbox]\nmax_memory_mb = 512\n[tools.timeouts]\nshell_commands_seconds = 20\n";
    let Some(s) = setup(config, &[]).await else { return };
    let status = s.forge.ok(&["--json", "sandbox"]).await.json_lines();
    if status.first().and_then(|s| s["memory_bounded"].as_bool()) != Some(true) {
        // A machine may truly lack a memory cgroup for forged: counted.
        forge_tests::harness::skipped(
            "memory_is_bounded_for_the_whole_command",
            "no memory cgroup here: a command's memory is bounded per process only",
        );
        return;
    }
    let hog = q(&bin("forged"));
    // Six children of 200 MB under a 512 MB total; they report and wait,
    // and the command ends when the shell has waited long enough.
    let line = format!(
        "for i in 1 2 3 4 5 6; do {hog} __forge-probe hog 200 & done; sleep 6; echo held $(grep -ls 'hog.200' /proc/[0-9]*/cmdline | wc -l)"
    );
    let text = s.run(&line).await;
    let holding = text.matches("holding 200 MiB").count();
    assert!(holding < 6, "not all six got their 200 MB: {text}");
    assert!(text.contains("the command used its 512 MiB of memory"), "the result says why: {text}");
    // One memfd of 1 GiB is memory too.
    let text = s.run(&format!("{hog} __forge-probe hog-memfd 1024; echo done")).await;
    assert!(!text.contains("holding 1024 MiB"), "{text}");
    s.forge.ok(&["status"]).await;
}

/// Skips a test that needs what this machine lacks, unless
/// `FORGE_REQUIRE_SANDBOX=1` (CI, which installs everything the suite
/// needs) says it must run.
fn require_or_skip(why: &str) {
    if std::env::var("FORGE_REQUIRE_SANDBOX").is_ok_and(|v| v == "1") {
        panic!("FORGE_REQUIRE_SANDBOX=1 but {why}");
    }
    forge_tests::harness::skipped("escape", why);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_outside_the_roots_reach_nothing_tmux_and_other_daemons_included() {
    let Some(s) = setup("", &[]).await else { return };
    let outside_tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A directory like a home's, outside /tmp.
    let home_like = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
    let marker = outside_tmp.path().join("ran-outside");
    let mut lines = Vec::new();
    let tmux = std::process::Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
    let mut servers = Vec::new();
    if tmux {
        for dir in [outside_tmp.path(), home_like.path()] {
            let sock = dir.join("tmux.sock");
            let ok = std::process::Command::new("tmux")
                .args(["-S", &sock.display().to_string(), "new-session", "-d", "sleep 600"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "a tmux server for the test");
            servers.push(sock.clone());
            lines.push(format!("tmux -S {} new-window 'touch {}'; echo tmux=$?", q(&sock), q(&marker)));
        }
    } else {
        require_or_skip("tmux is not installed: the tmux escape is not tried");
    }
    // A second daemon (another FORGE_HOME), its socket in /tmp, and a
    // third whose socket lies inside the session's project: the sandbox
    // lets the connect through, the daemon refuses a sandboxed peer.
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut second = Forge::new(&mock);
    second.start().await;
    let mut third = Forge::new(&mock);
    third.socket = s.dir().join("third.sock");
    third.start().await;
    for sock in [&second.socket, &third.socket] {
        lines.push(format!("{} __forge-probe connect-unix {}", q(&bin("forged")), q(sock)));
        lines.push(format!(
            "{} --socket {} --no-autostart session new --cwd /; echo forgectl=$?",
            q(&bin("forgectl")),
            q(sock)
        ));
    }
    let text = s.run(&lines.join("; ")).await;
    assert!(!marker.exists(), "nothing ran outside through tmux: {text}");
    if tmux {
        assert!(text.contains("refused connect to the Unix socket"), "the command is told: {text}");
        assert!(!text.contains("tmux=0"), "{text}");
    }
    assert!(!text.contains("connected to"), "no daemon took the connection: {text}");
    assert!(!text.contains("forgectl=0"), "{text}");
    for f in [&second, &third] {
        let list = f.ok(&["--json", "ps"]).await.json_lines();
        assert!(list.is_empty(), "no session was made in another daemon: {list:?}");
    }
    for sock in servers {
        let _ = std::process::Command::new("tmux").args(["-S", &sock.display().to_string(), "kill-server"]).status();
    }
}

/// `git args` in `dir`, as the user would run it.
fn user_git(dir: &Path, args: &[&str]) -> String {
    let out =
        std::process::Command::new("git").args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("git: {e}"));
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_hook_never_changes_git_config_and_the_users_git_runs_nothing() {
    for run_hooks in [false, true] {
        let config = if run_hooks { "[tools.git]\nrun_hooks = true\n" } else { "" };
        let Some(s) = setup(config, &[]).await else { return };
        let dir = s.dir();
        let marker = dir.join("fsmonitor-ran");
        user_git(&dir, &["init", "-q"]);
        user_git(&dir, &["config", "user.email", "t@example.com"]);
        user_git(&dir, &["config", "user.name", "T"]);
        // What husky sets up.
        user_git(&dir, &["config", "core.hooksPath", ".husky"]);
        let before = std::fs::read_to_string(dir.join(".git/config")).unwrap_or_default();
        // A hook in the project's hooks directory (as a clone brings one)
        // that would make the user's next `git status` run its command;
        // the model cannot change it (the directory is read-only to
        // commands), and writes a file to commit.
        let hook = format!(
            "#!/bin/sh\ntouch hook-ran\ngit config core.fsmonitor 'touch {}'\necho x >> .git/hooks/post-commit\n",
            marker.display()
        );
        std::fs::create_dir_all(dir.join(".husky")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join(".husky/pre-commit"), &hook).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(dir.join(".husky/pre-commit"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        s.run("echo 'touch evil' >> .husky/pre-commit; echo a > a.txt").await;
        assert_eq!(std::fs::read_to_string(dir.join(".husky/pre-commit")).unwrap_or_default(), hook);
        let calls =
            [tool_call("git_add", &json!({"paths": ["a.txt"]})), tool_call("git_commit", &json!({"message": "plain"}))];
        s.forge.ok(&["send", "--auto-approve", "-s", &s.id, &format!("{} {} go", calls[0], calls[1])]).await;
        // A write to .git/config by a file tool is refused too.
        let write = tool_call("write_file", &json!({"path": ".git/config", "content": "[core]\nfsmonitor = evil\n"}));
        s.forge.ok(&["send", "--auto-approve", "-s", &s.id, &format!("{write} go")]).await;
        let h = s.forge.ok(&["--json", "history", &s.id]).await.json_lines();
        let refusal = h.iter().rev().find(|m| m["role"] == "tool").map(|m| m["text"].to_string()).unwrap_or_default();
        assert!(refusal.contains("inside `.git`"), "{refusal}");

        assert_eq!(
            std::fs::read_to_string(dir.join(".git/config")).unwrap_or_default(),
            before,
            "run_hooks={run_hooks}"
        );
        assert!(!dir.join(".git/hooks/post-commit").exists(), "the hooks stay as they were");
        assert_eq!(dir.join("hook-ran").exists(), run_hooks, "hooks run only when [tools.git] run_hooks says so");
        if !run_hooks {
            assert_eq!(user_git(&dir, &["log", "--format=%s"]), "plain\n", "the commit was made, without the hook");
        }
        user_git(&dir, &["status"]);
        assert!(!marker.exists(), "the user's own git status ran nothing the model wrote");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_tools_run_nothing_a_repository_config_names() {
    let Some(s) = setup("", &[]).await else { return };
    let dir = s.dir();
    let ran = dir.join("ran");
    user_git(&dir, &["init", "-q"]);
    user_git(&dir, &["config", "user.email", "t@example.com"]);
    user_git(&dir, &["config", "user.name", "T"]);
    for (k, v) in [
        ("core.fsmonitor", format!("touch {}/fsmonitor", ran.display())),
        ("filter.x.clean", format!("sh -c 'touch {}/filter; cat'", ran.display())),
        ("diff.external", format!("touch {}/external", ran.display())),
    ] {
        user_git(&dir, &["config", k, &v]);
    }
    std::fs::create_dir(&ran).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(".gitattributes"), "*.txt filter=x\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
    let calls = [
        tool_call("git_status", &json!({})),
        tool_call("git_add", &json!({"paths": ["a.txt", ".gitattributes"]})),
        tool_call("git_diff", &json!({"staged": true})),
    ];
    s.forge.ok(&["send", "--auto-approve", "-s", &s.id, &format!("{} {} {} go", calls[0], calls[1], calls[2])]).await;
    let left: Vec<_> =
        std::fs::read_dir(&ran).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "nothing the repository's config names ran: {left:?}");
    let h = s.forge.ok(&["--json", "history", &s.id]).await.json_lines();
    let results: Vec<String> = h.iter().filter(|m| m["role"] == "tool").map(|m| m["text"].to_string()).collect();
    assert!(results.iter().any(|r| r.contains("+a")), "git_diff showed the change: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broad_roots_are_refused_unless_the_user_means_it_and_imports_can_be_rerooted() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home_s = home.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    forge.set_env("HOME", &home_s);
    forge.start().await;
    for dir in ["/", home_s.as_str(), "/etc", "/usr/lib"] {
        let out = forge.ctl(&["--json", "session", "new", "--cwd", dir]).await;
        assert_ne!(out.code, 0, "{dir}: {}", out.stdout);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains("broad_root") || all.contains("too broad"), "{dir}: {all}");
        assert!(all.contains("--allow-broad-root"), "the message says what to do: {all}");
    }
    let id = forge.new_session(&["--cwd", "/", "--allow-broad-root"]).await;
    // An export whose session works in `/` is refused, then re-rooted.
    let export = forge.ok(&["export", &id]).await.stdout;
    forge.ok(&["session", "rm", &id]).await;
    let file = home.path().join("s.jsonl");
    std::fs::write(&file, export).unwrap_or_else(|e| panic!("{e}"));
    let file_s = file.display().to_string();
    let refused = forge.ctl(&["import", &file_s]).await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("--cwd DIR"), "{}", refused.stderr);
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let info = forge.ok(&["--json", "import", &file_s, "--cwd", &p]).await.json_lines();
    assert_eq!(info.first().and_then(|i| i["cwd"].as_str()), Some(p.as_str()), "{info:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_from_the_model_and_tools_show_as_text() {
    let Some(s) = setup("", &[]).await else { return };
    // A clipboard write (OSC 52), a clear-screen and a hidden hyperlink in
    // a command's output, which the mock's answer repeats.
    let line = r"printf 'A\033]52;c;ZXZpbA==\007B\033[2JC\033]8;;https://evil.example\033\\link\033]8;;\033\\D\n'";
    let directive = tool_call("run_command", &json!({"command": line}));
    let sent = s.forge.ok(&["send", "-s", &s.id, &format!("{directive} go")]).await;
    let shown = format!("{}{}", sent.stdout, sent.stderr);
    assert!(!shown.contains('\x1b') && !shown.contains('\x07'), "send wrote a control sequence: {shown:?}");
    assert!(shown.contains("^[]52;c;ZXZpbA==^G"), "the sequence shows as text: {shown:?}");
    let history = s.forge.ok(&["history", &s.id]).await.stdout;
    assert!(!history.contains('\x1b'), "{history:?}");
    assert!(history.contains("^[[2J"), "{history:?}");
    let attach = s.forge.ok(&["attach", &s.id, "--from", "1", "--until-idle"]).await.stdout;
    assert!(!attach.contains('\x1b'), "{attach:?}");
    // For pipes that want the bytes.
    let raw = s.forge.ok(&["--raw", "history", &s.id]).await.stdout;
    assert!(raw.contains("\x1b]52;c;ZXZpbA==\x07"), "{raw:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_forge_home_inside_the_project_is_hidden() {
    let Some(s) = setup("", &[]).await else { return };
    let store = s.dir().join("tests/other-home");
    std::fs::create_dir_all(&store).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(store.join("forge.db"), "SQLite format 3 SECRET-STORE").unwrap_or_else(|e| panic!("{e}"));
    let text = s.run("cat tests/other-home/forge.db; ls tests/other-home; echo x > tests/other-home/planted").await;
    assert!(!text.contains("SECRET-STORE"), "{text}");
    assert!(!store.join("planted").exists(), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_make_a_repository_or_project_settings_where_there_are_none() {
    let Some(s) = setup("", &[]).await else { return };
    let marker = s.dir().join("fsmonitor-ran");
    let line = format!(
        "git init -q; git config core.fsmonitor 'touch {}'; mkdir -p .claude .forge; echo '{{}}' > .claude/settings.json; echo done",
        marker.display()
    );
    let text = s.run(&line).await;
    assert!(text.contains("may not make `.git`"), "the model is told why: {text}");
    for name in [".git", ".claude", ".forge"] {
        assert!(!s.dir().join(name).exists(), "{name} was not made, and no placeholder is left: {text}");
    }
    // The user's own git, here, runs nothing.
    let _ = std::process::Command::new("git").arg("status").current_dir(s.dir()).output();
    assert!(!marker.exists());
    // A subdirectory is the project's own business.
    let text = s.run("mkdir -p sub/.claude && echo ok > sub/.claude/x && cat sub/.claude/x").await;
    assert!(text.contains("ok"), "{text}");
}

/// Files under `dir` (recursively) with the setuid or setgid bit.
fn set_id_files(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
            if m.permissions().mode() & 0o6000 != 0 {
                found.push(e.path());
            }
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_make_a_setuid_or_setgid_file() {
    let Some(s) = setup("", &[]).await else { return };
    let forged = q(&bin("forged"));
    let attempts = [
        "cp /usr/bin/id ./x && chmod 6755 ./x; echo chmod=$?".to_string(),
        "chmod u+s ./x; chmod g+s ./x".to_string(),
        "cp /usr/bin/id ./y && install -m 4755 ./y ./z; echo install=$?".to_string(),
        format!("{forged} __forge-probe create-mode ./w 4755; {forged} __forge-probe create-mode ./v 2755"),
        "mkdir -m 2775 shared; mkdir plain && chmod g+s plain".to_string(),
        "cp -p /usr/bin/id ./copy-of-id 2>/dev/null; touch ok".to_string(),
    ];
    let text = s.run(&attempts.join("; ")).await;
    assert_eq!(set_id_files(&s.dir()), Vec::<PathBuf>::new(), "no setuid or setgid file in the project: {text}");
    assert!(text.contains("refused:"), "the creating call is refused: {text}");
    assert!(s.dir().join("x").is_file() && s.dir().join("ok").is_file(), "the rest of the command ran: {text}");
    // A plain chmod still works.
    let text = s.run("chmod 750 ./x && stat -c %a ./x").await;
    assert!(text.contains("750"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_and_descriptors_reach_only_sockets_in_the_roots() {
    let Some(s) = setup("", &[]).await else { return };
    // A socket like one in the user's home (outside /tmp, which commands
    // see as a private one), and one in the project.
    let home_like = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
    let outside = home_like.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).join("d.sock");
    let inside = s.dir().join("d.sock");
    let out_sock = std::os::unix::net::UnixDatagram::bind(&outside).unwrap_or_else(|e| panic!("{e}"));
    let in_sock = std::os::unix::net::UnixDatagram::bind(&inside).unwrap_or_else(|e| panic!("{e}"));
    let forged = q(&bin("forged"));
    let text = s.run(&format!("{forged} __forge-probe send-unix {}", q(&outside))).await;
    out_sock.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    let mut buf = [0u8; 64];
    assert!(out_sock.recv(&mut buf).is_err(), "nothing reached the socket outside: {text}");
    assert!(text.contains("refused send to the Unix socket"), "the command is told: {text}");
    let text = s.run(&format!("{forged} __forge-probe send-unix {}", q(&inside))).await;
    in_sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap_or_else(|e| panic!("{e}"));
    let n = in_sock.recv(&mut buf).unwrap_or_else(|e| panic!("the socket in the project is reached: {e}: {text}"));
    assert_eq!(&buf[..n], b"forge-probe datagram");
    assert!(text.contains("sent: datagram true, descriptor true"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_users_keyrings_are_out_of_sight() {
    let Some(s) = setup("", &[]).await else { return };
    let text = s.run("echo keys:; cat /proc/keys; echo :end; cat /proc/key-users | wc -c").await;
    let listed = text.split("keys:").nth(1).and_then(|t| t.split(":end").next()).unwrap_or("x").trim().to_string();
    assert!(listed.is_empty(), "/proc/keys lists nothing: {text}");
    assert!(!text.contains("_uid.") && !text.contains("keyring"), "{text}");
}

/// git run as the user in `dir`, with no configuration of the user's own,
/// failing or not.
fn git_as_user(dir: &Path, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@x")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@x")
        .output()
        .unwrap_or_else(|e| panic!("git: {e}"));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_a_command_sets_up_runs_nothing_when_the_user_runs_git_there() {
    let Some(s) = setup("", &[]).await else { return };
    let dir = s.dir();
    // The user's own nested repository, with a hooks directory of theirs.
    std::fs::create_dir(dir.join("mine")).unwrap_or_else(|e| panic!("{e}"));
    git_as_user(&dir.join("mine"), &["init", "-q"]);
    git_as_user(&dir.join("mine"), &["config", "core.hooksPath", ".husky"]);
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap_or_else(|e| panic!("{e}"));
    let marks = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
    let m = marks.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let command = format!(
        "git init -q sub && git -C sub config core.fsmonitor 'touch {m}/fsmonitor' \
         && printf '#!/bin/sh\\ntouch {m}/hook\\n' > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit; \
         git -C mine config alias.st '!touch {m}/alias'; \
         mkdir -p mine/.husky && printf '#!/bin/sh\\ntouch {m}/husky\\n' > mine/.husky/pre-commit && chmod +x mine/.husky/pre-commit; \
         mkdir -p target/deep && git init -q --bare target/deep/b.git && git -C target/deep/b.git config alias.lg '!touch {m}/bare'; \
         mkdir elsewhere && printf 'gitdir: /tmp/g\\n' > elsewhere/.git; echo set up"
    );
    let directive = tool_call("run_command", &json!({"command": command}));
    let sent = s.forge.ok(&["send", "-s", &s.id, &format!("{directive} go")]).await;
    assert!(sent.stderr.contains("sub/.git/config: took out core.fsmonitor"), "the user is told: {}", sent.stderr);
    let h = s.forge.ok(&["--json", "history", &s.id]).await.json_lines();
    let text =
        h.iter().rev().find(|m| m["role"] == "tool").and_then(|r| r["text"].as_str()).unwrap_or_default().to_string();
    assert!(text.contains("set up"), "{text}");
    for said in [
        "--- sandbox ---",
        "sub/.git/config: took out core.fsmonitor",
        "sub/.git/hooks/pre-commit",
        "mine/.git/config: took out alias.st",
        "mine/.husky/pre-commit",
        "target/deep/b.git/config: took out alias.lg",
        "elsewhere/.git",
    ] {
        assert!(text.contains(said), "the model is told {said:?}: {text}");
    }
    // The user runs git in each, as they or a shell prompt would.
    git_as_user(&dir.join("sub"), &["status"]);
    git_as_user(&dir.join("sub"), &["commit", "--allow-empty", "-qm", "x"]);
    git_as_user(&dir.join("mine"), &["st"]);
    git_as_user(&dir.join("mine"), &["commit", "--allow-empty", "-qm", "x"]);
    git_as_user(&dir.join("target/deep/b.git"), &["lg"]);
    git_as_user(&dir.join("elsewhere"), &["status"]);
    let ran: Vec<String> = std::fs::read_dir(marks.path())
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(ran.is_empty(), "nothing the model wrote ran: {ran:?}");
    assert_eq!(
        git_as_user(&dir.join("mine"), &["config", "core.hooksPath"]).trim(),
        ".husky",
        "the user's own setting stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_plant_a_hook_where_the_users_core_hooks_path_points() {
    let Some(s) = setup("", &[]).await else { return };
    let dir = s.dir();
    git_as_user(&dir, &["init", "-q"]);
    // What many repositories ask of each clone (husky sets `.husky/_`).
    git_as_user(&dir, &["config", "core.hooksPath", ".githooks"]);
    let marks = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
    let m = marks.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let plant = |hooks: &str| {
        format!(
            "mkdir -p {hooks}; printf '#!/bin/sh\\ntouch {m}/hook\\n' > {hooks}/pre-commit; chmod +x {hooks}/pre-commit; echo tried"
        )
    };
    // Where the directory does not exist yet, then where it does, then
    // where the user points it mid-session.
    let text = s.run(&plant(".githooks")).await;
    assert!(text.contains("tried"), "{text}");
    assert!(!dir.join(".githooks").exists(), "no hooks directory was made: {text}");
    std::fs::create_dir(dir.join(".githooks")).unwrap_or_else(|e| panic!("{e}"));
    s.run(&plant(".githooks")).await;
    assert!(!dir.join(".githooks/pre-commit").exists(), "nothing was planted in it");
    git_as_user(&dir, &["config", "core.hooksPath", ".husky/_"]);
    s.run(&plant(".husky/_")).await;
    assert!(!dir.join(".husky/_/pre-commit").exists(), "nor where the setting points now");
    git_as_user(&dir, &["commit", "--allow-empty", "-qm", "mine"]);
    git_as_user(&dir, &["config", "core.hooksPath", ".githooks"]);
    git_as_user(&dir, &["commit", "--allow-empty", "-qm", "mine again"]);
    let ran: Vec<String> = std::fs::read_dir(marks.path())
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(ran.is_empty(), "the user's commits ran nothing the model wrote: {ran:?}");
    // The rest of the project stays writable.
    let text = s.run("echo ok > notes.txt && cat notes.txt").await;
    assert!(text.contains("ok") && dir.join("notes.txt").exists(), "{text}");
}

/// How a running command is stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    Cancel,
    Shutdown,
    /// The daemon killed -9, then started again.
    Kill,
}

/// Runs `command` as the model would and stops it once `started` exists.
async fn stop_midway(s: &mut Setup, command: &str, started: &Path, how: Stop) {
    let directive = tool_call("run_command", &json!({"command": command}));
    let send = s.forge.ctl_cmd(&["send", "-s", &s.id, &format!("{directive} go")]).spawn();
    let send = send.unwrap_or_else(|e| panic!("forgectl send: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match how {
        Stop::Shutdown => {
            s.forge.ok(&["shutdown"]).await;
            assert!(s.forge.wait_exit().await, "forged stopped");
            s.forge.start().await;
        }
        Stop::Kill => {
            s.forge.kill9().await;
            s.forge.start().await;
        }
        Stop::Cancel => {
            s.forge.ok(&["cancel", &s.id]).await;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(60), send.wait_with_output()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_stopped_midway_leaves_nothing_git_would_run_and_undo_restores_every_file() {
    for how in [Stop::Cancel, Stop::Shutdown, Stop::Kill] {
        let shutdown = format!("{how:?}");
        let Some(mut s) = setup("", &[]).await else { return };
        let dir = s.dir();
        std::fs::write(dir.join("notes.txt"), "mine\n").unwrap_or_else(|e| panic!("{e}"));
        s.run("echo first").await;
        let marks = tempfile::tempdir_in(forge_tests::harness::bin_dir()).unwrap_or_else(|e| panic!("{e}"));
        let m = marks.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
        // Plants, changes a file, makes one, then sleeps: the command a
        // user cancels.
        let command = format!(
            "git init -q sub && git -C sub config core.fsmonitor 'touch {m}/fsmonitor' \
             && echo theirs > notes.txt && echo new > created.txt && sleep 120"
        );
        stop_midway(&mut s, &command, &dir.join("created.txt"), how).await;
        // What the stopped command left is recorded and undone once it
        // has stopped; the event says so.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ev = s.forge.rpc("session.events", json!({"session": s.id})).await;
            let events = ev["result"].as_array().cloned().unwrap_or_default();
            if events.iter().any(|e| e["kind"] == "git_settings_undone") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "shutdown={shutdown}: no git_settings_undone: {events:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        git_as_user(&dir.join("sub"), &["status"]);
        assert!(
            std::fs::read_dir(marks.path()).map(|d| d.count()).unwrap_or(0) == 0,
            "shutdown={shutdown}: nothing ran"
        );
        if how == Stop::Kill {
            // The record of the tree died with the daemon: once the user
            // has decided about the cut call, undo names the root as one
            // it cannot restore instead of saying nothing would change.
            s.forge.ok(&["recover", "--resume", &s.id]).await;
            s.forge.wait_for_session(&s.id, "idle", |v| v["state"] == "idle").await;
            let dry = s.forge.ctl(&["undo", &s.id, "--dry-run"]).await;
            let said = format!("{}{}", dry.stdout, dry.stderr);
            assert!(said.contains("stopped (killed or crashed) while the command ran"), "{said}");
            continue;
        }
        let dry = s.forge.ok(&["undo", &s.id, "--dry-run"]).await.stdout;
        assert!(dry.contains("notes.txt") && dry.contains("created.txt"), "shutdown={shutdown}: {dry}");
        s.forge.ok(&["undo", &s.id]).await;
        assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap_or_default(), "mine\n", "shutdown={shutdown}");
        assert!(!dir.join("created.txt").exists(), "shutdown={shutdown}: the file it made is gone");
    }
}
