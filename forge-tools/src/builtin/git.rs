//! The git tools: thin, checked wrappers over the `git` command line (the
//! semantics users know), run without a shell in the session's working
//! directory. Paths go through the sandbox; revisions and branch names may
//! not look like options.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
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

/// A call's arguments as the tool's `Args` type.
fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, ToolError> {
    crate::parse_args(args.clone())
}

/// A revision or branch name: never something git would read as an option.
fn name_arg(v: String, key: &str) -> Result<String, ToolError> {
    if v.is_empty() || v.starts_with('-') || v.contains(char::is_whitespace) {
        return Err(bad(format!("`{v}` is not a valid {key}")));
    }
    Ok(v)
}

fn path_arg(p: &str, sandbox: &Sandbox) -> Result<String, ToolError> {
    sandbox.resolve(p).map_err(ToolError::SandboxViolation)?;
    Ok(p.to_string())
}

fn paths(list: &[String], sandbox: &Sandbox) -> Result<Vec<String>, ToolError> {
    if list.is_empty() {
        return Err(bad("`paths` is empty"));
    }
    list.iter().map(|p| path_arg(p, sandbox)).collect()
}

/// A git tool's schema: its `Args`', with `required` listed even when
/// empty, as the git tools have always been offered.
fn schema<T: JsonSchema>() -> Value {
    let mut schema = crate::schema_of::<T>();
    if let Some(map) = schema.as_object_mut() {
        map.entry("required").or_insert_with(|| json!([]));
        crate::schema::put_last(map, "additionalProperties");
    }
    schema
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffArgs {
    #[serde(default)]
    staged: bool,
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogArgs {
    #[schemars(range(min = 1))]
    max_count: Option<u64>,
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShowArgs {
    rev: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BlameArgs {
    path: String,
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    paths: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CommitArgs {
    message: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BranchArgs {
    create: Option<String>,
    delete: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckoutArgs {
    branch: String,
    #[serde(default)]
    create: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RestoreArgs {
    paths: Vec<String>,
    #[serde(default)]
    staged: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StashArgs {
    // A string checked by the build, whose error names the actions.
    #[schemars(extend("enum" = ["push", "pop", "list"]))]
    action: String,
    message: Option<String>,
}

pub fn all() -> Vec<GitTool> {
    vec![
        GitTool {
            name: "git_status",
            description: "Show the working tree status (git status --porcelain -b).",
            schema: schema::<StatusArgs>,
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, _| {
                parse::<StatusArgs>(a)?;
                Ok(vec!["status".into(), "--porcelain=v1".into(), "-b".into()])
            },
        },
        GitTool {
            name: "git_diff",
            description: "Show changes in the working tree, or staged ones, optionally for one path.",
            schema: schema::<DiffArgs>,
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let a: DiffArgs = parse(a)?;
                let mut v = vec!["diff".to_string()];
                if a.staged {
                    v.push("--cached".into());
                }
                if let Some(p) = a.path {
                    v.extend(["--".to_string(), path_arg(&p, sb)?]);
                }
                Ok(v)
            },
        },
        GitTool {
            name: "git_log",
            description: "Show recent commits (hash, date, author, subject), optionally for one path.",
            schema: schema::<LogArgs>,
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let a: LogArgs = parse(a)?;
                let n = a.max_count.unwrap_or(20).min(500);
                let mut v =
                    vec!["log".into(), format!("-n{n}"), "--date=short".into(), "--format=%h %ad %an %s".into()];
                if let Some(p) = a.path {
                    v.extend(["--".to_string(), path_arg(&p, sb)?]);
                }
                Ok(v)
            },
        },
        GitTool {
            name: "git_show",
            description: "Show a commit: message, stat and patch.",
            schema: schema::<ShowArgs>,
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, _| {
                let a: ShowArgs = parse(a)?;
                Ok(vec!["show".into(), "--stat".into(), "--patch".into(), name_arg(a.rev, "rev")?])
            },
        },
        GitTool {
            name: "git_blame",
            description: "Show who last changed each line of a file, optionally for a line range.",
            schema: schema::<BlameArgs>,
            side_effecting: false,
            risk: RiskLevel::Low,
            build: |a, sb| {
                let a: BlameArgs = parse(a)?;
                let mut v = vec!["blame".to_string()];
                if let Some(s) = a.start_line {
                    let e = a.end_line.unwrap_or(s);
                    v.push(format!("-L{s},{e}"));
                }
                v.extend(["--".to_string(), path_arg(&a.path, sb)?]);
                Ok(v)
            },
        },
        GitTool {
            name: "git_add",
            description: "Stage files for the next commit.",
            schema: schema::<AddArgs>,
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, sb| {
                let a: AddArgs = parse(a)?;
                Ok([vec!["add".to_string(), "--".to_string()], paths(&a.paths, sb)?].concat())
            },
        },
        GitTool {
            name: "git_commit",
            description: "Commit the staged changes with a message (conventional commits preferred).",
            schema: schema::<CommitArgs>,
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| {
                let a: CommitArgs = parse(a)?;
                if a.message.trim().is_empty() {
                    return Err(bad("`message` is empty"));
                }
                Ok(vec!["commit".into(), "-m".into(), a.message])
            },
        },
        GitTool {
            name: "git_branch",
            description: "List branches, or create (`create`) or delete (`delete`, merged only) one.",
            schema: schema::<BranchArgs>,
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| match parse::<BranchArgs>(a)? {
                BranchArgs { create: Some(c), .. } => Ok(vec!["branch".into(), name_arg(c, "create")?]),
                BranchArgs { delete: Some(d), .. } => Ok(vec!["branch".into(), "-d".into(), name_arg(d, "delete")?]),
                _ => Ok(vec!["branch".into(), "--list".into()]),
            },
        },
        GitTool {
            name: "git_checkout",
            description: "Switch to a branch (`create: true` makes it first).",
            schema: schema::<CheckoutArgs>,
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| {
                let a: CheckoutArgs = parse(a)?;
                let mut v = vec!["checkout".to_string()];
                if a.create {
                    v.push("-b".into());
                }
                v.push(name_arg(a.branch, "branch")?);
                Ok(v)
            },
        },
        GitTool {
            name: "git_restore",
            description: "Discard uncommitted changes to files (destructive), or unstage them with `staged: true`.",
            schema: schema::<RestoreArgs>,
            side_effecting: true,
            risk: RiskLevel::High,
            build: |a, sb| {
                let a: RestoreArgs = parse(a)?;
                let mut v = vec!["restore".to_string()];
                if a.staged {
                    v.push("--staged".into());
                }
                v.push("--".into());
                v.extend(paths(&a.paths, sb)?);
                Ok(v)
            },
        },
        GitTool {
            name: "git_stash",
            description: "Stash changes (`push`, with an optional message), restore the latest (`pop`), or `list`.",
            schema: schema::<StashArgs>,
            side_effecting: true,
            risk: RiskLevel::Medium,
            build: |a, _| {
                let a: StashArgs = parse(a)?;
                match a.action.as_str() {
                    "push" => {
                        let mut v = vec!["stash".to_string(), "push".to_string()];
                        if let Some(m) = a.message {
                            v.extend(["-m".to_string(), m]);
                        }
                        Ok(v)
                    }
                    "pop" => Ok(vec!["stash".into(), "pop".into()]),
                    "list" => Ok(vec!["stash".into(), "list".into()]),
                    _ => Err(bad("`action` is push, pop or list")),
                }
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
