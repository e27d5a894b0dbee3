//! `write_file`: creates a new file (never overwrites: changing an existing
//! file is `apply_patch`'s job, with stale-file protection).

use std::io::Write;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut};

pub struct WriteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Path relative to the working directory
    path: String,
    content: String,
}

impl ToolExecutor for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Create a new file with the given content, in the working directory. Fails if the file exists."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, sandbox: &crate::Sandbox) -> String {
        let path = args.get("path").and_then(Value::as_str).unwrap_or("?");
        let content = args.get("content").and_then(Value::as_str).unwrap_or("");
        // Approving a call that cannot create its file would mislead.
        if sandbox.resolve_write(path).is_ok_and(|p| p.symlink_metadata().is_ok()) {
            return format!(
                "{path} already exists: this call will fail and change nothing (write_file only creates new files; \
                 the model is told)"
            );
        }
        let lines = content.lines().count();
        let preview: Vec<&str> = content.lines().take(10).collect();
        let more = if lines > 10 { format!("\n... ({} more lines)", lines - 10) } else { String::new() };
        format!("create {path} ({} bytes, {lines} lines):\n{}{more}", content.len(), preview.join("\n"))
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        args.get("path").and_then(Value::as_str).map(|p| vec![p.to_string()]).unwrap_or_default()
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            // Git's own files are never written by a tool (`resolve_write`
            // refuses `.git` below a root; a git session's worktree itself
            // lives in the repository's git directory).
            let path = ctx.sandbox.resolve_write(&args.path).map_err(ToolError::SandboxViolation)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: "write_file".into(), message };
            let content = args.content;
            let shown = args.path.clone();
            let sandbox = ctx.sandbox.clone();
            tokio::task::spawn_blocking(move || {
                // Missing directories are made, and the file created, through
                // directories opened one by one without following links: a
                // directory swapped for a link meanwhile cannot redirect them.
                let (Some(parent), Some(file_name)) = (path.parent(), path.file_name()) else {
                    return Err(failed(format!("{shown} is not a file path")));
                };
                let dir = sandbox
                    .create_dir_all_checked(parent, &shown)
                    .map_err(|e| e.into_tool_error(|e| failed(format!("cannot create {}: {e}", parent.display()))))?;
                let mut f = dir.create_new(file_name, 0o666).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        failed(format!("{shown} already exists; write_file only creates new files"))
                    } else {
                        failed(format!("{shown}: {e}"))
                    }
                })?;
                f.write_all(content.as_bytes()).map_err(|e| failed(format!("{shown}: {e}")))?;
                // The daemon's own umask is 077; the project's files get
                // the user's.
                use std::os::unix::fs::PermissionsExt;
                f.set_permissions(std::fs::Permissions::from_mode(crate::user_mode(0o666)))
                    .map_err(|e| failed(format!("{shown}: {e}")))?;
                Ok(format!("created {shown} ({} bytes)", content.len()))
            })
            .await
            .map_err(|e| ToolError::ExecutionFailed { tool: "write_file".into(), message: e.to_string() })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(dir: &std::path::Path, args: Value) -> Result<String, ToolError> {
        crate::run_blocking(&WriteFile, args, &ToolCtx::for_tests(dir, 1000))
    }

    #[test]
    fn creates_new_files_only_and_never_in_git_internals() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(run(dir.path(), json!({"path": "src/new.rs", "content": "x"})).is_ok());
        assert_eq!(std::fs::read_to_string(dir.path().join("src/new.rs")).unwrap_or_default(), "x");
        let again = run(dir.path(), json!({"path": "src/new.rs", "content": "y"}));
        assert!(
            matches!(again, Err(ToolError::ExecutionFailed { ref message, .. }) if message.contains("already exists"))
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("src/new.rs")).unwrap_or_default(), "x", "unchanged");
        assert!(matches!(
            run(dir.path(), json!({"path": ".git/hooks/pre-commit", "content": "x"})),
            Err(ToolError::SandboxViolation(_))
        ));
        assert!(matches!(
            run(dir.path(), json!({"path": "../escape", "content": "x"})),
            Err(ToolError::SandboxViolation(_))
        ));
    }

    /// The approval says what the call will do: a new file is "create",
    /// one that exists is a call that will fail.
    #[test]
    fn the_approval_of_a_file_that_exists_says_the_call_will_fail() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sandbox = ToolCtx::for_tests(dir.path(), 1000).sandbox;
        let args = json!({"path": "a.txt", "content": "new\n"});
        assert!(WriteFile.approval_summary(&args, &sandbox).starts_with("create a.txt (4 bytes, 1 lines)"));
        std::fs::write(dir.path().join("a.txt"), "old\n").unwrap_or_else(|e| panic!("{e}"));
        let summary = WriteFile.approval_summary(&args, &sandbox);
        assert!(summary.starts_with("a.txt already exists: this call will fail"), "{summary}");
    }
}
