//! The documentation's own links, checked on every run: README.md is the
//! front door and the reference lives under docs/, so a section moved or
//! renamed there must not leave a link (or a `#anchor`) pointing nowhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The workspace's top, where README.md and docs/ live.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// README.md and every docs/*.md, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap_or_else(|e| panic!("docs/: {e}"))
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// A document's lines outside fenced code blocks, each with its 1-based
/// number.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<(char, usize)> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, marker) {
            (None, Some(c)) if run >= 3 => fence = Some((c, run)),
            (Some((c, n)), Some(m)) if m == c && run >= n && trimmed[run..].trim().is_empty() => fence = None,
            (None, _) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// The line with its inline code spans (`...`, ``...``) taken out: what
/// is inside them is not Markdown.
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
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
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => i = end,
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// The targets of the inline links and images on a line: what follows
/// `](` up to its closing parenthesis, without a title.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = None;
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(k);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        let target = inner.strip_prefix('<').and_then(|t| t.split('>').next()).unwrap_or(inner);
        let target = target.split_whitespace().next().unwrap_or("");
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor for a heading's text: lowercase, every character that
/// is not alphanumeric, a space, `-` or `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text as rendered: links reduced to their text.
fn rendered(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(close) = after.find(')') else { break };
        out.push_str(&rest[..at]);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.replace(['[', ']'], "")
}

/// The anchors a Markdown document's headings get, duplicates numbered
/// `-1`, `-2`, ... as GitHub numbers them.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || line.len() - trimmed.len() > 3 {
            continue;
        }
        let body = &trimmed[hashes..];
        if !(body.is_empty() || body.starts_with(' ') || body.starts_with('\t')) {
            continue;
        }
        let body = body.trim().trim_end_matches('#').trim_end();
        let base = slug(&rendered(body));
        let count = seen.entry(base.clone()).or_insert(0);
        out.push(if *count == 0 { base.clone() } else { format!("{base}-{count}") });
        *count += 1;
    }
    out
}

/// Every relative link in README.md and docs/*.md names a file that
/// exists, and its `#anchor`, if any, a heading of that file: the reference
/// moved out of README into docs/ and links across pages break silently.
#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let root = root();
    let docs = documents(&root);
    assert!(docs.len() > 4, "README.md and docs/*.md were not found under {}", root.display());
    let mut anchor_cache: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        let dir = doc.parent().unwrap_or(&root);
        let shown = doc.strip_prefix(&root).unwrap_or(doc).display().to_string();
        for (number, line) in prose_lines(&text) {
            for target in link_targets(&without_code_spans(line)) {
                let lower = target.to_ascii_lowercase();
                if target.is_empty() || ["http:", "https:", "mailto:"].iter().any(|s| lower.starts_with(s)) {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let path = if file.is_empty() { doc.clone() } else { dir.join(file) };
                if !path.exists() {
                    broken.push(format!("{shown}:{number}: {target} (no such file: {})", path.display()));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if path.extension().is_none_or(|ext| ext != "md") {
                    broken.push(format!("{shown}:{number}: {target} (an anchor into a file that is not Markdown)"));
                    continue;
                }
                let key = path.canonicalize().unwrap_or_else(|_| path.clone());
                let known = anchor_cache.entry(key).or_insert_with(|| {
                    anchors(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
                });
                if !known.iter().any(|a| a == anchor) {
                    broken.push(format!("{shown}:{number}: {target} (no heading with anchor #{anchor})"));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found: is the link parser still finding them?");
    assert!(broken.is_empty(), "broken links ({}):\n{}", broken.len(), broken.join("\n"));
}

/// README.md stays a front door: the reference lives under docs/.
#[test]
fn readme_is_at_most_350_lines() {
    let readme = root().join("README.md");
    let lines =
        std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("{}: {e}", readme.display())).lines().count();
    assert!(lines <= 350, "README.md has {lines} lines; move reference material under docs/ (at most 350)");
}

/// The slug and the duplicate numbering agree with GitHub's on the
/// headings this documentation uses.
#[test]
fn anchors_follow_github() {
    let text = "# config.toml\n## Rewind: files follow the conversation\n```sh\n# not a heading\n```\n\
                ## A project's own tools\n## Tools\n## Tools\n### `forgectl` [docs](x.md)\n";
    assert_eq!(
        anchors(text),
        [
            "configtoml",
            "rewind-files-follow-the-conversation",
            "a-projects-own-tools",
            "tools",
            "tools-1",
            "forgectl-docs"
        ]
    );
}
