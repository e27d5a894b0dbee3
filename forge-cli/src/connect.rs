//! Connecting to the daemon, starting it first when none answers (unless
//! `--no-autostart`): forge-proto's autostart, with forgectl's exit codes.

use std::path::PathBuf;

use forge_client::autostart::{StartError, connect_or_start};
use forge_client::{ConnectError, Connection, Endpoint, ForgeClient, Greet, LineClient, SshRemote};
use forge_proto::{ClientInfo, ClientKind};

use crate::Global;
use crate::exit::{Failure, UNREACHABLE};

pub(crate) fn client_info() -> ClientInfo {
    ClientInfo { name: "forgectl".into(), version: env!("CARGO_PKG_VERSION").into(), kind: ClientKind::Cli }
}

pub fn socket_path(g: &Global) -> PathBuf {
    g.socket.clone().unwrap_or_else(forge_proto::paths::default_socket)
}

/// How long `send` and `attach` try to get a dropped link to a remote
/// back before they give up (its turns go on there meanwhile).
pub const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// Where the daemon is: `--remote` (through ssh), else the socket here.
pub fn endpoint(g: &Global) -> Result<Endpoint, Failure> {
    let Some(url) = g.remote() else { return Ok(Endpoint::Socket(socket_path(g))) };
    if g.socket.is_some() {
        return Err(Failure::new(
            2,
            "invalid_params",
            "--remote and --socket name two daemons; give one (through --remote, the far forgectl finds its daemon's socket itself)",
        ));
    }
    SshRemote::parse(url, g.remote_bin.clone(), !g.no_autostart)
        .map(Endpoint::Ssh)
        .map_err(|e| Failure::new(2, "invalid_params", e.to_string()))
}

/// A directory the command names for the daemon (`--cwd`, `--dir`): made
/// absolute here, or this directory when none is given. Through
/// `--remote` it is a directory of the far machine: taken as given, it
/// must be absolute, and none is sent when none is given, unless
/// `needed` (then the user is asked for one).
pub fn daemon_dir(g: &Global, given: Option<PathBuf>, flag: &str, needed: bool) -> Result<Option<String>, Failure> {
    if let Some(url) = g.remote() {
        return match given {
            Some(p) if p.is_absolute() => Ok(Some(p.display().to_string())),
            Some(p) => Err(Failure::new(
                2,
                "invalid_params",
                format!(
                    "{flag} {} is relative; through --remote it names a directory on {url}: give its absolute path",
                    p.display()
                ),
            )),
            None if needed => Err(Failure::new(
                2,
                "invalid_params",
                format!("through --remote, name the directory on {url} with {flag} (this machine's is not there)"),
            )),
            None => Ok(None),
        };
    }
    let dir = match given {
        Some(p) => std::path::absolute(&p).unwrap_or(p),
        None => std::env::current_dir().map_err(|e| Failure::new(2, "invalid_input", e.to_string()))?,
    };
    Ok(Some(dir.display().to_string()))
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
    let endpoint = endpoint(g)?;
    let fresh = std::sync::atomic::AtomicBool::new(false);
    let started = |pid| {
        fresh.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!("forgectl: started forged (pid {pid}) on {endpoint}");
    };
    let conn = connect_or_start(&endpoint, info, !g.no_autostart, started).await.map_err(|e| match e {
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
        StartError::Connect(e @ ConnectError::Remote { .. }) => {
            Failure::new(UNREACHABLE, "remote_unreachable", e.to_string())
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
