//! The Librarian: when a span of the conversation is summarized, the
//! durable facts in it (what the user asked, file paths, commands run and
//! how they ended, errors, decisions, names) are kept in a full-text index
//! beside the summary, each citing the message it came from. The `recall`
//! tool and `forgectl recall` search them, and through them the original
//! messages, which never leave the store.

use std::collections::{HashMap, HashSet};

use forge_proto::RecallHit;

use crate::provider::{ChatMessage, ChatRole};
use crate::store::{Store, StoreError};
use crate::tools::{Library, LibraryFut, RecalledFact, RecalledMessage};

/// Longest text one fact keeps (the original message is a citation away).
const MAX_FACT_CHARS: usize = 400;
/// Most facts of each kind one message gives (a long tool output would
/// otherwise flood the index with its lines).
const MAX_PER_KIND: usize = 12;
/// Most lines of a summary indexed as facts.
const MAX_SUMMARY_LINES: usize = 80;

pub use crate::store::rows::FactKind;

impl FactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::Request => "request",
            FactKind::Decision => "decision",
            FactKind::File => "file",
            FactKind::Command => "command",
            FactKind::Error => "error",
            FactKind::Name => "name",
            FactKind::Summary => "summary",
        }
    }
}

/// One fact, and the history node it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub node_id: String,
    pub kind: FactKind,
    pub text: String,
}

/// Collects facts, once each per node.
#[derive(Default)]
struct Shelf {
    facts: Vec<Fact>,
    seen: HashSet<(String, FactKind, String)>,
    per_kind: HashMap<(String, FactKind), usize>,
}

impl Shelf {
    fn put(&mut self, node: &str, kind: FactKind, text: &str) {
        let text = cut(text.trim(), MAX_FACT_CHARS);
        if text.is_empty() {
            return;
        }
        let count = self.per_kind.entry((node.to_string(), kind)).or_default();
        if *count >= MAX_PER_KIND {
            return;
        }
        if self.seen.insert((node.to_string(), kind, text.clone())) {
            *count += 1;
            self.facts.push(Fact { node_id: node.to_string(), kind, text });
        }
    }
}

/// The facts of a span about to be summarized, and of its summary (node
/// `summary_id`, text `summary`). Messages without a node are skipped:
/// a fact must cite one.
pub fn extract(span: &[ChatMessage], summary_id: &str, summary: &str) -> Vec<Fact> {
    let results: HashMap<&str, (&str, bool)> = span
        .iter()
        .filter_map(|m| m.tool_result.as_ref().map(|(id, failed)| (id.as_str(), (m.text.as_str(), *failed))))
        .collect();
    let mut shelf = Shelf::default();
    for m in span {
        let Some(node) = m.node.as_deref() else { continue };
        match m.role {
            ChatRole::User => {
                shelf.put(node, FactKind::Request, &m.text);
                prose(&mut shelf, node, &m.text);
            }
            ChatRole::Assistant => {
                prose(&mut shelf, node, &m.text);
                for call in &m.tool_calls {
                    let outcome = results.get(call.id.as_str()).copied();
                    tool_call(&mut shelf, node, &call.name, &call.arguments, outcome);
                }
            }
            ChatRole::Tool => {
                let failed = m.tool_result.as_ref().is_some_and(|(_, failed)| *failed);
                if failed {
                    shelf.put(node, FactKind::Error, first_lines(&m.text, 3));
                }
                for line in m.text.lines().filter(|l| is_error_line(l)) {
                    shelf.put(node, FactKind::Error, line);
                }
            }
        }
    }
    for line in summary.lines().take(MAX_SUMMARY_LINES) {
        let line = line.trim().trim_start_matches(['-', '*', '#', '>', ' ']).trim();
        if line.chars().filter(|c| c.is_alphanumeric()).count() >= 3 {
            shelf.put(summary_id, FactKind::Summary, line);
        }
    }
    shelf.facts
}

/// Paths, names, errors and decisions in what someone wrote.
fn prose(shelf: &mut Shelf, node: &str, text: &str) {
    for line in text.lines() {
        if is_error_line(line) {
            shelf.put(node, FactKind::Error, line);
        }
        for sentence in sentences(line) {
            if is_decision(sentence) {
                shelf.put(node, FactKind::Decision, sentence);
            }
        }
    }
    for word in text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '<' | '>' | ',')) {
        if let Some(path) = as_path(word) {
            shelf.put(node, FactKind::File, path);
        }
    }
    // Backticked names (code spans), but not fenced blocks.
    let mut parts = text.split('`');
    parts.next();
    while let Some(inside) = parts.next() {
        let inside = inside.trim();
        if (2..=80).contains(&inside.len()) && !inside.contains('\n') {
            match as_path(inside) {
                Some(path) => shelf.put(node, FactKind::File, path),
                None => shelf.put(node, FactKind::Name, inside),
            }
        }
        parts.next();
    }
}

/// A call the model made, with its outcome when its result is in the span.
fn tool_call(shelf: &mut Shelf, node: &str, name: &str, arguments: &str, outcome: Option<(&str, bool)>) {
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let text_arg = |key: &str| args.get(key).and_then(|v| v.as_str()).map(str::to_string);
    match name {
        "run_command" => {
            let Some(command) = text_arg("command") else { return };
            let ended = match outcome {
                None => String::new(),
                Some((out, failed)) => {
                    let status = out.lines().find(|l| l.starts_with("exit status:")).map(str::trim);
                    let first_error = out.lines().find(|l| is_error_line(l));
                    match (status, first_error, failed) {
                        (Some(s), Some(e), _) => format!(" ({s}; {})", e.trim()),
                        (Some(s), None, _) => format!(" ({s})"),
                        (None, _, true) => format!(" (failed: {})", first_lines(out, 1)),
                        (None, _, false) => String::new(),
                    }
                }
            };
            shelf.put(node, FactKind::Command, &format!("ran `{}`{ended}", cut(&command, 200)));
        }
        "read_file" | "write_file" | "edit" | "delete_file" => {
            if let Some(path) = text_arg("path") {
                let verb = match name {
                    "read_file" => "read",
                    "edit" => "edited",
                    "delete_file" => "deleted",
                    _ => "wrote",
                };
                let failed = outcome.is_some_and(|(_, failed)| failed);
                shelf.put(node, FactKind::File, &format!("{verb} {path}{}", if failed { " (failed)" } else { "" }));
            }
        }
        "apply_patch" => {
            let patch = text_arg("patch").unwrap_or_default();
            let failed = outcome.is_some_and(|(_, failed)| failed);
            for file in crate::tools::lp1::parse(&patch).map(|p| p.files).unwrap_or_default() {
                shelf.put(
                    node,
                    FactKind::File,
                    &format!("patched {}{}", file.path, if failed { " (failed)" } else { "" }),
                );
            }
        }
        _ => {
            let failed = outcome.is_some_and(|(_, failed)| failed);
            shelf.put(
                node,
                FactKind::Command,
                &format!("called {name} {}{}", cut(arguments, 200), if failed { " (failed)" } else { "" }),
            );
        }
    }
}

fn is_error_line(line: &str) -> bool {
    let lower = line.trim_start().to_ascii_lowercase();
    lower.starts_with("error")
        || lower.contains("error:")
        || lower.contains("error[")
        || lower.contains("panicked at")
        || lower.contains("exception")
        || lower.starts_with("traceback")
        || lower.contains("fatal:")
        || lower.contains("permission denied")
        || lower.contains("no such file")
}

const DECISION_CUES: [&str; 14] = [
    "decide",
    "decision",
    "we'll ",
    "we will ",
    "i'll use",
    "let's ",
    "going with",
    "chose ",
    "choose ",
    "instead of",
    "should use",
    "will use",
    "agreed",
    "prefer ",
];

fn is_decision(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    sentence.len() >= 12 && DECISION_CUES.iter().any(|c| lower.contains(c))
}

fn sentences(line: &str) -> impl Iterator<Item = &str> {
    line.split_inclusive(['.', '!', '?', ';']).map(str::trim).filter(|s| !s.is_empty())
}

/// `word` as a file path, if it looks like one: with a slash (not a URL)
/// or a name with an extension, less a trailing `:line:col`.
fn as_path(word: &str) -> Option<&str> {
    let word = word.trim_matches(|c: char| matches!(c, '`' | '*' | '[' | ']' | '{' | '}'));
    let mut word = word.trim_end_matches(['.', ',', ':', ';', '!', '?']);
    // `path:line` and `path:line:col`.
    for _ in 0..2 {
        if let Some((head, tail)) = word.rsplit_once(':')
            && !tail.is_empty()
            && tail.chars().all(|c| c.is_ascii_digit())
        {
            word = head;
        }
    }
    if word.len() < 3 || word.len() > 200 || word.contains("://") || word.starts_with("//") {
        return None;
    }
    let allowed = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '@' | '+');
    if !word.chars().all(allowed) || !word.chars().any(|c| c.is_alphabetic()) {
        return None;
    }
    if word.contains('/') {
        return word.split('/').any(|s| s.chars().any(char::is_alphanumeric)).then_some(word);
    }
    let (stem, ext) = word.rsplit_once('.')?;
    let ext_ok = (1..=6).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let stem_ok = stem.len() >= 2 && stem.chars().any(|c| c.is_alphabetic()) && !stem.ends_with('.');
    (ext_ok && stem_ok).then_some(word)
}

fn first_lines(text: &str, n: usize) -> &str {
    match text.match_indices('\n').nth(n.saturating_sub(1)) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

/// Words too common to search for.
const STOP_WORDS: [&str; 28] = [
    "a", "an", "and", "are", "did", "do", "for", "from", "how", "i", "in", "is", "it", "of", "on", "or", "that", "the",
    "this", "to", "was", "we", "what", "when", "where", "which", "with", "you",
];

/// A user's or model's query as an FTS5 expression: every word, quoted
/// (so punctuation and FTS5 syntax in it mean nothing), any of them, best
/// matches first. `None` when it has no word to look for.
pub fn match_expression(query: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let lower = word.to_lowercase();
        if word.is_empty() || STOP_WORDS.contains(&lower.as_str()) || terms.contains(&lower) {
            continue;
        }
        terms.push(lower);
    }
    if terms.is_empty() {
        // Only common words: search for them rather than nothing.
        terms = query
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
    }
    (!terms.is_empty()).then(|| terms.iter().take(16).map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// About `width` characters of `text` around the first word of `query` it
/// contains (its start if none), on one line.
pub fn excerpt(text: &str, query: &str, width: usize) -> String {
    let lower = text.to_lowercase();
    let at = query
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= 3)
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .unwrap_or(0);
    // `lower` may differ in length from `text` for a few scripts: fall
    // back to the start rather than cut inside a character.
    let at = if lower.len() == text.len() { at } else { 0 };
    let mut start = at.saturating_sub(width / 3);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let window: String = text[start..].chars().take(width).collect();
    let flat = window.split_whitespace().collect::<Vec<_>>().join(" ");
    let before = if start > 0 { "..." } else { "" };
    let after = if text[start..].chars().count() > width { "..." } else { "" };
    format!("{before}{flat}{after}")
}

/// Most hits one search returns.
pub const MAX_HITS: u32 = 50;
/// Characters of the cited message shown with a hit.
const EXCERPT_CHARS: usize = 240;

/// The session's facts matching `query`, best first, each with the
/// message it cites around what matched.
pub async fn recall(store: &Store, session: &str, query: &str, limit: u32) -> Result<Vec<RecallHit>, StoreError> {
    let Some(expression) = match_expression(query) else { return Ok(Vec::new()) };
    let limit = limit.clamp(1, MAX_HITS);
    let mut rows = store.recall(session, &expression, limit).await?;
    // A fork also finds what the summaries of the path it shares hold.
    let lineage = store.lineage(session).await?;
    if lineage.len() > 1 {
        let shared: std::collections::HashSet<String> =
            store.summaries(session).await?.into_iter().map(|n| n.id).collect();
        for origin in &lineage[1..] {
            let found = store.recall(origin, &expression, limit).await?;
            rows.extend(found.into_iter().filter(|r| shared.contains(&r.summary_id)));
        }
        rows.truncate(limit as usize);
    }
    Ok(rows
        .into_iter()
        .map(|r| RecallHit {
            excerpt: excerpt(&r.node.text, query, EXCERPT_CHARS),
            kind: r.kind,
            fact: r.text,
            node_id: r.node.id,
            role: r.node.role,
            summary_id: r.summary_id,
            created_ms: r.node.created_ms,
        })
        .collect())
}

/// What the `recall` tool of a session searches: its facts and messages
/// in the store.
pub struct SessionLibrary {
    pub store: Store,
    pub session: String,
}

impl Library for SessionLibrary {
    fn search<'a>(&'a self, query: &'a str, limit: usize) -> LibraryFut<'a, Vec<RecalledFact>> {
        Box::pin(async move {
            let hits = recall(&self.store, &self.session, query, limit as u32).await.map_err(|e| e.to_string())?;
            Ok(hits
                .into_iter()
                .map(|h| RecalledFact {
                    kind: h.kind,
                    fact: h.fact,
                    node_id: h.node_id,
                    role: h.role.as_str().to_string(),
                    excerpt: h.excerpt,
                })
                .collect())
        })
    }

    fn message<'a>(&'a self, node: &'a str) -> LibraryFut<'a, Option<RecalledMessage>> {
        Box::pin(async move {
            let node = self.store.node(&self.session, node).await.map_err(|e| e.to_string())?;
            Ok(node.map(|n| RecalledMessage { role: n.role.as_str().to_string(), node_id: n.id, text: n.text }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_proto::ToolCallRecord;

    fn msg(role: ChatRole, node: &str, text: &str) -> ChatMessage {
        let mut m = ChatMessage::user(text);
        m.role = role;
        m.node = Some(node.into());
        m
    }

    #[test]
    fn keeps_requests_paths_commands_errors_decisions_and_names_citing_their_nodes() {
        let mut call =
            msg(ChatRole::Assistant, "m2", "We'll use SQLite instead of sled for the store. See `Store::open`.");
        call.tool_calls = vec![ToolCallRecord {
            id: "c1".into(),
            name: "run_command".into(),
            arguments: r#"{"command":"cargo test -p forge-core"}"#.into(),
        }];
        let mut result = msg(
            ChatRole::Tool,
            "m3",
            "exit status: 101\nerror[E0425]: cannot find value `x` in this scope\n --> forge-core/src/store/mod.rs:12:5",
        );
        result.tool_result = Some(("c1".into(), false));
        let mut patch = msg(ChatRole::Assistant, "m4", "");
        patch.tool_calls = vec![ToolCallRecord {
            id: "c2".into(),
            name: "apply_patch".into(),
            arguments: serde_json::json!({"patch": "LP1\nF src/lib.rs\nT\n// end\n.\nEND\n"}).to_string(),
        }];
        let span = vec![
            msg(ChatRole::User, "m1", "Please fix the failing migration in migrations/0004_facts.sql"),
            call,
            result,
            patch,
        ];
        let facts = extract(&span, "s1", "- The store uses SQLite.\n- Tests fail with E0425.");
        let has = |node: &str, kind: FactKind, part: &str| {
            facts.iter().any(|f| f.node_id == node && f.kind == kind && f.text.contains(part))
        };
        assert!(has("m1", FactKind::Request, "fix the failing migration"), "{facts:#?}");
        assert!(has("m1", FactKind::File, "migrations/0004_facts.sql"), "{facts:#?}");
        assert!(has("m2", FactKind::Decision, "instead of sled"), "{facts:#?}");
        assert!(has("m2", FactKind::Name, "Store::open"), "{facts:#?}");
        assert!(
            has("m2", FactKind::Command, "ran `cargo test -p forge-core` (exit status: 101; error[E0425]"),
            "{facts:#?}"
        );
        assert!(has("m3", FactKind::Error, "cannot find value"), "{facts:#?}");
        assert!(has("s1", FactKind::Summary, "The store uses SQLite."), "{facts:#?}");
        assert!(has("m4", FactKind::File, "patched src/lib.rs"), "{facts:#?}");
        assert!(!facts.iter().any(|f| f.text == "e.g"), "{facts:#?}");
    }

    #[test]
    fn paths_are_told_from_prose() {
        for (word, path) in [
            ("src/main.rs:12:5", Some("src/main.rs")),
            ("Cargo.toml,", Some("Cargo.toml")),
            ("`~/.config/forge/config.toml`", Some("~/.config/forge/config.toml")),
            ("https://example.com/x", None),
            ("e.g.", None),
            ("1.5", None),
            ("and/or", Some("and/or")),
            ("song.mp3", Some("song.mp3")),
            ("src/v2:7", Some("src/v2")),
            ("hello", None),
        ] {
            assert_eq!(as_path(word), path, "{word}");
        }
    }

    #[test]
    fn queries_are_quoted_words_without_fts_syntax() {
        assert_eq!(
            match_expression("what did we decide about the \"cache\"?").as_deref(),
            Some("\"decide\" OR \"about\" OR \"cache\"")
        );
        assert_eq!(match_expression("NEAR(a b) OR -x*").as_deref(), Some("\"near\" OR \"b\" OR \"x\""));
        assert_eq!(match_expression("the").as_deref(), Some("\"the\""));
        assert_eq!(match_expression("  ?! "), None);
    }

    #[test]
    fn excerpts_centre_on_the_query() {
        let text = format!("{} the migration failed because of a lock {}", "x ".repeat(200), "y ".repeat(200));
        let e = excerpt(&text, "migration", 80);
        assert!(e.starts_with("...") && e.ends_with("...") && e.contains("the migration failed"), "{e}");
        assert_eq!(excerpt("short text", "nothing", 80), "short text");
    }
}
