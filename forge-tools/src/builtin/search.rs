//! `search`: a regular expression over the files under the working
//! directory, in-process with ripgrep's engine (grep-searcher/grep-regex)
//! and its .gitignore-aware walker. Also answers to `rg`, `ripgrep`, `grep`.

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

pub struct Search;

/// Most matching lines reported.
const MAX_MATCHES: usize = 1000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Regular expression
    pattern: String,
    /// File or directory, relative to the working directory
    path: Option<String>,
    /// Only search files whose name matches this glob
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
}

impl ToolExecutor for Search {
    fn name(&self) -> &str {
        "search"
    }
    fn description(&self) -> &str {
        "Search file contents with a regular expression (ripgrep syntax) under the working directory; returns path:line:text. .gitignore is honoured."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            let matcher = RegexMatcherBuilder::new()
                .case_insensitive(args.case_insensitive)
                .build(&args.pattern)
                .map_err(|e| ToolError::BadArgs { message: format!("bad regular expression: {e}") })?;
            let file_glob = match &args.glob {
                Some(g) => Some(
                    globset::Glob::new(g)
                        .map_err(|e| ToolError::BadArgs { message: format!("bad glob: {e}") })?
                        .compile_matcher(),
                ),
                None => None,
            };
            let base = ctx.sandbox.resolve(args.path.as_deref().unwrap_or(".")).map_err(ToolError::SandboxViolation)?;
            let sandbox = ctx.sandbox.clone();
            let cwd = ctx.sandbox.cwd().to_path_buf();
            let max = ctx.limits.output_bytes;
            tokio::task::spawn_blocking(move || {
                // Walk and search in parallel, as ripgrep does; sort after.
                let found = std::sync::Mutex::new(Vec::<(String, u64, String)>::new());
                let total = std::sync::atomic::AtomicUsize::new(0);
                let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
                ignore::WalkBuilder::new(&base).follow_links(false).threads(threads).build_parallel().run(|| {
                    let mut searcher =
                        SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build();
                    let matcher = matcher.clone();
                    let (found, total, sandbox, cwd, file_glob) = (&found, &total, &sandbox, &cwd, &file_glob);
                    Box::new(move |entry| {
                        let Ok(entry) = entry else { return ignore::WalkState::Continue };
                        if !entry.file_type().is_some_and(|t| t.is_file())
                            || file_glob.as_ref().is_some_and(|g| !g.is_match(entry.file_name()))
                            || sandbox.is_denied(entry.path())
                        {
                            return ignore::WalkState::Continue;
                        }
                        let rel = entry.path().strip_prefix(cwd).unwrap_or(entry.path()).display().to_string();
                        // Opened like read_file opens: a link swapped in
                        // during the walk, or a hard link, is skipped.
                        let Ok(file) = sandbox.open_checked(entry.path(), &rel) else {
                            return ignore::WalkState::Continue;
                        };
                        let mut local = Vec::new();
                        let _ = searcher.search_file(
                            &matcher,
                            &file,
                            UTF8(|line_no, line| {
                                local.push((rel.clone(), line_no, line.trim_end().to_string()));
                                Ok(true)
                            }),
                        );
                        if !local.is_empty() {
                            total.fetch_add(local.len(), std::sync::atomic::Ordering::Relaxed);
                            // Keep a bounded set; more is only counted.
                            if let Ok(mut f) = found.lock()
                                && f.len() < MAX_MATCHES * 4
                            {
                                f.extend(local);
                            }
                        }
                        ignore::WalkState::Continue
                    })
                });
                let mut found = found.into_inner().unwrap_or_default();
                found.sort();
                let total = total.into_inner();
                let shown: Vec<String> =
                    found.iter().take(MAX_MATCHES).map(|(p, n, l)| format!("{p}:{n}:{l}")).collect();
                let mut text = if shown.is_empty() { "no matches".to_string() } else { shown.join("\n") };
                if total > shown.len() {
                    text.push_str(&format!("\n[{} more matches not shown]", total - shown.len()));
                }
                Ok(truncate_output(text, max))
            })
            .await
            .map_err(|e| ToolError::ExecutionFailed { tool: "search".into(), message: e.to_string() })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::glob::Glob;
    use serde_json::json;

    fn ctx(dir: &std::path::Path) -> ToolCtx {
        ToolCtx::for_tests(dir, 100_000)
    }

    #[test]
    fn search_and_glob_honour_gitignore_and_the_sandbox() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path();
        std::fs::create_dir_all(p.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(p.join("target")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(p.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".gitignore"), "target/\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join("src/main.rs"), "fn main() {\n    needle();\n}\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join("target/gen.rs"), "needle\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".env"), "NEEDLE=secret\n").unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let c = ctx(p);
        let found =
            rt.block_on(Search.execute(json!({"pattern": "needle", "case_insensitive": true}), &c)).unwrap_or_default();
        assert_eq!(found, "src/main.rs:2:    needle();", "ignored and denied files are not searched");
        let files = rt.block_on(Glob.execute(json!({"pattern": "**/*.rs"}), &c)).unwrap_or_default();
        assert_eq!(files, "src/main.rs");
        assert!(matches!(rt.block_on(Search.execute(json!({"pattern": "("}), &c)), Err(ToolError::BadArgs { .. })));
    }
}
