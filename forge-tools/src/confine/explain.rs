//! What the sandbox refused, told to the model in the tool result.
//!
//! The kernel answers a refused access with a plain `EACCES`; the
//! command's own message names the path ("touch: cannot touch '/etc/x':
//! Permission denied"). Each path in such a message is checked against
//! the policy: only what the policy refuses is reported, with the rule
//! that refused it, so the model can ask to run the command outside the
//! sandbox instead of guessing.

use std::path::{Component, Path, PathBuf};

use super::{NetworkAccess, Policy};

const REFUSALS: &[&str] =
    &["Permission denied", "Operation not permitted", "Read-only file system", "Invalid cross-device link"];
const WRITE_HINTS: &[&str] = &[
    "cannot touch",
    "cannot create",
    "cannot remove",
    "cannot move",
    "cannot make",
    "failed to create",
    "cannot overwrite",
    "for writing",
    "cannot write",
    "cannot link",
    "cannot rename",
    "Read-only file system",
    "hard link",
];
const NETWORK_FAILURES: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No address associated with hostname",
    "failed to lookup address",
    "getaddrinfo",
    "dns error",
];

/// `path` made absolute against `cwd`, `..` and `.` taken out as written.
fn absolute(path: &str, cwd: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    // Where a link leads is what the kernel checked.
    out.canonicalize().ok().or_else(|| Some(out.parent()?.canonicalize().ok()?.join(out.file_name()?))).unwrap_or(out)
}

/// Path-looking words of a message line: quoted ones, and the fields
/// between ": " separators.
fn paths_in(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            found.push(after[..j].to_string());
            rest = &after[j + close.len_utf8()..];
        }
    }
    // "prog: [line 1: ]what PATH: reason": the program is not the path.
    for field in line.split(": ").skip(1) {
        let field = field.trim();
        match field.rsplit_once(' ') {
            // "cannot create PATH", "can't open PATH"
            Some((_, last)) => found.push(last.to_string()),
            None => found.push(field.to_string()),
        }
    }
    found.retain(|p| !p.is_empty() && !p.contains(' ') && (p.contains('/') || p.starts_with('.')));
    found.dedup();
    found
}

/// The refusals `output` shows, in words, one per line; empty when the
/// sandbox refused nothing that can be seen.
pub fn refusals(output: &str, cwd: &Path, policy: &Policy, roots: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let writable = {
        let mut w: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        w.push("the command's $TMPDIR".into());
        w.join(", ")
    };
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("[forge sandbox] refused ") {
            out.push(format!("network: {rest}"));
            continue;
        }
        if !REFUSALS.iter().any(|r| line.contains(r)) {
            continue;
        }
        let writes = WRITE_HINTS.iter().any(|h| line.contains(h));
        for p in paths_in(line) {
            let full = absolute(&p, cwd);
            let guarded = policy.read_only.iter().find(|g| full.starts_with(g));
            let made = policy.absent.iter().find(|g| full.starts_with(g));
            let note = if let Some(g) = guarded {
                let name = g.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let who = if name == ".git" { " (the git tools may change it)" } else { "" };
                format!("write to {}: `{name}` is read-only for commands{who}", full.display())
            } else if let Some(g) = made {
                let name = g.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                format!(
                    "write to {}: commands may not make `{name}` in the project (what it holds would run programs outside the sandbox later); the user can",
                    full.display()
                )
            } else if !policy.may_read(&full) && !writes && full.exists() {
                format!("read of {}: not among the places commands may read", full.display())
            } else if !policy.may_write(&full) && (writes || policy.may_read(&full) || !full.exists()) {
                format!("write to {}: outside the places commands may write ({writable})", full.display())
            } else {
                continue;
            };
            if !out.contains(&note) {
                out.push(note);
            }
        }
    }
    if policy.network == NetworkAccess::Deny && NETWORK_FAILURES.iter().any(|n| output.contains(n)) {
        out.push(
            "network: commands have no network access ([tools.sandbox] network = \"deny\"); only their own loopback works"
                .into(),
        );
    }
    out
}

/// The note added to a command's result when the sandbox refused
/// something, or `None`.
pub fn note(output: &str, cwd: &Path, policy: &Policy, roots: &[PathBuf]) -> Option<String> {
    let found = refusals(output, cwd, policy, roots);
    if found.is_empty() {
        return None;
    }
    let mut text = String::from("\n--- sandbox ---\nThe sandbox refused:\n");
    for f in &found {
        text.push_str(&format!("- {f}\n"));
    }
    text.push_str(
        "If the command needs this, say why and run it again with \"sandbox\": false: the user must approve that.\n",
    );
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(root: &Path) -> Policy {
        let root_text = root.display().to_string();
        let mut p = Policy::of(&["/usr", "/etc"], &[&root_text, "/tmp/forge-cmd-x"]);
        p.read_only = vec![root.join(".git")];
        p.shown = Vec::new();
        p
    }

    #[test]
    fn refused_writes_reads_and_network_are_named_with_their_rule() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let root = d.join("proj");
        std::fs::create_dir_all(d.join("home/.ssh")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("home/.ssh/id_ed25519"), "key").unwrap_or_else(|e| panic!("{e}"));
        let key = d.join("home/.ssh/id_ed25519");
        let out = format!(
            "touch: cannot touch '/etc/forge-x': Permission denied\n\
             cat: {}: Permission denied\n\
             bash: line 1: ../outside/f: Permission denied\n\
             touch: cannot touch '.git/x': Read-only file system\n\
             rm: cannot remove 'src/own': Permission denied\n\
             /bin/sh: 1: cannot create /etc/by-shell: Permission denied\n\
             curl: (6) Could not resolve host: example.com\n",
            key.display()
        );
        let found = refusals(&out, &root, &policy(&root), std::slice::from_ref(&root));
        assert!(found.iter().any(|f| f.starts_with("write to /etc/forge-x: outside")), "{found:?}");
        assert!(found.iter().any(|f| f.starts_with("write to /etc/by-shell: outside")), "{found:?}");
        assert!(!found.iter().any(|f| f.contains("/bin/")), "the program is not a path it was refused: {found:?}");
        assert!(found.iter().any(|f| f.starts_with(&format!("read of {}", key.display()))), "{found:?}");
        assert!(
            found.iter().any(|f| f.starts_with(&format!("write to {}", d.join("outside/f").display()))),
            "{found:?}"
        );
        assert!(found.iter().any(|f| f.contains("/proj/.git/x: `.git` is read-only")), "{found:?}");
        assert!(
            !found.iter().any(|f| f.contains("src/own")),
            "a refusal inside the roots is not the sandbox's: {found:?}"
        );
        assert!(found.iter().any(|f| f.starts_with("network: commands have no network")), "{found:?}");
        assert!(refusals("all good\n", &root, &policy(&root), &[]).is_empty());
    }
}
