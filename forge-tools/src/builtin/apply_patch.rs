//! `apply_patch`: changes existing files with an LP1 patch. All files of a
//! patch change or none; a file the model read and that changed since is
//! refused (stale-file protection); the approval shows the diff.

use std::ffi::OsString;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::lp1::{self, Patch};
use crate::sandbox::CheckedDir;
use crate::{Sandbox, ToolCtx, ToolError, ToolExecutor, ToolFut, sha256};

pub struct ApplyPatch;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The LP1 patch
    patch: String,
}

/// Every file's new text, computed before anything is written.
struct Plan {
    files: Vec<(String, std::path::PathBuf, Vec<u8>, String)>,
}

fn plan(patch: &Patch, sandbox: &Sandbox) -> Result<Plan, ToolError> {
    let mut files = Vec::new();
    for f in &patch.files {
        let path = sandbox.resolve_write(&f.path).map_err(ToolError::SandboxViolation)?;
        let file = sandbox.open_checked(&path, &f.path).map_err(|e| {
            e.into_tool_error(|e| ToolError::PatchFailed {
                file: f.path.clone().into(),
                message: format!(
                    "cannot read it ({e}); apply_patch changes existing files, write_file creates new ones"
                ),
            })
        })?;
        let mut old = Vec::new();
        std::io::Read::read_to_end(&mut std::io::BufReader::new(file), &mut old).map_err(|e| {
            ToolError::PatchFailed { file: f.path.clone().into(), message: format!("cannot read it: {e}") }
        })?;
        let text = String::from_utf8(old.clone())
            .map_err(|_| ToolError::PatchFailed { file: f.path.clone().into(), message: "not UTF-8 text".into() })?;
        let new = lp1::apply_to_text(&text, f)
            .map_err(|message| ToolError::PatchFailed { file: f.path.clone().into(), message })?;
        files.push((f.path.clone(), path, old, new));
    }
    Ok(Plan { files })
}

fn parse(args: &Value, max_bytes: usize) -> Result<Patch, ToolError> {
    let args: Args = crate::parse_args(args.clone())?;
    if args.patch.len() > max_bytes {
        return Err(ToolError::BadArgs {
            message: format!(
                "the patch is {} bytes; the limit is {max_bytes} (tools.apply_patch.max_patch_bytes): split it into smaller patches",
                args.patch.len()
            ),
        });
    }
    lp1::parse(&args.patch).map_err(|e| ToolError::BadArgs { message: format!("not an LP1 patch: {e}") })
}

impl ToolExecutor for ApplyPatch {
    fn name(&self) -> &str {
        "apply_patch"
    }
    fn description(&self) -> &str {
        "Change existing files with an LP1 patch. Format: a line `LP1`; per file `F path`; operations \
`R [n]` (replace: find block, then replacement block), `I [n]` (insert after anchor block), `P [n]` (insert \
before), `E [n]` (erase block), `T` (append block), `B` (prepend block), `N +`/`N -` (final newline); a line `END`. \
A block is lines ended by a line `.` (a content line starting with `.` gets one more `.`). `n` picks the n-th \
match when a block occurs more than once. All files change or none."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, sandbox: &Sandbox) -> String {
        let plan = parse(args, usize::MAX).and_then(|p| plan(&p, sandbox));
        match plan {
            Err(e) => format!("the patch would fail: {e}"),
            Ok(plan) => plan
                .files
                .iter()
                .map(|(name, _, old, new)| super::edit::diff(name, &String::from_utf8_lossy(old), new))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        let patch = args.get("patch").and_then(Value::as_str).unwrap_or_default();
        crate::lp1::parse(patch).map(|p| p.files.into_iter().map(|f| f.path).collect()).unwrap_or_default()
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let patch = parse(&args, ctx.limits.patch_bytes)?;
            let sandbox = ctx.sandbox.clone();
            let hashes = ctx.file_hashes.clone();
            tokio::task::spawn_blocking(move || {
                let plan = plan(&patch, &sandbox)?;
                // Stale-file protection: what the model read must be what is there.
                if let Ok(known) = hashes.lock() {
                    for (name, path, old, _) in &plan.files {
                        if known.get(path).is_some_and(|h| *h != sha256(old)) {
                            return Err(ToolError::StaleFile {
                                file: name.into(),
                                reason: "read it again and redo the patch".into(),
                            });
                        }
                    }
                }
                // All or nothing: write each to a temporary file, then
                // rename them in; undo the renames done if one fails. Every
                // write goes through its directory opened and checked once,
                // so a directory swapped for a link meanwhile cannot send a
                // write outside the roots.
                let pid = std::process::id();
                let mut staged: Vec<(CheckedDir, OsString, OsString, u32)> = Vec::new();
                let unstage = |staged: &[(CheckedDir, OsString, OsString, u32)]| {
                    for (dir, tmp, ..) in staged {
                        let _ = dir.remove(tmp);
                    }
                };
                for (name, path, _, new) in &plan.files {
                    let failed = |message: String| ToolError::PatchFailed { file: name.clone().into(), message };
                    let (Some(parent), Some(file_name)) = (path.parent(), path.file_name()) else {
                        unstage(&staged);
                        return Err(failed("not a file path".into()));
                    };
                    let dir = match sandbox.open_dir_checked(parent, name) {
                        Ok(dir) => dir,
                        Err(e) => {
                            unstage(&staged);
                            return Err(e.into_tool_error(|e| failed(format!("cannot write: {e}"))));
                        }
                    };
                    let tmp: OsString = format!(".{}.forge-patch-{pid}", file_name.to_string_lossy()).into();
                    let mode = dir.mode_of(file_name).unwrap_or(crate::user_mode(0o666));
                    if let Err(e) = dir.stage(&tmp, new.as_bytes(), mode) {
                        unstage(&staged);
                        return Err(failed(format!("cannot write: {e}")));
                    }
                    staged.push((dir, tmp, file_name.to_os_string(), mode));
                }
                let mut done: Vec<usize> = Vec::new();
                for (i, (dir, tmp, file_name, _)) in staged.iter().enumerate() {
                    if let Err(e) = dir.rename(tmp, file_name) {
                        for &j in &done {
                            let (dir, _, file_name, mode) = &staged[j];
                            let undo: OsString = format!(".{}.forge-undo-{pid}", file_name.to_string_lossy()).into();
                            let _ = dir.replace(file_name, &undo, &plan.files[j].2, *mode);
                        }
                        unstage(&staged[i..]);
                        return Err(ToolError::PatchFailed {
                            file: plan.files[i].0.clone().into(),
                            message: format!("cannot replace: {e}"),
                        });
                    }
                    done.push(i);
                }
                if let Ok(mut known) = hashes.lock() {
                    for (_, path, _, new) in &plan.files {
                        known.insert(path.clone(), sha256(new.as_bytes()));
                    }
                }
                let names: Vec<&str> = plan.files.iter().map(|(n, ..)| n.as_str()).collect();
                Ok(format!("patched {}", names.join(", ")))
            })
            .await
            .map_err(|e| ToolError::ExecutionFailed { tool: "apply_patch".into(), message: e.to_string() })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::read_file::ReadFile;
    use serde_json::json;

    fn ctx(dir: &std::path::Path) -> ToolCtx {
        ToolCtx::for_tests(dir, 100_000)
    }

    #[test]
    fn a_patched_script_stays_executable_and_no_temporary_file_is_left() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "echo one\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let patch = "LP1\nF run.sh\nR\necho one\n.\necho two\n.\nEND";
        assert_eq!(
            rt.block_on(ApplyPatch.execute(json!({"patch": patch}), &ctx(dir.path()))),
            Ok("patched run.sh".into())
        );
        assert_eq!(std::fs::read_to_string(&script).unwrap_or_default(), "echo two\n");
        let mode = std::fs::metadata(&script).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o755);
        assert_eq!(std::fs::read_dir(dir.path()).map(|d| d.count()).unwrap_or(0), 1, "only the script");
    }

    #[test]
    fn a_failing_patch_changes_no_file_and_a_stale_file_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("b.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let c = ctx(dir.path());
        // The second file's hunk fails: the first file must stay as it was.
        let bad = "LP1\nF a.txt\nR\none\n.\nONE\n.\nF b.txt\nE\nmissing\n.\nEND";
        let r = rt.block_on(ApplyPatch.execute(json!({"patch": bad}), &c));
        assert!(
            matches!(&r, Err(ToolError::PatchFailed { file, message }) if file.ends_with("b.txt") && message.contains("not in the file")),
            "{r:?}"
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap_or_default(), "one\ntwo\n");

        let good = "LP1\nF a.txt\nR\none\n.\nONE\n.\nF b.txt\nT\ny\n.\nEND";
        assert!(ApplyPatch.approval_summary(&json!({"patch": good}), &c.sandbox).contains("+ONE"));
        assert_eq!(rt.block_on(ApplyPatch.execute(json!({"patch": good}), &c)), Ok("patched a.txt, b.txt".into()));
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap_or_default(), "ONE\ntwo\n");

        // Read, then someone else edits it: the next patch is refused.
        let _ = rt.block_on(ReadFile.execute(json!({"path": "b.txt"}), &c));
        std::fs::write(dir.path().join("b.txt"), "edited elsewhere\n").unwrap_or_else(|e| panic!("{e}"));
        let stale = rt.block_on(ApplyPatch.execute(json!({"patch": "LP1\nF b.txt\nT\nz\n.\nEND"}), &c));
        assert!(matches!(stale, Err(ToolError::StaleFile { .. })), "{stale:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap_or_default(), "edited elsewhere\n");
    }
}
