//! Claiming the socket path: one daemon per socket (a lock file held for
//! the daemon's life), a stale socket from a dead daemon removed, the
//! directory private (0700) and the socket owner-only (0600).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tokio::net::UnixListener;

pub struct SocketClaim {
    pub path: PathBuf,
    listener: Option<UnixListener>,
    /// The listener came from systemd (socket activation): the socket
    /// file is systemd's, not removed on exit.
    activated: bool,
    /// Held (locked) until the daemon exits.
    _lock: File,
}

impl SocketClaim {
    pub fn claim(path: &Path) -> anyhow::Result<Self> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create the socket directory {}", dir.display()))?;
        }
        let lock = match crate::home_lock::hold(&path.with_extension("lock"), &std::process::id().to_string())? {
            Ok(file) => file,
            Err(pid) => {
                let pid = pid.trim();
                let who = if pid.is_empty() { String::new() } else { format!(" (pid {pid})") };
                bail!(
                    "another forged is already running on {}{who}; stop it with `forgectl shutdown` or use --socket to run a second one elsewhere",
                    path.display()
                );
            }
        };

        if let Some(listener) = activated_listener()? {
            // Where systemd's socket really is (its unit names the path),
            // for `forgectl status` to say.
            let passed = listener.local_addr().ok().and_then(|a| a.as_pathname().map(Path::to_path_buf));
            let path = passed.unwrap_or_else(|| path.to_path_buf());
            tracing::info!(path = %path.display(), "listening on the socket systemd passed (socket activation)");
            return Ok(Self { path, listener: Some(listener), activated: true, _lock: lock });
        }
        // We hold the lock, so a socket file left here belongs to a daemon
        // that died without cleaning up.
        if path.exists() {
            tracing::info!(path = %path.display(), "removing a stale socket left by a daemon that died");
            std::fs::remove_file(path).with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        let listener = UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot restrict the permissions of {}", path.display()))?;
        Ok(Self { path: path.to_path_buf(), listener: Some(listener), activated: false, _lock: lock })
    }
}

/// The first file descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

/// How many sockets systemd passed this process (see [`take_activation`]).
static ACTIVATED: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// Reads the `LISTEN_FDS` protocol's variables (`LISTEN_PID` is ours,
/// `LISTEN_FDS` counts descriptors from 3) and removes them, so that
/// nothing this daemon starts takes them for its own. Called first thing
/// in `main`, before any thread exists.
pub fn take_activation() {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    // SAFETY: no other thread exists yet.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    let ours = pid.and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
    let count = fds.and_then(|n| n.parse::<i32>().ok()).unwrap_or(0);
    let _ = ACTIVATED.set(if ours { count } else { 0 });
}

/// The listening socket systemd passed, if it passed one.
fn activated_listener() -> anyhow::Result<Option<UnixListener>> {
    let count = ACTIVATED.get().copied().unwrap_or(0);
    if count < 1 {
        return Ok(None);
    }
    if count > 1 {
        tracing::warn!(count, "systemd passed several sockets; forged listens on the first");
    }
    use std::os::fd::FromRawFd;
    // SAFETY: systemd hands this descriptor to us; nothing else owns it.
    let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(LISTEN_FDS_START) };
    std_listener.set_nonblocking(true).context("the socket systemd passed is not usable")?;
    let listener =
        UnixListener::from_std(std_listener).context("the socket systemd passed is not a Unix stream socket")?;
    Ok(Some(listener))
}

/// Tells systemd (`Type=notify`) how the daemon is doing: `READY=1`,
/// `STOPPING=1`. Nothing when not started by systemd.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let socket = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => return tracing::warn!(error = %e, "cannot tell systemd {state}"),
    };
    let bytes = target.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        // An abstract socket name.
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|a| socket.send_to_addr(state.as_bytes(), &a))
        }
        None => socket.send_to(state.as_bytes(), &target),
    };
    if let Err(e) = sent {
        tracing::warn!(error = %e, "cannot tell systemd {state}");
    }
}

impl SocketClaim {
    pub fn listener(&self) -> Option<&UnixListener> {
        self.listener.as_ref()
    }

    /// Stops listening and removes the socket, so new clients see at once
    /// that no daemon answers; the lock stays held until drop, so no second
    /// daemon opens the store while this one finishes writing.
    pub fn unlink(&mut self) {
        if self.listener.take().is_some() && !self.activated {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for SocketClaim {
    fn drop(&mut self) {
        self.unlink();
    }
}
