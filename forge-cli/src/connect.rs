//! Connecting to the daemon, starting it first when none answers (unless
//! `--no-autostart`): forge-proto's autostart, with forgectl's exit codes.

use std::path::PathBuf;

use forge_client::autostart::{StartError, connect_or_start};
use forge_client::{ConnectError, Connection, ForgeClient, Greet, LineClient};
use forge_proto::{ClientInfo, ClientKind};

use crate::Global;
use crate::exit::{Failure, UNREACHABLE};

fn client_info() -> ClientInfo {
    ClientInfo { name: "forgectl".into(), version: env!("CARGO_PKG_VERSION").into(), kind: ClientKind::Cli }
}

pub fn socket_path(g: &Global) -> PathBuf {
    g.socket.clone().unwrap_or_else(forge_proto::paths::default_socket)
}

pub async fn daemon(g: &Global) -> Result<Connection, Failure> {
    daemon_as(g, client_info()).await
}

/// [`daemon`], saying hello as `info` (an editor through `forgectl acp`).
pub async fn daemon_as(g: &Global, info: ClientInfo) -> Result<Connection, Failure> {
    reach(g, info, |c: &Connection| &c.client).await
}

/// [`daemon`] over JSON lines: calls one at a time, then perhaps a
/// follow on the same connection (what `forgectl send` needs, and no more).
pub async fn daemon_lines(g: &Global) -> Result<LineClient, Failure> {
    reach(g, client_info(), |c: &LineClient| c).await
}

/// Connects as `C` (starting the daemon unless `--no-autostart`); `rpc`
/// is its API, to ask a daemon just started about its sandbox.
async fn reach<C: Greet, R: ForgeClient>(g: &Global, info: ClientInfo, rpc: impl Fn(&C) -> &R) -> Result<C, Failure> {
    let socket = socket_path(g);
    let fresh = std::sync::atomic::AtomicBool::new(false);
    let started = |pid| {
        fresh.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!("forgectl: started forged (pid {pid}) on {}", socket.display());
    };
    let conn = connect_or_start(&socket, info, !g.no_autostart, started).await.map_err(|e| match e {
        StartError::Connect(ConnectError::NotRunning { path, .. }) => Failure::new(
            UNREACHABLE,
            "daemon_not_running",
            format!("no forged is running on {} (start it with `forged`, or drop --no-autostart)", path.display()),
        ),
        StartError::Connect(e @ ConnectError::Protocol { .. }) => {
            Failure::new(UNREACHABLE, "protocol_mismatch", e.to_string())
        }
        StartError::Connect(e @ (ConnectError::NoAnswer { .. } | ConnectError::Full { .. })) => {
            Failure::new(UNREACHABLE, "daemon_overloaded", e.to_string())
        }
        StartError::Connect(e) => Failure::new(UNREACHABLE, "daemon_unreachable", e.to_string()),
        e @ (StartError::Spawn { .. } | StartError::Failed(_)) => {
            Failure::new(UNREACHABLE, "daemon_start_failed", e.to_string())
        }
    })?;
    // A daemon just started says whether it can confine commands.
    if fresh.load(std::sync::atomic::Ordering::Relaxed)
        && let Ok(status) = rpc(&conn).daemon_status(()).await
        && let Some(sandbox) = status.sandbox.filter(|s| s.mode != "kernel")
    {
        // The reason ends by saying that every command asks.
        match sandbox.reason.as_deref() {
            Some(why) => eprintln!("forgectl: commands are not confined by the kernel here: {why}"),
            None => eprintln!(
                "forgectl: commands are not confined by the kernel here ({}); every command the model runs asks first",
                sandbox.mode
            ),
        }
    }
    Ok(conn)
}
