//! Commands of one's own: Markdown files whose text becomes the message
//! when a user sends `/name args`, as Claude Code, Codex and gemini-cli
//! have them. Read from `$XDG_CONFIG_HOME/forge/commands/` (or
//! `~/.config/forge/commands/`: the user's) and, in a folder the user
//! trusts, the project's `.claude/commands/` and `.forge/commands/` (a
//! project's command of the same name wins). A file in a subdirectory is
//! `/dir:name`.
//!
//! Front matter (`description`, `argument-hint`, `model`, `allowed-tools`)
//! is read (the last two apply to the turn the command starts, see the
//! machine's `grants.rs`); the body is the prompt, with `$ARGUMENTS` (all the arguments)
//! and `$1`…`$9` (each, split on white space) filled in.

use std::path::{Path, PathBuf};

use forge_proto::CommandInfo;

/// The largest command file read.
const MAX_BYTES: u64 = 256 * 1024;
/// The most commands read from one directory.
const MAX_COMMANDS: usize = 500;

/// One command file.
#[derive(Debug, Clone, PartialEq)]
pub struct SlashCommand {
    pub info: CommandInfo,
    pub body: String,
}

/// The user's own `kind` directory (`commands`, `agents`) in Forge's
/// configuration directory.
pub(crate) fn user_dir(kind: &str) -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("forge").join(kind))
}

/// The commands a session in `cwd` has: the user's, then (when `trusted`)
/// the project's, by name (a later one of the same name wins).
pub fn load(cwd: &Path, trusted: bool) -> Vec<SlashCommand> {
    let mut dirs: Vec<(PathBuf, &str)> = user_dir("commands").into_iter().map(|d| (d, "user")).collect();
    if trusted {
        dirs.push((cwd.join(".claude/commands"), "project"));
        dirs.push((cwd.join(".forge/commands"), "project"));
    }
    let mut all: Vec<SlashCommand> = Vec::new();
    for (dir, source) in dirs {
        for c in read_dir(&dir, source) {
            all.retain(|o| o.info.name != c.info.name);
            all.push(c);
        }
    }
    all.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    all
}

fn read_dir(dir: &Path, source: &str) -> Vec<SlashCommand> {
    let mut out = Vec::new();
    let mut visit = |path: &Path, prefix: Option<&str>| {
        let Ok(entries) = std::fs::read_dir(path) else { return Vec::new() };
        let mut subdirs = Vec::new();
        for e in entries.flatten().take(MAX_COMMANDS) {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            if meta.is_dir() && prefix.is_none() {
                subdirs.push((p, stem));
                continue;
            }
            let is_md = p.extension().is_some_and(|x| x == "md");
            if !meta.is_file() || !is_md || meta.len() > MAX_BYTES || !valid_name(&stem) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else { continue };
            let name = match prefix {
                Some(dir) => format!("{dir}:{stem}"),
                None => stem,
            };
            out.push(parse(&name, &text, source));
        }
        subdirs
    };
    for (sub, name) in visit(dir, None) {
        if valid_name(&name) {
            visit(&sub, Some(&name));
        }
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A command file's front matter and body.
pub fn parse(name: &str, text: &str, source: &str) -> SlashCommand {
    let mut info = CommandInfo {
        name: name.to_string(),
        description: String::new(),
        argument_hint: None,
        model: None,
        allowed_tools: Vec::new(),
        source: source.to_string(),
    };
    let (fields, body) = front_matter(text);
    for (k, v) in fields {
        match k {
            "description" => info.description = v,
            "argument-hint" => info.argument_hint = Some(v).filter(|v| !v.is_empty()),
            "model" => info.model = Some(v).filter(|v| !v.is_empty()),
            "allowed-tools" => info.allowed_tools = list(&v),
            _ => {}
        }
    }
    if info.description.is_empty() {
        info.description = first_line(body);
    }
    SlashCommand { info, body: body.to_string() }
}

/// A Markdown file's front matter (`key: value` lines between `---`
/// lines, quotes taken off) and its body.
pub(crate) fn front_matter(text: &str) -> (Vec<(&str, String)>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return (Vec::new(), text);
    };
    let Some(end) = rest.find("\n---") else { return (Vec::new(), text) };
    let unquote = |v: &str| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
    let mut fields: Vec<(&str, String)> = Vec::new();
    for line in rest[..end].lines() {
        // A YAML list's items (`  - Read`) join the key above them.
        if let Some(item) = line.trim_start().strip_prefix("- ")
            && line.starts_with([' ', '\t', '-'])
            && let Some((_, v)) = fields.last_mut()
        {
            if !v.is_empty() {
                v.push_str(", ");
            }
            v.push_str(&unquote(item));
            continue;
        }
        let Some((k, v)) = line.split_once(':') else { continue };
        // `[Read, Grep]`: a flow list.
        let v = v.trim();
        let v = v.strip_prefix('[').and_then(|v| v.strip_suffix(']')).unwrap_or(v);
        fields.push((k.trim(), v.split(',').map(unquote).collect::<Vec<_>>().join(", ")));
    }
    (fields, rest[end + 4..].trim_start_matches(['-']).trim_start_matches(['\r', '\n']))
}

/// A comma-separated front matter list (`Read, Grep`).
pub(crate) fn list(v: &str) -> Vec<String> {
    v.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
}

/// A body's first line, for a description none was given for.
pub(crate) fn first_line(body: &str) -> String {
    body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").chars().take(80).collect()
}

impl SlashCommand {
    /// The prompt for `args`: `$ARGUMENTS` and `$1`…`$9` filled in (a body
    /// that uses neither gets the arguments after it).
    pub fn expand(&self, args: &str) -> String {
        let args = args.trim();
        let words: Vec<&str> = args.split_whitespace().collect();
        let uses = self.body.contains("$ARGUMENTS") || (1..=9).any(|i| self.body.contains(&format!("${i}")));
        let mut out = self.body.replace("$ARGUMENTS", args);
        // From $9 down, so $1 does not eat the start of $10-like text.
        for i in (1..=9).rev() {
            out = out.replace(&format!("${i}"), words.get(i - 1).copied().unwrap_or(""));
        }
        if !uses && !args.is_empty() {
            out = format!("{}\n\n{args}", out.trim_end());
        }
        out.trim().to_string()
    }
}

/// The name of the project command `text` would run in `cwd` were the
/// folder trusted (it is not: the text goes to the model as it is).
pub fn untrusted_project_command(cwd: &Path, text: &str) -> Option<String> {
    let all = load(cwd, true);
    expand(&all, text).filter(|(_, c)| c.info.source == "project").map(|(_, c)| c.info.name.clone())
}

/// `/name args` as a command of `commands`, expanded, with the command;
/// `None` when the text names none of them.
pub fn expand<'a>(commands: &'a [SlashCommand], text: &str) -> Option<(String, &'a SlashCommand)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let c = commands.iter().find(|c| c.info.name == name)?;
    Some((c.expand(args), c))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REVIEW: &str = "---\ndescription: Review code\nargument-hint: <path>\nallowed-tools: read_file, search\n---\nReview the code in $ARGUMENTS (first: $1).\n";

    #[test]
    fn front_matter_is_read_and_arguments_filled_in() {
        let c = parse("review", REVIEW, "project");
        assert_eq!(c.info.description, "Review code");
        assert_eq!(c.info.argument_hint.as_deref(), Some("<path>"));
        assert_eq!(c.info.allowed_tools, ["read_file", "search"]);
        assert_eq!(c.expand("src/ lib/"), "Review the code in src/ lib/ (first: src/).");
        let plain = parse("hi", "Say hello.", "user");
        assert_eq!(plain.info.description, "Say hello.");
        assert_eq!(plain.expand("to Bob"), "Say hello.\n\nto Bob");
        assert_eq!(
            expand(std::slice::from_ref(&c), "/review src/").map(|(text, _)| text).as_deref(),
            Some("Review the code in src/ (first: src/).")
        );
        assert_eq!(expand(&[c], "/etc/hosts is broken"), None, "a path is not a command");
    }

    #[test]
    fn project_commands_only_in_a_trusted_folder_and_subdirectories_are_namespaced() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path();
        std::fs::create_dir_all(p.join(".claude/commands/git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".claude/commands/review.md"), REVIEW).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".claude/commands/git/log.md"), "Show the log").unwrap_or_else(|e| panic!("{e}"));
        let names = |v: Vec<SlashCommand>| {
            v.into_iter().filter(|c| c.info.source == "project").map(|c| c.info.name).collect::<Vec<_>>()
        };
        assert!(names(load(p, false)).is_empty());
        assert_eq!(names(load(p, true)), ["git:log", "review"]);
    }
}
