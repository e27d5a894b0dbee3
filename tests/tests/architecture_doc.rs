//! docs/ARCHITECTURE.md names the code it describes: files, directories
//! and types. The code moves under it (a module split, a type renamed, a
//! file gone), and a design document that names what no longer exists
//! misleads whoever reads it next. These tests check every path and every
//! type name it mentions in a code span against the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace's top, where docs/ lives.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn architecture() -> String {
    let path = root().join("docs").join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The document without its fenced code blocks (the diagram), lines
/// joined again: a code span may run across a line break.
fn prose(text: &str) -> String {
    let mut fence: Option<(char, usize)> = None;
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, marker) {
            (None, Some(c)) if run >= 3 => fence = Some((c, run)),
            (Some((c, n)), Some(m)) if m == c && run >= n && trimmed[run..].trim().is_empty() => fence = None,
            (None, _) => {
                out.push_str(line);
                out.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The contents of the inline code spans (`...`, ``...``), each with its
/// runs of white space (line breaks included) made one space.
fn code_spans(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: exactly n backticks.
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                let inner: String = chars[i + n..end].iter().collect();
                spans.push(inner.split_whitespace().collect::<Vec<_>>().join(" "));
                i = end + n;
            }
            None => i += n,
        }
    }
    spans
}

/// Extensions that make a span a file's name even without a `/`.
const FILE_EXTENSIONS: &[&str] = &[".rs", ".md", ".sql", ".toml", ".json", ".sh", ".py"];

/// Spans that read like paths but name no file of the repository.
const NOT_PATHS: &[&str] = &[
    // The user's configuration file (`~/.config/forge/config.toml`).
    "config.toml",
    // MCP protocol methods and notifications.
    "tools/list_changed",
    "tools/call",
    "prompts/get",
    "resources/read",
    "resources/list_changed",
    // The prefix of the ACP bridge's extension methods.
    "_forge/",
];

/// Whether a span is a path in this repository to check: path-like, and
/// none of what is clearly something else.
fn repo_path(span: &str) -> bool {
    let path_like = span.contains('/') || FILE_EXTENSIONS.iter().any(|ext| span.ends_with(ext));
    let elsewhere = [
        '/', // absolute: the machine's (`/tmp`, `/proc/...`), or a slash command
        '~', // the user's home
        '$', // under an environment variable (`$FORGE_HOME/...`), or a JSON-RPC `$/` method
    ]
    .iter()
    .any(|c| span.starts_with(*c));
    let special = span.contains("://") // a URL
        || span.contains('*') // a glob
        || span.contains('<'); // a placeholder (`forge/session/<id>`)
    // A project's own layout, a git directory's inside, git refs, build
    // output.
    let layout = [".forge/", ".claude/", ".git/", ".mcp.json", "refs/", "target/"].iter().any(|p| span.starts_with(p));
    path_like && !elsewhere && !special && !layout && !NOT_PATHS.contains(&span)
}

/// Every file and directory of the repository (build output and `.git`
/// left out), as path components relative to its top.
fn repository_paths(dir: &Path, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "target" || name == ".git" {
            continue;
        }
        let mut path = prefix.to_vec();
        path.push(name);
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            repository_paths(&entry.path(), &path, out);
        }
        out.push(path);
    }
}

/// Whether some file or directory's path ends with `span`, component by
/// component: the document names files relative to their crate or module
/// (`session/machine/input.rs`, `confine/`).
fn resolves(span: &str, paths: &[Vec<String>]) -> bool {
    let wanted: Vec<&str> = span.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    !wanted.is_empty()
        && paths.iter().any(|p| {
            p.len() >= wanted.len() && p[p.len() - wanted.len()..].iter().zip(&wanted).all(|(a, b)| a.as_str() == *b)
        })
}

/// The CamelCase names in a span: the span itself, or each segment of a
/// path such as `Effect::Helper(HelperOut::Start)` or `EventKind::name()`.
fn camel_names(span: &str) -> Vec<String> {
    let span = span.strip_suffix("()").unwrap_or(span);
    span.split("::")
        .flat_map(|s| s.split(['(', ')']))
        .filter(|s| {
            let mut chars = s.chars();
            chars.next().is_some_and(|c| c.is_ascii_uppercase())
                && s.len() > 1
                && s.chars().all(|c| c.is_ascii_alphanumeric())
                && s.chars().any(|c| c.is_ascii_lowercase())
        })
        .map(str::to_string)
        .collect()
}

/// Names the document uses that are Rust items, but not this repository's.
const NOT_OURS: &[&str] = &[
    // std's `Arc` (`Shared` is held as one).
    "Arc",
    // jsonrpsee's table of methods, which JSON-lines calls are handed to.
    "Methods",
    // A method of systemd's D-Bus interface, called through `busctl`.
    "StartTransientUnit",
];

/// The Rust sources of the repository (build output and `.git` left out).
fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                rust_sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The names a line of Rust defines, read plainly: an item (`struct`,
/// `enum`, `trait`, `type`, `union`, `const`, `static`, `mod`, after any
/// visibility), an enum variant (a line that starts with a name followed
/// by ` {`, `(`, `,`, ` =` or nothing), or a variant of the method
/// table's `machine` block (`... -> Result = Variant;`).
fn defined_on(line: &str, out: &mut BTreeSet<String>) {
    let line = line.trim();
    if line.starts_with("//") {
        return;
    }
    let mut rest = line;
    if let Some(after) = rest.strip_prefix("pub") {
        rest = after.trim_start();
        if rest.starts_with('(') {
            rest = rest.find(')').map_or("", |i| rest[i + 1..].trim_start());
        }
    }
    let rest = rest.strip_prefix("unsafe ").unwrap_or(rest);
    for keyword in ["struct ", "enum ", "trait ", "type ", "union ", "const ", "static ", "mod "] {
        if let Some(after) = rest.strip_prefix(keyword) {
            out.insert(ident(after.trim_start()).to_string());
        }
    }
    let name = ident(line);
    if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        let after = &line[name.len()..];
        if after.is_empty() || [" {", "(", ",", " ="].iter().any(|s| after.starts_with(s)) {
            out.insert(name.to_string());
        }
    }
    if line.contains("->")
        && let Some(variant) = line.strip_suffix(';').and_then(|l| l.rsplit_once("= ")).map(|(_, v)| v)
        && ident(variant) == variant
    {
        out.insert(variant.to_string());
    }
}

/// Every path the document names in a code span (a file or directory,
/// relative to the top or to its crate or module) exists: a module split
/// or a file removed must take the document along.
#[test]
fn every_path_in_the_architecture_document_exists() {
    let root = root();
    let mut paths = Vec::new();
    repository_paths(&root, &[], &mut paths);
    assert!(paths.len() > 200, "the repository's files were not found under {}", root.display());
    let named: BTreeSet<String> = code_spans(&prose(&architecture())).into_iter().filter(|s| repo_path(s)).collect();
    assert!(
        named.len() >= 50,
        "only {} paths found in docs/ARCHITECTURE.md: is the span reader still finding them?",
        named.len()
    );
    let missing: Vec<&String> = named.iter().filter(|p| !resolves(p, &paths)).collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names {} paths that match no file or directory (of {} checked):\n{}",
        missing.len(),
        named.len(),
        missing.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
    );
}

/// Every CamelCase name the document gives in a code span (a type, a
/// trait, an enum's variant) is defined somewhere in the repository's
/// Rust: a type renamed or gone must take the document along.
#[test]
fn every_type_name_in_the_architecture_document_is_defined() {
    let root = root();
    let mut files = Vec::new();
    rust_sources(&root, &mut files);
    assert!(files.len() > 100, "the repository's Rust sources were not found under {}", root.display());
    let mut defined = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines() {
            defined_on(line, &mut defined);
        }
    }
    let named: BTreeSet<String> = code_spans(&prose(&architecture())).iter().flat_map(|s| camel_names(s)).collect();
    assert!(
        named.len() >= 50,
        "only {} names found in docs/ARCHITECTURE.md: is the span reader still finding them?",
        named.len()
    );
    let missing: Vec<&String> =
        named.iter().filter(|n| !defined.contains(*n) && !NOT_OURS.contains(&n.as_str())).collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names {} types or variants defined nowhere in the repository (of {} checked):\n{}",
        missing.len(),
        named.len(),
        missing.iter().map(|n| format!("  {n}")).collect::<Vec<_>>().join("\n")
    );
}

/// The readers above find what they are meant to, on text shaped like the
/// document's.
#[test]
fn spans_paths_and_names_are_read_as_written() {
    let text = "A `session/machine/input.rs` and ``a `tick` inside``,\nsplit `git worktree\nlist`.\n\
                ```\n`not/this.rs`\n```\n\
                `Effect::Helper(HelperOut::Start)`, `EventKind::name()`, `MAX_IMAGES`, `README`.";
    let spans = code_spans(&prose(text));
    assert_eq!(
        spans,
        [
            "session/machine/input.rs",
            "a `tick` inside",
            "git worktree list",
            "Effect::Helper(HelperOut::Start)",
            "EventKind::name()",
            "MAX_IMAGES",
            "README"
        ]
    );
    let names: Vec<String> = spans.iter().flat_map(|s| camel_names(s)).collect();
    assert_eq!(names, ["Effect", "Helper", "HelperOut", "Start", "EventKind"]);
    assert!(repo_path("confine/") && repo_path("Cargo.toml") && repo_path("forge-core/migrations/"));
    for not in [
        "/tmp",
        "~/.claude/settings.json",
        "$FORGE_HOME/trust.json",
        ".forge/tools/*.toml",
        "refs/forge/x",
        "forge/session/<id>",
        "https://x.y/z",
        "tools/call",
    ] {
        assert!(!repo_path(not), "{not} is not a repository path");
    }
    let paths = vec![
        ["forge-core", "src", "session", "machine", "input.rs"].map(String::from).to_vec(),
        ["forge-tools", "src", "confine"].map(String::from).to_vec(),
    ];
    assert!(resolves("session/machine/input.rs", &paths) && resolves("confine/", &paths));
    assert!(!resolves("machine/input", &paths) && !resolves("achine/input.rs", &paths));
    let mut defined = BTreeSet::new();
    for line in [
        "pub(crate) enum Event {",
        "    Command(SessionCmd),",
        "    Idle,",
        "    \"session.send\" session_send(SendParams) -> SendResult = Send;",
        "// struct NotThis",
    ] {
        defined_on(line, &mut defined);
    }
    assert_eq!(defined, ["Command", "Event", "Idle", "Send"].map(String::from).into_iter().collect::<BTreeSet<_>>());
}
