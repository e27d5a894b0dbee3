//! The approval policy: which tool calls run at once, which wait for a
//! user's answer, which are refused. `[tools.approval]`: `mode` is
//! `permissive` | `default` | `strict` (or the seed's `auto` | `prompt` |
//! `deny`), plus `allowlist`, `denylist`, `prompt_side_effects`, `enabled`.

use std::collections::HashSet;

use super::{RiskLevel, ToolExecutor};
use crate::config::ToolApprovalConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Only high-risk tools ask.
    Permissive,
    /// Side-effecting tools ask unless allowlisted.
    Default,
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

/// `permissive` | `default` | `strict`, or the seed's `auto` | `prompt` |
/// `deny`.
pub fn parse_mode(word: &str) -> Option<ApprovalMode> {
    match word {
        "permissive" | "auto" => Some(ApprovalMode::Permissive),
        "default" | "prompt" => Some(ApprovalMode::Default),
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
}

impl ApprovalPolicy {
    pub fn from_config(cfg: Option<&ToolApprovalConfig>) -> Self {
        let mode = cfg.and_then(|c| c.mode.as_deref()).and_then(parse_mode).unwrap_or(ApprovalMode::Default);
        Self {
            mode,
            enabled: cfg.and_then(|c| c.enabled).unwrap_or(true),
            allow: cfg.and_then(|c| c.allowlist.clone()).unwrap_or_default().into_iter().collect(),
            deny: cfg.and_then(|c| c.denylist.clone()).unwrap_or_default().into_iter().collect(),
            prompt_side_effects: cfg.and_then(|c| c.prompt_side_effects).unwrap_or(true),
        }
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

    pub fn decide(&self, tool: &dyn ToolExecutor) -> Decision {
        let name = tool.name();
        // `server__*` names every tool of an MCP server.
        let listed = |set: &HashSet<String>| {
            set.contains(name) || name.split_once("__").is_some_and(|(server, _)| set.contains(&format!("{server}__*")))
        };
        if listed(&self.deny) {
            return Decision::Deny(format!("`{name}` is on the denylist ([tools.approval] denylist)"));
        }
        if listed(&self.allow) || !self.enabled {
            return Decision::Run;
        }
        match self.mode {
            ApprovalMode::Strict => {
                Decision::Deny(format!("strict approval mode runs only allowlisted tools; `{name}` is not one"))
            }
            ApprovalMode::Permissive if tool.risk_level() >= RiskLevel::High => Decision::Ask,
            ApprovalMode::Permissive => Decision::Run,
            ApprovalMode::Default if tool.is_side_effecting() && self.prompt_side_effects => Decision::Ask,
            ApprovalMode::Default => Decision::Run,
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
        assert_eq!(default.decide(read.as_ref()), Decision::Run);
        assert_eq!(default.decide(write.as_ref()), Decision::Ask);
        let cfg = ToolApprovalConfig {
            enabled: None,
            mode: Some("strict".into()),
            allowlist: Some(vec!["read_file".into()]),
            denylist: Some(vec!["write_file".into()]),
            prompt_side_effects: None,
        };
        let strict = ApprovalPolicy::from_config(Some(&cfg));
        assert_eq!(strict.decide(read.as_ref()), Decision::Run);
        assert!(matches!(strict.decide(write.as_ref()), Decision::Deny(m) if m.contains("denylist")));
        let permissive = ApprovalPolicy::from_config(Some(&ToolApprovalConfig {
            mode: Some("auto".into()),
            denylist: None,
            allowlist: None,
            enabled: None,
            prompt_side_effects: None,
        }));
        assert_eq!(permissive.decide(write.as_ref()), Decision::Run);
    }
}
