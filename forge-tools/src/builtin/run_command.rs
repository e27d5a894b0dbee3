//! `run_command`: a shell command in the session's working directory, in
//! its own process group (a cancel or timeout kills all of it, and so does
//! the daemon's death: see [`crate::supervisor`]), with an
//! environment cleaned of secrets, output capped, and stdout/stderr streamed
//! to clients while it runs.

use std::process::Stdio;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{RiskLevel, ToolCtx, ToolError, ToolExecutor, ToolFut, ToolOutput};

pub struct RunCommand;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
}

/// Names of environment variables a command must not see.
fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"].iter().any(|w| upper.contains(w))
}

/// The shell commands run in: `$SHELL` if it is a POSIX-style one, else
/// `/bin/sh`.
pub fn shell() -> String {
    match std::env::var("SHELL") {
        Ok(s) if ["/bash", "/zsh", "/sh", "/dash", "/ksh"].iter().any(|n| s.ends_with(n)) => s,
        _ => "/bin/sh".into(),
    }
}

/// Kills the command's whole process group when dropped: on completion
/// (stray children), on timeout, and when the call is cancelled.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) on a process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}

impl ToolExecutor for RunCommand {
    fn name(&self) -> &str {
        "run_command"
    }
    fn description(&self) -> &str {
        "Run a shell command in the working directory and return its exit status, stdout and stderr."
    }
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line, run by a POSIX shell"}},
            "required": ["command"],
            "additionalProperties": false
        })
    }
    fn changes_files_anywhere(&self) -> bool {
        true
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn risk_level(&self) -> RiskLevel {
        RiskLevel::High
    }
    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(300)
    }
    fn approval_summary(&self, args: &Value, _sandbox: &crate::Sandbox) -> String {
        format!("run in the working directory: {}", args.get("command").and_then(Value::as_str).unwrap_or("?"))
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: "run_command".into(), message };
            // Under a supervisor that kills the group if the daemon dies.
            let mut cmd = crate::supervisor::command(&shell(), &args.command);
            cmd.current_dir(ctx.sandbox.cwd());
            cmd.env_clear();
            for (k, v) in std::env::vars_os() {
                if let Some(name) = k.to_str()
                    && !is_secret(name)
                {
                    cmd.env(&k, v);
                }
            }
            cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.process_group(0);
            cmd.kill_on_drop(true);
            let mut child = cmd.spawn().map_err(|e| failed(format!("cannot start the shell: {e}")))?;
            let _group = GroupGuard(child.id().map(|p| p as i32));
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let max = ctx.limits.output_bytes;
            let (out, err, status) =
                tokio::join!(pump(stdout, "stdout", ctx, max), pump(stderr, "stderr", ctx, max), child.wait());
            let status = status.map_err(|e| failed(e.to_string()))?;
            let code = status.code().map(|c| c.to_string()).unwrap_or_else(|| "killed by a signal".into());
            let mut text = format!("exit status: {code}\n");
            if !out.is_empty() {
                text.push_str(&format!("--- stdout ---\n{out}"));
            }
            if !err.is_empty() {
                text.push_str(&format!("\n--- stderr ---\n{err}"));
            }
            Ok(text)
        })
    }
}

/// Reads a pipe to its end, forwarding chunks as they come and keeping at
/// most `max` bytes (the rest is counted, and the cut is said).
async fn pump(pipe: Option<impl AsyncRead + Unpin>, stream: &'static str, ctx: &ToolCtx, max: usize) -> String {
    let Some(mut pipe) = pipe else { return String::new() };
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n;
        if kept.len() < max {
            let take = n.min(max - kept.len());
            kept.extend_from_slice(&buf[..take]);
        }
        if let Some(tx) = &ctx.output {
            let _ = tx.try_send(ToolOutput { stream, text: String::from_utf8_lossy(&buf[..n]).into_owned() });
        }
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if total > kept.len() {
        text.push_str(&format!("\n[{stream} truncated: {} of {total} bytes kept]", kept.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(dir: &std::path::Path) -> ToolCtx {
        ToolCtx::for_tests(dir, 1000)
    }

    #[test]
    fn runs_in_the_working_directory_and_reports_status_and_both_streams() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let c = ctx(dir.path());
        let out =
            rt.block_on(RunCommand.execute(json!({"command": "pwd; echo err >&2; exit 3"}), &c)).unwrap_or_default();
        assert!(out.contains("exit status: 3"), "{out}");
        assert!(out.contains(&dir.path().canonicalize().map(|p| p.display().to_string()).unwrap_or_default()), "{out}");
        assert!(out.contains("--- stderr ---\nerr"), "{out}");
    }

    #[test]
    fn secret_looking_variables_are_not_passed_on() {
        for name in ["ANTHROPIC_API_KEY", "GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY"] {
            assert!(is_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM"] {
            assert!(!is_secret(name), "{name}");
        }
    }

    #[test]
    fn a_cancelled_command_takes_its_whole_process_group_with_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let marker = dir.path().join("still-running");
        let c = ctx(dir.path());
        let cmd = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        rt.block_on(async {
            let run = RunCommand.execute(json!({"command": cmd}), &c);
            // Dropping the future is what a cancel or a timeout does.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(300), run).await;
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        });
        assert!(!marker.exists(), "the background child was killed with the group");
    }
}
