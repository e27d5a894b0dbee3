//! Connecting to the daemon, starting it first when none answers (unless
//! `--no-autostart`), the way tmux starts its server.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use forge_proto::client::{ConnectError, Connection, connect};
use forge_proto::{ClientInfo, ClientKind};

use crate::Global;
use crate::exit::{Failure, UNREACHABLE};

/// How long to wait for a freshly started daemon to answer.
const START_TIMEOUT: Duration = Duration::from_secs(15);

fn client_info() -> ClientInfo {
    ClientInfo { name: "forgectl".into(), version: env!("CARGO_PKG_VERSION").into(), kind: ClientKind::Cli }
}

pub fn socket_path(g: &Global) -> PathBuf {
    g.socket.clone().unwrap_or_else(forge_proto::paths::default_socket)
}

pub async fn daemon(g: &Global) -> Result<Connection, Failure> {
    let socket = socket_path(g);
    match connect(&socket, client_info()).await {
        Ok(c) => Ok(c),
        Err(ConnectError::NotRunning { .. }) if !g.no_autostart => start_and_connect(&socket).await,
        Err(ConnectError::NotRunning { path, .. }) => Err(Failure::new(
            UNREACHABLE,
            "daemon_not_running",
            format!("no forged is running on {} (start it with `forged`, or drop --no-autostart)", path.display()),
        )),
        Err(e) => Err(connect_failure(e)),
    }
}

fn connect_failure(e: ConnectError) -> Failure {
    let kind = match e {
        ConnectError::Protocol { .. } => "protocol_mismatch",
        _ => "daemon_unreachable",
    };
    Failure::new(UNREACHABLE, kind, e.to_string())
}

/// `forged` next to this executable (an installed or built pair), else on PATH.
fn forged_binary() -> PathBuf {
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

async fn start_and_connect(socket: &Path) -> Result<Connection, Failure> {
    let home = forge_proto::paths::forge_home();
    let logs = home.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let err_path = logs.join("forged.stderr");
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
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
    let mut child = cmd.spawn().map_err(|e| {
        Failure::new(
            UNREACHABLE,
            "daemon_start_failed",
            format!("cannot start {}: {e} (is forged installed next to forgectl or on PATH?)", bin.display()),
        )
    })?;
    eprintln!("forgectl: started forged (pid {}) on {}", child.id(), socket.display());
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            // Another forgectl may have won the race to start it.
            if let Ok(c) = connect(socket, client_info()).await {
                return Ok(c);
            }
            let text = std::fs::read(&err_path)
                .map(|b| String::from_utf8_lossy(&b[(start_offset as usize).min(b.len())..]).trim().to_string())
                .unwrap_or_default();
            let detail = if text.is_empty() { format!("it exited with {status}") } else { text };
            return Err(Failure::new(UNREACHABLE, "daemon_start_failed", format!("forged failed to start: {detail}")));
        }
        match connect(socket, client_info()).await {
            Ok(c) => return Ok(c),
            Err(ConnectError::NotRunning { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(connect_failure(e)),
        }
    }
}
