//! Runs the real binaries: a `forged` on a temporary socket and
//! `FORGE_HOME`, pointed at a [`MockServer`](crate::mock::MockServer), and
//! `forgectl` against it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use crate::mock::MockServer;

/// Directory holding the workspace's binaries: a test runs from
/// `target/<profile>/deps/`, the binaries sit in `target/<profile>/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") { dir.parent().map(Path::to_path_buf).unwrap_or(dir) } else { dir }
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`, which `cargo test --workspace` does)",
        p.display()
    );
    p
}

/// Every file and directory under `dir`, recursively (links not followed).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        out.push(p.clone());
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        }
    }
    out
}

/// One daemon with its own home and socket.
pub struct Forge {
    pub home: tempfile::TempDir,
    pub socket: PathBuf,
    data: Option<PathBuf>,
    env: Vec<(String, String)>,
    daemon: Option<Child>,
}

impl Forge {
    /// A daemon environment pointed at `mock` for every provider, with
    /// keys the mock accepts. Not started yet.
    pub fn new(mock: &MockServer) -> Forge {
        let mut f = Self::bare();
        f.set_env("ANTHROPIC_BASE_URL", &mock.anthropic_url());
        f.set_env("OPENAI_BASE_URL", &mock.openai_url());
        f.set_env("GEMINI_BASE_URL", &mock.gemini_url());
        f.set_env("ANTHROPIC_API_KEY", "mock-key-anthropic");
        f.set_env("OPENAI_API_KEY", "mock-key-openai");
        f.set_env("GEMINI_API_KEY", "mock-key-gemini");
        f
    }

    /// No provider settings at all.
    pub fn bare() -> Forge {
        let home = tempfile::Builder::new().prefix("forge-test-").tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let socket = home.path().join("run").join("forged.sock");
        Forge { home, socket, data: None, env: Vec::new(), daemon: None }
    }

    /// Keeps `FORGE_HOME` (the store, logs) in `data` instead of the temp dir.
    pub fn with_data_dir(mut self, data: &Path) -> Forge {
        self.data = Some(data.to_path_buf());
        self
    }

    /// Where `FORGE_HOME` points.
    pub fn data_dir(&self) -> PathBuf {
        self.data.clone().unwrap_or_else(|| self.home.path().to_path_buf())
    }

    pub fn set_env(&mut self, k: &str, v: &str) {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.to_string(), v.to_string()));
    }

    /// The environment clients of this daemon run with (for programs
    /// started elsewhere, e.g. in tmux).
    pub fn client_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("FORGE_HOME".to_string(), self.data_dir().display().to_string()),
            ("FORGE_SOCKET".to_string(), self.socket.display().to_string()),
        ];
        env.extend(self.env.iter().cloned());
        env
    }

    fn apply_env(&self, cmd: &mut Command) {
        cmd.env_clear();
        for k in ["PATH", "HOME", "LANG", "TMPDIR"] {
            if let Ok(v) = std::env::var(k) {
                cmd.env(k, v);
            }
        }
        cmd.env("FORGE_HOME", self.data_dir());
        cmd.env("FORGE_SOCKET", &self.socket);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.data_dir().join("config.toml"), text).unwrap_or_else(|e| panic!("write config: {e}"));
    }

    /// Starts forged and waits until it answers.
    pub async fn start(&mut self) {
        let child = self.spawn_daemon();
        self.daemon = Some(child);
        self.wait_ready().await;
    }

    pub fn spawn_daemon(&self) -> Child {
        let mut cmd = Command::new(bin("forged"));
        self.apply_env(&mut cmd);
        cmd.arg("--socket").arg(&self.socket).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        cmd.spawn().unwrap_or_else(|e| panic!("spawn forged: {e}"))
    }

    /// Starts forged as systemd's socket activation would: the listening
    /// socket (bound here, at `self.socket`) is its descriptor 3, and
    /// `LISTEN_PID`/`LISTEN_FDS` name it; `notify` becomes `NOTIFY_SOCKET`.
    pub fn start_activated(&mut self, listener: &std::os::unix::net::UnixListener, notify: Option<&Path>) {
        let socket = self.socket.clone();
        self.start_activated_with(listener, notify, &socket);
    }

    /// As [`Self::start_activated`], forged told `--socket socket` (a
    /// unit whose path differs from the socket systemd passes).
    pub fn start_activated_with(
        &mut self,
        listener: &std::os::unix::net::UnixListener,
        notify: Option<&Path>,
        socket: &Path,
    ) {
        use std::os::fd::AsRawFd;
        let fd = listener.as_raw_fd();
        // `$$` is the shell's pid, which `exec` hands to forged.
        let mut cmd = Command::new("sh");
        self.apply_env(&mut cmd);
        if let Some(n) = notify {
            cmd.env("NOTIFY_SOCKET", n);
        }
        cmd.arg("-c")
            .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"")
            .arg(bin("forged"))
            .arg("--socket")
            .arg(socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: only dup2(2), async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.kill_on_drop(true);
        self.daemon = Some(cmd.spawn().unwrap_or_else(|e| panic!("spawn forged: {e}")));
    }

    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.socket.exists() && UnixStream::connect(&self.socket).await.is_ok() {
                return;
            }
            if let Some(child) = self.daemon.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err).await;
                }
                panic!("forged exited early ({status}): {err}");
            }
            assert!(Instant::now() < deadline, "forged did not come up on {}", self.socket.display());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (up to 20 s) for the daemon to exit by itself; true if it did.
    pub async fn wait_exit(&mut self) -> bool {
        let Some(mut child) = self.daemon.take() else { return true };
        tokio::time::timeout(Duration::from_secs(20), child.wait()).await.is_ok_and(|s| s.is_ok())
    }

    pub fn pid(&self) -> Option<u32> {
        self.daemon.as_ref().and_then(|c| c.id())
    }

    /// `kill -9`: no chance to clean up.
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGTERM and wait for a clean exit; returns its exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        let mut child = self.daemon.take()?;
        if let Some(pid) = child.id() {
            // SAFETY: plain kill(2) on our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.ok()?.ok()?;
        status.code()
    }

    pub async fn restart(&mut self) {
        self.terminate().await;
        self.start().await;
    }

    /// A `forgectl` command on this daemon (no autostart).
    pub fn ctl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("forgectl"));
        self.apply_env(&mut cmd);
        cmd.arg("--no-autostart").args(args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        cmd
    }

    /// A `forgectl` command that starts forged if none runs (as a user's
    /// first command does). The daemon it starts is not a child: stop it
    /// with `shutdown`.
    pub fn ctl_autostart_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("forgectl"));
        self.apply_env(&mut cmd);
        cmd.args(args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        cmd
    }

    pub async fn ctl(&self, args: &[&str]) -> Ran {
        let out = tokio::time::timeout(Duration::from_secs(60), self.ctl_cmd(args).output())
            .await
            .unwrap_or_else(|_| panic!("forgectl {args:?} did not finish in 60 s"))
            .unwrap_or_else(|e| panic!("run forgectl: {e}"));
        Ran::from(out)
    }

    /// Runs forgectl and asserts it succeeded.
    pub async fn ok(&self, args: &[&str]) -> Ran {
        let r = self.ctl(args).await;
        assert_eq!(r.code, 0, "forgectl {args:?} failed:\nstdout: {}\nstderr: {}", r.stdout, r.stderr);
        r
    }

    /// The first session's `attached_clients` as `forgectl ps` reports it,
    /// once it is `want` or after 5 s of asking (whatever it is then).
    pub async fn attached_clients(&self, want: u64) -> u64 {
        let mut count = u64::MAX;
        for _ in 0..100 {
            let ps = self.ok(&["--json", "ps"]).await.json_lines();
            count = ps.first().and_then(|s| s["attached_clients"].as_u64()).unwrap_or(u64::MAX);
            if count == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        count
    }

    /// The session (id or name) as `forgectl ps` reports it, once `ready`
    /// holds for it: what a test waits for instead of sleeping. Panics
    /// naming `what` after 10 s.
    pub async fn wait_for_session(
        &self,
        session: &str,
        what: &str,
        ready: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut last = serde_json::Value::Null;
        for _ in 0..400 {
            let ps = self.ok(&["--json", "ps"]).await.json_lines();
            if let Some(s) = ps.into_iter().find(|s| s["id"] == session || s["name"] == session) {
                if ready(&s) {
                    return s;
                }
                last = s;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("waited 10 s for session {session} to be {what}; it is {last}");
    }

    /// Configures a token-guarded TCP listener on a free loopback port
    /// (`token` in a private file of the data dir; `extra` more lines of
    /// `[daemon]`): the port.
    pub fn listen_with_token(&self, token: &str, extra: &str) -> u16 {
        use std::os::unix::fs::PermissionsExt;
        let port = free_port();
        let token_file = self.data_dir().join("listen.token");
        std::fs::write(&token_file, format!("{token}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap_or_else(|e| panic!("{e}"));
        self.write_config(&format!(
            "[daemon]\nlisten = [\"ws://127.0.0.1:{port}\"]\ntoken_file = \"{}\"\n{extra}",
            token_file.display()
        ));
        port
    }

    /// Creates a session and returns its id.
    pub async fn new_session(&self, extra: &[&str]) -> String {
        let mut args = vec!["session", "new"];
        args.extend_from_slice(extra);
        self.ok(&args).await.stdout.trim().to_string()
    }

    /// One JSON-RPC call over plain HTTP, as curl would make it; returns
    /// the response body.
    pub async fn http(&self, body: &[u8]) -> String {
        raw_http(&self.socket, body).await
    }

    /// A JSON-RPC call returning the parsed response.
    pub async fn rpc(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let req = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let text = self.http(req.to_string().as_bytes()).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON-RPC response {text:?}: {e}"))
    }
}

impl Drop for Forge {
    fn drop(&mut self) {
        if let Some(child) = self.daemon.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// A finished command.
#[derive(Debug, Clone)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Ran {
    /// stdout as JSON Lines.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
            .collect()
    }
}

/// POSTs `body` to the daemon over its socket and returns the response body.
pub async fn raw_http(socket: &Path, body: &[u8]) -> String {
    let mut s = UnixStream::connect(socket).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let head = format!(
        "POST / HTTP/1.1\r\nHost: forge\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body).await;
    let mut resp = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut resp)).await;
    let text = String::from_utf8_lossy(&resp).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.to_ascii_lowercase().contains("transfer-encoding: chunked") => dechunk(body),
        Some((_, body)) => body.to_string(),
        None => text,
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// A deliberately minimal WebSocket client over the daemon's socket, for
/// tests that need to control exactly when frames are read (a slow or
/// stalled subscriber). Real clients use `forge_client`.
pub struct RawWs {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl RawWs {
    pub async fn connect(socket: &Path) -> RawWs {
        let mut stream = UnixStream::connect(socket).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let req = "GET / HTTP/1.1\r\nHost: forge\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        stream.write_all(req.as_bytes()).await.unwrap_or_else(|e| panic!("handshake: {e}"));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await.unwrap_or(0);
            assert!(n > 0, "the daemon closed the WebSocket handshake");
            buf.extend_from_slice(&chunk[..n]);
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4).unwrap_or(buf.len());
        assert!(buf.starts_with(b"HTTP/1.1 101"), "no upgrade: {}", String::from_utf8_lossy(&buf));
        RawWs { stream, buf: buf[end..].to_vec() }
    }

    /// Sends one masked text frame.
    pub async fn send(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        let len = payload.len();
        if len < 126 {
            frame.push(0x80 | len as u8);
        } else if len < 65536 {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.unwrap_or_else(|e| panic!("ws send: {e}"));
    }

    /// Reads the next text frame, or `None` when the connection closes or
    /// nothing arrives within `wait`.
    pub async fn recv(&mut self, wait: Duration) -> Option<String> {
        loop {
            if let Some((text, used)) = parse_frame(&self.buf) {
                self.buf.drain(..used);
                match text {
                    Some(t) => return Some(t),
                    None => continue, // ping/pong/other control frames
                }
            }
            let mut chunk = vec![0u8; 64 * 1024];
            let n = match tokio::time::timeout(wait, self.stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => n,
                _ => return None,
            };
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One server frame from the start of `buf`: (text if a text frame, bytes used).
fn parse_frame(buf: &[u8]) -> Option<(Option<String>, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let opcode = buf[0] & 0x0f;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b) as usize, 10)
        }
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    if buf[1] & 0x80 != 0 {
        at += 4; // servers do not mask, but be lenient
    }
    if buf.len() < at + len {
        return None;
    }
    let payload = &buf[at..at + len];
    let text = (opcode == 1).then(|| String::from_utf8_lossy(payload).into_owned());
    Some((text, at + len))
}

/// A small tmpfs mounted for a test (a disk that really fills up), removed
/// on drop. `None` where mounting is not permitted (not root).
pub struct SmallDisk {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::Builder::new().prefix("forge-disk-").tempdir().ok()?;
        let path = dir.path().to_path_buf();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then_some(SmallDisk { path, _dir: dir })
    }

    /// Writes a file until the disk is full; returns its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.path.join("filler");
        if let Ok(mut f) = std::fs::File::create(&filler) {
            let block = vec![0u8; 64 * 1024];
            while f.write_all(&block).is_ok() {}
            let small = [0u8; 512];
            while f.write_all(&small).is_ok() {}
            let _ = f.sync_all();
        }
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Runs git in `dir` (the tests need it) and asserts it succeeded; its
/// stdout.
/// A loopback TCP port free right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().map(|a| a.port()).unwrap_or_else(|e| panic!("{e}"))
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("git {args:?}: {e} (the tests need git)"));
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new repository on branch `main` with `files` in its first commit
/// (a user configured, so commits need nothing more).
pub fn git_repository(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["config", "user.email", "user@example.com"]);
    git(p, &["config", "user.name", "User"]);
    for (name, text) in files {
        std::fs::write(p.join(name), text).unwrap_or_else(|e| panic!("{e}"));
    }
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "start"]);
    dir
}

/// Says that a test did not check what it is for, and why: on stderr,
/// and as a line in `$FORGE_SKIP_LOG` when set (`.ci/run` counts them in
/// its closing summary).
pub fn skipped(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    if let Some(log) = std::env::var_os("FORGE_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}
