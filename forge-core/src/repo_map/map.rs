//! The pure part of a repository map: which files fit the token budget,
//! how the map reads, what a cheap model is asked and how its answer is
//! read back. No I/O here.

use std::collections::{BTreeMap, HashMap};

/// What the model is told when asked for summaries.
pub const INSTRUCTIONS: &str = "You summarize files for a map of a software repository. For each file \
given, answer exactly one line: the file's path, a colon, then what the file is for in at most 15 words. \
No other text, no Markdown.";

/// Tokens a line costs beyond its path: the summary and the separators.
const SUMMARY_TOKENS: usize = 16;

/// A file of the repository, as walked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    /// Relative to the repository's top, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// The files the map shows, shallow ones first (a project's top files say
/// most about it), as many as fit `budget` tokens; and the rest counted by
/// their top directory.
pub fn select(mut files: Vec<Walked>, budget: usize) -> (Vec<Walked>, BTreeMap<String, usize>) {
    files.sort_by(|a, b| (a.path.matches('/').count(), &a.path).cmp(&(b.path.matches('/').count(), &b.path)));
    let mut used = 0;
    let mut shown = Vec::new();
    let mut rest = BTreeMap::new();
    for f in files {
        let cost = line_tokens(&f.path);
        // Room is kept for the lines counting what is left out.
        if used + cost + 40 <= budget {
            used += cost;
            shown.push(f);
        } else {
            let top = f.path.split_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_else(|| "./".into());
            *rest.entry(top).or_default() += 1;
        }
    }
    shown.sort_by(|a, b| a.path.cmp(&b.path));
    (shown, rest)
}

fn line_tokens(path: &str) -> usize {
    path.len() / 3 + SUMMARY_TOKENS
}

/// The map as the system prompt holds it, within `budget` tokens: the
/// shallowest files' lines while they fit (summaries are longer than
/// `select` guessed, or shorter), the rest counted by directory.
/// `summaries` by path; a file without one yet is listed by its path alone.
pub fn render(
    root_name: &str,
    shown: &[Walked],
    rest: &BTreeMap<String, usize>,
    summaries: &HashMap<String, String>,
    budget: usize,
) -> String {
    let total = shown.len() + rest.values().sum::<usize>();
    let mut order: Vec<&Walked> = shown.iter().collect();
    order.sort_by(|a, b| (a.path.matches('/').count(), &a.path).cmp(&(b.path.matches('/').count(), &b.path)));
    let mut rest = rest.clone();
    // The header and the line counting what is left out.
    let mut used = 100;
    let mut lines = Vec::new();
    for f in order {
        let line = match summaries.get(&f.path) {
            Some(s) => format!("- {}: {s}\n", f.path),
            None => format!("- {}\n", f.path),
        };
        if used + tokens(&line) <= budget {
            used += tokens(&line);
            lines.push((f.path.as_str(), line));
        } else {
            let top = f.path.split_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_else(|| "./".into());
            *rest.entry(top).or_default() += 1;
        }
    }
    lines.sort();
    let mut out = format!(
        "\n\n# Repository map\n\nThe files of {root_name} ({total} in all{}), each with a one-line summary \
         written by a model when the file last changed (read a file before relying on it):\n",
        if rest.is_empty() { String::new() } else { format!(", {} shown", lines.len()) }
    );
    for (_, line) in lines {
        out.push_str(&line);
    }
    if !rest.is_empty() {
        let dirs: Vec<String> = rest.iter().map(|(d, n)| format!("{d} ({n})")).collect();
        out.push_str(&format!("- not shown: {}\n", dirs.join(", ")));
    }
    out
}

/// Rough tokens of `text` (four bytes each).
pub fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// One file for the model: its path and the start of its text.
pub struct Excerpt {
    pub path: String,
    pub text: String,
}

/// The request's text for a batch of files.
pub fn prompt(batch: &[Excerpt]) -> String {
    let mut out = String::from("Summarize each of these files in one line (`path: summary`).\n");
    for e in batch {
        out.push_str(&format!("\n=== {} ===\n{}\n", e.path, e.text.trim_end()));
    }
    out
}

/// The summaries a model's answer gives for the batch's paths (a line for
/// a path not asked about is ignored; a summary is cut to 160 characters).
pub fn parse(answer: &str, batch: &[Excerpt]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in answer.lines() {
        let line = line.trim().trim_start_matches(['-', '*', ' ']).replace('`', "");
        let Some((path, summary)) = line.split_once(':') else { continue };
        let (path, summary) = (path.trim(), summary.trim());
        if summary.is_empty() || !batch.iter().any(|e| e.path == path) {
            continue;
        }
        let cut: String = summary.chars().take(160).collect();
        out.insert(path.to_string(), cut);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walked(paths: &[&str]) -> Vec<Walked> {
        paths.iter().map(|p| Walked { path: p.to_string(), size: 10 }).collect()
    }

    #[test]
    fn shallow_files_come_first_and_the_rest_is_counted_by_directory() {
        let files = walked(&["src/deep/a.rs", "README.md", "src/main.rs", "tests/t.rs", "Cargo.toml"]);
        let (shown, rest) = select(files.clone(), 10_000);
        assert_eq!(shown.len(), 5);
        assert!(rest.is_empty());
        // Room for three lines: the top files, then the shallowest.
        let budget = 40 + line_tokens("README.md") + line_tokens("Cargo.toml") + line_tokens("src/main.rs");
        let (shown, rest) = select(files, budget);
        let names: Vec<&str> = shown.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["Cargo.toml", "README.md", "src/main.rs"]);
        assert_eq!(rest.into_iter().collect::<Vec<_>>(), [("src/".to_string(), 1), ("tests/".to_string(), 1)]);
    }

    #[test]
    fn the_map_lists_summaries_and_paths_waiting_for_one() {
        let (shown, rest) = select(walked(&["a.rs", "b.rs"]), 10_000);
        let summaries = HashMap::from([("a.rs".to_string(), "The entry point.".to_string())]);
        let map = render("forge", &shown, &rest, &summaries, 10_000);
        assert!(map.contains("# Repository map"));
        assert!(map.contains("- a.rs: The entry point.\n- b.rs\n"), "{map}");
        // Summaries longer than guessed: lines leave until the map fits.
        let long = HashMap::from([("a.rs".to_string(), "word ".repeat(200)), ("b.rs".to_string(), "short".into())]);
        let map = render("forge", &shown, &rest, &long, 200);
        assert!(tokens(&map) <= 200, "{}", tokens(&map));
        assert!(map.contains("- b.rs: short") && map.contains("not shown: ./ (1)"), "{map}");
    }

    #[test]
    fn an_answer_is_read_per_path_asked_for() {
        let batch = vec![
            Excerpt { path: "src/a.rs".into(), text: "fn a() {}".into() },
            Excerpt { path: "b.md".into(), text: "# B".into() },
        ];
        let p = prompt(&batch);
        assert!(p.contains("=== src/a.rs ===\nfn a() {}"));
        let got = parse("- `src/a.rs`: Defines a.\nother.rs: not asked\nb.md:\nnoise", &batch);
        assert_eq!(got.len(), 1);
        assert_eq!(got.get("src/a.rs").map(String::as_str), Some("Defines a."));
    }
}
