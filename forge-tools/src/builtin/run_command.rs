//! `run_command`: a shell command in the session's working directory,
//! under a supervisor (a cancel or timeout kills all it started, and so
//! does the daemon's death: see [`crate::supervisor`]), in the kernel
//! sandbox unless the user approved running it outside (`sandbox: false`),
//! with an environment cleaned of secrets, output capped, and
//! stdout/stderr streamed to clients while it runs.

use std::process::Stdio;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{RiskLevel, ToolCtx, ToolError, ToolExecutor, ToolFut, ToolOutput};

pub struct RunCommand;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The command line, run by a POSIX shell
    command: String,
    /// false: run outside the sandbox (the user must approve it); omit otherwise
    #[serde(default)]
    sandbox: Option<bool>,
}

/// Whether a call asks to run outside the sandbox.
pub fn wants_no_sandbox(args: &Value) -> bool {
    args.get("sandbox").and_then(Value::as_bool) == Some(false)
}

/// Names of environment variables a command must not see.
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"].iter().any(|w| upper.contains(w))
}

/// The daemon's variables a command must not get: secret-looking ones
/// unless `[tools.sandbox] pass_env` names them, and any whose name is
/// not text.
pub fn hidden_env(pass: &[String]) -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_str().is_none_or(|name| is_secret(name) && !pass.iter().any(|p| p == name)))
        .collect()
}

/// Variables naming the user's agents and buses, hidden (with their
/// sockets) from confined commands.
pub const SOCKET_VARS: &[&str] = &["SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "GPG_AGENT_INFO"];

/// The shell commands run in: `$SHELL` if it is a POSIX-style one, else
/// `/bin/sh`.
pub fn shell() -> String {
    match std::env::var("SHELL") {
        Ok(s) if ["/bash", "/zsh", "/sh", "/dash", "/ksh"].iter().any(|n| s.ends_with(n)) => s,
        _ => "/bin/sh".into(),
    }
}

/// What every process started for the model starts with: the session's
/// directory; its private temporary directory as `TMPDIR`, `TMP` and
/// `TEMP`; none of the daemon's secret-looking variables (unless
/// `pass_env` names them); and, when confined, none naming the user's
/// agents and buses (their sockets are hidden too). Variables are removed
/// one by one: the supervisor's own stays.
pub fn prepare(cmd: &mut tokio::process::Command, sandbox: &crate::Sandbox, tmp: &std::path::Path, confined: bool) {
    cmd.current_dir(sandbox.cwd());
    for name in hidden_env(&sandbox.command_settings().pass_env) {
        cmd.env_remove(name);
    }
    if confined {
        for name in SOCKET_VARS {
            cmd.env_remove(name);
        }
    }
    for var in ["TMPDIR", "TMP", "TEMP"] {
        cmd.env(var, tmp);
    }
}

/// A private temporary directory for one command (`TMPDIR`), removed
/// when it ends.
pub fn private_tmpdir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("forge-cmd-").tempdir()
}

impl ToolExecutor for RunCommand {
    fn name(&self) -> &str {
        "run_command"
    }
    fn description(&self) -> &str {
        "Run a shell command in the working directory and return its exit status, stdout and stderr. \
Commands run in a sandbox (introspect shows it): they write only inside the session's roots and $TMPDIR, \
cannot read the home directory's secrets, and have no network unless configured. When the sandbox refuses \
something, the result says what; if the command really needs it, run it again with \"sandbox\": false, \
which the user must approve."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
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
    fn runs_commands(&self) -> bool {
        true
    }
    fn stops_on_time(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, sandbox: &crate::Sandbox) -> String {
        let line = args.get("command").and_then(Value::as_str).unwrap_or("?");
        if wants_no_sandbox(args) {
            format!("run OUTSIDE the sandbox (full access to your files and network): {line}")
        } else if sandbox.command_settings().kernel_active() {
            format!("run in the sandbox: {line}")
        } else {
            format!("run in the working directory (not confined by the kernel): {line}")
        }
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: "run_command".into(), message };
            let tmp = private_tmpdir().map_err(|e| failed(format!("cannot make a temporary directory: {e}")))?;
            let confinement =
                if args.sandbox == Some(false) { None } else { ctx.sandbox.confinement(tmp.path(), false) };
            let mut cmd = crate::supervisor::command(&shell(), &args.command, confinement.as_ref());
            prepare(&mut cmd, &ctx.sandbox, tmp.path(), confinement.is_some());
            cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            let mut child = cmd.spawn().map_err(|e| failed(format!("cannot start the shell: {e}")))?;
            let mut stop = crate::supervisor::StopGuard::new(child.id());
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let max = ctx.limits.output_bytes;
            let mut run = Box::pin(async {
                tokio::join!(pump(stdout, "stdout", ctx, max), pump(stderr, "stderr", ctx, max), child.wait())
            });
            let limit = ctx.timeout.unwrap_or(self.timeout());
            let (out, err, status, timed_out) = match tokio::time::timeout(limit, &mut run).await {
                Ok((out, err, status)) => (out, err, status, false),
                Err(_) => {
                    // The supervisor kills everything the command started
                    // and says how much on stderr, which ends the pipes.
                    stop.stop();
                    match tokio::time::timeout(std::time::Duration::from_secs(10), &mut run).await {
                        Ok((out, err, status)) => (out, err, status, true),
                        Err(_) => return Err(ToolError::Timeout { tool: "run_command".into(), elapsed: limit }),
                    }
                }
            };
            let status = status.map_err(|e| failed(e.to_string()))?;
            // The supervisor has cleaned up after the command.
            if crate::supervisor::enabled() {
                stop.disarm();
            }
            let code = status.code().map(|c| c.to_string()).unwrap_or_else(|| "killed by a signal".into());
            let head = if timed_out {
                let err = String::from_utf8_lossy(&err.kept);
                let killed = stopped_count(&err).map(|n| format!(": {n} process(es) killed")).unwrap_or_default();
                format!("timed out after {} s and was stopped{killed}\n", limit.as_secs())
            } else {
                format!("exit status: {code}\n")
            };
            // Room for the labels and the sandbox's note after the streams.
            let (out, err) = streams(&out, &err, max.saturating_sub(head.len() + (max / 4).min(1024)));
            let mut text = head;
            if !out.is_empty() {
                text.push_str(&format!("--- stdout ---\n{out}"));
            }
            if !err.is_empty() {
                text.push_str(&format!("\n--- stderr ---\n{err}"));
            }
            if let Some(c) = &confinement
                && let Some(note) = crate::confine::explain::note(
                    &format!("{out}\n{err}"),
                    ctx.sandbox.cwd(),
                    &c.policy,
                    ctx.sandbox.roots(),
                )
            {
                text.push_str(&note);
            }
            if timed_out { Err(failed(text)) } else { Ok(text) }
        })
    }
}

/// How many processes the supervisor said it killed at a stop.
fn stopped_count(stderr: &str) -> Option<u64> {
    let rest = stderr.lines().find_map(|l| l.strip_prefix("[forge sandbox] stopped: "))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Reads a pipe to its end, forwarding chunks as they come and keeping at
/// most `max` bytes (the rest is counted, and the cut is said).
async fn pump(pipe: Option<impl AsyncRead + Unpin>, stream: &'static str, ctx: &ToolCtx, max: usize) -> Captured {
    let Some(mut pipe) = pipe else { return Captured { kept: Vec::new(), total: 0 } };
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = vec![0u8; 8192];
    // Live output a session too busy to take it missed: said, not hidden.
    let mut skipped = 0usize;
    let skip_note = |n: usize| format!("\n[forge: {n} bytes of live output skipped while the session caught up]\n");
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
            let mut text = String::from_utf8_lossy(&buf[..n]).into_owned();
            if skipped > 0 {
                text.insert_str(0, &skip_note(skipped));
            }
            match tx.try_send(ToolOutput { stream, text }) {
                Ok(()) => skipped = 0,
                Err(_) => skipped += n,
            }
        }
    }
    if skipped > 0
        && let Some(tx) = &ctx.output
    {
        let _ = tx.try_send(ToolOutput { stream, text: skip_note(skipped) });
    }
    Captured { kept, total }
}

/// What a stream printed: the bytes kept (at most the output limit) and
/// how many there were.
struct Captured {
    kept: Vec<u8>,
    total: usize,
}

/// The two streams as the result shows them, within `budget` bytes
/// together (stderr keeps at least a quarter when both are long); a cut
/// one says how much the command printed in all.
fn streams(out: &Captured, err: &Captured, budget: usize) -> (String, String) {
    const NOTE: usize = 100;
    let room = budget.saturating_sub(2 * NOTE);
    let (o, e) = (out.kept.len(), err.kept.len());
    let err_room = if o + e <= room { e } else { e.min((room / 4).max(room.saturating_sub(o))) };
    let out_room = room.saturating_sub(err_room);
    (shown(out, out_room, "stdout"), shown(err, err_room, "stderr"))
}

fn shown(c: &Captured, room: usize, stream: &str) -> String {
    let mut text = String::from_utf8_lossy(&c.kept).into_owned();
    if text.len() > room {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    let shown = text.len().min(c.total);
    if c.total > shown || c.kept.len() > shown {
        text.push_str(&format!(
            "\n[{stream} truncated: the command printed {} bytes, {} shown]",
            thousands(c.total),
            thousands(shown)
        ));
    }
    text
}

/// `n` with its thousands apart: 200,000,004.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cut_stream_says_what_the_command_printed_in_all() {
        assert_eq!(thousands(200_000_004), "200,000,004");
        assert_eq!(thousands(999), "999");
        let out = Captured { kept: vec![b'x'; 1000], total: 200_000_004 };
        let err = Captured { kept: b"warning\n".to_vec(), total: 8 };
        let (o, e) = streams(&out, &err, 700);
        assert!(o.ends_with("[stdout truncated: the command printed 200,000,004 bytes, 492 shown]"), "{o}");
        assert_eq!(e, "warning\n", "the short stream is whole");
        assert!(o.len() + e.len() <= 700);
        let (o, e) = streams(&Captured { kept: b"ok".to_vec(), total: 2 }, &err, 700);
        assert_eq!((o.as_str(), e.as_str()), ("ok", "warning\n"), "nothing cut, nothing said");
    }

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
