//! git's hooks directory as the user's git sees it: `core.hooksPath` from
//! any configuration git reads (system, global, the repository's, the
//! worktree's), asked of git itself before every command so that a setting
//! the user adds mid-session counts. Where it lies inside the roots (a
//! project's `.githooks`, husky's `.husky/_`), a command sees it
//! read-only, as it sees `.git`: what it planted there would run at the
//! user's next `git commit`, outside any sandbox.

use std::path::{Component, Path, PathBuf};

/// The hooks directory of the repository each root is in, where git
/// names one (absolute, as git resolves it).
pub(super) fn hooks_dirs(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        let mut git = std::process::Command::new("git");
        git.arg("-C").arg(root).args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"]);
        // The daemon's own environment must not point git elsewhere.
        for var in
            ["GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS"]
        {
            git.env_remove(var);
        }
        let Ok(done) = git.stdin(std::process::Stdio::null()).stderr(std::process::Stdio::null()).output() else {
            continue;
        };
        let Ok(text) = String::from_utf8(done.stdout) else { continue };
        let dir = PathBuf::from(text.trim_end_matches(['\n', '\r']));
        if done.status.success() && dir.is_absolute() && !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// `path` with its existing part resolved (links followed) and the rest
/// joined lexically: where it is, or would be once made.
fn resolved(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(|n| n.to_os_string()) else { break };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let mut out = existing.canonicalize().unwrap_or(existing);
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

/// Of the hooks directories `dirs`, those inside `roots`: `(read_only,
/// absent)`, the first to be bound read-only, the second held by an empty
/// placeholder (the first missing component of a directory that does not
/// exist yet, so nothing can be made under it).
pub(super) fn in_roots(dirs: &[PathBuf], roots: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut read_only, mut absent) = (Vec::new(), Vec::new());
    for dir in dirs {
        if dir.components().any(|c| c == Component::ParentDir) {
            continue;
        }
        let dir = resolved(dir);
        let Some(root) = roots.iter().find(|r| dir.starts_with(r) && dir != **r) else { continue };
        if std::fs::symlink_metadata(&dir).is_ok() {
            read_only.push(dir);
            continue;
        }
        // The first missing component below the root.
        let mut first = root.clone();
        for c in dir.strip_prefix(root).into_iter().flat_map(Path::components) {
            first.push(c);
            if std::fs::symlink_metadata(&first).is_err() {
                break;
            }
        }
        if !absent.contains(&first) {
            absent.push(first);
        }
    }
    (read_only, absent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok =
            std::process::Command::new("git").arg("-C").arg(dir).args(args).output().is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_hooks_path_in_the_roots_is_found_read_only_or_held_where_missing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        git(&d, &["init", "-q"]);
        let roots = vec![d.clone()];
        let found = hooks_dirs(&roots);
        assert_eq!(found, vec![d.join(".git/hooks")], "git's default");
        git(&d, &["config", "core.hooksPath", ".husky/_"]);
        let found = hooks_dirs(&roots);
        assert_eq!(found, vec![d.join(".husky/_")]);
        assert_eq!(in_roots(&found, &roots), (Vec::new(), vec![d.join(".husky")]), "held at its first missing part");
        std::fs::create_dir_all(d.join(".husky")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(in_roots(&found, &roots), (Vec::new(), vec![d.join(".husky/_")]));
        std::fs::create_dir_all(d.join(".husky/_")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(in_roots(&found, &roots), (vec![d.join(".husky/_")], Vec::new()));
        git(&d, &["config", "core.hooksPath", "/etc/hooks-elsewhere"]);
        assert_eq!(in_roots(&hooks_dirs(&roots), &roots), (Vec::new(), Vec::new()), "outside the roots: not ours");
        let plain = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(hooks_dirs(&[plain.path().to_path_buf()]).iter().all(|h| !h.starts_with(plain.path())));
    }
}
