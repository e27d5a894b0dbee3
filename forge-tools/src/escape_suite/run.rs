//! What the escape suite's probes share: their outcome rows, where they
//! run, and running one shell line under a confinement.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;

use crate::supervisor::{self, Confinement};

/// A probe's expected outcome and outcome where commands are not
/// confined: it is not run, since such a command would ask the user first.
pub const ASKS_FIRST: &str = "asks first";

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeRow {
    /// What it tries, in words.
    pub probe: String,
    /// `refused` or `allowed`: what the configuration should do
    /// ([`ASKS_FIRST`] where commands are not confined).
    pub expected: String,
    /// `refused`, `allowed`, `skipped` or [`ASKS_FIRST`].
    pub outcome: String,
    /// What was seen.
    pub detail: String,
}

impl ProbeRow {
    pub fn passed(&self) -> bool {
        self.outcome == "skipped" || self.outcome == self.expected
    }
}

/// Where the probes run, and what they try to reach.
pub struct Targets {
    /// The daemon's socket (a command must not drive the daemon).
    pub socket: PathBuf,
    /// `$FORGE_HOME` (its store must not be readable).
    pub forge_home: PathBuf,
}

pub(super) struct Run {
    pub code: Option<i32>,
    pub out: String,
}

pub(super) fn word(refused: bool) -> String {
    if refused { "refused" } else { "allowed" }.into()
}

pub(super) fn row(probe: &str, expected: bool, refused: bool, detail: impl Into<String>) -> ProbeRow {
    ProbeRow { probe: probe.into(), expected: word(expected), outcome: word(refused), detail: detail.into() }
}

pub(super) fn skipped(probe: &str, expected: bool, why: &str) -> ProbeRow {
    ProbeRow { probe: probe.into(), expected: word(expected), outcome: "skipped".into(), detail: why.into() }
}

/// Runs `line` in `root` under `confinement`, giving up after `limit`.
pub(super) async fn run(
    line: &str,
    root: &Path,
    confinement: Option<&Confinement>,
    tmp: &Path,
    limit: Duration,
) -> Run {
    let mut cmd = supervisor::command("/bin/sh", line, confinement);
    cmd.current_dir(root).env("TMPDIR", tmp).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let Ok(child) = cmd.spawn() else { return Run { code: None, out: "cannot start /bin/sh".into() } };
    let mut stop = supervisor::StopGuard::new(child.id());
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            stop.disarm();
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            Run { code: out.status.code(), out: text.trim().to_string() }
        }
        _ => Run { code: None, out: format!("stopped after {} s", limit.as_secs()) },
    }
}

/// The first line of `text`, cut short.
pub(super) fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    crate::short_summary(line.to_string())
}

/// Whether a process whose command line holds `marker` is alive.
pub(super) fn alive(marker: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
    })
}

pub(super) fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Where the probes run: the project (the root), a place outside it,
/// the command's `$TMPDIR`, and the daemon's executable (for the probes
/// it runs inside the sandbox).
pub(super) struct Probe {
    pub root: PathBuf,
    pub outside: PathBuf,
    pub tmp: PathBuf,
    pub exe: Option<PathBuf>,
}
