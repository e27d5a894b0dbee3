//! The hooks' configuration: `[[hooks]]` entries (or `[hooks]` with
//! `import_claude`), checked at load; what `config check` says of them,
//! and the one-time notice that hook errors stopped blocking.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    Stop,
    SessionStart,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    pub(super) fn parse(word: &str) -> Option<HookEvent> {
        [Self::PreToolUse, Self::PostToolUse, Self::UserPromptSubmit, Self::Stop, Self::SessionStart]
            .into_iter()
            .find(|e| e.as_str() == word)
    }
}

pub(super) const DEFAULT_TIMEOUT_SECONDS: u64 = 60;

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    pub event: HookEvent,
    /// A regular expression matched against the whole tool name (Forge's
    /// or Claude's: `Bash` is `run_command`); absent, `""` or `*`: every
    /// tool. Tool events only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Run by `/bin/sh -c` in the session's directory.
    pub command: String,
    /// Seconds (default 60); a hook still running then is killed and
    /// counted as an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// `true`: always confined; `false`: with the user's permissions (a
    /// way out of the sandbox, which `config check` names); unset:
    /// confined whenever it can reach the session's roots, which a
    /// confined command may have written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Where a confined hook may write besides the roots, `~/.claude` and
    /// Forge's home (as `[tools.sandbox] write_roots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_roots: Option<Vec<String>>,
    /// An error of this hook (an exit status other than 0 and 2, a
    /// timeout, output that is not valid JSON) blocks what it guards
    /// instead of being shown and passed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_closed: Option<bool>,
}

/// `[[hooks]]` (a list of hooks, where an entry may be `{ import_claude =
/// true }`), or `[hooks]` with `import_claude` and `[[hooks.hook]]`
/// entries: TOML cannot have `[hooks]` and `[[hooks]]` in one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HooksConfig {
    /// Also run the hooks of the user's `~/.claude/settings.json` and of a
    /// trusted project's `.claude/settings.json` (and
    /// `.claude/settings.local.json`).
    pub import_claude: bool,
    #[serde(rename = "hook", skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HooksTable {
    import_claude: Option<bool>,
    #[serde(default)]
    hook: Vec<HookConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookEntry {
    import_claude: Option<bool>,
    event: Option<HookEvent>,
    matcher: Option<String>,
    command: Option<String>,
    timeout: Option<u64>,
    sandbox: Option<bool>,
    write_roots: Option<Vec<String>>,
    fail_closed: Option<bool>,
}

impl<'de> Deserialize<'de> for HooksConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::Table(t) => {
                let t: HooksTable =
                    toml::Value::Table(t).try_into().map_err(|e| D::Error::custom(format!("[hooks]: {e}")))?;
                Ok(HooksConfig { import_claude: t.import_claude.unwrap_or(false), hooks: t.hook })
            }
            toml::Value::Array(list) => {
                let mut out = HooksConfig::default();
                for (i, v) in list.into_iter().enumerate() {
                    let e: HookEntry =
                        v.try_into().map_err(|e| D::Error::custom(format!("[[hooks]] entry {}: {e}", i + 1)))?;
                    out.import_claude |= e.import_claude.unwrap_or(false);
                    match (e.event, e.command) {
                        (Some(event), Some(command)) => out.hooks.push(HookConfig {
                            event,
                            matcher: e.matcher,
                            command,
                            timeout: e.timeout,
                            sandbox: e.sandbox,
                            write_roots: e.write_roots,
                            fail_closed: e.fail_closed,
                        }),
                        (None, None) if e.import_claude.is_some() => {}
                        _ => {
                            return Err(D::Error::custom(format!(
                                "[[hooks]] entry {} needs `event` (PreToolUse, PostToolUse, UserPromptSubmit, Stop, SessionStart) and `command`",
                                i + 1
                            )));
                        }
                    }
                }
                Ok(out)
            }
            _ => Err(D::Error::custom("`hooks` is a list of [[hooks]] entries or a [hooks] table")),
        }
    }
}

impl HooksConfig {
    /// Whether any hook may apply in a session working in `cwd`: hooks in
    /// config.toml, or (with `import_claude`) a project's `.claude`
    /// directory or the user's Claude settings. A cheap test, so that
    /// sessions without hooks never read settings files or the trust store
    /// for them.
    pub fn may_apply(&self, cwd: &Path, home: Option<&Path>) -> bool {
        !self.hooks.is_empty()
            || (self.import_claude
                && (cwd.join(".claude").is_dir() || home.is_some_and(|h| user_claude_settings(h).is_file())))
    }

    /// Guard hooks (PreToolUse, UserPromptSubmit) whose errors no longer
    /// block: what `config check` and a session after an upgrade point out.
    pub fn guards_without_fail_closed(&self) -> Vec<&HookConfig> {
        self.hooks
            .iter()
            .filter(|h| matches!(h.event, HookEvent::PreToolUse | HookEvent::UserPromptSubmit))
            .filter(|h| h.fail_closed.is_none())
            .collect()
    }

    /// Checks the matchers; the error names the hook.
    pub fn validate(&self) -> Result<(), String> {
        for h in &self.hooks {
            compile(h.matcher.as_deref()).map_err(|e| format!("[[hooks]] matcher {:?}: {e}", h.matcher))?;
            if h.command.trim().is_empty() {
                return Err(format!("a {} hook has an empty command", h.event.as_str()));
            }
        }
        Ok(())
    }
}

/// What `config check` says of the hooks: guards whose errors no longer
/// block, and commands that name a program that is not there or cannot be
/// run (`~/` against `home`; a relative path is the session's and not
/// checked, nor is a word with shell expansions).
pub fn config_warnings(config: &HooksConfig, home: Option<&Path>) -> Vec<String> {
    let mut out: Vec<String> = config
        .guards_without_fail_closed()
        .into_iter()
        .map(|h| {
            format!(
                "{} hook `{}`: an error of it (an exit status other than 0 and 2, a timeout, output that is not \
                 valid JSON) is shown and no longer blocks: add `fail_closed = true` if it guards something, \
                 `fail_closed = false` to say it does not (and silence this)",
                h.event.as_str(),
                h.command
            )
        })
        .collect();
    for h in config.hooks.iter().filter(|h| h.sandbox == Some(false)) {
        out.push(format!(
            "{} hook `{}` runs outside the sandbox (`sandbox = false`): a way out of it, since what a confined \
             command writes into what the hook runs (a Makefile, a script of the project) would run with your \
             permissions; remove `sandbox = false` to confine it",
            h.event.as_str(),
            h.command
        ));
    }
    for h in &config.hooks {
        let Some(word) = h.command.split_whitespace().next() else { continue };
        if word.contains('$') || word.contains('`') {
            continue;
        }
        let path = match (word.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => continue,
            _ if word.starts_with('/') => std::path::PathBuf::from(word),
            _ => continue,
        };
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(&path) {
            Err(_) => out.push(format!(
                "{} hook `{}`: {} does not exist (the hook will fail with exit status 127)",
                h.event.as_str(),
                h.command,
                path.display()
            )),
            Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => out.push(format!(
                "{} hook `{}`: {} is not an executable file (`chmod +x {}`, or run it as `sh {}`)",
                h.event.as_str(),
                h.command,
                path.display(),
                path.display(),
                word
            )),
            Ok(_) => {}
        }
    }
    out
}

/// Said once per Forge home (a marker file in it), by the first session
/// created after hook errors stopped blocking, when guard hooks lack
/// `fail_closed`.
pub fn upgrade_notice(config: &HooksConfig, home: &Path) -> Option<String> {
    let guards = config.guards_without_fail_closed();
    if guards.is_empty() {
        return None;
    }
    let marker = home.join("notices").join("hooks-fail-closed");
    if marker.exists() {
        return None;
    }
    let _ = std::fs::create_dir_all(marker.parent()?);
    if let Err(e) = std::fs::write(&marker, "said\n") {
        tracing::warn!(error = %e, "cannot remember that the fail_closed notice was given");
    }
    let names: Vec<String> = guards.iter().map(|h| format!("`{}`", h.command)).collect();
    Some(format!(
        "hook errors no longer block (as in Claude Code: exit 2 blocks, other failures are shown): set \
         `fail_closed = true` on guard hooks that must block when they fail ({}); this is said once",
        names.join(", ")
    ))
}

/// A matcher as a whole-name regular expression; `None` matches all.
pub(super) fn compile(matcher: Option<&str>) -> Result<Option<regex::Regex>, regex::Error> {
    match matcher.map(str::trim) {
        None | Some("") | Some("*") => Ok(None),
        Some(m) => regex::Regex::new(&format!("^(?:{m})$")).map(Some),
    }
}

/// The user's own Claude Code settings, whose hooks `import_claude` reads.
pub fn user_claude_settings(home: &Path) -> std::path::PathBuf {
    home.join(".claude").join("settings.json")
}
