//! Connecting to the daemon, starting it first when none answers, the way
//! tmux starts its server. Shared by every Rust client (`forgectl`, `forge`).

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use forge_proto::types::ClientInfo;

use crate::connection::{ConnectError, Greet};
use crate::endpoint::Endpoint;

/// How long to wait for a freshly started daemon to answer.
const START_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("cannot start {bin}: {source} (is forged installed next to this program or on PATH?)")]
    Spawn { bin: PathBuf, source: std::io::Error },
    #[error("forged failed to start: {0}")]
    Failed(String),
}

/// `forged` next to this executable (an installed or built pair), else on PATH.
pub fn forged_binary() -> PathBuf {
    if let Ok(me) = std::env::current_exe()
        && let Some(dir) = me.parent()
    {
        let sibling = dir.join("forged");
        if sibling.is_file() {
            return sibling;
        }
    }
    PathBuf::from("forged")
}

/// Connects; if no daemon answers and `autostart` is set, starts `forged`
/// on `socket` (detached from this terminal, logging to
/// `$FORGE_HOME/logs/`) and connects to it. `started(pid)` is called once
/// the daemon it started answers, so the caller can say so (a daemon that
/// fails to start is reported as an error only). `C` is how to talk to
/// it: [`crate::Connection`] (WebSocket) or [`crate::LineClient`].
/// A remote endpoint's bridge starts its own daemon (see
/// [`crate::endpoint::SshRemote::autostart`]).
pub async fn connect_or_start<C: Greet>(
    endpoint: &Endpoint,
    info: ClientInfo,
    autostart: bool,
    started: impl FnOnce(u32),
) -> Result<C, StartError> {
    match (C::greet(endpoint, info.clone()).await, endpoint) {
        (Err(ConnectError::NotRunning { .. }), Endpoint::Socket(socket)) if autostart => {
            start_and_connect(socket, info, started).await
        }
        (other, _) => Ok(other?),
    }
}

async fn start_and_connect<C: Greet>(
    socket: &Path,
    info: ClientInfo,
    started: impl FnOnce(u32),
) -> Result<C, StartError> {
    let endpoint = Endpoint::Socket(socket.to_path_buf());
    let home = forge_proto::paths::forge_home();
    let logs = home.join("logs");
    // Private from the start: the daemon's files hold conversations.
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&logs);
    let err_path = logs.join("forged.stderr");
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&err_path)
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null());
    let start_offset = std::fs::metadata(&err_path).map(|m| m.len()).unwrap_or(0);
    let bin = forged_binary();
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("--socket").arg(socket).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from this
    // terminal so closing the terminal does not kill it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| StartError::Spawn { bin: bin.clone(), source })?;
    let pid = child.id();
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            // Another client may have won the race to start it.
            if let Ok(c) = C::greet(&endpoint, info.clone()).await {
                return Ok(c);
            }
            let text = std::fs::read(&err_path)
                .map(|b| String::from_utf8_lossy(&b[(start_offset as usize).min(b.len())..]).trim().to_string())
                .unwrap_or_default();
            let detail = if text.is_empty() { format!("it exited with {status}") } else { text };
            return Err(StartError::Failed(detail));
        }
        match C::greet(&endpoint, info.clone()).await {
            Ok(c) => {
                started(pid);
                return Ok(c);
            }
            Err(ConnectError::NotRunning { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
