//! Git configuration that runs programs: the keys of a repository's
//! `config` that name a program git starts on its own (an fsmonitor, a
//! hooks directory, filters, diff and merge drivers, text conversions,
//! ssh, proxy, askpass, gpg, pager and editor programs, credential
//! helpers, `!` aliases, includes that could bring any of them), found in
//! a config file's text and taken out of it, line by line, leaving the
//! rest as it was.
//!
//! A command may set up a repository anywhere under its roots; the user's
//! own `git status` there (or a shell prompt that runs it) would run what
//! its configuration names, outside the sandbox. What a command leaves is
//! checked against this list (see `guard.rs`).

mod guard;
mod repair;
mod seen;
#[cfg(test)]
mod tests_guard;

pub use guard::{Guard, Spot, Undone, in_bare_git_dir, worth_a_look};

/// Values that switch a program-or-boolean key (`core.fsmonitor`,
/// `pager.<cmd>`) on or off without naming a program.
const BOOLEANS: &[&str] = &["", "true", "false", "yes", "no", "on", "off", "1", "0"];

/// Whether `key` (`section.sub.name` or `section.name`, any case) set to
/// `value` makes git run a program.
pub fn runs_program(key: &str, value: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('.').collect();
    let (section, name) = (parts[0], parts[parts.len() - 1]);
    let sub = parts.len() > 2;
    let v = value.trim().to_ascii_lowercase();
    match (section, sub, name) {
        ("core", false, "fsmonitor") => !BOOLEANS.contains(&v.as_str()),
        (
            "core",
            false,
            "hookspath" | "sshcommand" | "gitproxy" | "askpass" | "editor" | "pager" | "alternaterefscommand",
        ) => true,
        ("sequence", false, "editor") => true,
        ("filter", true, "clean" | "smudge" | "process") => true,
        ("diff", true, "command" | "textconv") => true,
        ("diff", false, "external") => true,
        ("merge", true, "driver") => true,
        ("credential", _, "helper") => true,
        ("gpg", _, "program") => true,
        ("gpg", true, "defaultkeycommand") => true,
        ("pager", _, _) => !BOOLEANS.contains(&v.as_str()),
        // `!cmd` runs a shell; `-c key=value cmd` or `--exec-path=dir cmd`
        // sets anything above for the command it runs.
        ("alias", _, _) => v.starts_with('!') || v.starts_with('-'),
        // Configuration-based hooks (git 2.54).
        ("hook", true, "command") => true,
        ("trailer", true, "command" | "cmd") => true,
        ("sendemail", _, "sendmailcmd") => true,
        ("instaweb", false, "httpd") => true,
        ("guitool", true, "cmd") => true,
        ("remote", true, "vcs") => true,
        // git-lfs, which the user's own filter runs.
        ("lfs", true, "clean" | "smudge" | "path") => true,
        ("include", false, "path") | ("includeif", true, "path") => true,
        ("remote", true, "uploadpack" | "receivepack") => true,
        ("remote", true, "url" | "pushurl") => v.starts_with("ext::"),
        ("url", true, "insteadof" | "pushinsteadof") => v.starts_with("ext::") || lower.contains(".ext::"),
        ("protocol", _, "allow") => v == "always" && (!sub || lower.starts_with("protocol.ext.")),
        ("submodule", true, "update") => v.starts_with('!'),
        ("uploadpack", false, "packobjectshook") => true,
        ("difftool" | "mergetool", true, "cmd" | "path") => true,
        ("web", false, "browser") => true,
        ("browser" | "man", true, "cmd" | "path") => true,
        ("interactive", false, "difffilter") => true,
        ("imap", false, "tunnel") => true,
        ("sendemail", _, "smtpserver") => v.starts_with('/') || v.starts_with('~'),
        ("sendemail", _, "tocmd" | "cccmd" | "headercmd") => true,
        _ => false,
    }
}

/// One key of a config file: its full name, its value as written, and
/// the lines it spans (0-based, end exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
    pub lines: std::ops::Range<usize>,
}

/// The settings of a config file's text, in order. Sections are
/// `[section]`, `[section "sub"]` and the old `[section.sub]`; a value
/// goes on over lines that end in a backslash.
pub fn settings(text: &str) -> Vec<Setting> {
    // git skips a byte-order mark at the start, so must this.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = Vec::new();
    let mut section = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let start = i;
        i += 1;
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut rest = line;
        if let Some(after) = rest.strip_prefix('[') {
            let Some(close) = after.find(']') else { continue };
            section = header(&after[..close]);
            rest = after[close + 1..].trim();
            // A key may follow the header on its line.
            if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
                continue;
            }
        }
        let (name, value) = match rest.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim_end_matches(['\n', '\r']).to_string()),
            None => (rest.trim_end_matches(['\n', '\r']), String::new()),
        };
        let mut value = value;
        // A value continued on the next lines.
        while value.trim_end().ends_with('\\') && i < lines.len() {
            value = format!("{}{}", value.trim_end().trim_end_matches('\\'), lines[i].trim_end_matches(['\n', '\r']));
            i += 1;
        }
        if name.is_empty() || section.is_empty() {
            continue;
        }
        out.push(Setting { key: format!("{section}.{name}"), value: value.trim().to_string(), lines: start..i });
    }
    out
}

/// A section header's name as a key prefix: `core`, `filter.lfs`
/// (`[filter "lfs"]`), `credential.https://x` (`[credential "https://x"]`).
fn header(inside: &str) -> String {
    let inside = inside.trim();
    match inside.split_once(char::is_whitespace) {
        Some((name, sub)) => {
            let sub = sub.trim().trim_matches('"').replace("\\\"", "\"").replace("\\\\", "\\");
            format!("{name}.{sub}")
        }
        None => inside.to_string(),
    }
}

/// The settings of `text` that run programs.
pub fn programs(text: &str) -> Vec<Setting> {
    settings(text).into_iter().filter(|s| runs_program(&s.key, &s.value)).collect()
}

/// `text` without the settings that run programs (their lines, comments
/// and the rest kept), and those settings; `None` when there are none.
pub fn without_programs(text: &str) -> Option<(String, Vec<Setting>)> {
    let found = programs(text);
    if found.is_empty() {
        return None;
    }
    let kept: String = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(i, _)| !found.iter().any(|s| s.lines.contains(i)))
        .map(|(_, l)| l)
        .collect();
    Some((kept, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_that_names_a_program_is_found() {
        let text = r#"[core]
	repositoryformatversion = 0
	fsmonitor = "touch /tmp/x"
	hooksPath = ../evil
[core]
	fsmonitor = false
[filter "lfs"]
	smudge = git-lfs smudge -- %f
	required = true
[diff "pdf"]
	textconv = pdftotext
[merge "ours"]
	driver = true
[credential "https://example.com"]
	helper = store
[gpg]
	program = /tmp/gpg
[gpg "ssh"]
	program = x
[alias]
	st = !sh -c evil
	co = checkout
[include]
	path = ../other.cfg
[includeIf "gitdir:~/src/"]
	path = x.cfg
[remote "origin"]
	url = ext::sh -c evil
	uploadpack = /tmp/up
[pager]
	log = less -R
	diff = false
[core]
	sshCommand = ssh -i key \
	   -o ProxyCommand=evil
	editor = vim
[user]
	name = A
"#;
        let keys: Vec<String> = programs(text).into_iter().map(|s| s.key.to_lowercase()).collect();
        assert_eq!(
            keys,
            [
                "core.fsmonitor",
                "core.hookspath",
                "filter.lfs.smudge",
                "diff.pdf.textconv",
                "merge.ours.driver",
                "credential.https://example.com.helper",
                "gpg.program",
                "gpg.ssh.program",
                "alias.st",
                "include.path",
                "includeif.gitdir:~/src/.path",
                "remote.origin.url",
                "remote.origin.uploadpack",
                "pager.log",
                "core.sshcommand",
                "core.editor",
            ]
        );
    }

    #[test]
    fn taking_them_out_keeps_every_other_line() {
        let text = "[core]\n\tbare = false\n\tfsmonitor = evil \\\n  more\n[user]\n\tname = A # c\n";
        let (kept, found) = without_programs(text).unwrap_or_else(|| panic!("found"));
        assert_eq!(kept, "[core]\n\tbare = false\n[user]\n\tname = A # c\n");
        assert_eq!(found.len(), 1);
        assert!(without_programs(&kept).is_none(), "nothing more to take out");
        assert!(without_programs("[core]\n\tfsmonitor = true\n[alias]\n\tco = checkout\n").is_none());
    }
}
