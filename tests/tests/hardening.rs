//! What a daemon holding people's work must keep: private files, keys that
//! no error, log or other process shows. Each test runs the real binaries.
//! Checks that need a second, unprivileged user run only as root (which can
//! run processes as `nobody`), and say so when they skip.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use forge_tests::harness::{Forge, bin, walk};
use forge_tests::mock::{MockOptions, MockServer, token_text};

/// `nobody`: an unprivileged user every Linux system has.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).map(|m| m.permissions().mode() & 0o777).unwrap_or(0)
}

/// A daemon on the mock, started.
async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

/// Drops every privilege to `nobody`'s, in the child between fork and exec.
fn become_nobody() -> std::io::Result<()> {
    // SAFETY: plain syscalls, async-signal-safe.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Runs `program args` as `nobody`; (exit code, stdout + stderr).
fn run_as_nobody(program: &str, args: &[&str]) -> (i32, String) {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    // SAFETY: become_nobody only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(become_nobody) };
    let out = cmd.output().unwrap_or_else(|e| panic!("run {program} as nobody: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_home_and_every_file_in_it_are_private() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = Forge::new(&mock);
    // A home forged creates itself, under a directory anyone may enter.
    let data = forge.home.path().join("data");
    std::fs::set_permissions(forge.home.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut forge = forge.with_data_dir(&data);
    forge.start().await;
    let id = forge.new_session(&[]).await;
    let r = forge.ok(&["send", "-s", &id, "mock:tokens=5 mock:delay=5"]).await;
    assert_eq!(r.stdout.trim_end(), token_text(5).trim_end());
    let files = walk(&data);
    assert!(files.iter().any(|p| p.ends_with("forge.db")), "{files:?}");
    assert!(files.iter().any(|p| p.parent().is_some_and(|d| d.ends_with("logs"))), "{files:?}");
    for p in std::iter::once(data.clone()).chain(files) {
        assert_eq!(mode(&p) & 0o077, 0, "{} is {:o}: readable by other users", p.display(), mode(&p));
    }
    if is_root() {
        let (code, out) = run_as_nobody("cat", &[&data.join("forge.db").display().to_string()]);
        assert_ne!(code, 0, "another user read the store: {out}");
    } else {
        eprintln!("skipped the other-user read check: it needs root to run a process as nobody");
    }

    // A home made loose by hand (or by an older forged) is tightened at
    // start, and the log says so.
    forge.terminate().await;
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(data.join("forge.db"), std::fs::Permissions::from_mode(0o644))
        .unwrap_or_else(|e| panic!("{e}"));
    forge.start().await;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("forge.db")), 0o600);
    let mut logs = String::new();
    for e in std::fs::read_dir(data.join("logs")).into_iter().flatten().flatten() {
        logs.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    assert!(logs.contains("made private"), "the log says what was tightened: {logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_syntax_error_names_file_line_and_key_but_never_the_api_key() {
    let forge = Forge::bare();
    forge.write_config(
        "[app]\nmodel = \"claude-sonnet-4-6\"\n\n[api_keys]\nanthropic = \"sk-ant-api03-SECRETSECRET0123456789\n",
    );
    // forgectl starts the daemon itself (no --no-autostart), as a user's would.
    let out = tokio::process::Command::new(bin("forgectl"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGE_HOME", forge.data_dir())
        .env("FORGE_SOCKET", &forge.socket)
        .args(["status"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("forgectl: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("config.toml") && stderr.contains("line 5") && stderr.contains("anthropic"), "{stderr}");
    assert!(!stderr.contains("started forged"), "a daemon that failed to start is not announced: {stderr}");
    let mut everything = stderr.into_owned();
    let files = walk(&forge.data_dir());
    for f in files.iter().filter(|p| p.is_file() && !p.ends_with("config.toml")) {
        everything.push_str(&String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()));
    }
    assert!(everything.contains("line 5"), "the log holds the error too: {everything}");
    assert!(!everything.contains("SECRETSECRET"), "the key leaked: {everything}");
}

/// The daemon's own environment holds no key once it started, and (as a
/// non-root user) no other process of the user can read its environment or
/// memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_other_process_can_read_the_daemons_keys() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.set_env("ANTHROPIC_API_KEY", "sk-ant-ENVIRONSECRET-0123456789");
    forge.start().await;
    // The key still works: it was taken into the configuration.
    let r = forge.ok(&["send", "mock:tokens=3"]).await;
    assert_eq!(r.stdout.trim_end(), token_text(3).trim_end());
    let pid = forge.pid().unwrap_or_else(|| panic!("no pid"));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    assert!(!environ.is_empty(), "root can read it; it must not hold the key");
    assert!(!String::from_utf8_lossy(&environ).contains("ENVIRONSECRET"), "the key is in /proc/PID/environ");
    forge.terminate().await;

    if !is_root() {
        eprintln!("skipped the same-user /proc check: it needs root to run the daemon and a reader as nobody");
        return;
    }
    // forged and an attacker's process as the same unprivileged user.
    let home = tempfile::Builder::new().prefix("forge-nobody-").tempdir().unwrap_or_else(|e| panic!("{e}"));
    let chown = |p: &Path| {
        let c = std::ffi::CString::new(p.display().to_string()).unwrap_or_default();
        // SAFETY: chown(2) on a path we created.
        unsafe { libc::chown(c.as_ptr(), NOBODY, NOBODY) };
    };
    chown(home.path());
    let socket = home.path().join("forged.sock");
    let mut cmd = tokio::process::Command::new(bin("forged"));
    cmd.env_clear()
        .env("FORGE_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-ENVIRONSECRET-0123456789")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // SAFETY: become_nobody only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(become_nobody) };
    let mut daemon = cmd.spawn().unwrap_or_else(|e| panic!("forged as nobody: {e}"));
    let dpid = daemon.id().unwrap_or(0);
    for _ in 0..500 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(socket.exists(), "forged did not start as nobody (is target/ readable by other users?)");
    for file in ["environ", "maps"] {
        let (code, out) = run_as_nobody("head", &["-c", "4096", &format!("/proc/{dpid}/{file}")]);
        assert_ne!(code, 0, "a same-user process read /proc/{dpid}/{file}: {out}");
        assert!(!out.contains("ENVIRONSECRET"));
    }
    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
}

/// `rm $FORGE_HOME/forge.db*` under a running daemon: the next write
/// blocks (nothing is acknowledged into a file that is gone), and
/// `forgectl journal reset` writes the database back from the connection
/// that still holds it, so nothing is lost across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_database_blocks_and_a_reset_writes_it_back() {
    let (_mock, mut forge) = started().await;
    let id = forge.new_session(&["--name", "keep"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=4 mock:delay=2 first"]).await;
    let data = forge.data_dir();
    for e in std::fs::read_dir(&data).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("forge.db") {
            std::fs::remove_file(e.path()).unwrap_or_else(|err| panic!("rm: {err}"));
        }
    }
    let r = forge.ctl(&["--json", "send", "-s", &id, "mock:tokens=4 lost"]).await;
    assert_ne!(r.code, 0, "a turn into a deleted store must not be acknowledged: {}", r.stdout);
    assert!(r.stdout.contains("persistence_blocked") || r.stderr.contains("persistence_blocked"), "{r:?}");
    let j = forge.ok(&["--json", "journal"]).await.json_lines().pop().unwrap_or_default();
    assert_eq!(j["health"], "blocked", "{j}");
    assert!(j["reason"].as_str().unwrap_or("").contains("deleted or replaced"), "{j}");

    let reset = forge.ok(&["journal", "reset"]).await;
    assert!(reset.stdout.contains("written back"), "{}", reset.stdout);
    assert!(data.join("forge.db").is_file(), "the database is at its path again");
    forge.ok(&["send", "-s", &id, "mock:tokens=2 after"]).await;

    forge.restart().await;
    let history = forge.ok(&["--json", "history", "keep"]).await.json_lines();
    let texts: Vec<&str> = history.iter().map(|m| m["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(texts[0].contains("first") && texts[2].contains("after"), "{texts:?}");
    assert_eq!(texts[1].trim_end(), token_text(4).trim_end());
    assert_eq!(texts[3].trim_end(), token_text(2).trim_end());
}

/// A turn killed before its first word is recovered as an interrupted
/// answer, and the next request tells the model so instead of sending two
/// user messages in a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_before_its_first_text_is_marked_interrupted() {
    let (mock, mut forge) = started().await;
    let id = forge.new_session(&["--name", "early"]).await;
    forge.ok(&["send", "--no-wait", "-s", &id, "mock:tokens=3 mock:delay=20000 slow to start"]).await;
    // The request reached the provider; no text has come back.
    for _ in 0..200 {
        if !mock.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(mock.requests().len(), 1);
    forge.kill9().await;
    forge.start().await;

    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    assert_eq!(h.len(), 2, "the question and an (empty) interrupted answer: {h:?}");
    assert_eq!(h[1]["role"], "assistant");
    assert_eq!(h[1]["status"], "interrupted");
    assert_eq!(h[1]["recovered"], "incomplete");

    forge.ok(&["send", "-s", &id, "mock:tokens=1 are you there"]).await;
    let last = mock.requests().pop().unwrap_or_else(|| panic!("no request"));
    let msgs = last.body["messages"].as_array().cloned().unwrap_or_default();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap_or("")).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{msgs:?}");
    assert!(msgs[1]["content"].to_string().contains("interrupted"), "the model is told: {}", msgs[1]);
}

/// A turn that failed before any output leaves no answer in history, but
/// the next request still tells the model the question went unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_left_unanswered_by_an_error_is_marked_in_the_next_request() {
    let (mock, forge) = started().await;
    let id = forge.new_session(&[]).await;
    assert_eq!(forge.ctl(&["send", "-s", &id, "mock:status=400 first"]).await.code, 4);
    forge.ok(&["send", "-s", &id, "mock:tokens=1 second"]).await;
    let last = mock.requests().pop().unwrap_or_else(|| panic!("no request"));
    let msgs = last.body["messages"].as_array().cloned().unwrap_or_default();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap_or("")).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{msgs:?}");
    assert!(msgs[1]["content"].to_string().contains("No answer"), "{}", msgs[1]);
}

/// Pids of processes whose command line is exactly `args`.
fn processes(args: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// An approved command, and the children it started, die with a killed
/// daemon; after the restart the session says what was running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_die_with_a_killed_daemon_and_recovery_says_what_was_running() {
    let (_mock, mut forge) = started().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;
    // A grandchild in a subshell, and a child: neither is the group's leader.
    let call = r#"mock:tool=run_command:{"command":"(sleep${IFS}4711)&sleep${IFS}4712;wait"}"#;
    let mut sender = forge
        .ctl_cmd(&["send", "--auto-approve", "-s", &id, &format!("{call} go")])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut started = false;
    for _ in 0..400 {
        if !processes(&["sleep", "4711"]).is_empty() && !processes(&["sleep", "4712"]).is_empty() {
            started = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(started, "the command started");
    forge.kill9().await;
    let _ = sender.start_kill();
    let mut left = Vec::new();
    for _ in 0..100 {
        left = [processes(&["sleep", "4711"]), processes(&["sleep", "4712"])].concat();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if !left.is_empty() {
        // Do not leave them behind for the next test run.
        for pid in &left {
            // SAFETY: kill(2) on a stray test process.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
    }
    assert!(left.is_empty(), "processes outlived the daemon: {left:?}");

    forge.start().await;
    let show = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert_eq!(show[0]["state"], "tool_recovery");
    let events = forge.ok(&["attach", &id, "--until-idle"]).await;
    assert!(
        events.stdout.contains(
            "run_command `(sleep${IFS}4711)&sleep${IFS}4712;wait` (was running; its processes were stopped with forged)"
        ),
        "{}",
        events.stdout
    );
}

/// `forgectl attach S --from live --until-idle` joining a running turn
/// follows it to its end (it used to print nothing and exit at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_from_live_until_idle_follows_a_running_turn_to_its_end() {
    let (_mock, forge) = started().await;
    let id = forge.new_session(&["--name", "live"]).await;
    forge.ok(&["send", "--no-wait", "-s", &id, "mock:tokens=40 mock:delay=25 go"]).await;
    // Join once some text is out.
    for _ in 0..200 {
        let show = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
        if show[0]["last_seq"].as_u64().unwrap_or(0) > 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let r = forge.ok(&["--json", "attach", &id, "--from", "live", "--until-idle"]).await;
    let events = r.json_lines();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds.last(), Some(&"turn_finished"), "it followed the turn to its end: {kinds:?}");
    assert!(kinds.contains(&"text_delta"), "{kinds:?}");
    assert!(!kinds.contains(&"turn_started"), "nothing from before it joined: {kinds:?}");
    // Idle now: it returns at once with nothing.
    let r = forge.ok(&["attach", &id, "--from", "live", "--until-idle"]).await;
    assert_eq!(r.stdout, "");
}

/// Raises this process's open-file limit for a flood of connections;
/// false (the test counted as skipped, saying why) if it cannot reach
/// 2,500.
fn room_for_2500_files(what: &str) -> bool {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max.min(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    if lim.rlim_cur < 2500 {
        let why = format!("this process may open only {} files; {what} take 2,500", lim.rlim_cur);
        forge_tests::harness::skipped("hardening", &why);
        return false;
    }
    true
}

/// One local process holding every connection slot cannot starve other
/// clients: with 1,100 connections that sent half a request or nothing,
/// `forgectl ps` is answered at once (the longest-idle of them are closed
/// to make room), and half-sent requests are closed after 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_does_not_starve_new_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if !room_for_2500_files("the flood") {
        return;
    }
    let mut forge = Forge::bare();
    // Half-sent requests are cut off after 2 s here, 30 s by default.
    forge.set_env("FORGE_PARTIAL_REQUEST_TIMEOUT_SECS", "2");
    forge.start().await;
    let mut flood = Vec::new();
    for i in 0..2200 {
        let Ok(mut s) = tokio::net::UnixStream::connect(&forge.socket).await else { continue };
        match i % 4 {
            0 => drop(s.write_all(br#"{"jsonrpc""#).await),
            1 => drop(s.write_all(b"POST / HTTP/1.1\r\nHost: forge\r\n").await),
            _ => {} // silent
        }
        flood.push(s);
    }
    let started = std::time::Instant::now();
    let r = forge.ctl(&["ps"]).await;
    let waited = started.elapsed();
    assert_eq!(r.code, 0, "{}", r.stderr);
    eprintln!("a new client waited {waited:?} behind {} idle connections", flood.len());
    assert!(waited < std::time::Duration::from_secs(5), "forgectl ps waited {waited:?}");

    // Those still open are cut off once their half request is too old:
    // each is read until the daemon closes it (at most 10 s in all).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut still_open = 0;
    for (i, s) in flood.iter_mut().enumerate() {
        if i % 4 > 1 {
            continue;
        }
        let mut b = [0u8; 64];
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                // Whatever the daemon answered before it closed.
                Ok(Ok(_)) => continue,
                Err(_) => {
                    still_open += 1;
                    break;
                }
            }
        }
    }
    assert_eq!(still_open, 0, "half-sent requests are closed once their time is up");
}

/// Models trained on other agents send absolute paths: one inside the
/// session's directory works like its relative form; one outside is
/// refused with the roots named (and nothing about a config key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_paths_inside_the_session_directory_work() {
    let (_mock, forge) = started().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.path().join("notes.txt"), "inside the project\n").unwrap_or_else(|e| panic!("{e}"));
    let root = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;
    let inside = root.join("notes.txt").display().to_string();
    let msg = format!(r#"mock:tool=read_file:{{"path":"{inside}"}} mock:tool=read_file:{{"path":"/etc/hostname"}} go"#);
    forge.ok(&["send", "-s", &id, &msg]).await;
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let results: Vec<&serde_json::Value> = history.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 2, "{history:?}");
    assert_eq!(results[0]["tool_result"]["is_error"], false, "{}", results[0]);
    assert!(results[0]["text"].as_str().unwrap_or("").contains("inside the project"), "{}", results[0]);
    let refused = results[1]["text"].as_str().unwrap_or("");
    assert_eq!(results[1]["tool_result"]["is_error"], true);
    assert!(
        refused.contains("outside the allowed roots") && refused.contains(&root.display().to_string()),
        "{refused}"
    );
    assert!(!refused.contains("allow_absolute"), "the model cannot change the config: {refused}");
}

/// A newcomer can see what the mock provider does without reading tests.
#[test]
fn forge_mock_help_lists_its_directives() {
    let out = std::process::Command::new(bin("forge-mock")).arg("--help").output().unwrap_or_else(|e| panic!("{e}"));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for directive in ["mock:tokens=N", "mock:delay=MS", "mock:tool=NAME", "mock:status=CODE", "mock:sleep=S"] {
        assert!(help.contains(directive), "--help should list {directive}: {help}");
    }
    assert!(help.contains("ANTHROPIC_BASE_URL"), "and say how to use it: {help}");
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Memory does not grow with the volume streamed: once quiet again, the
/// daemon is back near its idle size (it held every session's history and
/// a fragmented heap: +50 MB per 25 MB streamed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_returns_near_idle_after_streaming() {
    let (_mock, forge) = started().await;
    let pid = forge.pid().unwrap_or_else(|| panic!("no pid"));
    forge.ok(&["ps"]).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let idle = rss_kib(pid);
    let mut streamed = 0;
    for _ in 0..2 {
        let id = forge.new_session(&[]).await;
        let r = forge.ok(&["send", "-s", &id, "mock:tokens=100000 mock:pad=100"]).await;
        streamed += r.stdout.len() as u64 / 1024;
    }
    // Quiet sessions let go of their history after 10 s; freed memory goes
    // back to the system within 5 s after that.
    let mut now = u64::MAX;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        now = rss_kib(pid);
        if now < idle + 32 * 1024 {
            break;
        }
    }
    eprintln!("RSS idle {idle} KiB, after streaming {streamed} KiB: {now} KiB");
    // Measured: +14 MiB in a debug build now, +73 MiB before.
    assert!(now < idle + 32 * 1024, "RSS {now} KiB after streaming {streamed} KiB (idle: {idle} KiB)");
}

/// 1,100 clients following a session cannot lock out a new one: a
/// following connection is never closed to make room, so only so many may
/// follow; the rest are told why (`overloaded`), and `forgectl ps` is
/// still answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_followers_leave_room_for_new_clients() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    if !room_for_2500_files("1,100 followers") {
        return;
    }
    let (_mock, forge) = started().await;
    let id = forge.new_session(&["--name", "watched"]).await;
    let (mut following, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..1100 {
        let s = tokio::net::UnixStream::connect(&forge.socket).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let (read, mut write) = s.into_split();
        let mut lines = tokio::io::BufReader::new(read).lines();
        let hello = r#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol_version":1,"client":{"name":"f","version":"0","kind":"other"}}}"#;
        let subscribe =
            format!(r#"{{"jsonrpc":"2.0","id":2,"method":"session.subscribe","params":{{"session":"{id}"}}}}"#);
        write.write_all(format!("{hello}\n{subscribe}\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
        // Answers may come in any order.
        let mut answer = String::new();
        for _ in 0..2 {
            let line = lines.next_line().await.ok().flatten().unwrap_or_default();
            if line.contains("\"id\":2") {
                answer = line;
            }
        }
        assert!(!answer.is_empty(), "the subscription is answered");
        if answer.contains("\"error\"") {
            refused.push(answer);
        } else {
            following.push((lines, write));
        }
    }
    assert!(following.len() >= 800, "{} follow", following.len());
    assert_eq!(following.len() + refused.len(), 1100);
    let said = refused.first().cloned().unwrap_or_default();
    assert!(said.contains("overloaded") && said.contains("following sessions"), "{said}");

    let started = std::time::Instant::now();
    let r = forge.ctl(&["ps"]).await;
    let waited = started.elapsed();
    assert_eq!(r.code, 0, "{}", r.stderr);
    eprintln!("a new client waited {waited:?} beside {} followers", following.len());
    assert!(waited < std::time::Duration::from_secs(5), "forgectl ps waited {waited:?}");
    // The followers still get the session's events.
    forge.ok(&["send", "--no-wait", "-s", "watched", "mock:tokens=1 hello"]).await;
    let (lines, _) = following.last_mut().unwrap_or_else(|| panic!("a follower"));
    let event = lines.next_line().await.ok().flatten().unwrap_or_default();
    assert!(event.contains("session.event"), "{event}");
}
