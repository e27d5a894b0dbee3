//! The escape suite (`forgectl sandbox test`): each probe is a shell
//! command run exactly as `run_command` runs one (the supervisor, the
//! sandbox of the configuration in force), in a scratch project, trying
//! one way out; the daemon then checks what actually happened on disk or
//! on the wire, not what the command printed.

use std::time::Duration;

mod limits;
mod reach;
mod run;

use crate::confine::{NetworkAccess, Policy, Settings};
use crate::supervisor::{self, Confinement};
pub use run::{ASKS_FIRST, ProbeRow, Targets};
use run::{Probe, first_line, row, run, sh_quote, skipped};

/// Runs every probe against `settings` (the configuration in force).
pub async fn run_suite(settings: &Settings, targets: &Targets) -> std::io::Result<Vec<ProbeRow>> {
    // In the home directory's cache where there is one: a place commands
    // can see but not write (a private /tmp would hide one in /tmp, and
    // the probes would test nothing).
    let home_cache =
        crate::confine::host().and_then(|h| h.home.as_ref()).map(|h| h.join(".cache")).filter(|c| c.is_dir());
    let builder = tempfile::Builder::new().prefix("forge-sandbox-test-").clone();
    let scratch = match home_cache.map(|c| builder.tempdir_in(c)) {
        Some(Ok(d)) => d,
        _ => builder.tempdir()?,
    };
    let base = scratch.path().canonicalize()?;
    let root = base.join("project");
    let outside = base.join("outside");
    let tmp = base.join("tmp");
    for d in [&root, &outside, &tmp, &root.join(".git"), &root.join("d")] {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(outside.join("target"), "original\n")?;
    let roots = vec![root.clone()];
    let confinement = if settings.kernel_active() && supervisor::enabled() {
        Some(Confinement::new(Policy::build(settings, &roots, &tmp, false)))
    } else {
        None
    };
    if confinement.is_none() {
        let probe = Probe { root, outside, tmp, exe: crate::confine::host().and_then(|h| h.exe.clone()) };
        let mut rows = asks_first(settings);
        rows.extend(reach::forge_probes(settings, &probe).await);
        return Ok(rows);
    }
    let c = confinement.as_ref();
    let q_out = sh_quote(&outside);
    let short = Duration::from_secs(20);
    let mut rows = Vec::new();

    let writes = [
        ("write outside the roots", format!("echo x > {q_out}/direct"), "direct"),
        ("write outside through ..", "echo x > ../outside/dotdot".to_string(), "dotdot"),
        ("write outside through a symlink", format!("ln -s {q_out} link && echo x > link/symlink"), "symlink"),
        (
            "write outside through /proc/self/root",
            format!("echo x > /proc/self/root{}/proc", outside.display()),
            "proc",
        ),
    ];
    for (probe, line, file) in writes {
        let r = run(&line, &root, c, &tmp, short).await;
        let escaped = outside.join(file).exists();
        rows.push(row(probe, true, !escaped, if escaped { "the file was written".into() } else { first_line(&r.out) }));
    }
    let r = run(&format!("ln {q_out}/target hard && echo changed > hard"), &root, c, &tmp, short).await;
    let changed = std::fs::read_to_string(outside.join("target")).unwrap_or_default() != "original\n";
    rows.push(row(
        "write outside through a hard link",
        true,
        !changed,
        if changed { "the outside file changed".into() } else { first_line(&r.out) },
    ));
    // One loop swaps a directory for a link to the outside while the
    // other writes through its name.
    let race = format!(
        "(i=0; while [ $i -lt 300 ]; do mv d d.real; ln -s {q_out} d; rm d; mv d.real d; i=$((i+1)); done) & \
         i=0; while [ $i -lt 300 ]; do echo x > d/race$i 2>/dev/null; i=$((i+1)); done; wait"
    );
    let r = run(&race, &root, c, &tmp, Duration::from_secs(60)).await;
    let raced = std::fs::read_dir(&outside)
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("race")).count())
        .unwrap_or(0);
    rows.push(row(
        "write outside through a rename race",
        true,
        raced == 0,
        if raced > 0 { format!("{raced} files written outside") } else { first_line(&r.out) },
    ));
    let r = run("touch .git/forge-probe", &root, c, &tmp, short).await;
    let wrote = root.join(".git/forge-probe").exists();
    rows.push(row(".git inside the roots", true, !wrote, if wrote { "written".into() } else { first_line(&r.out) }));
    let r = run("echo ok > inside && echo ok > \"$TMPDIR/t\" && cat inside", &root, c, &tmp, short).await;
    let ok = root.join("inside").exists() && tmp.join("t").exists();
    rows.push(row("write in the roots and $TMPDIR", false, !ok, first_line(&r.out)));

    // Secrets.
    let home = crate::confine::host().and_then(|h| h.home.clone());
    match home.as_ref().map(|h| h.join(".ssh")).filter(|s| s.is_dir()) {
        Some(ssh) => {
            // The files as the daemon sees them: the command cannot list them.
            let files: Vec<String> = std::fs::read_dir(&ssh)
                .map(|d| d.flatten().filter(|e| e.path().is_file()).map(|e| sh_quote(&e.path())).collect())
                .unwrap_or_default();
            let line =
                if files.is_empty() { format!("ls {}", sh_quote(&ssh)) } else { format!("cat {}", files.join(" ")) };
            let r = run(&line, &root, c, &tmp, short).await;
            // Refused by Landlock, or absent from the command's view (a
            // mount namespace of the granted trees only): the files exist.
            let refused = r.code != Some(0)
                && (r.out.contains("ermission denied") || r.out.contains("No such file or directory"));
            rows.push(row("read ~/.ssh", true, refused, first_line(&r.out)));
        }
        None => rows.push(skipped("read ~/.ssh", true, "there is no ~/.ssh")),
    }
    let db = targets.forge_home.join("forge.db");
    let r = run(&format!("cat {} > /dev/null", sh_quote(&db)), &root, c, &tmp, short).await;
    rows.push(row("read $FORGE_HOME/forge.db", true, r.code != Some(0), first_line(&r.out)));

    // The network and the daemon.
    let exe = crate::confine::host().and_then(|h| h.exe.clone());
    match &exe {
        Some(exe) => {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let port = listener.local_addr()?.port();
            let line = format!("{} {} connect-tcp 127.0.0.1:{port}", sh_quote(exe), crate::confine::PROBE_ARG);
            let r = run(&line, &root, c, &tmp, short).await;
            let deny = settings.network == NetworkAccess::Deny;
            rows.push(row(
                &format!("connect to a loopback listener (network = \"{}\")", settings.network.word()),
                deny,
                r.code != Some(0),
                first_line(&r.out),
            ));
            let line = format!("{} {} connect-tcp 1.1.1.1:443", sh_quote(exe), crate::confine::PROBE_ARG);
            let r = run(&line, &root, c, &tmp, short).await;
            let outward = settings.network != NetworkAccess::Allow;
            if outward || r.code == Some(0) {
                rows.push(row("connect to the internet (1.1.1.1:443)", outward, r.code != Some(0), first_line(&r.out)));
            } else {
                rows.push(skipped("connect to the internet (1.1.1.1:443)", false, "no route from this machine"));
            }
            let line =
                format!("{} {} connect-unix {}", sh_quote(exe), crate::confine::PROBE_ARG, sh_quote(&targets.socket));
            let r = run(&line, &root, c, &tmp, short).await;
            rows.push(row("connect to forged's socket", true, r.code != Some(0), first_line(&r.out)));
            drop(listener);
        }
        None => rows.push(skipped("the network probes", true, "the daemon's executable is unknown")),
    }

    let probe = Probe { root: root.clone(), outside: outside.clone(), tmp: tmp.clone(), exe: exe.clone() };
    rows.extend(reach::run_probes(settings, &probe, c).await?);
    rows.extend(limits::run_probes(settings, &probe, c).await);
    Ok(rows)
}

/// Where commands are not confined, no probe runs a command: each one
/// would ask the user first, and that is its row.
fn asks_first(settings: &Settings) -> Vec<ProbeRow> {
    let network = format!("connect to a loopback listener (network = \"{}\")", settings.network.word());
    let names = [
        "write outside the roots",
        "write outside through ..",
        "write outside through a symlink",
        "write outside through /proc/self/root",
        "write outside through a hard link",
        "write outside through a rename race",
        ".git inside the roots",
        "write in the roots and $TMPDIR",
        "read ~/.ssh",
        "read $FORGE_HOME/forge.db",
        &network,
        "connect to the internet (1.1.1.1:443)",
        "connect to forged's socket",
        "connect to a Unix socket outside the roots (a tmux server, another daemon)",
        "connect to an abstract Unix socket",
        "connect to a Unix socket inside the roots",
        "send a datagram or a descriptor to a Unix socket outside the roots",
        "memory hog (max_memory_mb lowered to 256 for the probe)",
        "a flood of 200 processes (max_processes lowered to 64 for the probe)",
        "three children of 200 MiB under a 256 MiB total",
        "a command outliving its timeout, with setsid children",
        "setuid programs gain privileges",
        "chmod a setuid file",
        "create a setuid file",
        "read the daemon user's keyrings (/proc/keys)",
        "leave a git setting or hook that runs a program in a nested repository",
    ];
    names
        .iter()
        .map(|n| ProbeRow {
            probe: n.to_string(),
            expected: ASKS_FIRST.into(),
            outcome: ASKS_FIRST.into(),
            detail: "not run: commands are not confined here, so such a command asks you first".into(),
        })
        .collect()
}
