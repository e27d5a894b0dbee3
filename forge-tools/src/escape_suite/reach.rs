//! The escape suite's ways out through what a command can reach: Unix
//! sockets of other programs (a tmux server, another daemon) outside the
//! roots and under abstract names, the repository's git configuration,
//! `.git` through the file tools, and a session rooted too broadly.

use std::time::Duration;

use super::run::{Probe, ProbeRow, first_line, row, run, sh_quote, skipped};
use crate::confine::Settings;
use crate::supervisor::Confinement;

pub(super) async fn run_probes(
    settings: &Settings,
    p: &Probe,
    c: Option<&Confinement>,
) -> std::io::Result<Vec<ProbeRow>> {
    let (root, tmp) = (&p.root, &p.tmp);
    let short = Duration::from_secs(20);
    let mut rows = Vec::new();
    match &p.exe {
        Some(exe) => {
            // A server outside the roots (what a tmux server or another
            // daemon is), one inside them, and one under an abstract name.
            let outer = std::os::unix::net::UnixListener::bind(p.outside.join("server.sock"))?;
            let inner = std::os::unix::net::UnixListener::bind(root.join("server.sock"))?;
            let name = format!("forge-probe-{}", std::process::id());
            let addr =
                <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(&name)?;
            let abstract_server = std::os::unix::net::UnixListener::bind_addr(&addr)?;
            for (probe, target, expect_refused) in [
                (
                    "connect to a Unix socket outside the roots (a tmux server, another daemon)",
                    p.outside.join("server.sock").display().to_string(),
                    true,
                ),
                ("connect to an abstract Unix socket", format!("@{name}"), true),
                ("connect to a Unix socket inside the roots", root.join("server.sock").display().to_string(), false),
            ] {
                let line = format!(
                    "{} {} connect-unix {}",
                    sh_quote(exe),
                    crate::confine::PROBE_ARG,
                    sh_quote(std::path::Path::new(&target))
                );
                let r = run(&line, root, c, tmp, short).await;
                rows.push(row(probe, expect_refused, r.code != Some(0), first_line(&r.out)));
            }
            drop((outer, inner, abstract_server));
            rows.push(send_probe(p, exe, c).await?);
        }
        None => rows.push(skipped("the Unix socket probes", true, "the daemon's executable is unknown")),
    }
    rows.extend(forge_probes(settings, p).await);
    Ok(rows)
}

/// A datagram, then a descriptor, sent to a socket outside the roots by
/// address (no `connect` to check): what arrives is read on the far side.
async fn send_probe(p: &Probe, exe: &std::path::Path, c: Option<&Confinement>) -> std::io::Result<ProbeRow> {
    let target = p.outside.join("datagram.sock");
    let far = std::os::unix::net::UnixDatagram::bind(&target)?;
    far.set_nonblocking(true)?;
    let line = format!("{} {} send-unix {}", sh_quote(exe), crate::confine::PROBE_ARG, sh_quote(&target));
    let r = run(&line, &p.root, c, &p.tmp, Duration::from_secs(20)).await;
    let mut buf = [0u8; 64];
    let arrived = far.recv(&mut buf).is_ok();
    Ok(row(
        "send a datagram or a descriptor to a Unix socket outside the roots",
        true,
        !arrived,
        if arrived { "a message arrived".into() } else { first_line(&r.out) },
    ))
}

/// The probes of what Forge itself refuses, whatever confines commands:
/// the git tools, a file tool on `.git`, a session rooted at `/`.
pub(super) async fn forge_probes(settings: &Settings, p: &Probe) -> Vec<ProbeRow> {
    let mut rows = git_probes(settings, p).await;
    let broad = crate::roots::too_broad(std::path::Path::new("/"), None);
    rows.push(row(
        "a session rooted at / (without --allow-broad-root)",
        true,
        broad.is_some(),
        broad.map(|w| format!("refused: {w}")).unwrap_or_else(|| "accepted".into()),
    ));
    rows
}

/// The git tools in a repository whose configuration names a program
/// (core.fsmonitor), and a file tool writing `.git/config`.
async fn git_probes(settings: &Settings, p: &Probe) -> Vec<ProbeRow> {
    let mut rows = Vec::new();
    let repo = p.root.join("repo");
    let marker = p.outside.join("fsmonitor-ran");
    let git = |args: &[&str]| {
        std::process::Command::new("git").args(args).current_dir(&repo).output().is_ok_and(|o| o.status.success())
    };
    if std::fs::create_dir_all(&repo).is_err() || !git(&["init", "-q"]) {
        rows.push(skipped("git runs a program the repository's config names", true, "git is not installed"));
        return rows;
    }
    let _ = git(&["config", "core.fsmonitor", &format!("touch {}", sh_quote(&marker))]);
    let mut sandbox = crate::Sandbox::new(&repo, &[], &[], true, false);
    sandbox.set_command_settings(settings.clone());
    let ctx = crate::ToolCtx {
        sandbox,
        call_id: "sandbox-test".into(),
        limits: crate::ToolLimits::default(),
        output: None,
        file_hashes: Default::default(),
        about: None,
        library: None,
        timeout: None,
        images: None,
    };
    let registry = crate::ToolRegistry::builtin();
    if let Some(status) = registry.get("git_status") {
        let r = status.execute(serde_json::json!({}), &ctx).await;
        let ran = marker.exists();
        rows.push(row(
            "git runs a program the repository's config names (core.fsmonitor)",
            true,
            !ran,
            match (&r, ran) {
                (_, true) => "the program ran".to_string(),
                (Ok(_), false) => "git_status ran it not".to_string(),
                (Err(e), false) => first_line(&e.to_string()),
            },
        ));
    }
    if let Some(write) = registry.get("write_file") {
        let before = std::fs::read_to_string(repo.join(".git/config")).unwrap_or_default();
        let r = write.execute(serde_json::json!({"path": ".git/config", "content": "[core]\n"}), &ctx).await;
        let after = std::fs::read_to_string(repo.join(".git/config")).unwrap_or_default();
        rows.push(row(
            "write .git/config with a file tool",
            true,
            before == after,
            r.err().map(|e| first_line(&e.to_string())).unwrap_or_else(|| "written".into()),
        ));
    }
    rows
}
