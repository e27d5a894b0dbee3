//! Hooks: commands the user sets to run at points of a session, in
//! Claude Code's format, so existing hook scripts work.
//!
//! A hook gets the event as JSON on stdin (`session_id`, `cwd`,
//! `hook_event_name`, and per event `tool_name`, `tool_input`,
//! `tool_response`, `prompt`). Exit status 0 goes on (its stdout may add
//! context, or be JSON: `decision` / `reason`, `continue` / `stopReason`,
//! `hookSpecificOutput.permissionDecision`, `additionalContext`); 2 blocks,
//! its stderr the reason the model (or the user) is given; any other
//! status, malformed JSON and a hook killed at its timeout are errors that
//! do not block (shown to the user and journaled), as in Claude Code,
//! unless the hook sets `fail_closed`, when they block what it guards.
//! A project's hooks run in the command sandbox; the user's own
//! (config.toml, `~/.claude/settings.json`) run confined too when they
//! can reach what a confined command may have written, which is nearly
//! always (see `reach.rs`), unless they say `sandbox = false`. Every run
//! is journaled (`hook_ran`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::tools::Sandbox;

mod config;
mod reach;

use config::{DEFAULT_TIMEOUT_SECONDS, compile};
pub use config::{HookConfig, HookEvent, HooksConfig, config_warnings, upgrade_notice, user_claude_settings};
use reach::{Confinement, Origin};

/// Most of a hook's stdout or stderr kept.
const MAX_HOOK_OUTPUT: usize = 64 * 1024;

/// Claude Code's names for Forge's tools, so imported matchers work.
fn claude_names(tool: &str) -> &'static [&'static str] {
    match tool {
        "run_command" => &["Bash"],
        "write_file" => &["Write"],
        "apply_patch" => &["Edit", "MultiEdit"],
        "edit" => &["Edit"],
        "read_file" => &["Read"],
        "glob" => &["Glob"],
        "search" => &["Grep"],
        "web_fetch" => &["WebFetch"],
        _ => &[],
    }
}

/// A hook ready to run.
#[derive(Debug, Clone)]
pub struct Hook {
    pub event: HookEvent,
    matcher: Option<regex::Regex>,
    pub command: String,
    pub timeout: Duration,
    /// Where it was set: `config.toml` or a settings file's path.
    pub source: String,
    /// Whose it is: a project's always runs confined.
    origin: Origin,
    /// Its `sandbox` setting: unset decides by what it reaches.
    pub sandbox: Option<bool>,
    /// Where it may write besides the roots (its own `write_roots`).
    pub write_roots: Vec<String>,
    /// Its errors block (`fail_closed = true`).
    pub fail_closed: bool,
}

impl Hook {
    /// How a run of it in `sandbox` is confined (see `reach.rs`).
    fn confinement(&self, sandbox: &Sandbox) -> Confinement {
        let home = crate::tools::confine::host().and_then(|h| h.home.clone());
        reach::confinement(self.origin, self.sandbox, &self.write_roots, &self.command, sandbox, home.as_deref())
    }

    fn matches(&self, tool: Option<&str>) -> bool {
        let (Some(re), Some(tool)) = (&self.matcher, tool) else { return true };
        re.is_match(tool)
            || claude_names(tool).iter().any(|n| re.is_match(n))
            || (tool.contains("__") && re.is_match(&format!("mcp__{tool}")))
    }
}

/// The hooks in force for a session.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    hooks: Vec<Hook>,
}

impl HookSet {
    /// `config.toml`'s hooks, and (with `import_claude`) those of the
    /// user's Claude settings in `home` and of the project's when the user
    /// trusts the folder (`trusted`, see [`crate::trust`]). Returns what
    /// could not be read too.
    pub fn for_session(config: &HooksConfig, cwd: &Path, trusted: bool, home: Option<&Path>) -> (HookSet, Vec<String>) {
        let mut hooks = Vec::new();
        let mut problems = Vec::new();
        for h in &config.hooks {
            match compile(h.matcher.as_deref()) {
                Ok(matcher) => hooks.push(Hook {
                    event: h.event,
                    matcher,
                    command: h.command.clone(),
                    timeout: Duration::from_secs(h.timeout.unwrap_or(DEFAULT_TIMEOUT_SECONDS)),
                    source: "config.toml".into(),
                    origin: Origin::User,
                    sandbox: h.sandbox,
                    write_roots: h.write_roots.clone().unwrap_or_default(),
                    fail_closed: h.fail_closed.unwrap_or(false),
                }),
                Err(e) => problems.push(format!("config.toml: matcher {:?}: {e}", h.matcher)),
            }
        }
        let mut files: Vec<(std::path::PathBuf, Origin)> = Vec::new();
        if config.import_claude {
            files.extend(home.map(|h| (user_claude_settings(h), Origin::User)));
            if trusted {
                files.extend(
                    ["settings.json", "settings.local.json"].map(|n| (cwd.join(".claude").join(n), Origin::Project)),
                );
            }
        }
        for (path, origin) in files {
            match std::fs::read_to_string(&path) {
                Ok(text) => claude_hooks(&text, &path.display().to_string(), origin, &mut hooks, &mut problems),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => problems.push(format!("{}: {e}", path.display())),
            }
        }
        (HookSet { hooks }, problems)
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks for `event` (and `tool`, for tool events), in order.
    pub fn matching(&self, event: HookEvent, tool: Option<&str>) -> Vec<Hook> {
        self.hooks.iter().filter(|h| h.event == event && h.matches(tool)).cloned().collect()
    }
}

/// The `hooks` section of a Claude settings file: `{EVENT: [{matcher,
/// hooks: [{type: "command", command, timeout}]}]}` (Forge also reads
/// `sandbox` and `fail_closed` on an entry).
fn claude_hooks(text: &str, source: &str, origin: Origin, out: &mut Vec<Hook>, problems: &mut Vec<String>) {
    let settings: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return problems.push(format!("{source}: not JSON: {e}")),
    };
    let Some(events) = settings.get("hooks").and_then(Value::as_object) else { return };
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            problems.push(format!("{source}: hook event {name} is not one Forge runs"));
            continue;
        };
        for group in groups.as_array().into_iter().flatten() {
            let matcher = match compile(group.get("matcher").and_then(Value::as_str)) {
                Ok(m) => m,
                Err(e) => {
                    problems.push(format!("{source}: {name} matcher: {e}"));
                    continue;
                }
            };
            for h in group.get("hooks").and_then(Value::as_array).into_iter().flatten() {
                let kind = h.get("type").and_then(Value::as_str).unwrap_or("command");
                let Some(command) = h.get("command").and_then(Value::as_str).filter(|_| kind == "command") else {
                    problems.push(format!("{source}: {name}: only \"command\" hooks are run"));
                    continue;
                };
                let secs = h.get("timeout").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT_SECONDS);
                let flag = |name: &str| h.get(name).and_then(Value::as_bool);
                let write_roots = h
                    .get("write_roots")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
                    .unwrap_or_default();
                out.push(Hook {
                    event,
                    matcher: matcher.clone(),
                    command: command.to_string(),
                    timeout: Duration::from_secs(secs),
                    source: source.to_string(),
                    origin,
                    sandbox: flag("sandbox"),
                    write_roots,
                    fail_closed: flag("fail_closed") == Some(true),
                });
            }
        }
    }
}

/// What a hook decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    Allow,
    Block,
    Error,
}

/// One hook's run, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    pub event: HookEvent,
    pub command: String,
    pub tool: Option<String>,
    pub decision: HookDecision,
    /// Why it blocked, or what went wrong.
    pub reason: Option<String>,
    /// What it adds for the model.
    pub context: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// It answered `continue: false`: stop (for a `Stop` hook, let the
    /// turn end).
    pub halt: bool,
}

impl HookRun {
    /// The hook's finding in one line for the model or the user.
    pub fn says(&self) -> String {
        let what = match self.decision {
            HookDecision::Block => "blocked",
            HookDecision::Error => "failed",
            HookDecision::Allow => "allowed",
        };
        match &self.reason {
            Some(r) => format!("{} hook `{}` {what}: {r}", self.event.as_str(), self.command),
            None => format!("{} hook `{}` {what}", self.event.as_str(), self.command),
        }
    }
}

/// The JSON a hook reads: the common fields and the event's own.
pub fn input(event: HookEvent, session_id: &str, cwd: &str, extra: Value) -> Value {
    let mut v =
        json!({"session_id": session_id, "cwd": cwd, "hook_event_name": event.as_str(), "transcript_path": null});
    if let (Some(obj), Value::Object(more)) = (v.as_object_mut(), extra) {
        obj.extend(more);
    }
    v
}

async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(pipe) = pipe else { return String::new() };
    let mut buf = Vec::new();
    let _ = pipe.take(MAX_HOOK_OUTPUT as u64).read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// A hook's decision, reason and context, and whether it said
/// `continue: false`.
type Verdict = (HookDecision, Option<String>, Option<String>, bool);

/// Reads a hook's exit status and output into its decision.
fn judge(code: Option<i32>, stdout: &str, stderr: &str) -> Verdict {
    let stderr = stderr.trim();
    let said = |fallback: &str| Some(if stderr.is_empty() { fallback.to_string() } else { stderr.to_string() });
    match code {
        Some(0) => {}
        Some(2) => return (HookDecision::Block, said("blocked, without a reason"), None, false),
        Some(c) if stderr.is_empty() => return (HookDecision::Error, Some(format!("exit status {c}")), None, false),
        Some(c) => return (HookDecision::Error, Some(format!("exit status {c}: {stderr}")), None, false),
        None => return (HookDecision::Error, Some("killed by a signal".into()), None, false),
    }
    let out = stdout.trim();
    if !out.starts_with('{') {
        return (HookDecision::Allow, None, (!out.is_empty()).then(|| out.to_string()), false);
    }
    let v: Value = match serde_json::from_str(out) {
        Ok(v) => v,
        Err(e) => return (HookDecision::Error, Some(format!("its output is not valid JSON: {e}")), None, false),
    };
    let specific = v.get("hookSpecificOutput");
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let context = text(v.get("additionalContext")).or_else(|| text(specific.and_then(|s| s.get("additionalContext"))));
    let reason = text(v.get("reason"))
        .or_else(|| text(specific.and_then(|s| s.get("permissionDecisionReason"))))
        .or_else(|| text(v.get("stopReason")));
    let decision = text(v.get("decision")).or_else(|| text(specific.and_then(|s| s.get("permissionDecision"))));
    // "ask" wants the user's say, which a hook cannot get here: not an
    // allow. `continue: false` stops what the hook guards.
    let halt = v.get("continue").and_then(Value::as_bool) == Some(false);
    let blocked = matches!(decision.as_deref(), Some("block") | Some("deny") | Some("ask")) || halt;
    let reason = match decision.as_deref() {
        Some("ask") => Some(format!(
            "the hook asks for your approval, which Forge does not take from hooks: {}",
            reason.as_deref().unwrap_or("no reason given")
        )),
        _ => reason,
    };
    match decision.as_deref() {
        None | Some("block") | Some("deny") | Some("approve") | Some("allow") | Some("ask") | Some("undefined") => {}
        Some(other) => return (HookDecision::Error, Some(format!("unknown decision {other:?}")), None, false),
    }
    if blocked {
        (HookDecision::Block, reason.or_else(|| Some("blocked, without a reason".into())), context, halt)
    } else {
        (HookDecision::Allow, reason, context, halt)
    }
}

/// An error is passed over, and shown, unless the hook is `fail_closed`:
/// then it blocks.
fn fail_policy(hook: &Hook, decision: HookDecision, reason: Option<String>) -> (HookDecision, Option<String>) {
    match decision {
        HookDecision::Error if hook.fail_closed => (
            HookDecision::Block,
            Some(format!("{} (the hook is fail_closed: its errors block)", reason.as_deref().unwrap_or("it failed"))),
        ),
        d => (d, reason),
    }
}

/// Runs `hook` with `input` on stdin: with the user's permissions, or in
/// the session's sandbox, as [`Hook::confinement`] decides.
pub async fn run(hook: &Hook, input: &Value, sandbox: &Sandbox, tool: Option<&str>) -> HookRun {
    use crate::tools::builtin::run_command::{prepare, private_tmpdir, shell};
    use std::process::Stdio;
    let started = Instant::now();
    let done = |decision, reason: Option<String>, context: Option<String>, exit_code, halt| {
        let (decision, reason) = fail_policy(hook, decision, reason);
        HookRun {
            event: hook.event,
            command: hook.command.clone(),
            tool: tool.map(str::to_string),
            decision,
            reason: reason.map(|r| crate::redact::scrub(&r).into_owned()),
            context: context.map(|c| crate::redact::scrub(&c).into_owned()),
            exit_code,
            duration_ms: started.elapsed().as_millis() as u64,
            halt,
        }
    };
    let tmp = match private_tmpdir() {
        Ok(t) => t,
        Err(e) => return done(HookDecision::Error, Some(format!("no temporary directory: {e}")), None, None, false),
    };
    let confinement = match hook.confinement(sandbox) {
        Confinement::Unconfined => None,
        Confinement::Command => sandbox.confinement(tmp.path(), false),
        Confinement::UserHook(reach) => sandbox.hook_confinement(tmp.path(), reach),
    };
    let mut cmd = crate::tools::supervisor::command(&shell(), &hook.command, confinement.as_ref());
    prepare(&mut cmd, sandbox, tmp.path(), confinement.is_some());
    cmd.env("CLAUDE_PROJECT_DIR", sandbox.cwd())
        .env("FORGE_HOOK_EVENT", hook.event.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return done(HookDecision::Error, Some(format!("cannot start: {e}")), None, None, false),
    };
    let mut stop = crate::tools::supervisor::StopGuard::new(child.id());
    let stdin = child.stdin.take();
    let body = input.to_string();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(body.as_bytes()).await;
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let work = async { tokio::join!(feed, read_capped(stdout), read_capped(stderr), child.wait()) };
    match tokio::time::timeout(hook.timeout, work).await {
        Ok((_, out, err, Ok(status))) => {
            if crate::tools::supervisor::enabled() {
                stop.disarm();
            }
            let (decision, reason, context, halt) = judge(status.code(), &out, &err);
            done(decision, reason, context, status.code(), halt)
        }
        Ok((_, _, _, Err(e))) => done(HookDecision::Error, Some(format!("cannot wait for it: {e}")), None, None, false),
        // The guard kills it and all it started; the next hook starts
        // once it has ended (its placeholders gone with it).
        Err(_) => {
            stop.stop();
            let wait = || crate::tools::supervisor::wait_stopped(Duration::from_secs(5));
            let _ = tokio::task::spawn_blocking(wait).await;
            done(
                HookDecision::Error,
                Some(format!("timed out after {} s and was killed", hook.timeout.as_secs())),
                None,
                None,
                false,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_and_json_output_decide() {
        assert_eq!(judge(Some(0), "", ""), (HookDecision::Allow, None, None, false));
        assert_eq!(judge(Some(0), "note this\n", "").2.as_deref(), Some("note this"));
        let (d, r, _, _) = judge(Some(2), "", "no rm -rf here\n");
        assert_eq!((d, r.as_deref()), (HookDecision::Block, Some("no rm -rf here")));
        assert_eq!(judge(Some(1), "", "boom").0, HookDecision::Error);
        assert_eq!(judge(None, "", "").0, HookDecision::Error);
        let (d, r, _, _) = judge(Some(0), r#"{"decision": "block", "reason": "tests first"}"#, "");
        assert_eq!((d, r.as_deref()), (HookDecision::Block, Some("tests first")));
        let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "nope"}}"#;
        assert_eq!(judge(Some(0), deny, "").1.as_deref(), Some("nope"));
        let ctx = r#"{"hookSpecificOutput": {"additionalContext": "the build is red"}}"#;
        assert_eq!(judge(Some(0), ctx, ""), (HookDecision::Allow, None, Some("the build is red".into()), false));
        let ask = r#"{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "risky"}}"#;
        assert_eq!(judge(Some(0), ask, "").0, HookDecision::Block, "ask is never an allow");
        assert!(judge(Some(0), r#"{"continue": false, "stopReason": "done"}"#, "").3);
        assert_eq!(judge(Some(0), "{not json", "").0, HookDecision::Error, "malformed output is an error");
        assert_eq!(judge(Some(0), r#"{"decision": "maybe"}"#, "").0, HookDecision::Error);
    }

    #[test]
    fn matchers_know_claudes_tool_names_and_both_config_forms_load() {
        let list: HooksConfig = toml::from_str::<toml::Table>(
            "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Bash\"\ncommand = \"x\"\n[[hooks]]\nimport_claude = true\n",
        )
        .ok()
        .and_then(|t| t.get("hooks").cloned())
        .and_then(|v| v.try_into().ok())
        .unwrap_or_default();
        assert!(list.import_claude);
        assert_eq!(list.hooks.len(), 1);
        let table: HooksConfig = toml::from_str::<toml::Table>(
            "[hooks]\nimport_claude = true\n[[hooks.hook]]\nevent = \"Stop\"\ncommand = \"y\"\n",
        )
        .ok()
        .and_then(|t| t.get("hooks").cloned())
        .and_then(|v| v.try_into().ok())
        .unwrap_or_default();
        assert!(table.import_claude && table.hooks[0].event == HookEvent::Stop);
        let (set, problems) = HookSet::for_session(&list, Path::new("/nonexistent"), true, None);
        assert!(set.hooks[0].sandbox.is_none() && !set.hooks[0].fail_closed, "decided by its reach; errors pass");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(set.matching(HookEvent::PreToolUse, Some("run_command")).len(), 1, "Bash is run_command");
        assert!(set.matching(HookEvent::PreToolUse, Some("write_file")).is_empty());
        let mut imported = Vec::new();
        let mut problems = Vec::new();
        claude_hooks(
            r#"{"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt", "timeout": 5}]}]}}"#,
            "settings.json",
            Origin::Project,
            &mut imported,
            &mut problems,
        );
        let set = HookSet { hooks: imported };
        assert_eq!(set.matching(HookEvent::PostToolUse, Some("apply_patch")).len(), 1);
        assert_eq!(set.matching(HookEvent::PostToolUse, Some("apply_patch"))[0].timeout, Duration::from_secs(5));
        assert_eq!(set.hooks[0].origin, Origin::Project, "a project's hooks run in the sandbox");
    }

    #[test]
    fn the_users_claude_settings_are_read_and_run_as_the_user() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(home.path().join(".claude")).unwrap_or_else(|e| panic!("{e}"));
        let settings = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "~/.claude/hooks/log.sh"},
            {"type": "command", "command": "guard", "sandbox": true, "fail_closed": true}]}]}}"#;
        std::fs::write(user_claude_settings(home.path()), settings).unwrap_or_else(|e| panic!("{e}"));
        let config = HooksConfig { import_claude: true, hooks: Vec::new() };
        assert!(config.may_apply(Path::new("/nonexistent"), Some(home.path())));
        let (set, problems) = HookSet::for_session(&config, Path::new("/nonexistent"), false, Some(home.path()));
        assert!(problems.is_empty(), "{problems:?}");
        let hooks = set.matching(HookEvent::PreToolUse, Some("run_command"));
        assert_eq!(hooks.len(), 2);
        assert!(hooks[0].sandbox.is_none() && !hooks[0].fail_closed);
        assert!(hooks[1].sandbox == Some(true) && hooks[1].fail_closed);
        let off = HooksConfig { import_claude: false, hooks: Vec::new() };
        assert!(!off.may_apply(Path::new("/nonexistent"), Some(home.path())), "only with import_claude");
    }

    #[test]
    fn errors_pass_unless_the_hook_is_fail_closed() {
        let (set, _) = HookSet::for_session(
            &HooksConfig {
                import_claude: false,
                hooks: vec![HookConfig {
                    event: HookEvent::PreToolUse,
                    matcher: None,
                    command: "x".into(),
                    timeout: None,
                    sandbox: None,
                    write_roots: None,
                    fail_closed: Some(true),
                }],
            },
            Path::new("/nonexistent"),
            false,
            None,
        );
        let guard = &set.hooks[0];
        let open = Hook { fail_closed: false, ..guard.clone() };
        assert_eq!(fail_policy(&open, HookDecision::Error, Some("exit status 1".into())).0, HookDecision::Error);
        let (d, r) = fail_policy(guard, HookDecision::Error, Some("exit status 1".into()));
        assert_eq!(d, HookDecision::Block);
        assert!(r.is_some_and(|r| r.contains("exit status 1") && r.contains("fail_closed")));
        assert_eq!(fail_policy(guard, HookDecision::Allow, None).0, HookDecision::Allow);
    }
}
