//! `edit`: replaces an exact string in a file (the search/replace edit
//! models are trained on: Claude Code's Edit, gemini-cli's replace), and
//! `delete_file`. Both go through the sandbox, refuse a file changed since
//! the model last read it, show the change for approval, and are recorded
//! for rewind like `apply_patch`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{Sandbox, ToolCtx, ToolError, ToolExecutor, ToolFut, sha256};

pub struct Edit;
pub struct DeleteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    /// Path relative to the working directory
    path: String,
    /// The exact text to replace
    old_string: String,
    /// The text to put in its place
    new_string: String,
    /// Replace every occurrence (default false)
    #[serde(default)]
    replace_all: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    /// Path relative to the working directory
    path: String,
}

/// What an edit will write: the file's path, what it holds now (`None`:
/// absent, created by an edit with an empty `old_string`) and after.
struct Planned {
    path: PathBuf,
    old: Option<Vec<u8>>,
    new: String,
}

fn failed(tool: &str, message: String) -> ToolError {
    ToolError::ExecutionFailed { tool: tool.into(), message }
}

/// The file as it is (`None` when absent), read through the sandbox.
fn read_existing(sandbox: &Sandbox, path: &Path, shown: &str, tool: &str) -> Result<Option<Vec<u8>>, ToolError> {
    if path.symlink_metadata().is_err() {
        return Ok(None);
    }
    let file = sandbox
        .open_checked(path, shown)
        .map_err(|e| e.into_tool_error(|e| failed(tool, format!("cannot read {shown}: {e}"))))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::BufReader::new(file), &mut bytes)
        .map_err(|e| failed(tool, format!("cannot read {shown}: {e}")))?;
    Ok(Some(bytes))
}

fn plan_edit(args: &EditArgs, sandbox: &Sandbox) -> Result<Planned, ToolError> {
    let path = sandbox.resolve_write(&args.path).map_err(ToolError::SandboxViolation)?;
    let shown = &args.path;
    let old = read_existing(sandbox, &path, shown, "edit")?;
    let Some(bytes) = &old else {
        if args.old_string.is_empty() {
            return Ok(Planned { path, old: None, new: args.new_string.clone() });
        }
        return Err(failed("edit", format!("{shown} does not exist (an empty old_string creates it)")));
    };
    let text = std::str::from_utf8(bytes).map_err(|_| failed("edit", format!("{shown} is not UTF-8 text")))?;
    if args.old_string.is_empty() {
        return Err(failed(
            "edit",
            format!(
                "{shown} exists: old_string is empty; give the text to replace (an empty old_string only creates a file)"
            ),
        ));
    }
    if args.old_string == args.new_string {
        return Err(failed("edit", "old_string and new_string are the same: nothing would change".into()));
    }
    let found = text.matches(args.old_string.as_str()).count();
    let new = match (found, args.replace_all) {
        (0, _) => {
            return Err(failed(
                "edit",
                format!(
                    "old_string is not in {shown}; read the file again and copy the text exactly, whitespace and indentation included"
                ),
            ));
        }
        (1, _) | (_, true) => text.replace(args.old_string.as_str(), &args.new_string),
        (n, false) => {
            return Err(failed(
                "edit",
                format!(
                    "old_string occurs {n} times in {shown}; add surrounding lines so it occurs once, or set replace_all to change every one"
                ),
            ));
        }
    };
    Ok(Planned { path, old, new })
}

/// Stale-file protection: what the model last read or wrote of `path`
/// must be what is there.
fn check_fresh(hashes: &crate::FileHashes, path: &Path, now: Option<&[u8]>, shown: &str) -> Result<(), ToolError> {
    let known = hashes.lock().map(|k| k.get(path).cloned()).unwrap_or(None);
    match (known, now) {
        (Some(h), Some(now)) if h != sha256(now) => {
            Err(ToolError::StaleFile { file: shown.into(), reason: "read it again and redo the edit".into() })
        }
        _ => Ok(()),
    }
}

/// A file's change as a unified diff, for approvals.
pub(super) fn diff(name: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

impl ToolExecutor for Edit {
    fn name(&self) -> &str {
        "edit"
    }
    fn description(&self) -> &str {
        "Replace an exact string in a file. old_string must occur exactly once (include enough surrounding \
lines to make it unique), unless replace_all is set to change every occurrence. Copy old_string exactly as \
the file has it, indentation included. An empty old_string creates a new file holding new_string."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<EditArgs>()
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, sandbox: &Sandbox) -> String {
        let planned = crate::parse_args::<EditArgs>(args.clone()).and_then(|a| Ok((plan_edit(&a, sandbox)?, a.path)));
        match planned {
            Err(e) => format!("the edit would fail: {e}"),
            Ok((p, name)) => {
                let old = p.old.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
                diff(&name, &old, &p.new)
            }
        }
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        args.get("path").and_then(Value::as_str).map(|p| vec![p.to_string()]).unwrap_or_default()
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: EditArgs = crate::parse_args(args)?;
            let (sandbox, hashes) = (ctx.sandbox.clone(), ctx.file_hashes.clone());
            tokio::task::spawn_blocking(move || {
                let Planned { path, old, new } = plan_edit(&args, &sandbox)?;
                let shown = args.path;
                check_fresh(&hashes, &path, old.as_deref(), &shown)?;
                write_whole(&sandbox, &path, &shown, new.as_bytes())?;
                if let Ok(mut known) = hashes.lock() {
                    known.insert(path, sha256(new.as_bytes()));
                }
                Ok(match old {
                    None => format!("created {shown} ({} bytes)", new.len()),
                    Some(_) => format!("edited {shown}"),
                })
            })
            .await
            .map_err(|e| failed("edit", e.to_string()))?
        })
    }
}

/// Writes `content` as `path`, whole: to a temporary file in its directory
/// (opened and checked once, made if missing), then renamed over it,
/// keeping its mode.
fn write_whole(sandbox: &Sandbox, path: &Path, shown: &str, content: &[u8]) -> Result<(), ToolError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(failed("edit", format!("{shown} is not a file path")));
    };
    let dir = sandbox
        .create_dir_all_checked(parent, shown)
        .map_err(|e| e.into_tool_error(|e| failed("edit", format!("cannot write {shown}: {e}"))))?;
    let tmp: OsString = format!(".{}.forge-edit-{}", name.to_string_lossy(), std::process::id()).into();
    let mode = dir.mode_of(name).unwrap_or(crate::user_mode(0o666));
    dir.replace(name, &tmp, content, mode).map_err(|e| failed("edit", format!("cannot write {shown}: {e}")))
}

impl ToolExecutor for DeleteFile {
    fn name(&self) -> &str {
        "delete_file"
    }
    fn description(&self) -> &str {
        "Delete a file (not a directory) in the working directory."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<DeleteArgs>()
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, sandbox: &Sandbox) -> String {
        let name = args.get("path").and_then(Value::as_str).unwrap_or("?");
        let found = sandbox.resolve_write(name).map_err(ToolError::SandboxViolation).and_then(|p| {
            read_existing(sandbox, &p, name, "delete_file")?
                .ok_or_else(|| failed("delete_file", format!("{name} does not exist")))
        });
        match found {
            Err(e) => format!("the deletion would fail: {e}"),
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                format!("delete {name} ({} bytes, {} lines)", bytes.len(), text.lines().count())
            }
        }
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        args.get("path").and_then(Value::as_str).map(|p| vec![p.to_string()]).unwrap_or_default()
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: DeleteArgs = crate::parse_args(args)?;
            let path = ctx.sandbox.resolve_write(&args.path).map_err(ToolError::SandboxViolation)?;
            let shown = args.path;
            let meta = path.symlink_metadata().map_err(|_| failed("delete_file", format!("{shown} does not exist")))?;
            if meta.is_dir() {
                return Err(failed("delete_file", format!("{shown} is a directory; delete_file removes files only")));
            }
            let sandbox = ctx.sandbox.clone();
            let (p, s) = (path.clone(), shown.clone());
            let now = tokio::task::spawn_blocking(move || read_existing(&sandbox, &p, &s, "delete_file"))
                .await
                .map_err(|e| failed("delete_file", e.to_string()))??;
            check_fresh(&ctx.file_hashes, &path, now.as_deref(), &shown)?;
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(failed("delete_file", format!("{shown} is not a file path")));
            };
            let dir = ctx
                .sandbox
                .open_dir_checked(parent, &shown)
                .map_err(|e| e.into_tool_error(|e| failed("delete_file", format!("cannot delete {shown}: {e}"))))?;
            dir.remove(name).map_err(|e| failed("delete_file", format!("cannot delete {shown}: {e}")))?;
            if let Ok(mut known) = ctx.file_hashes.lock() {
                known.remove(&path);
            }
            Ok(format!("deleted {shown} ({} bytes)", now.map(|b| b.len()).unwrap_or(0)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::read_file::ReadFile;
    use serde_json::json;

    fn run(tool: &dyn ToolExecutor, ctx: &ToolCtx, args: Value) -> Result<String, ToolError> {
        crate::run_blocking(tool, args, ctx)
    }

    #[test]
    fn an_edit_replaces_one_exact_string_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = dir.path().join("a.rs");
        std::fs::write(&f, "fn a() {}\nfn b() {}\nfn b() {}\n").unwrap_or_else(|e| panic!("{e}"));
        let ctx = ToolCtx::for_tests(dir.path(), 10_000);
        let edit = |old: &str, new: &str, all: bool| {
            run(&Edit, &ctx, json!({"path": "a.rs", "old_string": old, "new_string": new, "replace_all": all}))
        };
        assert_eq!(edit("fn a()", "fn alpha()", false), Ok("edited a.rs".into()));
        let twice = edit("fn b()", "fn beta()", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(twice.contains("occurs 2 times") && twice.contains("replace_all"), "{twice}");
        let missing = edit("fn c()", "x", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(missing.contains("is not in a.rs"), "{missing}");
        assert_eq!(edit("fn b()", "fn beta()", true), Ok("edited a.rs".into()));
        assert_eq!(std::fs::read_to_string(&f).unwrap_or_default(), "fn alpha() {}\nfn beta() {}\nfn beta() {}\n");
        // An empty old_string creates a file (never overwrites one).
        let created = run(&Edit, &ctx, json!({"path": "new/b.txt", "old_string": "", "new_string": "hi\n"}));
        assert_eq!(created, Ok("created new/b.txt (3 bytes)".into()));
        assert!(edit("", "x", false).is_err());
        // Never into git's own files, never outside the roots.
        let git = run(&Edit, &ctx, json!({"path": ".git/config", "old_string": "", "new_string": "x"}));
        assert!(matches!(git, Err(ToolError::SandboxViolation(_))), "{git:?}");
    }

    #[test]
    fn a_file_changed_since_it_was_read_is_not_edited_or_deleted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one\n").unwrap_or_else(|e| panic!("{e}"));
        let ctx = ToolCtx::for_tests(dir.path(), 10_000);
        assert!(run(&ReadFile, &ctx, json!({"path": "a.txt"})).is_ok());
        std::fs::write(&f, "one, changed elsewhere\n").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&Edit, &ctx, json!({"path": "a.txt", "old_string": "one", "new_string": "two"}));
        assert!(matches!(r, Err(ToolError::StaleFile { .. })), "{r:?}");
        let r = run(&DeleteFile, &ctx, json!({"path": "a.txt"}));
        assert!(matches!(r, Err(ToolError::StaleFile { .. })), "{r:?}");
        assert!(f.exists());
        assert!(run(&ReadFile, &ctx, json!({"path": "a.txt"})).is_ok());
        assert!(
            DeleteFile
                .approval_summary(&json!({"path": "a.txt"}), &ctx.sandbox)
                .starts_with("delete a.txt (23 bytes, 1 lines)")
        );
        assert_eq!(run(&DeleteFile, &ctx, json!({"path": "a.txt"})), Ok("deleted a.txt (23 bytes)".into()));
        assert!(!f.exists());
        let gone = run(&DeleteFile, &ctx, json!({"path": "a.txt"})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(gone.contains("does not exist"), "{gone}");
    }

    #[test]
    fn the_approval_shows_the_diff() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("a.txt"), "keep\nold\n").unwrap_or_else(|e| panic!("{e}"));
        let sandbox = ToolCtx::for_tests(dir.path(), 10_000).sandbox;
        let shown =
            Edit.approval_summary(&json!({"path": "a.txt", "old_string": "old", "new_string": "new"}), &sandbox);
        assert!(shown.contains("-old") && shown.contains("+new") && shown.contains(" keep"), "{shown}");
        let bad = Edit.approval_summary(&json!({"path": "a.txt", "old_string": "nope", "new_string": "x"}), &sandbox);
        assert!(bad.starts_with("the edit would fail"), "{bad}");
    }
}
