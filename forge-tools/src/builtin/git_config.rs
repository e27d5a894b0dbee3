//! What git may run on its own, switched off for the git tools: hooks
//! (unless `[tools.git] run_hooks`), the fsmonitor, a pager, and every
//! program the repository's own configuration names (filters, diff and
//! merge drivers, ssh and gpg programs, editors, credential helpers).
//! A repository's `.git/config` can be written by whatever ran in it
//! before; what it names would otherwise run with the git tools.

/// Keys of the repository's configuration that name programs, and what
/// they are set to instead (`None`: the empty value, which switches the
/// program off).
fn replacement(key: &str) -> Option<Option<&'static str>> {
    let key = key.to_ascii_lowercase();
    let last = key.rsplit('.').next().unwrap_or("");
    let first = key.split('.').next().unwrap_or("");
    let sub = key.split('.').count() == 3;
    Some(match (first, sub, last) {
        ("filter", true, "clean" | "smudge" | "process") => None,
        ("diff", true, "command" | "textconv") => None,
        ("merge", true, "driver") => None,
        ("credential", _, "helper") => None,
        ("core", false, "sshcommand") => Some("ssh"),
        ("core", false, "askpass") => None,
        ("core", false, "editor") => Some("true"),
        ("sequence", false, "editor") => Some("true"),
        ("gpg", _, "program") if key.starts_with("gpg.ssh") => Some("ssh-keygen"),
        ("gpg", _, "program") if key.starts_with("gpg.x509") => Some("gpgsm"),
        ("gpg", _, "program") => Some("gpg"),
        ("gpg", true, "defaultkeycommand") => None,
        _ => return None,
    })
}

/// The `-c` options (and global flags) every git tool call starts with:
/// `local` is the repository's own configuration (`git config --local
/// --includes --list`), `run_hooks` the user's choice.
pub fn overrides(local: &str, run_hooks: bool) -> Vec<String> {
    let mut out: Vec<String> = vec!["--no-pager".into()];
    let mut set = |k: &str, v: &str| {
        out.push("-c".into());
        out.push(format!("{k}={v}"));
    };
    set("core.pager", "cat");
    set("color.ui", "false");
    set("core.fsmonitor", "false");
    if !run_hooks {
        set("core.hooksPath", "/dev/null");
    }
    let mut seen: Vec<String> = Vec::new();
    for line in local.lines() {
        let key = line.split_once('=').map(|(k, _)| k).unwrap_or(line).trim();
        if key.is_empty() || seen.iter().any(|s| s == key) {
            continue;
        }
        if let Some(value) = replacement(key) {
            seen.push(key.to_string());
            set(key, value.unwrap_or(""));
        }
    }
    out
}

/// The hooks directory the repository sets (core.hooksPath), if it is a
/// relative one inside the project.
pub fn hooks_dir(local: &str) -> Option<String> {
    let value = local.lines().rev().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        k.trim().eq_ignore_ascii_case("core.hookspath").then(|| v.trim().to_string())
    })?;
    let p = std::path::Path::new(&value);
    (p.is_relative() && !p.components().any(|c| c == std::path::Component::ParentDir)).then_some(value)
}

/// Flags for the commands that show diffs: no external diff program and
/// no text conversion the repository defines.
pub fn diff_flags(subcommand: &str) -> &'static [&'static str] {
    match subcommand {
        "diff" | "show" | "log" => &["--no-ext-diff", "--no-textconv"],
        "blame" => &["--no-textconv"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_the_repository_names_are_switched_off() {
        let local = "core.repositoryformatversion=0\ncore.fsmonitor=touch /tmp/x\nfilter.lfs.clean=evil\n\
                     filter.x.process=evil\ndiff.pdf.textconv=evil\ncore.sshcommand=evil\ngpg.program=evil\n\
                     gpg.ssh.program=evil\nalias.st=!evil\nuser.name=U\ncore.hookspath=.husky\n";
        let o = overrides(local, false).join(" ");
        for want in [
            "--no-pager",
            "-c core.fsmonitor=false",
            "-c core.hooksPath=/dev/null",
            "-c filter.lfs.clean=",
            "-c filter.x.process=",
            "-c diff.pdf.textconv=",
            "-c core.sshcommand=ssh",
            "-c gpg.program=gpg",
            "-c gpg.ssh.program=ssh-keygen",
        ] {
            assert!(o.contains(want), "{want} in {o}");
        }
        assert!(!o.contains("user.name") && !o.contains("alias"), "{o}");
        assert!(!overrides(local, true).join(" ").contains("hooksPath"), "hooks run when asked");
        assert_eq!(hooks_dir(local).as_deref(), Some(".husky"));
        assert_eq!(hooks_dir("core.hookspath=/etc/hooks\n"), None);
        assert_eq!(hooks_dir("core.hookspath=../x\n"), None);
    }
}
