//! A delegated cgroup of the daemon's own on cgroup v2, when it was not
//! started by its systemd service: a daemon a client autostarts (or one
//! run by hand) sits in the terminal's session scope, with the shell and
//! whatever else the user runs there, and may not divide that cgroup, so
//! no command's totals could be bounded. It asks the user's systemd for a
//! transient scope holding only itself, with `Delegate=yes` (what the
//! installed service has), through `busctl` (part of systemd: no D-Bus
//! code of Forge's own), then waits until the kernel shows it there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the move may take: systemd runs the job at once, a loaded
/// machine in a VM may take a moment.
const MOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's cgroup v2 path (`0::` line), if the machine runs cgroup v2.
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

/// Where the user's bus is when the terminal did not say
/// (`XDG_RUNTIME_DIR` unset under su, ssh or cron): `/run/user/UID`.
fn runtime_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    // SAFETY: plain system call.
    let dir = PathBuf::from(format!("/run/user/{}", unsafe { libc::getuid() }));
    dir.join("bus").exists().then_some(dir)
}

/// Moves this process into a new transient scope `forged-PID.scope` of
/// the user's systemd, delegated to it. Returns the new cgroup path, or
/// why it could not.
pub fn move_to_own_scope() -> Result<String, String> {
    let before = own_cgroup().ok_or("not cgroup v2")?;
    let pid = std::process::id();
    let unit = format!("forged-{pid}.scope");
    let runtime =
        runtime_dir().ok_or("no user session bus (XDG_RUNTIME_DIR is not set, and /run/user/UID/bus is not there)")?;
    let pid_text = pid.to_string();
    let args = [
        "--user",
        "--quiet",
        "call",
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartTransientUnit",
        "ssa(sv)a(sa(sv))",
        &unit,
        "fail",
        "3",
        "PIDs",
        "au",
        "1",
        &pid_text,
        "Delegate",
        "b",
        "true",
        "Description",
        "s",
        "Forge daemon (started by a client; its commands' cgroups live here)",
        "0",
    ];
    let out = Command::new("busctl")
        .args(args)
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run busctl: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("the user's systemd did not make {unit}: {}", err.trim()));
    }
    let deadline = Instant::now() + MOVE_TIMEOUT;
    loop {
        match own_cgroup() {
            Some(now) if now != before && Path::new(&now).ends_with(&unit) => return Ok(now),
            _ if Instant::now() > deadline => return Err(format!("{unit} was made, but forged is not in it yet")),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
