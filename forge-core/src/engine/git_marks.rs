//! What a merge (or a diff) brings that needs the user's word before it
//! reaches their tree: files that run code later (the same list the file
//! tools ask for, and the repository's own hooks directory), symbolic
//! links out of the repository, and binaries over 1 MiB. A git session's
//! commands write its worktree freely; these are what would then run, or
//! reach, outside the session when the user takes its work.

use forge_proto::git::GitMarked;

/// Binaries past this are marked.
const LARGE_BINARY: u64 = 1024 * 1024;

/// The marks of `brought`, with `hooks_dir` the repository's
/// core.hooksPath (relative to its top) where it sets one.
pub(super) fn marks(brought: &[forge_git::Brought], hooks_dir: Option<&str>) -> Vec<GitMarked> {
    let mut out = Vec::new();
    for b in brought {
        let mark = |why: &str, detail: String| GitMarked { path: b.path.clone(), why: why.into(), detail };
        let in_hooks = hooks_dir.is_some_and(|h| b.path.starts_with(&format!("{h}/")));
        if in_hooks || crate::tools::policy::runs_code_later(&b.path) {
            let what = match in_hooks {
                true => "in the repository's hooks directory (core.hooksPath): git runs it".to_string(),
                false => "runs code later (git, a hook, an agent's settings or a tool reads it)".to_string(),
            };
            out.push(mark("runs_later", what));
        }
        if b.link_leaves_repository() {
            let target = b.link.clone().unwrap_or_default();
            out.push(mark("link_out", format!("a symbolic link out of the repository, to {target}")));
        }
        if b.binary && b.size > LARGE_BINARY {
            out.push(mark("large_binary", format!("a binary of {:.1} MiB", b.size as f64 / (1024.0 * 1024.0))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> forge_git::Brought {
        forge_git::Brought { path: path.into(), link: None, size: 10, binary: false }
    }

    #[test]
    fn hooks_settings_links_out_and_large_binaries_are_marked_but_not_the_state_files() {
        let big = forge_git::Brought { path: "x.bin".into(), link: None, size: 30 << 20, binary: true };
        let link = forge_git::Brought {
            path: "keylink".into(),
            link: Some("/home/u/.ssh/id_ed25519".into()),
            size: 20,
            binary: false,
        };
        let brought = vec![
            file("src/main.rs"),
            file(".githooks/pre-commit"),
            file(".gitattributes"),
            file("tools/hooks/pre-push"),
            file(".forge/sessions/s1.json"),
            big,
            link,
        ];
        let marked = marks(&brought, Some("tools/hooks"));
        let paths: Vec<(&str, &str)> = marked.iter().map(|m| (m.path.as_str(), m.why.as_str())).collect();
        assert_eq!(
            paths,
            [
                (".githooks/pre-commit", "runs_later"),
                (".gitattributes", "runs_later"),
                ("tools/hooks/pre-push", "runs_later"),
                ("x.bin", "large_binary"),
                ("keylink", "link_out"),
            ]
        );
        assert!(marked[4].detail.contains("/home/u/.ssh/id_ed25519") && marked[3].detail.contains("30.0 MiB"));
        assert!(marks(&[file("README.md")], None).is_empty(), "a merge that brings none asks nothing");
    }
}
