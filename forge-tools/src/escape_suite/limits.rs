//! The escape suite's limits: memory and processes, per process and in
//! all, and nothing outliving its command.

use std::time::Duration;

use super::run::{Probe, ProbeRow, alive, first_line, row, run, sh_quote, skipped};
use crate::confine::{Policy, Settings};
use crate::supervisor::Confinement;

pub(super) async fn run_probes(settings: &Settings, p: &Probe, c: Option<&Confinement>) -> Vec<ProbeRow> {
    let (root, tmp) = (&p.root, &p.tmp);
    let roots = vec![root.clone()];
    let short = Duration::from_secs(20);
    let mut rows = Vec::new();
    // Limits, with small values so the probes stay quick.
    let small = Settings {
        limits: Some(crate::confine::Limits { memory_mb: 256, processes: 64, cpu_seconds: 60 }),
        ..settings.clone()
    };
    let small_c = c.map(|_| Confinement::new(Policy::build(&small, &roots, tmp, false)));
    let r = run("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", root, small_c.as_ref(), tmp, short).await;
    rows.push(row(
        "memory hog (max_memory_mb lowered to 256 for the probe)",
        true,
        r.code.is_some_and(|c| c != 0),
        first_line(&r.out),
    ));
    match &p.exe {
        Some(exe) => {
            // A bounded flood: 200 sleeping children, never a fork bomb.
            let line = format!("{} {} flood 200 exit", sh_quote(exe), crate::confine::PROBE_ARG);
            let r = run(&line, root, small_c.as_ref(), tmp, Duration::from_secs(30)).await;
            let started: Option<u64> = r
                .out
                .lines()
                .find_map(|l| l.strip_prefix("started "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse().ok());
            rows.push(row(
                "a flood of 200 processes (max_processes lowered to 64 for the probe)",
                true,
                started.is_some_and(|n| n < 64) || r.out.contains("[forge sandbox] stopped"),
                match started {
                    _ if r.out.contains("[forge sandbox] stopped") => "stopped at the limit".to_string(),
                    Some(n) => format!("{n} of 200 started"),
                    None => first_line(&r.out),
                },
            ));
            let totals = crate::confine::totals();
            if totals.memory {
                // Three children of 200 MiB under a 256 MiB total.
                // Alive at the end: processes whose whole command line is
                // the hog's (not this shell's, nor the counting's own).
                let line = format!(
                    "for i in 1 2 3; do {exe} {arg} hog 200 & done; sleep 3; \
                     echo alive $(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -- '{arg} hog 200 $')",
                    exe = sh_quote(exe),
                    arg = crate::confine::PROBE_ARG
                );
                let r = run(&line, root, small_c.as_ref(), tmp, Duration::from_secs(30)).await;
                let held = r.out.matches("holding 200 MiB").count();
                // On a busy machine the three may take turns: each holds its
                // 200 MiB after the one before was killed. What the total
                // forbids is all three holding at once (alive at the end).
                let alive: Option<usize> =
                    r.out.lines().find_map(|l| l.strip_prefix("alive ")).and_then(|n| n.trim().parse().ok());
                rows.push(row(
                    "three children of 200 MiB under a 256 MiB total",
                    true,
                    held < 3 || alive.is_some_and(|n| n < 3),
                    r.out
                        .lines()
                        .find(|l| l.contains("[forge sandbox]"))
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{held} of 3 held 200 MiB")),
                ));
            } else {
                rows.push(skipped(
                    "three children of 200 MiB under a 256 MiB total",
                    true,
                    &format!("memory is bounded per process only here: {}", totals.how),
                ));
            }
        }
        None => rows.push(skipped("the process and memory totals", true, "the daemon's executable is unknown")),
    }
    let marker = format!("{}.{}", 600, std::process::id());
    let line = format!("setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}");
    let _ = run(&line, root, c, tmp, Duration::from_secs(2)).await;
    let mut left = true;
    for _ in 0..100 {
        left = alive(&format!("sleep {marker}"));
        if !left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rows.push(row(
        "a command outliving its timeout, with setsid children",
        true,
        !left,
        if left { "processes were left running" } else { "all killed" },
    ));
    let r = run("grep NoNewPrivs /proc/self/status", root, c, tmp, short).await;
    rows.push(row("setuid programs gain privileges", true, r.out.ends_with('1'), first_line(&r.out)));
    rows.extend(set_id_probes(p, c).await);
    rows.push(nested_repo_probe(p, c).await);
    let r = run("cat /proc/keys", root, c, tmp, short).await;
    let listed = r.out.lines().any(|l| l.contains("keyring") || l.contains("_uid."));
    rows.push(row(
        "read the daemon user's keyrings (/proc/keys)",
        true,
        !listed,
        if listed { "keyrings are listed" } else { "nothing listed" },
    ));
    rows
}

/// A setuid or setgid file left in the project would run with the
/// daemon user's rights for whoever starts it later.
async fn set_id_probes(p: &Probe, c: Option<&Confinement>) -> Vec<ProbeRow> {
    use std::os::unix::fs::PermissionsExt;
    let (root, tmp) = (&p.root, &p.tmp);
    let set_id =
        |name: &str| std::fs::symlink_metadata(root.join(name)).is_ok_and(|m| m.permissions().mode() & 0o6000 != 0);
    let mut rows = Vec::new();
    let r = run("cp /bin/sh ./suid-sh && chmod 6755 ./suid-sh", root, c, tmp, Duration::from_secs(20)).await;
    let made = set_id("suid-sh");
    rows.push(row(
        "chmod a setuid file",
        true,
        !made,
        if made { "the file is setuid".into() } else { first_line(&r.out) },
    ));
    match &p.exe {
        Some(exe) => {
            let line = format!("{} {} create-mode ./suid-new 4755", sh_quote(exe), crate::confine::PROBE_ARG);
            let r = run(&line, root, c, tmp, Duration::from_secs(20)).await;
            let made = set_id("suid-new");
            rows.push(row(
                "create a setuid file",
                true,
                !made,
                if made { "the file is setuid".into() } else { first_line(&r.out) },
            ));
        }
        None => rows.push(skipped("create a setuid file", true, "the daemon's executable is unknown")),
    }
    rows
}

/// A repository a command sets up under the roots: what its configuration
/// and hooks name would run when the user runs git there, outside the
/// sandbox. The guard a session runs after each command undoes it.
async fn nested_repo_probe(p: &Probe, c: Option<&Confinement>) -> ProbeRow {
    let root = &p.root;
    let mut guard = crate::git_guard::Guard::new(std::slice::from_ref(root));
    let spots = guard.find();
    guard.learn(spots);
    let line = "mkdir -p nested/.git/objects nested/.git/refs nested/.git/hooks \
        && echo 'ref: refs/heads/main' > nested/.git/HEAD \
        && printf '[core]\\n\\tfsmonitor = touch ../pwned\\n' > nested/.git/config \
        && printf '#!/bin/sh\\ntouch ../pwned\\n' > nested/.git/hooks/post-checkout \
        && chmod +x nested/.git/hooks/post-checkout && echo made";
    let r = run(line, root, c, &p.tmp, Duration::from_secs(20)).await;
    let spots = guard.find();
    let undone = guard.check(spots);
    let git = root.join("nested/.git");
    let config = std::fs::read_to_string(git.join("config")).unwrap_or_default();
    let left = config.contains("fsmonitor") || git.join("hooks/post-checkout").exists();
    let detail = match (r.out.contains("made"), left) {
        (false, _) => format!("the repository could not be set up: {}", first_line(&r.out)),
        (true, true) => "the setting or hook stayed".to_string(),
        (true, false) => format!("{} undone after the command", undone.len()),
    };
    row(
        "leave a git setting or hook that runs a program in a nested repository",
        true,
        r.out.contains("made") && !left,
        detail,
    )
}
