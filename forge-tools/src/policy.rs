//! The approval policy: which tool calls run at once, which wait for a
//! user's answer, which are refused. `[tools.approval]`: `mode` is
//! `permissive` | `default` | `prompt` | `strict` (or the seed's `auto` |
//! `prompt` | `deny`), plus `allowlist`, `denylist`, `prompt_side_effects`,
//! `enabled`.
//!
//! Commands are special: where the kernel sandbox confines them, the
//! `default` mode lets them run without asking (the kernel keeps them in
//! the session's roots); where it cannot, they ask even in `permissive`
//! mode; and a call to run one outside the sandbox (`sandbox: false`)
//! always asks, whatever the mode, allowlist or session rules say.

use std::collections::HashSet;

use super::{RiskLevel, ToolExecutor};
use crate::config::ToolApprovalConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Only high-risk tools ask.
    Permissive,
    /// Side-effecting tools ask unless allowlisted; commands confined by
    /// the kernel sandbox run.
    Default,
    /// Side-effecting tools ask unless allowlisted, confined commands too.
    Prompt,
    /// Only allowlisted tools run.
    Strict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    Ask,
    Deny(String),
}

impl Decision {
    /// `run`, `ask` or `deny`, as `tools.list` reports it.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Run => "run",
            Decision::Ask => "ask",
            Decision::Deny(_) => "deny",
        }
    }

    /// The rule in words, for the model (`introspect`).
    pub fn describe(&self) -> String {
        match self {
            Decision::Run => "runs without asking".into(),
            Decision::Ask => "a user must approve each call".into(),
            Decision::Deny(why) => format!("refused: {why}"),
        }
    }
}

/// `permissive` | `default` | `prompt` | `strict`, or the seed's `auto` |
/// `deny`.
pub fn parse_mode(word: &str) -> Option<ApprovalMode> {
    match word {
        "permissive" | "auto" => Some(ApprovalMode::Permissive),
        "default" => Some(ApprovalMode::Default),
        "prompt" => Some(ApprovalMode::Prompt),
        "strict" | "deny" => Some(ApprovalMode::Strict),
        _ => None,
    }
}

#[derive(Debug, Clone)]
pub struct ApprovalPolicy {
    mode: ApprovalMode,
    enabled: bool,
    allow: HashSet<String>,
    deny: HashSet<String>,
    prompt_side_effects: bool,
    /// Commands run confined by the kernel sandbox.
    commands_confined: bool,
    /// What the running turn's command allows (`allowed-tools`).
    grants: Vec<crate::grants::Grant>,
    /// A git session's worktree: file edits in it are commits that can be
    /// undone, and run without asking (see
    /// [`ApprovalPolicy::with_reversible_edits`]).
    reversible_edits: Option<std::path::PathBuf>,
    /// A directory of that worktree whose files run later too: the
    /// repository's `core.hooksPath` (relative to its top).
    run_later_dir: Option<String>,
}

/// Files that make something run later (a hook, a build step, a tool or
/// server the agent starts, git itself): an edit there asks even where
/// edits are reversible, since undoing the file does not undo what ran.
pub fn runs_code_later(path: &str) -> bool {
    const FILES: &[&str] =
        &[".mcp.json", ".envrc", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook.yaml"];
    // Forge's own state files, which each turn's commit writes.
    if path.strip_prefix(".forge/sessions/").is_some_and(|f| f.ends_with(".json") && !f.contains('/')) {
        return false;
    }
    std::path::Path::new(path).components().any(|c| {
        let c = c.as_os_str().to_string_lossy();
        c.starts_with(".git")
            || [".claude", ".forge", ".husky", ".githooks"].contains(&c.as_ref())
            || FILES.contains(&c.as_ref())
    })
}

impl ApprovalPolicy {
    /// `[tools.approval]`, knowing whether `[tools.sandbox]` confines
    /// commands on this machine.
    pub fn for_tools(tools: &crate::config::ToolsConfig) -> Self {
        let mut policy = Self::from_config(tools.approval.as_ref());
        policy.commands_confined = crate::confine::Settings::from_config(tools.sandbox.as_ref()).kernel_active();
        policy
    }

    pub fn from_config(cfg: Option<&ToolApprovalConfig>) -> Self {
        let mode = cfg.and_then(|c| c.mode.as_deref()).and_then(parse_mode).unwrap_or(ApprovalMode::Default);
        Self {
            mode,
            enabled: cfg.and_then(|c| c.enabled).unwrap_or(true),
            allow: cfg.and_then(|c| c.allowlist.clone()).unwrap_or_default().into_iter().collect(),
            deny: cfg.and_then(|c| c.denylist.clone()).unwrap_or_default().into_iter().collect(),
            prompt_side_effects: cfg.and_then(|c| c.prompt_side_effects).unwrap_or(true),
            commands_confined: false,
            grants: Vec::new(),
            reversible_edits: None,
            run_later_dir: None,
        }
    }

    /// A git session's policy (`[git] ask_for_edits = false`): file edits
    /// run without asking, each being part of a commit the user can undo,
    /// except edits of files that make something run later
    /// ([`runs_code_later`]). The denylist and strict mode still apply.
    pub fn with_reversible_edits(mut self, worktree: Option<std::path::PathBuf>) -> Self {
        self.reversible_edits = worktree;
        self
    }

    /// The repository's hooks directory (`core.hooksPath`, relative to
    /// the worktree's top): edits there ask, as other files that run later.
    pub fn with_run_later_dir(mut self, dir: Option<String>) -> Self {
        self.run_later_dir = dir;
        self
    }

    /// Whether the edit of `path` (as the call gives it) is in the git
    /// session's worktree and makes nothing run later.
    fn reversible(&self, path: &str) -> bool {
        let Some(root) = &self.reversible_edits else { return false };
        let p = std::path::Path::new(path);
        let inside = match p.is_absolute() {
            true => p.strip_prefix(root).ok(),
            false => Some(p),
        };
        let hooks = self.run_later_dir.as_deref().map(std::path::Path::new);
        inside.is_some_and(|rel| {
            !rel.components().any(|c| matches!(c, std::path::Component::ParentDir))
                && !runs_code_later(&rel.to_string_lossy())
                && !hooks.is_some_and(|h| rel.starts_with(h))
        })
    }

    /// The policy for a turn a command of one's own started: calls its
    /// `allowed-tools` cover run without asking (the denylist, strict
    /// mode's refusals of everything else and a call leaving the sandbox
    /// are unchanged).
    pub fn with_grants(mut self, grants: Vec<crate::grants::Grant>) -> Self {
        self.grants = grants;
        self
    }

    /// The policy for one session: its own `mode` (if set) replaces the
    /// configured one, and the tools it allows always run without asking
    /// (the denylist still wins).
    pub fn for_session(mut self, mode: Option<&str>, always: &[String]) -> Self {
        if let Some(mode) = mode.and_then(parse_mode) {
            self.mode = mode;
        }
        self.allow.extend(always.iter().cloned());
        self
    }

    /// What happens to a call of `tool` with `args` (`None`: a call
    /// as usual, for listings).
    pub fn decide(&self, tool: &dyn ToolExecutor, args: Option<&serde_json::Value>) -> Decision {
        let name = tool.name();
        // `server__*` names every tool of an MCP server.
        let listed = |set: &HashSet<String>| {
            set.contains(name) || name.split_once("__").is_some_and(|(server, _)| set.contains(&format!("{server}__*")))
        };
        if listed(&self.deny) {
            return Decision::Deny(format!("`{name}` is on the denylist ([tools.approval] denylist)"));
        }
        let commands = tool.runs_commands();
        if commands && args.is_some_and(crate::builtin::run_command::wants_no_sandbox) {
            return Decision::Ask;
        }
        if listed(&self.allow) || !self.enabled || self.grants.iter().any(|g| g.allows(name, args)) {
            return Decision::Run;
        }
        // A project tool the user approved by its content runs confined
        // without asking, except where only the allowlist runs.
        if tool.approved_in_advance() && self.mode != ApprovalMode::Strict && (!commands || self.commands_confined) {
            return Decision::Run;
        }
        if self.mode != ApprovalMode::Strict
            && let Some(args) = args
        {
            let paths = tool.touches(args);
            if !paths.is_empty() && paths.iter().all(|p| self.reversible(p)) {
                return Decision::Run;
            }
        }
        match self.mode {
            ApprovalMode::Strict => {
                Decision::Deny(format!("strict approval mode runs only allowlisted tools; `{name}` is not one"))
            }
            ApprovalMode::Permissive if commands && !self.commands_confined => Decision::Ask,
            ApprovalMode::Permissive if tool.risk_level() >= RiskLevel::High => Decision::Ask,
            ApprovalMode::Permissive => Decision::Run,
            ApprovalMode::Default if commands && self.commands_confined => Decision::Run,
            ApprovalMode::Default | ApprovalMode::Prompt if tool.is_side_effecting() && self.prompt_side_effects => {
                Decision::Ask
            }
            ApprovalMode::Default | ApprovalMode::Prompt => Decision::Run,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolRegistry;

    #[test]
    fn side_effects_ask_reads_run_denylist_wins() {
        let r = ToolRegistry::builtin();
        let read = r.get("read_file").unwrap_or_else(|| panic!("read_file"));
        let write = r.get("write_file").unwrap_or_else(|| panic!("write_file"));
        let default = ApprovalPolicy::from_config(None);
        assert_eq!(default.decide(read.as_ref(), None), Decision::Run);
        assert_eq!(default.decide(write.as_ref(), None), Decision::Ask);
        let cfg = ToolApprovalConfig {
            enabled: None,
            mode: Some("strict".into()),
            allowlist: Some(vec!["read_file".into()]),
            denylist: Some(vec!["write_file".into()]),
            prompt_side_effects: None,
        };
        let strict = ApprovalPolicy::from_config(Some(&cfg));
        assert_eq!(strict.decide(read.as_ref(), None), Decision::Run);
        assert!(matches!(strict.decide(write.as_ref(), None), Decision::Deny(m) if m.contains("denylist")));
        let permissive = ApprovalPolicy::from_config(Some(&ToolApprovalConfig {
            mode: Some("auto".into()),
            denylist: None,
            allowlist: None,
            enabled: None,
            prompt_side_effects: None,
        }));
        assert_eq!(permissive.decide(write.as_ref(), None), Decision::Run);
    }

    #[test]
    fn a_git_sessions_edits_run_but_not_where_code_runs_later_nor_in_strict_mode() {
        let r = ToolRegistry::builtin();
        let write = r.get("write_file").unwrap_or_else(|| panic!("write_file"));
        let root = std::path::PathBuf::from("/repo/.git/forge/worktrees/s1");
        let git = ApprovalPolicy::from_config(None).with_reversible_edits(Some(root));
        let at = |path: &str| serde_json::json!({"path": path, "content": "x"});
        assert_eq!(git.decide(write.as_ref(), Some(&at("src/main.rs"))), Decision::Run);
        let absolute = "/repo/.git/forge/worktrees/s1/src/main.rs";
        assert_eq!(git.decide(write.as_ref(), Some(&at(absolute))), Decision::Run, "in the worktree, absolute");
        assert_eq!(git.decide(write.as_ref(), Some(&at("/home/u/scratch/x"))), Decision::Ask, "another root");
        for path in
            [".claude/settings.json", ".git/config", ".github/workflows/ci.yml", ".mcp.json", "a/.husky/pre-commit"]
        {
            assert_eq!(git.decide(write.as_ref(), Some(&at(path))), Decision::Ask, "{path}");
        }
        // The repository's own hooks directory (`core.hooksPath`), by any name.
        let hooked = git.clone().with_run_later_dir(Some("scripts/hooks".into()));
        assert_eq!(hooked.decide(write.as_ref(), Some(&at("scripts/hooks/pre-commit"))), Decision::Ask);
        let in_hooks = "/repo/.git/forge/worktrees/s1/scripts/hooks/pre-push";
        assert_eq!(hooked.decide(write.as_ref(), Some(&at(in_hooks))), Decision::Ask);
        assert_eq!(hooked.decide(write.as_ref(), Some(&at("scripts/hooksmith.rs"))), Decision::Run);
        assert_eq!(ApprovalPolicy::from_config(None).decide(write.as_ref(), Some(&at("src/main.rs"))), Decision::Ask);
        let strict = ApprovalPolicy::from_config(Some(&ToolApprovalConfig {
            mode: Some("strict".into()),
            ..Default::default()
        }))
        .with_reversible_edits(Some("/w".into()));
        assert!(matches!(strict.decide(write.as_ref(), Some(&at("src/main.rs"))), Decision::Deny(_)));
    }

    #[test]
    fn confined_commands_run_unconfined_ones_ask_and_leaving_the_sandbox_always_asks() {
        let r = ToolRegistry::builtin();
        let cmd = r.get("run_command").unwrap_or_else(|| panic!("run_command"));
        let inside = serde_json::json!({"command": "cargo test"});
        let outside = serde_json::json!({"command": "cargo test", "sandbox": false});
        let mode = |m: &str| ToolApprovalConfig {
            mode: Some(m.into()),
            enabled: None,
            allowlist: Some(vec![]),
            denylist: None,
            prompt_side_effects: None,
        };
        let mut confined = ApprovalPolicy::from_config(None);
        confined.commands_confined = true;
        assert_eq!(confined.decide(cmd.as_ref(), Some(&inside)), Decision::Run);
        assert_eq!(confined.decide(cmd.as_ref(), Some(&outside)), Decision::Ask);
        let mut prompt = ApprovalPolicy::from_config(Some(&mode("prompt")));
        prompt.commands_confined = true;
        assert_eq!(prompt.decide(cmd.as_ref(), Some(&inside)), Decision::Ask, "the seed's prompt mode still asks");
        let unconfined_auto = ApprovalPolicy::from_config(Some(&mode("auto")));
        assert_eq!(unconfined_auto.decide(cmd.as_ref(), Some(&inside)), Decision::Ask);
        let mut allowed = ApprovalPolicy::from_config(None).for_session(None, &["run_command".into()]);
        allowed.commands_confined = true;
        assert_eq!(
            allowed.decide(cmd.as_ref(), Some(&outside)),
            Decision::Ask,
            "allow-always does not cover leaving the sandbox"
        );
    }

    #[test]
    fn an_approved_project_tool_runs_confined_without_asking_but_not_unconfined_or_in_strict_mode() {
        let def = crate::repo_tools::parse(b"name = \"t\"\ndescription = \"d\"\ncommand = \"make\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let tool = crate::repo_tools::RepoTool { def, file: "t.toml".into(), pins: None };
        let mut confined = ApprovalPolicy::from_config(None);
        confined.commands_confined = true;
        assert_eq!(confined.decide(&tool, Some(&serde_json::json!({}))), Decision::Run);
        assert_eq!(ApprovalPolicy::from_config(None).decide(&tool, None), Decision::Ask, "not confined: asks");
        let mut strict = ApprovalPolicy::from_config(Some(&ToolApprovalConfig {
            mode: Some("strict".into()),
            enabled: None,
            allowlist: None,
            denylist: None,
            prompt_side_effects: None,
        }));
        strict.commands_confined = true;
        assert!(matches!(strict.decide(&tool, None), Decision::Deny(_)));
    }
}
