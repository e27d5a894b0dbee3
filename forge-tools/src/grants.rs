//! Tools a command of one's own lets its turn run without asking: the
//! `allowed-tools` of its front matter, in Claude Code's words (`Bash(git
//! add:*)`, `Read`, `mcp__server__tool`) or Forge's (`run_command(git
//! status)`, `read_file`, `server__tool`, `server__*`).
//!
//! A grant never widens what the denylist refuses or a call that leaves
//! the sandbox, and a command grant matches one plain command only: text
//! that chains, pipes, redirects or substitutes is not `git add …`.

use serde_json::Value;

/// One entry of `allowed-tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The Forge tool it names (`server__*`: every tool of the server).
    pub tool: String,
    /// For `run_command`: the command allowed (`Some((prefix, true))` for
    /// `prefix:*`, a whole command otherwise); `None`: any call.
    pub command: Option<(String, bool)>,
}

/// Claude Code's tool names, as Forge's.
pub fn forge_name(name: &str) -> String {
    match name {
        "Bash" => "run_command".into(),
        "Read" => "read_file".into(),
        "Write" => "write_file".into(),
        "Edit" | "MultiEdit" => "edit".into(),
        "Glob" => "glob".into(),
        "Grep" => "search".into(),
        "WebFetch" => "web_fetch".into(),
        "TodoWrite" => "update_plan".into(),
        other => match other.strip_prefix("mcp__").and_then(|r| r.split_once("__")) {
            Some((server, tool)) => format!("{server}__{tool}"),
            // `mcp__server` alone: all of its tools.
            None => match other.strip_prefix("mcp__") {
                Some(server) => format!("{server}__*"),
                None => other.into(),
            },
        },
    }
}

impl Grant {
    /// One entry; `None` for one Forge cannot honour exactly (a path
    /// pattern on a file tool, say), which then grants nothing.
    pub fn parse(entry: &str) -> Option<Grant> {
        let entry = entry.trim();
        let (name, spec) = match entry.split_once('(') {
            Some((name, rest)) => (name.trim(), Some(rest.strip_suffix(')')?.trim())),
            None => (entry, None),
        };
        if name.is_empty() {
            return None;
        }
        let tool = forge_name(name);
        let command = match spec {
            None | Some("*") | Some("") => None,
            Some(spec) if tool == "run_command" => Some(match spec.strip_suffix(":*") {
                Some(prefix) => (prefix.trim().to_string(), true),
                None => (spec.to_string(), false),
            }),
            Some(_) => return None,
        };
        Some(Grant { tool, command })
    }

    /// Whether this grant covers a call of `tool` with `args`.
    pub fn allows(&self, tool: &str, args: Option<&Value>) -> bool {
        let named = self.tool == tool
            || self
                .tool
                .strip_suffix("__*")
                .is_some_and(|server| tool.strip_prefix(server).is_some_and(|r| r.starts_with("__")));
        if !named {
            return false;
        }
        let Some((allowed, prefix)) = &self.command else { return true };
        let Some(command) = args.and_then(|a| a.get("command")).and_then(Value::as_str) else { return false };
        let command = command.trim();
        if command.chars().any(|c| matches!(c, ';' | '&' | '|' | '`' | '$' | '>' | '<' | '\n' | '\r' | '(' | ')')) {
            return false;
        }
        match prefix {
            true => {
                command == allowed
                    || command.strip_prefix(allowed.as_str()).is_some_and(|rest| rest.starts_with(char::is_whitespace))
            }
            false => command == allowed,
        }
    }
}

/// `allowed-tools` as grants (entries Forge cannot honour are left out).
pub fn parse_all(entries: &[String]) -> Vec<Grant> {
    entries.iter().filter_map(|e| Grant::parse(e)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmd(c: &str) -> Value {
        json!({ "command": c })
    }

    #[test]
    fn claude_codes_names_and_forges_both_work() {
        let g = parse_all(&["Bash(git add:*)".into(), "Read".into(), "mcp__gh__list_prs".into(), "docs__*".into()]);
        assert_eq!(g[0], Grant { tool: "run_command".into(), command: Some(("git add".into(), true)) });
        assert!(g[1].allows("read_file", None));
        assert!(g[2].allows("gh__list_prs", None) && !g[2].allows("gh__merge", None));
        assert!(g[3].allows("docs__search", None) && !g[3].allows("docsx__search", None));
        assert_eq!(Grant::parse("Read(src/**)"), None, "a path pattern grants nothing");
        assert_eq!(Grant::parse("Bash(git status"), None);
    }

    #[test]
    fn a_command_grant_covers_that_command_alone() {
        let add = Grant::parse("Bash(git add:*)").unwrap_or_else(|| panic!("parse"));
        assert!(add.allows("run_command", Some(&cmd("git add src/a.rs"))));
        assert!(add.allows("run_command", Some(&cmd("git add"))));
        assert!(!add.allows("run_command", Some(&cmd("git addx"))));
        assert!(!add.allows("run_command", Some(&cmd("git add . && rm -rf ~"))));
        assert!(!add.allows("run_command", Some(&cmd("git add $(cat list)"))));
        assert!(!add.allows("run_command", Some(&cmd("git add a > /etc/x"))));
        assert!(!add.allows("run_command", Some(&cmd("git add a\nrm b"))));
        assert!(!add.allows("write_file", Some(&cmd("git add a"))));
        let status = Grant::parse("run_command(git status)").unwrap_or_else(|| panic!("parse"));
        assert!(status.allows("run_command", Some(&cmd(" git status "))));
        assert!(!status.allows("run_command", Some(&cmd("git status -s"))));
        assert!(Grant::parse("Bash").is_some_and(|g| g.allows("run_command", Some(&cmd("make; make install")))));
    }
}
