//! `forgectl remote check ssh://…`: what works on the far side of an ssh
//! remote (ssh itself, forgectl there and its version, the daemon, its
//! protocol and sandbox), and what to install or set when something does
//! not.

use std::process::Stdio;
use std::time::Duration;

use clap::Subcommand;
use forge_client::{ConnectError, ForgeClient, Greet, LineClient, SshRemote};
use forge_proto::PROTOCOL_VERSION;
use serde::Serialize;

use crate::Global;
use crate::exit::{Failure, UNREACHABLE};
use crate::output::json_line;

#[derive(Subcommand)]
pub enum RemoteCmd {
    /// Check that a remote can be used with --remote: ssh logs in,
    /// forgectl is there (its version and protocol), its daemon answers
    /// (started if none runs, unless --no-autostart), and whether that
    /// daemon's sandbox confines commands
    #[command(after_help = "Exit status: 0 when --remote URL works; 3 when it does not (what to do on stderr).\n\
FORGE_SSH_COMMAND and --remote-bin / FORGE_REMOTE_BIN apply as for --remote.")]
    Check {
        /// ssh://[USER@]HOST[:PORT]
        url: String,
    },
}

/// What was found, step by step; `None` where the check did not get that far.
#[derive(Serialize, Default)]
struct Report {
    remote: String,
    ssh: bool,
    forgectl: Option<String>,
    daemon: Option<String>,
    protocol_version: Option<u32>,
    sandbox: Option<String>,
    ok: bool,
    problem: Option<String>,
}

/// How long a step may take (ssh may ask for a passphrase).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn run(g: &Global, cmd: RemoteCmd) -> Result<(), Failure> {
    let RemoteCmd::Check { url } = cmd;
    let remote = SshRemote::parse(&url, g.remote_bin.clone(), !g.no_autostart)
        .map_err(|e| Failure::new(2, "invalid_params", e.to_string()))?;
    let mut report = Report { remote: url.clone(), ..Default::default() };
    let problem = check(&remote, &mut report).await.err();
    report.ok = problem.is_none();
    report.problem = problem.clone();
    if g.json {
        json_line(&report);
    } else {
        let mark = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        outln!("remote:    {url}");
        outln!("ssh:       {}", if report.ssh { "logs in" } else { "does not log in" });
        outln!("forgectl:  {}", mark(&report.forgectl));
        outln!("daemon:    {}", mark(&report.daemon));
        outln!("sandbox:   {}", mark(&report.sandbox));
        if report.ok {
            outln!("ok: forgectl --remote {url} works");
        }
    }
    match problem {
        None => Ok(()),
        Some(p) => Err(Failure::new(UNREACHABLE, "remote_unreachable", p)),
    }
}

async fn check(remote: &SshRemote, report: &mut Report) -> Result<(), String> {
    // Step 1: ssh logs in and finds forgectl.
    let mut cmd = remote.command(&format!("{} --version", remote.bin));
    cmd.stdin(Stdio::null());
    let out = tokio::time::timeout(STEP_TIMEOUT, cmd.output())
        .await
        .map_err(|_| format!("ssh did not finish within {} s", STEP_TIMEOUT.as_secs()))?
        .map_err(|e| format!("cannot run ssh: {e} (install OpenSSH's client, or set FORGE_SSH_COMMAND)"))?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => {}
        Some(255) => {
            return Err(format!(
                "ssh cannot log in to {}: {said} (check that `ssh -T{} {} true` works without a question, with your agent or keys{})",
                remote.host,
                remote.port.map(|p| format!(" -p {p}")).unwrap_or_default(),
                remote.destination,
                if remote.ssh_command.is_some() { " and FORGE_SSH_COMMAND's options" } else { "" }
            ));
        }
        Some(127) => {
            report.ssh = true;
            return Err(format!(
                "{} is not on {}'s PATH: install Forge there (forgectl and forged in a directory of its PATH, such as ~/.local/bin), or name it with --remote-bin PATH or FORGE_REMOTE_BIN",
                remote.bin, remote.host
            ));
        }
        code => {
            report.ssh = true;
            return Err(format!(
                "`{} --version` failed on {} (status {}): {said}",
                remote.bin,
                remote.host,
                code.map_or("a signal".into(), |c| c.to_string())
            ));
        }
    }
    report.ssh = true;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    report.forgectl = Some(version.clone());
    if !version.starts_with("forgectl ") {
        return Err(format!("{} on {} is not forgectl (it printed \"{version}\")", remote.bin, remote.host));
    }
    // Step 2: its daemon answers through the bridge, in this protocol.
    let info = crate::connect::client_info();
    let endpoint = forge_client::Endpoint::Ssh(remote.clone());
    let conn = match LineClient::greet(&endpoint, info).await {
        Ok(c) => c,
        Err(ConnectError::Protocol { client, daemon }) => {
            report.protocol_version = Some(daemon);
            return Err(format!(
                "the daemon on {} speaks protocol {daemon}, this forgectl {client}: install the same Forge release on both machines",
                remote.host
            ));
        }
        Err(e) => return Err(e.to_string()),
    };
    let status = conn.daemon_status(()).await.map_err(|e| format!("the daemon did not give its status: {e}"))?;
    report.protocol_version = Some(conn.hello.protocol_version);
    report.daemon = Some(format!(
        "forged {} (pid {}), protocol {} (this forgectl: {PROTOCOL_VERSION}), home {}",
        status.version, status.pid, status.protocol_version, status.home
    ));
    report.sandbox = Some(match &status.sandbox {
        Some(s) if s.mode == "kernel" => "kernel: commands run confined".to_string(),
        Some(s) => format!(
            "{}: every command asks first{}",
            s.mode,
            s.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ),
        None => "not reported (an older forged)".to_string(),
    });
    Ok(())
}
