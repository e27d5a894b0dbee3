//! Whether a hook runs confined, decided by what it can reach rather than
//! by its words: a program a confined command could have written (a
//! Makefile's recipe, `package.json`'s scripts, a module, a script in the
//! project) must never run with more than a command's reach, whoever
//! starts it. A project's hooks always run confined. A user's hook runs
//! confined when it works in the roots (as hooks do: their working
//! directory is the session's) or its command reaches into them (a
//! relative path, `$CLAUDE_PROJECT_DIR`, a `cd`), unless it says
//! `sandbox = false`; with `sandbox = true`, always. A confined user hook
//! also reads its own program wherever it lives and may append to files
//! in `~/.claude` and Forge's home (see `forge_tools::confine::HookReach`).

use std::path::{Path, PathBuf};

use crate::tools::Sandbox;
use forge_tools::confine::HookReach;

/// Whose settings a hook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// `config.toml` or the user's `~/.claude/settings.json`.
    User,
    /// A trusted project's `.claude/settings*.json`.
    Project,
}

/// How one run of a hook is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Confinement {
    /// With the user's permissions (`sandbox = false`, or nothing of the
    /// roots in reach).
    Unconfined,
    /// A command's sandbox exactly: a project's hook.
    Command,
    /// A command's sandbox plus what a user's hook needs of its own.
    UserHook(HookReach),
}

/// The variables hooks get that name the project.
const PROJECT_VARS: &[&str] = &["$CLAUDE_PROJECT_DIR", "${CLAUDE_PROJECT_DIR}"];

/// The words of `command`, split where the shell would split them
/// (roughly: quotes and operators are separators; no expansion).
fn words(command: &str) -> impl Iterator<Item = String> + '_ {
    command
        .split(|c: char| c.is_whitespace() || ";&|()<>`".contains(c))
        .map(|w| w.replace(['\'', '"'], ""))
        .filter(|w| !w.is_empty())
}

/// `word` as a path, if it is one: `~/` against `home`, the project's
/// variable against `cwd`, an absolute path, or a relative one with a
/// `/` in it (or naming a file that exists) against `cwd`.
fn as_path(word: &str, cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let word = word.trim_start_matches(['=', '@']);
    if let Some(rest) = word.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    for var in PROJECT_VARS {
        if let Some(rest) = word.strip_prefix(var) {
            return Some(cwd.join(rest.trim_start_matches('/')));
        }
    }
    if word.starts_with('$') || word.starts_with('-') {
        return None;
    }
    let p = Path::new(word);
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    let relative = cwd.join(p);
    (word.contains('/') || relative.exists()).then_some(relative)
}

/// `path` with `..` taken away lexically and links resolved where it
/// exists.
fn real(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| forge_tools::lexical::lexical(path))
}

/// Whether a hook running `command` in `cwd` reaches into `roots`.
fn reaches_roots(command: &str, cwd: &Path, roots: &[PathBuf], home: Option<&Path>) -> bool {
    let inside = |p: &Path| roots.iter().any(|r| real(p).starts_with(r));
    inside(cwd)
        || PROJECT_VARS.iter().any(|v| command.contains(v))
        || words(command).any(|w| w == "cd" || w == "pushd")
        || words(command).filter_map(|w| as_path(&w, cwd, home)).any(|p| inside(&p))
}

/// The files `command` runs or reads as its program: every word that is
/// a file (`~/.claude/hooks/log.sh`, `/opt/x/guard`,
/// `"$CLAUDE_PROJECT_DIR"/scripts/lint.sh`), and its first word as `PATH`
/// finds it (`guard.sh` in `~/bin`).
fn programs(command: &str, cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        let p = real(&p);
        if p.is_file() && !out.contains(&p) {
            out.push(p);
        }
    };
    for w in words(command) {
        if let Some(p) = as_path(&w, cwd, home) {
            add(p);
        }
    }
    if let Some(first) = words(command).next().filter(|w| !w.contains('/') && !w.starts_with('$'))
        && let Some(path) = std::env::var_os("PATH")
        && let Some(found) = std::env::split_paths(&path).map(|d| d.join(&first)).find(|p| p.is_file())
    {
        add(found);
    }
    out
}

/// How a hook from `origin`, with its `sandbox` setting and own
/// `write_roots`, runs `command` in the session's `sandbox`.
pub(super) fn confinement(
    origin: Origin,
    setting: Option<bool>,
    write_roots: &[String],
    command: &str,
    sandbox: &Sandbox,
    home: Option<&Path>,
) -> Confinement {
    let reach = || HookReach { programs: programs(command, sandbox.cwd(), home), write_roots: write_roots.to_vec() };
    match (origin, setting) {
        (Origin::Project, _) => Confinement::Command,
        (Origin::User, Some(false)) => Confinement::Unconfined,
        (Origin::User, Some(true)) => Confinement::UserHook(reach()),
        (Origin::User, None) if reaches_roots(command, sandbox.cwd(), sandbox.roots(), home) => {
            Confinement::UserHook(reach())
        }
        (Origin::User, None) => Confinement::Unconfined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let (home, proj) = (d.join("home"), d.join("proj"));
        for p in [home.join(".claude/hooks"), home.join("bin"), proj.join("scripts"), proj.join("sub")] {
            std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{e}"));
        }
        for f in [home.join(".claude/hooks/log.sh"), home.join("bin/guard.sh"), proj.join("scripts/lint.sh")] {
            std::fs::write(f, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        }
        (dir, home, proj)
    }

    #[test]
    fn the_five_forms_that_run_project_code_are_confined_and_sandbox_false_is_not() {
        let (_dir, home, proj) = setup();
        let sandbox = Sandbox::new(&proj, &[], &[], true, false);
        for command in [
            "make -s fmt",
            "npm run -s lint",
            "python3 -m tools.lint",
            "cd sub && ./fmt.sh",
            "\"$CLAUDE_PROJECT_DIR\"/scripts/lint.sh",
            "~/.claude/hooks/log.sh",
        ] {
            let c = confinement(Origin::User, None, &[], command, &sandbox, Some(&home));
            assert!(matches!(c, Confinement::UserHook(_)), "{command}: {c:?}");
        }
        let off = confinement(Origin::User, Some(false), &[], "make -s fmt", &sandbox, Some(&home));
        assert_eq!(off, Confinement::Unconfined, "sandbox = false is the user's way out");
        let project = confinement(Origin::Project, Some(false), &[], "x", &sandbox, Some(&home));
        assert_eq!(project, Confinement::Command, "a project's hook is always confined");
        // A session whose roots leave its directory out: a hook that only
        // reaches outside them runs as the user.
        let narrow = Sandbox::new(&proj, &["scripts".into()], &[], true, false);
        assert_eq!(confinement(Origin::User, None, &[], "date", &narrow, Some(&home)), Confinement::Unconfined);
        let into = confinement(Origin::User, None, &[], "sh scripts/lint.sh", &narrow, Some(&home));
        assert!(matches!(into, Confinement::UserHook(_)), "a relative path into the roots: {into:?}");
    }

    #[test]
    fn a_hook_reads_its_own_program_wherever_it_lives() {
        let (_dir, home, proj) = setup();
        let found = programs("~/.claude/hooks/log.sh --quiet", &proj, Some(&home));
        assert_eq!(found, vec![home.join(".claude/hooks/log.sh")]);
        let found = programs("\"$CLAUDE_PROJECT_DIR\"/scripts/lint.sh", &proj, Some(&home));
        assert_eq!(found, vec![proj.join("scripts/lint.sh")]);
        let found = programs(&format!("{} check", home.join("bin/guard.sh").display()), &proj, Some(&home));
        assert_eq!(found, vec![home.join("bin/guard.sh")]);
        assert!(programs("jq -r .tool_input.command", &proj, Some(&home)).iter().all(|p| !p.starts_with(&home)));
    }
}
