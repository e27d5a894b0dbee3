//! `forgectl sandbox [status|test]`: how the commands the model runs are
//! confined, and the escape suite against that configuration.

use forge_client::ForgeClient;
use forge_proto::SandboxStatus;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

/// Exit status of `sandbox test` when a probe did not have the expected
/// outcome.
const PROBE_FAILED: u8 = 1;

#[derive(Debug, clap::Subcommand)]
pub enum SandboxAction {
    /// The sandbox in force: mode, kernel support, network, limits (the
    /// default)
    Status,
    /// Run the escape suite against the configuration in force and print
    /// a table: every way out should be refused. Where commands are not
    /// confined, it says so first and runs no command: each probe is
    /// "asks first", since such a command would ask you. Exit status 1 if
    /// a probe got out
    Test,
}

pub async fn run(g: &Global, action: Option<SandboxAction>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    match action.unwrap_or(SandboxAction::Status) {
        SandboxAction::Status => {
            let s = conn.client.daemon_status(()).await?;
            let Some(sandbox) = s.sandbox else {
                return Err(Failure::new(
                    PROBE_FAILED,
                    "sandbox",
                    "this forged does not report its sandbox; upgrade it",
                ));
            };
            if g.json {
                json_line(&sandbox);
            } else {
                show_status(&sandbox);
            }
        }
        SandboxAction::Test => {
            if !g.json {
                eprintln!("running the escape suite (a minute or two on a slow machine)...");
            }
            let report = conn.client.sandbox_test(()).await?;
            if g.json {
                for p in &report.probes {
                    json_line(p);
                }
            } else {
                if report.status.mode != "kernel" {
                    outln!(
                        "commands are NOT confined here, so every command the model runs asks you first: no probe \
                         ran a command unconfined"
                    );
                }
                show_status(&report.status);
                outln!();
                let width = report.probes.iter().map(|p| p.probe.chars().count()).max().unwrap_or(5).max(5);
                let words =
                    report.probes.iter().map(|p| p.expected.len().max(p.outcome.len())).max().unwrap_or(8).max(8);
                outln!("{:width$}  {:words$}  {:words$}  DETAIL", "PROBE", "EXPECTED", "RESULT");
                for p in &report.probes {
                    let mark = if p.ok { "" } else { "  << FAILED" };
                    outln!("{:width$}  {:words$}  {:words$}  {}{mark}", p.probe, p.expected, p.outcome, p.detail);
                }
                let failed = report.probes.iter().filter(|p| !p.ok).count();
                outln!();
                if failed == 0 {
                    outln!("every probe had the expected outcome");
                } else {
                    outln!("{failed} probe(s) did not: see `forgectl sandbox` and [tools.sandbox] in config.toml");
                }
            }
            if !report.passed {
                return Err(Failure::silent(PROBE_FAILED));
            }
        }
    }
    Ok(())
}

/// The sandbox in a few lines (also part of `forgectl status`).
pub fn status_lines(s: &SandboxStatus) -> Vec<String> {
    let mut lines = Vec::new();
    match &s.reason {
        Some(r) => lines.push(format!("sandbox:   {} ({r})", s.mode)),
        None => lines.push(format!(
            "sandbox:   {} (Landlock ABI {}, user namespaces {})",
            s.mode,
            s.landlock_abi,
            if s.user_namespaces { "yes" } else { "no" }
        )),
    }
    if let Some(how) = &s.confined_by {
        lines.push(format!("           confined: {how}"));
    }
    let memory = if s.memory_bounded { "in all" } else { "per process" };
    lines.push(format!(
        "           network {}, {} MiB {memory}, {} processes at once, {} CPU s per process",
        s.network, s.max_memory_mb, s.max_processes, s.max_cpu_seconds
    ));
    let unbounded: Vec<&str> = [(!s.processes_bounded, "processes"), (!s.memory_bounded, "memory")]
        .iter()
        .filter(|(u, _)| *u)
        .map(|(_, w)| *w)
        .collect();
    if unbounded.is_empty() {
        lines.push(format!("           totals per command: {}", s.totals));
    } else {
        lines.push(format!(
            "           NOT bounded per command in all: {} ({}); the defaults keep processes x memory under this machine's memory",
            unbounded.join(" and "),
            s.totals
        ));
    }
    lines
}

fn show_status(s: &SandboxStatus) {
    for l in status_lines(s) {
        outln!("{l}");
    }
}
