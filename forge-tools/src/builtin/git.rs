//! The git tools: thin, checked wrappers over the `git` command line (the
//! semantics users know), run without a shell in the session's working
//! directory. Paths go through the sandbox; revisions and branch names may
//! not look like options.

use serde_json::{Value, json};

use crate::{RiskLevel, Sandbox, ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

type Build = fn(&Value, &Sandbox) -> Result<Vec<String>, ToolError>;

pub struct GitTool {
    name: &'static str,
    description: &'static str,
    schema: fn() -> Value,
    side_effecting: bool,
    risk: RiskLevel,
    build: Build,
}

fn bad(message: impl Into<String>) -> ToolError {
    ToolError::BadArgs { message: message.into() }
}

fn string(args: &Value, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A revision or branch name: never something git would read as an option.
fn name_arg(args: &Value, key: &str) -> Result<String, ToolError> {
    let v = string(args, key).ok_or_else(|| bad(format!("`{key}` is required")))?;
    if v.is_empty() || v.starts_with('-') || v.contains(char::is_whitespace) {
        return Err(bad(format!("`{v}` is not a valid {key}")));
    }
    Ok(v)
}

fn path_arg(p: &str, sandbox: &Sandbox) -> Result<String, ToolError> {
    sandbox.resolve(p).map_err(ToolError::SandboxViolation)?;
    Ok(p.to_string())
}

fn paths(args: &Value, sandbox: &Sandbox) -> Result<Vec<String>, ToolError> {
    let list = args.get("paths").and_then(Value::as_array).ok_or_else(|| bad("`paths` (a list) is required"))?;
    if list.is_empty() {
        return Err(bad("`paths` is empty"));
    }
    list.iter().map(|p| p.as_str().ok_or_else(|| bad("paths are strings")).and_then(|p| path_arg(p, sandbox))).collect()
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

pub fn all() -> Vec<GitTool> {
    vec![
        GitTool {
            name: "git_status",
            description: "Show the working tree status (git status --porcelain -b).",
            schema: || obj(json!({}), &[]),
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |_, _| Ok(vec!["status".into(), "--porcelain=v1".into(), "-b".into()]),
        },
        GitTool {
            name: "git_diff",
            description: "Show changes in the working tree, or staged ones, optionally for one path.",
            schema: || obj(json!({"staged": {"type": "boolean"}, "path": {"type": "string"}}), &[]),
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let mut v = vec!["diff".to_string()];
                if a.get("staged").and_then(Value::as_bool).unwrap_or(false) {
                    v.push("--cached".into());
                }
                if let Some(p) = string(a, "path") {
                    v.extend(["--".to_string(), path_arg(&p, sb)?]);
                }
                Ok(v)
            },
        },
        GitTool {
            name: "git_log",
            description: "Show recent commits (hash, date, author, subject), optionally for one path.",
            schema: || obj(json!({"max_count": {"type": "integer", "minimum": 1}, "path": {"type": "string"}}), &[]),
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let n = a.get("max_count").and_then(Value::as_u64).unwrap_or(20).min(500);
                let mut v =
                    vec!["log".into(), format!("-n{n}"), "--date=short".into(), "--format=%h %ad %an %s".into()];
                if let Some(p) = string(a, "path") {
                    v.extend(["--".to_string(), path_arg(&p, sb)?]);
                }
                Ok(v)
            },
        },
        GitTool {
            name: "git_show",
            description: "Show a commit: message, stat and patch.",
            schema: || obj(json!({"rev": {"type": "string"}}), &["rev"]),
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, _| Ok(vec!["show".into(), "--stat".into(), "--patch".into(), name_arg(a, "rev")?]),
        },
        GitTool {
            name: "git_blame",
            description: "Show who last changed each line of a file, optionally for a line range.",
            schema: || {
                obj(
                    json!({"path": {"type": "string"}, "start_line": {"type": "integer", "minimum": 1}, "end_line": {"type": "integer", "minimum": 1}}),
                    &["path"],
                )
            },
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let mut v = vec!["blame".to_string()];
                if let Some(s) = a.get("start_line").and_then(Value::as_u64) {
                    let e = a.get("end_line").and_then(Value::as_u64).unwrap_or(s);
                    v.push(format!("-L{s},{e}"));
                }
                let p = string(a, "path").ok_or_else(|| bad("`path` is required"))?;
                v.extend(["--".to_string(), path_arg(&p, sb)?]);
                Ok(v)
            },
        },
        GitTool {
            name: "git_add",
            description: "Stage files for the next commit.",
            schema: || obj(json!({"paths": {"type": "array", "items": {"type": "string"}}}), &["paths"]),
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, sb| Ok([vec!["add".to_string(), "--".to_string()], paths(a, sb)?].concat()),
        },
        GitTool {
            name: "git_commit",
            description: "Commit the staged changes with a message (conventional commits preferred).",
            schema: || obj(json!({"message": {"type": "string"}}), &["message"]),
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| {
                let m = string(a, "message")
                    .filter(|m| !m.trim().is_empty())
                    .ok_or_else(|| bad("`message` is required"))?;
                Ok(vec!["commit".into(), "-m".into(), m])
            },
        },
        GitTool {
            name: "git_branch",
            description: "List branches, or create (`create`) or delete (`delete`, merged only) one.",
            schema: || obj(json!({"create": {"type": "string"}, "delete": {"type": "string"}}), &[]),
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| match (a.get("create"), a.get("delete")) {
                (Some(_), _) => Ok(vec!["branch".into(), name_arg(a, "create")?]),
                (None, Some(_)) => Ok(vec!["branch".into(), "-d".into(), name_arg(a, "delete")?]),
                (None, None) => Ok(vec!["branch".into(), "--list".into()]),
            },
        },
        GitTool {
            name: "git_checkout",
            description: "Switch to a branch (`create: true` makes it first).",
            schema: || obj(json!({"branch": {"type": "string"}, "create": {"type": "boolean"}}), &["branch"]),
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| {
                let mut v = vec!["checkout".to_string()];
                if a.get("create").and_then(Value::as_bool).unwrap_or(false) {
                    v.push("-b".into());
                }
                v.push(name_arg(a, "branch")?);
                Ok(v)
            },
        },
        GitTool {
            name: "git_restore",
            description: "Discard uncommitted changes to files (destructive), or unstage them with `staged: true`.",
            schema: || {
                obj(
                    json!({"paths": {"type": "array", "items": {"type": "string"}}, "staged": {"type": "boolean"}}),
                    &["paths"],
                )
            },
            side_effecting: true,
            risk: RiskLevel::High,
            build: |a, sb| {
                let mut v = vec!["restore".to_string()];
                if a.get("staged").and_then(Value::as_bool).unwrap_or(false) {
                    v.push("--staged".into());
                }
                v.push("--".into());
                v.extend(paths(a, sb)?);
                Ok(v)
            },
        },
        GitTool {
            name: "git_stash",
            description: "Stash changes (`push`, with an optional message), restore the latest (`pop`), or `list`.",
            schema: || {
                obj(
                    json!({"action": {"type": "string", "enum": ["push", "pop", "list"]}, "message": {"type": "string"}}),
                    &["action"],
                )
            },
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| match string(a, "action").as_deref() {
                Some("push") => {
                    let mut v = vec!["stash".to_string(), "push".to_string()];
                    if let Some(m) = string(a, "message") {
                        v.extend(["-m".to_string(), m]);
                    }
                    Ok(v)
                }
                Some("pop") => Ok(vec!["stash".into(), "pop".into()]),
                Some("list") => Ok(vec!["stash".into(), "list".into()]),
                _ => Err(bad("`action` is push, pop or list")),
            },
        },
    ]
}

impl ToolExecutor for GitTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        self.description
    }
    fn schema(&self) -> Value {
        (self.schema)()
    }
    fn changes_files_anywhere(&self) -> bool {
        matches!(self.name, "git_checkout" | "git_restore" | "git_stash")
    }
    fn is_side_effecting(&self) -> bool {
        self.side_effecting
    }
    fn risk_level(&self) -> RiskLevel {
        self.risk
    }
    fn approval_summary(&self, args: &Value, sandbox: &Sandbox) -> String {
        match (self.build)(args, sandbox) {
            Ok(argv) => format!("git {}", argv.join(" ")),
            Err(e) => format!("would fail: {e}"),
        }
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let argv = (self.build)(&args, &ctx.sandbox)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: self.name.into(), message };
            let tmp = super::run_command::private_tmpdir()
                .map_err(|e| failed(format!("cannot make a temporary directory: {e}")))?;
            // What the repository's own configuration names, read with
            // `.git` read-only, is switched off for the call itself.
            let read_only = ctx.sandbox.confinement(tmp.path(), false);
            let local = run_git(ctx, &["config", "--local", "--includes", "--list"], read_only.as_ref(), tmp.path())
                .await
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let run_hooks = ctx.sandbox.git_hooks();
            let mut full = super::git_config::overrides(&local, run_hooks);
            let subcommand = argv.first().map(String::as_str).unwrap_or("");
            full.push(subcommand.to_string());
            full.extend(super::git_config::diff_flags(subcommand).iter().map(|f| f.to_string()));
            full.extend(argv.iter().skip(1).cloned());
            // git may run hooks: it is confined like a command, with `.git`
            // writable (the one thing the git tools are for) but for its
            // configuration and hooks.
            let hooks_dir = if run_hooks { super::git_config::hooks_dir(&local) } else { None };
            let confinement = ctx.sandbox.git_confinement(tmp.path(), hooks_dir);
            let full: Vec<&str> = full.iter().map(String::as_str).collect();
            let out = run_git(ctx, &full, confinement.as_ref(), tmp.path())
                .await
                .map_err(|e| failed(format!("cannot run git: {e}")))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                return Err(failed(format!("git {subcommand} failed: {}", stderr.trim())));
            }
            let mut text = stdout.into_owned();
            if text.trim().is_empty() {
                text = if stderr.trim().is_empty() { "(no output)".into() } else { stderr.into_owned() };
            }
            Ok(truncate_output(text, ctx.limits.output_bytes))
        })
    }
}

/// Runs git with `args` in the session's directory, supervised and
/// (given a confinement) sandboxed.
async fn run_git(
    ctx: &ToolCtx,
    args: &[&str],
    confinement: Option<&crate::supervisor::Confinement>,
    tmp: &std::path::Path,
) -> std::io::Result<std::process::Output> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut cmd = crate::supervisor::exec_command("git", &args, confinement);
    super::run_command::prepare(&mut cmd, &ctx.sandbox, tmp, confinement.is_some());
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env("GIT_SEQUENCE_EDITOR", "true")
        .env_remove("GIT_EXTERNAL_DIFF")
        .env_remove("GIT_SSH_COMMAND")
        .env_remove("GIT_SSH")
        .env_remove("GIT_ASKPASS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn()?;
    let mut stop = crate::supervisor::StopGuard::new(child.id());
    let out = child.wait_with_output().await?;
    if crate::supervisor::enabled() {
        stop.disarm();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> GitTool {
        all().into_iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name}"))
    }

    fn run(dir: &std::path::Path, name: &str, args: Value) -> Result<String, ToolError> {
        crate::run_blocking(&tool(name), args, &ToolCtx::for_tests(dir, 100_000))
    }

    #[test]
    fn a_small_git_workflow_and_option_injection_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        let git = |args: &[&str]| std::process::Command::new("git").args(args).current_dir(d).output();
        if git(&["init", "-q"]).is_err() {
            eprintln!("SKIPPED: no git on this machine");
            return;
        }
        let _ = git(&["config", "user.email", "t@example.com"]);
        let _ = git(&["config", "user.name", "Test"]);
        std::fs::write(d.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(run(d, "git_status", json!({})).unwrap_or_default().contains("?? a.txt"));
        assert!(run(d, "git_add", json!({"paths": ["a.txt"]})).is_ok());
        assert!(run(d, "git_commit", json!({"message": "feat: first"})).is_ok());
        assert!(run(d, "git_log", json!({})).unwrap_or_default().contains("feat: first"));
        std::fs::write(d.join("a.txt"), "two\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(run(d, "git_diff", json!({})).unwrap_or_default().contains("+two"));
        assert!(run(d, "git_restore", json!({"paths": ["a.txt"]})).is_ok());
        assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap_or_default(), "one\n");
        assert!(matches!(run(d, "git_show", json!({"rev": "--output=/tmp/x"})), Err(ToolError::BadArgs { .. })));
        assert!(matches!(run(d, "git_add", json!({"paths": ["../outside"]})), Err(ToolError::SandboxViolation(_))));
        assert!(run(d, "git_checkout", json!({"branch": "work", "create": true})).is_ok());
        assert!(run(d, "git_branch", json!({})).unwrap_or_default().contains("* work"));
    }
}
