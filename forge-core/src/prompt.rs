//! The system prompt every request carries: `prompts/system.md` (or the
//! file `[app] system_prompt_file` names) with the session's environment
//! filled in, then `[app] system_prompt_append`. A session renders it once
//! when it starts, so it stays byte-for-byte the same across its turns and
//! the provider's prompt cache keeps hitting.

use std::path::{Path, PathBuf};

use forge_proto::ErrorKind;

use crate::config::{ForgeConfig, expand_env_vars};
use crate::error::EngineError;
use crate::tools::policy::{ApprovalPolicy, Decision};
use crate::tools::{Sandbox, ToolRegistry};

/// The prompt Forge ships, reviewed like code.
pub const BUILTIN: &str = include_str!("../prompts/system.md");

/// The template in force, read once when the daemon starts.
#[derive(Debug, Clone)]
pub struct PromptTemplate {
    text: String,
    append: Option<String>,
}

impl Default for PromptTemplate {
    fn default() -> Self {
        PromptTemplate { text: BUILTIN.to_string(), append: None }
    }
}

impl PromptTemplate {
    /// The built-in template, or `[app] system_prompt_file` (a path
    /// relative to `home` unless absolute; `${VAR}` and `~` expand).
    pub fn load(config: &ForgeConfig, home: &Path) -> Result<Self, EngineError> {
        let text = match config.app.system_prompt_file.as_deref().filter(|f| !f.trim().is_empty()) {
            None => BUILTIN.to_string(),
            Some(file) => {
                let path = resolve(file, home);
                std::fs::read_to_string(&path).map_err(|e| {
                    EngineError::new(
                        ErrorKind::Config,
                        format!(
                            "cannot read the system prompt file {} ([app] system_prompt_file): {e}; fix the path or remove the setting",
                            path.display()
                        ),
                    )
                })?
            }
        };
        let append = config.app.system_prompt_append.clone().filter(|a| !a.trim().is_empty());
        Ok(PromptTemplate { text, append })
    }

    /// The prompt for a session in `env`. `{{name}}` placeholders are
    /// replaced; any other text is kept as written.
    pub fn render(&self, env: &PromptEnv) -> String {
        let mut out = self.text.trim_end().to_string();
        for (name, value) in env.values() {
            out = out.replace(&format!("{{{{{name}}}}}"), value);
        }
        if let Some(append) = &self.append {
            out.push_str("\n\n");
            out.push_str(append.trim_end());
        }
        out.push('\n');
        out
    }
}

fn resolve(file: &str, home: &Path) -> PathBuf {
    let file = expand_env_vars(file);
    let path = match file.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
        None => PathBuf::from(&file),
    };
    if path.is_absolute() { path } else { home.join(path) }
}

/// What the prompt says about a session's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptEnv {
    pub cwd: String,
    pub roots: String,
    pub denied: String,
    pub os: String,
    pub shell: String,
    pub date: String,
    pub git: String,
    pub approval: String,
    pub ask_tools: String,
    /// Which edit tool this model family is best at.
    pub edit_tools: String,
}

impl PromptEnv {
    /// Looks at the session's environment now (its directory, git, the
    /// configuration in force).
    pub fn detect(cwd: &str, provider: &str, config: &ForgeConfig, tools: &ToolRegistry, now_ms: i64) -> Self {
        let (roots, denied) = Sandbox::outline(Path::new(cwd), config.tools.sandbox.as_ref());
        let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        let approval = config.tools.approval.as_ref();
        let policy = ApprovalPolicy::for_tools(&config.tools);
        let (mut ask, mut refused) = (Vec::new(), Vec::new());
        for tool in tools.iter() {
            match policy.decide(tool.as_ref(), None) {
                Decision::Ask => ask.push(tool.name()),
                Decision::Deny(_) => refused.push(tool.name()),
                Decision::Run => {}
            }
        }
        let mode = approval.and_then(|a| a.mode.clone()).unwrap_or_else(|| "default".into());
        let approval = match (approval.and_then(|a| a.enabled) == Some(false), refused.is_empty()) {
            (true, _) => "off: every tool runs without asking".to_string(),
            (false, true) => format!("`{mode}` mode"),
            (false, false) => format!("`{mode}` mode; refused outright: {}", refused.join(", ")),
        };
        let date = crate::tools::builtin::current_date::iso8601(now_ms);
        PromptEnv {
            cwd: cwd.to_string(),
            roots: roots.join(", "),
            denied: denied.join(" "),
            os: format!("{} ({})", std::env::consts::OS, std::env::consts::ARCH),
            shell: crate::tools::builtin::run_command::shell(),
            date: format!("{} (UTC)", date.get(..10).unwrap_or(&date)),
            git: git_state(Path::new(cwd)),
            approval,
            ask_tools: if ask.is_empty() { "none".into() } else { ask.join(", ") },
            edit_tools: edit_tools(provider).into(),
        }
    }

    fn values(&self) -> [(&'static str, &str); 10] {
        [
            ("cwd", &self.cwd),
            ("roots", &self.roots),
            ("denied", &self.denied),
            ("os", &self.os),
            ("shell", &self.shell),
            ("date", &self.date),
            ("git", &self.git),
            ("approval", &self.approval),
            ("ask_tools", &self.ask_tools),
            ("edit_tools", &self.edit_tools),
        ]
    }
}

/// The edit tool a model family was trained on first: Claude's and
/// Gemini's agents edit by exact search and replace, OpenAI's by patches.
fn edit_tools(provider: &str) -> &'static str {
    match crate::provider::ProviderKind::parse(provider) {
        Some(crate::provider::ProviderKind::OpenAi) => {
            "Edit files with apply_patch (one patch may change several files, all or none); edit replaces one exact string when that is simpler."
        }
        _ => {
            "Edit files with edit: old_string exactly as the file has it, with enough lines to occur once, and new_string in its place; apply_patch changes several places or files in one step."
        }
    }
}

/// Whether `dir` is in a git repository, and on which branch (read from
/// `.git/HEAD`, without running git).
fn git_state(dir: &Path) -> String {
    let Some(git) = dir.ancestors().map(|d| d.join(".git")).find(|g| g.exists()) else {
        return "not a git repository".into();
    };
    // A worktree or submodule: `.git` is a file naming the real directory.
    let git_dir = match std::fs::read_to_string(&git) {
        Ok(link) => match link.trim().strip_prefix("gitdir:") {
            Some(target) => git.parent().unwrap_or(dir).join(target.trim()),
            None => git,
        },
        Err(_) => git,
    };
    match std::fs::read_to_string(git_dir.join("HEAD")) {
        Ok(head) => match head.trim().strip_prefix("ref: refs/heads/") {
            Some(branch) if branch.starts_with("forge/session/") => format!(
                "a Forge git session on branch {branch}, in a worktree of its own: each of your turns is committed there for you, so do not commit, stash or switch branches yourself"
            ),
            Some(branch) => format!("a git repository, on branch {branch}"),
            None => format!("a git repository, detached at {}", head.trim().get(..12).unwrap_or(head.trim())),
        },
        Err(_) => "a git repository".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> PromptEnv {
        PromptEnv::detect(&dir.display().to_string(), "claude", &ForgeConfig::default(), &ToolRegistry::builtin(), 0)
    }

    #[test]
    fn the_prompt_names_the_session_environment_and_leaves_no_placeholder() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let prompt = PromptTemplate::default().render(&env(dir.path()));
        assert!(prompt.contains(&format!("Working directory: {}", dir.path().display())));
        assert!(prompt.contains("Date: 1970-01-01 (UTC)"));
        assert!(prompt.contains("Git: not a git repository"));
        assert!(prompt.contains("write_file"), "the tools needing approval are named");
        assert!(!prompt.contains("{{"), "{prompt}");
    }

    #[test]
    fn the_branch_is_read_from_git_head() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(git_state(&dir.path().join("src")), "a git repository, on branch feature/x");
    }

    #[test]
    fn a_prompt_file_replaces_the_template_and_append_adds_to_it() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.path().join("mine.md"), "Be terse. Work in {{cwd}}.").unwrap_or_else(|e| panic!("{e}"));
        let mut config = ForgeConfig::default();
        config.app.system_prompt_file = Some("mine.md".into());
        config.app.system_prompt_append = Some("Answer in French.".into());
        let prompt = PromptTemplate::load(&config, home.path()).unwrap_or_else(|e| panic!("{e}"));
        let text = prompt.render(&env(Path::new("/p")));
        assert_eq!(text, "Be terse. Work in /p.\n\nAnswer in French.\n");

        config.app.system_prompt_file = Some("missing.md".into());
        let err = PromptTemplate::load(&config, home.path()).err().map(|e| e.message).unwrap_or_default();
        assert!(err.contains("missing.md") && err.contains("system_prompt_file"), "{err}");
    }
}
