//! The scrubber's precision and recall on text no one here wrote: the
//! READMEs, guides, docs and lock files of BurntSushi/ripgrep,
//! tokio-rs/tokio, serde-rs/serde, psf/requests, expressjs/express,
//! axios/axios, openai/openai-python, anthropics/anthropic-sdk-python,
//! huggingface/huggingface_hub and docker-library/docs (each file, its
//! commit and license in `fixtures/scrub-corpus/NOTICE.md`), vendored
//! unchanged. Every file must come out of `scrub` exactly as it went in;
//! then secrets of every shape are planted in each, and every one must
//! come out redacted with the text around it untouched.

use std::path::PathBuf;

use forge_core::redact::scrub;

fn corpus() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scrub-corpus");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "NOTICE.md")
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 9, "the corpus is there: {files:?}");
    files
}

/// Secrets of every shape the scrubber knows, with a piece of each that
/// must not survive (all made up for this test).
const PLANTED: &[(&str, &str)] = &[
    ("AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJDREVGR0g=;", "cXV4MTIzNDU2"),
    ("Authorization: Bearer q8Zk2PvB7xLm4NwR9tYc", "q8Zk2PvB7xLm"),
    ("Authorization: token 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", "9f8e7d6c5b4a"),
    ("glpat-Q7wErTy8UiOp9AsDf0Gh", "Q7wErTy8UiOp"),
    ("npm_Q7wErTy8UiOp9AsDf0GhJkLzXcVbNm123456", "Q7wErTy8UiOp"),
    ("hf_Q7wErTy8UiOp9AsDf0GhJkLzXcVbNm1234", "Q7wErTy8UiOp"),
    ("https://hooks.slack.com/services/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", "q8Zk2PvB7xLm"),
    ("password=Tr0ub4dor&3x", "Tr0ub4dor"),
    ("api_key=\"q8Zk2PvB7xLm4NwR9tYc\"", "q8Zk2PvB7xLm"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "K7MDENG"),
    ("key wJalrXUtnFEMI/K7MDENG/bPxRfiCY3XAMPLEKEY in a log", "K7MDENG"),
    ("AKIAQ7WERTY8UIOP9ASD", "Q7WERTY8UIOP"),
    ("ghp_Q7wErTy8UiOp9AsDf0GhJkLzXcVbNm123456", "Q7wErTy8UiOp"),
    ("sk-ant-api03-Q7wErTy8UiOp9AsDf0GhJkLzXcVbNm", "Q7wErTy8UiOp"),
    ("xoxb-123456789012-Q7wErTy8UiOp9AsD", "Q7wErTy8UiOp"),
    ("postgres://app:q8Zk2PvB7xLm@db.internal:5432/app", "q8Zk2PvB7xLm"),
];

#[test]
fn other_projects_text_reads_unchanged_and_every_planted_secret_goes() {
    let files = corpus();
    let mut false_positives = Vec::new();
    for (name, text) in &files {
        let out = scrub(text);
        if out != text.as_str() {
            let changed: Vec<String> = text
                .lines()
                .zip(out.lines())
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| format!("{name}:{}: {a:?} -> {b:?}", i + 1))
                .collect();
            false_positives.push(if changed.is_empty() { format!("{name}: changed") } else { changed.join("\n") });
        }
    }
    let mut missed = Vec::new();
    let mut planted = 0;
    for (name, text) in &files {
        // In the middle of the file, on a line of its own and inside a line.
        let middle = text.len() / 2;
        let at = text[middle..].find('\n').map_or(text.len(), |i| middle + i + 1);
        for (secret, piece) in PLANTED {
            for (before, after) in [("", "\n"), ("see ", " here\n")] {
                planted += 1;
                let line = format!("{before}{secret}{after}");
                let with = format!("{}{line}{}", &text[..at], &text[at..]);
                let out = scrub(&with);
                let (head, tail) = (&text[..at], &text[at..]);
                let kept = out.starts_with(head) && out.ends_with(tail);
                if out.contains(piece) || !kept {
                    missed.push(format!("{name}: {secret:?} (kept around: {kept})"));
                }
            }
        }
    }
    eprintln!(
        "scrubber corpus: {} files ({} bytes), {} false positives; {planted} planted secrets, {} missed",
        files.len(),
        files.iter().map(|(_, t)| t.len()).sum::<usize>(),
        false_positives.len(),
        missed.len()
    );
    assert!(false_positives.is_empty(), "text that is no secret was changed:\n{}", false_positives.join("\n"));
    assert!(missed.is_empty(), "planted secrets that were not redacted:\n{}", missed.join("\n"));
}
