//! `glob`: files matching a glob pattern under the working directory,
//! honouring .gitignore (ripgrep's walker), sandbox denies applied.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

pub struct Glob;

/// Most paths listed.
const MAX_RESULTS: usize = 2000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    /// Directory to search in, relative to the working directory
    path: Option<String>,
}

impl ToolExecutor for Glob {
    fn name(&self) -> &str {
        "glob"
    }
    fn description(&self) -> &str {
        "List files matching a glob pattern (e.g. `**/*.rs`), relative to the working directory; .gitignore is honoured."
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
            let matcher = globset::GlobBuilder::new(&args.pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| ToolError::BadArgs { message: format!("bad pattern: {e}") })?
                .compile_matcher();
            let base = ctx.sandbox.resolve(args.path.as_deref().unwrap_or(".")).map_err(ToolError::SandboxViolation)?;
            let sandbox = ctx.sandbox.clone();
            let cwd = ctx.sandbox.cwd().to_path_buf();
            let max = ctx.limits.output_bytes;
            tokio::task::spawn_blocking(move || {
                let mut found = Vec::new();
                let mut more = 0usize;
                for entry in ignore::WalkBuilder::new(&base).hidden(false).follow_links(false).build().flatten() {
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        continue;
                    }
                    let Ok(rel) = entry.path().strip_prefix(&cwd) else { continue };
                    let rel_base = entry.path().strip_prefix(&base).unwrap_or(rel);
                    if !(matcher.is_match(rel) || matcher.is_match(rel_base)) {
                        continue;
                    }
                    let shown = rel.display().to_string();
                    if sandbox.is_denied(entry.path()) || rel.components().any(|c| c.as_os_str() == ".git") {
                        continue;
                    }
                    if found.len() < MAX_RESULTS {
                        found.push(shown);
                    } else {
                        more += 1;
                    }
                }
                found.sort();
                let mut text = if found.is_empty() { "no files match".to_string() } else { found.join("\n") };
                if more > 0 {
                    text.push_str(&format!("\n[{more} more matches not listed]"));
                }
                Ok(truncate_output(text, max))
            })
            .await
            .map_err(|e| ToolError::ExecutionFailed { tool: "glob".into(), message: e.to_string() })?
        })
    }
}
