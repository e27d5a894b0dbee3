//! `forgectl daemon install|status|stop|logs`: forged as a systemd user
//! service (socket activation), and a look at the daemon and its logs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Global;
use crate::exit::Failure;

const SOCKET_UNIT: &str = include_str!("../../../systemd/forged.socket");
const SERVICE_UNIT: &str = include_str!("../../../systemd/forged.service");

#[derive(clap::Subcommand)]
pub enum DaemonCmd {
    /// Write the systemd user units (forged.socket, forged.service) and
    /// enable the socket: forged then starts on the first connection
    #[command(
        after_help = "The units go to $XDG_CONFIG_HOME/systemd/user (~/.config/systemd/user); ExecStart is the forged next to this forgectl (or on PATH). API keys: ~/.forge/config.toml [api_keys], or ~/.config/forge/env (ANTHROPIC_API_KEY=..., mode 0600)."
    )]
    Install {
        /// Only write the units; do not run systemctl
        #[arg(long)]
        no_start: bool,
        /// The forged to run [default: next to this forgectl, else on PATH]
        #[arg(long, value_name = "PATH")]
        forged: Option<PathBuf>,
    },
    /// The daemon's pid, version, uptime and sessions, and its systemd
    /// units' state when they are installed
    Status,
    /// Stop the daemon gracefully (with the socket unit enabled, the next
    /// client starts it again)
    Stop,
    /// Print the end of the daemon's log ($FORGE_HOME/logs)
    Logs {
        /// How many lines
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
}

pub async fn run(g: &Global, cmd: DaemonCmd) -> Result<(), Failure> {
    match cmd {
        DaemonCmd::Install { no_start, forged } => install(no_start, forged),
        DaemonCmd::Status => {
            crate::cmd::misc::status(g).await?;
            if units_dir().join("forged.socket").exists() && has_systemctl() {
                for unit in ["forged.socket", "forged.service"] {
                    let state = systemctl(&["is-active", unit]).unwrap_or_else(|e| e);
                    eprintln!("forgectl: {unit}: {}", state.trim());
                }
            }
            Ok(())
        }
        DaemonCmd::Stop => crate::cmd::misc::shutdown(g).await,
        DaemonCmd::Logs { lines } => logs(lines),
    }
}

fn units_dir() -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".config"));
    config.join("systemd").join("user")
}

fn has_systemctl() -> bool {
    Command::new("systemctl").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// `systemctl --user ARGS`: its output, or what went wrong.
fn systemctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("systemctl").arg("--user").args(args).output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() { Ok(text) } else { Err(text) }
}

/// The forged to run: given, next to this forgectl, or on PATH.
fn find_forged(given: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("forged")));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("forged")).collect::<Vec<_>>())
        .unwrap_or_default();
    given
        .into_iter()
        .chain(beside)
        .chain(on_path)
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .ok_or_else(|| {
            Failure::new(2, "not_found", "cannot find forged next to forgectl or on PATH; give it with --forged PATH")
        })
}

fn install(no_start: bool, forged: Option<PathBuf>) -> Result<(), Failure> {
    let forged = find_forged(forged)?;
    let exec = forged.display().to_string();
    if exec.contains(char::is_whitespace) {
        return Err(Failure::new(
            2,
            "invalid_params",
            format!("{exec}: a path with spaces cannot go in ExecStart; move forged"),
        ));
    }
    let dir = units_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(1, "io", format!("cannot create {}: {e}", dir.display())))?;
    let service = SERVICE_UNIT.replace("ExecStart=%h/.cargo/bin/forged", &format!("ExecStart={exec}"));
    for (name, text) in [("forged.socket", SOCKET_UNIT), ("forged.service", service.as_str())] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| Failure::new(1, "io", format!("cannot write {}: {e}", path.display())))?;
        eprintln!("forgectl: wrote {}", path.display());
    }
    if no_start {
        eprintln!(
            "forgectl: to start it: systemctl --user daemon-reload && systemctl --user enable --now forged.socket"
        );
        return Ok(());
    }
    if !has_systemctl() {
        eprintln!(
            "forgectl: systemctl is not available here; the units are written, forgectl keeps starting forged itself"
        );
        return Ok(());
    }
    systemctl(&["daemon-reload"])
        .map_err(|e| Failure::new(1, "systemd", format!("systemctl --user daemon-reload: {}", e.trim())))?;
    systemctl(&["enable", "--now", "forged.socket"]).map_err(|e| {
        Failure::new(
            1,
            "systemd",
            format!(
                "systemctl --user enable --now forged.socket: {} (a forged started by forgectl may hold the socket: `forgectl shutdown`, then run it again)",
                e.trim()
            ),
        )
    })?;
    eprintln!("forgectl: forged.socket is enabled; forged starts on the first connection (`forgectl daemon status`)");
    Ok(())
}

/// The newest log file's last `n` lines.
fn logs(n: usize) -> Result<(), Failure> {
    let dir = forge_proto::paths::forge_home().join("logs");
    let newest = newest_log(&dir).ok_or_else(|| {
        Failure::new(1, "not_found", format!("no log in {} yet (forged writes one when it starts)", dir.display()))
    })?;
    let text = std::fs::read_to_string(&newest)
        .map_err(|e| Failure::new(1, "io", format!("cannot read {}: {e}", newest.display())))?;
    let lines: Vec<&str> = text.lines().collect();
    for l in &lines[lines.len().saturating_sub(n)..] {
        outln!("{l}");
    }
    Ok(())
}

fn newest_log(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with("forged.") && e.file_name().to_string_lossy().ends_with(".log")
        })
        .max_by_key(|e| e.file_name())
        .map(|e| e.path())
}
