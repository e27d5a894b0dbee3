//! `forgectl doctor`: what holds on this machine and what does not, each
//! missing piece with its cause and the fix (the kernel, user namespaces
//! and an AppArmor profile for `forged`, totals and `daemon install`,
//! hooks that cannot run).

use forge_client::ForgeClient;
use forge_proto::SandboxStatus;
use serde::Serialize;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

/// Exit status when something is missing.
const MISSING: u8 = 1;

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    ok: bool,
    detail: String,
    /// What to do, where something is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// The AppArmor profile that lets `forged` make user namespaces where
/// Ubuntu restricts them (`kernel.apparmor_restrict_unprivileged_userns`).
pub fn apparmor_profile(forged: &str) -> String {
    format!(
        "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile forged {forged} flags=(unconfined) {{\n  userns,\n\n  \
         include if exists <local/forged>\n}}\n"
    )
}

/// How to allow user namespaces, from the daemon's reason (which names
/// the setting that refuses them).
fn userns_fix(reason: &str, forged: &str) -> String {
    if reason.contains("apparmor_restrict_unprivileged_userns") {
        return format!(
            "allow them for forged alone: save this profile as /etc/apparmor.d/forged, then run \
             `sudo apparmor_parser -r /etc/apparmor.d/forged` and `forgectl shutdown`:\n\n{}",
            apparmor_profile(forged)
        );
    }
    if reason.contains("max_user_namespaces") {
        return "`sudo sysctl user.max_user_namespaces=15000` (and the same line in /etc/sysctl.d/forge.conf), then \
                `forgectl shutdown`"
            .into();
    }
    if reason.contains("unprivileged_userns_clone") {
        return "`sudo sysctl kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d/forge.conf), then \
                `forgectl shutdown`"
            .into();
    }
    "run forged where unprivileged user namespaces are allowed; until then every command asks first".into()
}

fn sandbox_checks(s: &SandboxStatus, forged: &str) -> Vec<Check> {
    let mut out = Vec::new();
    let kernel = &s.kernel;
    match s.mode.as_str() {
        "kernel" => out.push(Check {
            check: "sandbox",
            ok: true,
            detail: format!(
                "commands run confined, without asking (Linux {kernel}): {}",
                s.confined_by.as_deref().unwrap_or("by the kernel")
            ),
            fix: None,
        }),
        "paths-only" => out.push(Check {
            check: "sandbox",
            ok: false,
            detail: "[tools.sandbox] mode = \"paths-only\": commands are not confined, every one asks".into(),
            fix: Some("remove `mode = \"paths-only\"` from [tools.sandbox] in config.toml".into()),
        }),
        _ if !s.user_namespaces => {
            let reason = s.reason.clone().unwrap_or_default();
            out.push(Check {
                check: "sandbox",
                ok: false,
                detail: format!("commands are not confined (Linux {kernel}): {reason}"),
                fix: Some(userns_fix(&reason, forged)),
            });
        }
        _ => out.push(Check {
            check: "sandbox",
            ok: false,
            detail: s.reason.clone().unwrap_or_else(|| "commands are not confined".into()),
            fix: None,
        }),
    }
    if s.mode == "kernel" && s.landlock_abi < 3 {
        out.push(Check {
            check: "landlock",
            ok: true,
            detail: format!(
                "Landlock ABI {} (Linux {kernel}): a mount namespace carries the file boundary; Linux 6.2 or \
                 later adds Landlock's own rules on top",
                s.landlock_abi
            ),
            fix: None,
        });
    }
    if s.network == "deny" || s.network == "allow" || s.landlock_abi >= 4 {
        out.push(Check { check: "network", ok: true, detail: format!("network = \"{}\"", s.network), fix: None });
    } else {
        out.push(Check {
            check: "network",
            ok: false,
            detail: "network = \"localhost\" needs Landlock ABI 4 (Linux 6.7): commands get no network".into(),
            fix: Some("a newer kernel, or network = \"deny\" / \"allow\"".into()),
        });
    }
    if !s.refused_toolchains.is_empty() {
        out.push(Check {
            check: "toolchain",
            ok: false,
            detail: format!(
                "not readable by commands, as they lead to your home or above it: {}",
                s.refused_toolchains.join(", ")
            ),
            fix: Some(
                "make each a directory of its own (not a link to ~), or name what commands need in \
                 [tools.sandbox] read_roots"
                    .into(),
            ),
        });
    }
    let bounded = s.processes_bounded && s.memory_bounded;
    out.push(Check {
        check: "totals",
        ok: bounded,
        detail: if bounded {
            format!("each command's processes and memory are bounded in all: {}", s.totals)
        } else {
            format!("each command's processes and memory are NOT bounded in all: {}", s.totals)
        },
        fix: (!bounded).then(|| {
            "`forgectl shutdown && forgectl daemon install`: the systemd user service gives forged a delegated \
             cgroup (on cgroup v1, the pids and memory hierarchies must be writable by you)"
                .into()
        }),
    });
    out
}

/// How rewind learns what commands change: the kernel's notes on every
/// directory of a session's tree, within the user's inotify limit (Forge
/// takes at most three quarters); a bigger tree is scanned around each
/// command, which costs about half a second per 100,000 files.
fn rewind_check(max_watches: Option<u64>) -> Check {
    const LOW: u64 = 65_536;
    match max_watches {
        Some(n) => Check {
            check: "rewind",
            ok: true,
            detail: format!(
                "the kernel names what commands change (inotify) in trees of up to about {} directories \
                 (fs.inotify.max_user_watches = {n}); bigger trees are scanned around each command",
                n * 3 / 4
            ),
            fix: (n < LOW).then(|| {
                "for big repositories: sudo sysctl fs.inotify.max_user_watches=524288 \
                 (and a line in /etc/sysctl.d/ to keep it)"
                    .into()
            }),
        },
        None => Check {
            check: "rewind",
            ok: true,
            detail: "no inotify limit to read here: commands' changes are found by scanning the tree".into(),
            fix: None,
        },
    }
}

pub async fn run(g: &Global) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let status = conn.client.daemon_status(()).await?;
    let forged = forge_client::autostart::forged_binary();
    let forged = forged.canonicalize().unwrap_or(forged).display().to_string();
    let mut checks = vec![Check {
        check: "daemon",
        ok: true,
        detail: format!("forged {} (pid {}) on {}, home {}", status.version, status.pid, status.socket, status.home),
        fix: None,
    }];
    match &status.sandbox {
        Some(s) => checks.extend(sandbox_checks(s, &forged)),
        None => checks.push(Check {
            check: "sandbox",
            ok: false,
            detail: "this forged does not report its sandbox".into(),
            fix: Some("upgrade forged".into()),
        }),
    }
    checks.push(rewind_check(
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").ok().and_then(|s| s.trim().parse().ok()),
    ));
    // The configuration's warnings (hooks that cannot run, guards
    // without fail_closed), from the daemon binary's own check.
    if let Ok(out) = std::process::Command::new(forge_client::autostart::forged_binary()).arg("--check-config").output()
    {
        let err = String::from_utf8_lossy(&out.stderr);
        let warnings: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("warning: ")).collect();
        checks.push(Check {
            check: "config",
            ok: out.status.success() && warnings.is_empty(),
            detail: match (out.status.success(), warnings.is_empty()) {
                (false, _) => err.trim().trim_start_matches("forged: ").to_string(),
                (true, true) => "config.toml is valid".into(),
                (true, false) => warnings.join("\n"),
            },
            fix: (!out.status.success() || !warnings.is_empty()).then(|| "see `forgectl config check`".into()),
        });
    }
    let missing = checks.iter().filter(|c| !c.ok).count();
    if g.json {
        for c in &checks {
            json_line(c);
        }
    } else {
        for c in &checks {
            outln!("{:8} {:3}  {}", c.check, if c.ok { "ok" } else { "NO" }, c.detail);
            if let Some(fix) = &c.fix {
                for (i, line) in fix.lines().enumerate() {
                    outln!("{:13}{}{line}", "", if i == 0 { "fix: " } else { "     " });
                }
            }
        }
        outln!();
        if missing == 0 {
            outln!("everything holds");
        } else {
            outln!("{missing} thing(s) missing: each says how to fix it");
        }
    }
    if missing > 0 {
        return Err(Failure::silent(MISSING));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_toolchain_that_leads_to_the_home_is_named_with_what_to_do() {
        let status = forge_proto::SandboxStatus {
            mode: "kernel".into(),
            landlock_abi: 6,
            user_namespaces: true,
            network: "deny".into(),
            max_memory_mb: 1,
            max_processes: 1,
            max_cpu_seconds: 1,
            processes_bounded: true,
            memory_bounded: true,
            totals: String::new(),
            confined_by: None,
            kernel: "6.18".into(),
            reason: None,
            refused_toolchains: vec!["/home/u/.cargo".into()],
        };
        let checks = super::sandbox_checks(&status, "forged");
        let line = checks.iter().find(|c| c.check == "toolchain").unwrap_or_else(|| panic!("no toolchain line"));
        assert!(!line.ok && line.detail.contains("/home/u/.cargo") && line.fix.is_some(), "{}", line.detail);
        let fine = forge_proto::SandboxStatus { refused_toolchains: Vec::new(), ..status };
        assert!(super::sandbox_checks(&fine, "forged").iter().all(|c| c.check != "toolchain"));
    }

    #[test]
    fn the_rewind_line_says_how_big_a_tree_the_kernel_watches_and_how_to_raise_it() {
        let low = super::rewind_check(Some(8192));
        assert!(low.ok && low.detail.contains("6144 directories"), "{}", low.detail);
        assert!(low.fix.as_deref().is_some_and(|f| f.contains("fs.inotify.max_user_watches=")));
        assert!(super::rewind_check(Some(1_048_576)).fix.is_none());
        assert!(super::rewind_check(None).detail.contains("scanning"));
    }

    use super::*;

    #[test]
    fn the_apparmor_profile_names_forged_and_allows_user_namespaces() {
        let p = apparmor_profile("/usr/local/bin/forged");
        assert!(p.contains("profile forged /usr/local/bin/forged flags=(unconfined)"));
        assert!(p.contains("  userns,"));
    }
}
