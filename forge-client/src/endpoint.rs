//! Where the daemon is: its Unix socket on this machine, or a daemon on
//! another machine reached through the user's own `ssh`, which runs
//! `forgectl bridge` there (that daemon's socket on the ssh channel, byte
//! for byte). Forge writes no SSH of its own: the user's config, agent,
//! keys and jump hosts apply, and `FORGE_SSH_COMMAND` replaces the program
//! and its options the way `GIT_SSH_COMMAND` does for git.

use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::connect_error::{ConnectError, open_socket};

/// How a client reaches a daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The daemon's Unix socket on this machine.
    Socket(PathBuf),
    /// A daemon on another machine, through `ssh`.
    Ssh(SshRemote),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Socket(p) => write!(f, "{}", p.display()),
            Endpoint::Ssh(r) => f.write_str(&r.url),
        }
    }
}

impl Endpoint {
    /// Whether a lost connection is worth trying again at once: an ssh
    /// link drops while the daemon behind it goes on.
    pub fn reconnects(&self) -> bool {
        matches!(self, Endpoint::Ssh(_))
    }

    /// The same daemon, reached without ssh asking anything on the
    /// terminal (for links made while a UI holds it).
    pub fn asking_nothing(&self) -> Endpoint {
        match self {
            Endpoint::Ssh(r) => Endpoint::Ssh(SshRemote { batch: true, ..r.clone() }),
            e => e.clone(),
        }
    }

    /// The other machine, if any.
    pub fn remote(&self) -> Option<&SshRemote> {
        match self {
            Endpoint::Ssh(r) => Some(r),
            Endpoint::Socket(_) => None,
        }
    }

    /// A new connection to the daemon: its two directions, and for ssh
    /// what the ssh process said (to explain a link that never came up).
    pub(crate) async fn open(&self) -> Result<(Link, Option<SshProbe>), ConnectError> {
        match self {
            Endpoint::Socket(path) => {
                let (read, write) = open_socket(path).await?.into_split();
                Ok((Link { read: Box::new(read), write: Box::new(write) }, None))
            }
            Endpoint::Ssh(remote) => {
                let (link, probe) = remote.spawn()?;
                Ok((link, Some(probe)))
            }
        }
    }
}

/// A connection's two directions.
pub(crate) struct Link {
    pub read: Box<dyn AsyncRead + Send + Unpin>,
    pub write: Box<dyn AsyncWrite + Send + Unpin>,
}

/// The default name of `forgectl` on the far side (its PATH).
pub const REMOTE_BIN: &str = "forgectl";

/// `ssh://[user@]host[:port]`, and how to run `forgectl` there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshRemote {
    /// As the user wrote it.
    pub url: String,
    /// `[user@]host`, as ssh takes it.
    pub destination: String,
    pub host: String,
    pub port: Option<u16>,
    /// The far `forgectl`: a command line for the remote shell (a path, or
    /// `env FORGE_HOME=... forgectl`).
    pub bin: String,
    /// Whether the bridge may start the far daemon.
    pub autostart: bool,
    /// `FORGE_SSH_COMMAND`, run by `sh` with ssh's arguments after it.
    pub ssh_command: Option<String>,
    /// ssh asks nothing (`BatchMode`): set once a UI holds the terminal,
    /// where a passphrase prompt would garble the screen.
    pub batch: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("{url} is not a remote Forge can reach: {why} (write ssh://[user@]host[:port])")]
pub struct RemoteUrlError {
    url: String,
    why: String,
}

impl SshRemote {
    /// Reads `ssh://[user@]host[:port]`; `bin` is the far `forgectl`
    /// (default [`REMOTE_BIN`]). `FORGE_SSH_COMMAND` is read here.
    pub fn parse(url: &str, bin: Option<String>, autostart: bool) -> Result<Self, RemoteUrlError> {
        let err = |why: &str| RemoteUrlError { url: url.to_string(), why: why.to_string() };
        let rest = url.strip_prefix("ssh://").ok_or_else(|| err("only ssh:// remotes are supported"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('?') || rest.contains('#') {
            return Err(err("a remote names a machine, not a path on it (use --cwd for the directory)"));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u), h),
            Some(_) => return Err(err("the user before @ is empty")),
            None => (None, rest),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| err("an IPv6 address lacks its ]"))?;
            if !host.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
                return Err(err("the IPv6 address is not one"));
            }
            match after {
                "" => (host, None),
                a => (host, Some(a.strip_prefix(':').ok_or_else(|| err("after ] comes :PORT or nothing"))?)),
            }
        } else {
            match hostport.split_once(':') {
                Some((_, p)) if p.contains(':') => return Err(err("an IPv6 address goes in brackets: ssh://[::1]")),
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        // Host names and users as ssh and DNS know them, nothing a shell or
        // an ssh option could read otherwise.
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with(['-', '.'])
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        if !(plain(host) || hostport.starts_with('[') && !host.is_empty()) {
            return Err(err("the host is missing or not a host name"));
        }
        let port = match port {
            Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| err("the port is not a number"))?),
            None => None,
        };
        if user.is_some_and(|u| !plain(u)) {
            return Err(err("the user name is not one (letters, digits, . _ -)"));
        }
        let destination = match user {
            Some(u) => format!("{u}@{host}"),
            None => host.to_string(),
        };
        let ssh_command = std::env::var("FORGE_SSH_COMMAND").ok().filter(|s| !s.trim().is_empty());
        let bin = bin.filter(|b| !b.trim().is_empty()).unwrap_or_else(|| REMOTE_BIN.to_string());
        Ok(SshRemote {
            url: url.to_string(),
            destination,
            host: host.to_string(),
            port,
            bin,
            autostart,
            ssh_command,
            batch: false,
        })
    }

    /// The ssh command that runs `remote` (a command line for the far
    /// shell) on this remote, its standard streams piped.
    pub fn command(&self, remote: &str) -> Command {
        let mut args: Vec<String> = vec!["-T".into()];
        // A dead network is noticed within half a minute rather than at
        // TCP's timeout, so the client can reconnect.
        // A host that does not answer (network gone) fails in 10 s, so
        // the backoff, not TCP's timeout, paces the retries.
        args.extend(
            ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=10"]
                .map(String::from),
        );
        // Once a UI holds the terminal, ssh must not ask anything on it.
        if self.batch {
            args.extend(["-o".to_string(), "BatchMode=yes".to_string()]);
        }
        if let Some(p) = self.port {
            args.extend(["-p".to_string(), p.to_string()]);
        }
        args.extend([self.destination.clone(), "--".into(), remote.to_string()]);
        let mut cmd = match &self.ssh_command {
            Some(line) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("{line} \"$@\"")).arg("forge-ssh").args(&args);
                c
            }
            None => {
                let mut c = Command::new("ssh");
                c.args(&args);
                c
            }
        };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        // Ctrl-C in the user's terminal is for the client (a send cancels
        // its turn through the link): ssh keeps SIGINT ignored when it
        // starts with it ignored.
        // SAFETY: signal() is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        cmd
    }

    /// The far command line of the bridge.
    fn bridge_line(&self) -> String {
        let no_autostart = if self.autostart { "" } else { " --no-autostart" };
        format!("{}{no_autostart} bridge", self.bin)
    }

    fn spawn(&self) -> Result<(Link, SshProbe), ConnectError> {
        let program = if self.ssh_command.is_some() { "FORGE_SSH_COMMAND" } else { "ssh" };
        let mut child = self.command(&self.bridge_line()).spawn().map_err(|e| ConnectError::Remote {
            remote: self.url.clone(),
            message: format!("cannot run {program}: {e} (is OpenSSH's client installed?)"),
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ConnectError::Remote { remote: self.url.clone(), message: "ssh started without pipes".into() });
        };
        let probe = SshProbe::watch(child, stderr);
        let write = SshWrite { stdin, _kill: probe.kill.clone() };
        Ok((Link { read: Box::new(stdout), write: Box::new(write) }, probe))
    }
}

/// The ssh process behind a link: the end of what it wrote on stderr, and
/// its exit status once it is gone. Dropping every [`Kill`] stops it.
#[derive(Clone)]
pub(crate) struct SshProbe {
    said: Arc<Mutex<String>>,
    exited: watch::Receiver<Option<i32>>,
    kill: Arc<Kill>,
}

/// Stops the ssh process when the last half of its link is dropped.
struct Kill(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// What of ssh's stderr is kept to explain a failure.
const SAID_BYTES: usize = 4096;

impl SshProbe {
    fn watch(mut child: Child, stderr: tokio::process::ChildStderr) -> Self {
        let said = Arc::new(Mutex::new(String::new()));
        let (status_tx, exited) = watch::channel(None);
        let (kill_tx, mut kill_rx) = tokio::sync::oneshot::channel::<()>();
        let kept = said.clone();
        let keep = move |bytes: &[u8]| {
            let mut s = kept.lock().unwrap_or_else(|p| p.into_inner());
            s.push_str(&String::from_utf8_lossy(bytes));
            if s.len() > SAID_BYTES {
                let cut = s.len() - SAID_BYTES;
                let cut = (cut..s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(s.len());
                s.drain(..cut);
            }
        };
        tokio::spawn(async move {
            let pid = child.id().and_then(|p| i32::try_from(p).ok());
            let mut stderr = BufReader::new(stderr);
            let mut line = Vec::new();
            let (mut open, mut killed) = (true, false);
            // ssh's exit is watched beside its stderr, which something it
            // started (a ControlPersist master, a proxy) may hold open.
            let status = loop {
                tokio::select! {
                    read = stderr.read_until(b'\n', &mut line), if open => match read {
                        Ok(n) if n > 0 => {
                            keep(&line);
                            line.clear();
                        }
                        _ => open = false,
                    },
                    _ = &mut kill_rx, if !killed => {
                        killed = true;
                        if let Some(pid) = pid {
                            // SAFETY: a signal to the child this task owns and has not reaped.
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                        }
                    }
                    status = child.wait() => break status,
                }
            };
            // What it said last, if it comes at once.
            let rest = async {
                while open && stderr.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
                    keep(&line);
                    line.clear();
                }
            };
            let _ = tokio::time::timeout(Duration::from_millis(200), rest).await;
            let code = status.ok().and_then(|s| s.code());
            let _ = status_tx.send(Some(code.unwrap_or(-1)));
        });
        SshProbe { said, exited, kill: Arc::new(Kill(Some(kill_tx))) }
    }

    /// Why the link failed, in words: ssh's own (its last lines), with a
    /// hint for the common cases. Waits a moment for ssh to finish.
    pub(crate) async fn explain(&self, remote: &SshRemote) -> ConnectError {
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(Duration::from_secs(3), exited.wait_for(Option::is_some)).await;
        let code = *exited.borrow();
        let said = self.said.lock().unwrap_or_else(|p| p.into_inner()).trim().to_string();
        let hint = match code {
            Some(127) => format!(
                " ({} is not on {}'s PATH: install Forge there, or name it with --remote-bin or FORGE_REMOTE_BIN)",
                remote.bin, remote.host
            ),
            Some(255) => format!(
                " (ssh could not log in: try `ssh -T{} {} true` yourself{})",
                remote.port.map(|p| format!(" -p {p}")).unwrap_or_default(),
                remote.destination,
                if remote.ssh_command.is_some() { ", with FORGE_SSH_COMMAND's options" } else { "" }
            ),
            Some(3) if !remote.autostart => " (start forged there, or drop --no-autostart)".to_string(),
            Some(3) => {
                " (the daemon there could not start or answer: its log is in $FORGE_HOME/logs/ there)".to_string()
            }
            _ => String::new(),
        };
        let message = match (said.is_empty(), code) {
            (false, _) => format!("{said}{hint}"),
            (true, Some(c)) => format!("ssh exited with status {c}{hint}"),
            (true, None) => "the link closed before the daemon answered".into(),
        };
        ConnectError::Remote { remote: remote.url.clone(), message }
    }
}

/// The writing half of an ssh link, which holds the process.
struct SshWrite {
    stdin: tokio::process::ChildStdin,
    _kill: Arc<Kill>,
}

impl AsyncWrite for SshWrite {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

/// Backoff between reconnects: 0.2 s, doubling, at most 5 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: Backoff::FIRST }
    }
}

impl Backoff {
    pub const FIRST: Duration = Duration::from_millis(200);
    pub const MAX: Duration = Duration::from_secs(5);

    /// The wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ssh_urls() {
        let r = SshRemote::parse("ssh://dev@box.example:2222", None, true).unwrap();
        assert_eq!((r.destination.as_str(), r.host.as_str(), r.port), ("dev@box.example", "box.example", Some(2222)));
        assert_eq!(r.bridge_line(), "forgectl bridge");
        let r = SshRemote::parse("ssh://[::1]:22/", Some("/opt/forge/forgectl".into()), false).unwrap();
        assert_eq!((r.destination.as_str(), r.port), ("::1", Some(22)));
        assert_eq!(r.bridge_line(), "/opt/forge/forgectl --no-autostart bridge");
        assert_eq!(SshRemote::parse("ssh://box", None, true).unwrap().port, None);
        for bad in
            ["box", "ws://box", "ssh://", "ssh://-oProxyCommand=x", "ssh://box:0", "ssh://box/home", "ssh://@box"]
        {
            assert!(SshRemote::parse(bad, None, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_to_five_seconds() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
