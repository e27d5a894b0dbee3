//! Claiming the socket path: one daemon per socket (a lock file held for
//! the daemon's life), a stale socket from a dead daemon removed, the
//! directory private (0700) and the socket owner-only (0600).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tokio::net::UnixListener;

pub struct SocketClaim {
    pub path: PathBuf,
    listener: Option<UnixListener>,
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
        let lock_path = path.with_extension("lock");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = lock.read_to_string(&mut pid);
                let pid = pid.trim();
                let who = if pid.is_empty() { String::new() } else { format!(" (pid {pid})") };
                bail!(
                    "another forged is already running on {}{who}; stop it with `forgectl shutdown` or use --socket to run a second one elsewhere",
                    path.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()));
            }
        }
        lock.set_len(0)?;
        lock.rewind()?;
        write!(lock, "{}", std::process::id())?;
        lock.flush()?;

        // We hold the lock, so a socket file left here belongs to a daemon
        // that died without cleaning up.
        if path.exists() {
            tracing::info!(path = %path.display(), "removing a stale socket left by a daemon that died");
            std::fs::remove_file(path).with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        let listener = UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot restrict the permissions of {}", path.display()))?;
        Ok(Self { path: path.to_path_buf(), listener: Some(listener), _lock: lock })
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
        if self.listener.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for SocketClaim {
    fn drop(&mut self) {
        self.unlink();
    }
}
