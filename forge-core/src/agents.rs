//! Agent types for helper agents (the `task` tool): Markdown files with
//! front matter, as Claude Code defines them (`name`, `description`,
//! `tools`, `model`; the body is the helper's instructions). Read from
//! the user's `$XDG_CONFIG_HOME/forge/agents/` (or
//! `~/.config/forge/agents/`) and, in a folder the user trusts, the
//! project's `.claude/agents/` and `.forge/agents/` (a later one of the
//! same name wins). `general-purpose`, with every tool, is built in.

use std::path::{Path, PathBuf};

use forge_proto::AgentInfo;

use crate::slash_commands::{first_line, front_matter, list, user_dir};

/// The agent type a `task` call without one runs as.
pub const GENERAL_PURPOSE: &str = "general-purpose";

const MAX_BYTES: u64 = 256 * 1024;
const MAX_AGENTS: usize = 200;

/// One agent type.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentType {
    pub info: AgentInfo,
    /// Its instructions (the file's body).
    pub instructions: String,
}

fn builtin() -> AgentType {
    AgentType {
        info: AgentInfo {
            name: GENERAL_PURPOSE.into(),
            description: "researches, searches code and carries out multi-step tasks".into(),
            tools: None,
            model: None,
            source: "builtin".into(),
            path: None,
        },
        instructions: String::new(),
    }
}

/// The agent types a session in `cwd` has, by name.
/// What the agent types of `cwd` are, in a word: it changes when one is
/// added, removed or edited, or the folder's trust does.
pub fn key(cwd: &Path, trusted: bool) -> String {
    load(cwd, trusted)
        .iter()
        .map(|a| {
            format!(
                "{}\0{}\0{:?}\0{:?}\0{}",
                a.info.name, a.info.description, a.info.tools, a.info.model, a.instructions
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn load(cwd: &Path, trusted: bool) -> Vec<AgentType> {
    let mut dirs: Vec<(PathBuf, &str)> = user_dir("agents").into_iter().map(|d| (d, "user")).collect();
    if trusted {
        dirs.push((cwd.join(".claude/agents"), "project"));
        dirs.push((cwd.join(".forge/agents"), "project"));
    }
    let mut all = vec![builtin()];
    for (dir, source) in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for p in files.into_iter().take(MAX_AGENTS) {
            // Links are not followed: a project's file is its own.
            let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
            if !meta.is_file() || meta.len() > MAX_BYTES || p.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else { continue };
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            if let Some(a) = parse(stem, &text, source, &p) {
                all.retain(|o| o.info.name != a.info.name);
                all.push(a);
            }
        }
    }
    all.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    all
}

/// An agent file; `None` when its name is not one a model can ask for.
pub fn parse(stem: &str, text: &str, source: &str, path: &Path) -> Option<AgentType> {
    let (fields, body) = front_matter(text);
    let mut info = AgentInfo {
        name: stem.to_string(),
        description: String::new(),
        tools: None,
        model: None,
        source: source.into(),
        path: Some(path.display().to_string()),
    };
    for (k, v) in fields {
        match k {
            "name" if !v.is_empty() => info.name = v,
            "description" => info.description = v,
            "tools" => {
                let tools = list(&v);
                // `*` (or nothing listed): every tool.
                if !tools.is_empty() && !tools.iter().any(|t| t == "*") {
                    info.tools = Some(tools.iter().map(|t| crate::tools::grants::forge_name(t)).collect());
                }
            }
            "model" => info.model = Some(v).filter(|v| !v.is_empty() && v != "inherit"),
            _ => {}
        }
    }
    let valid = !info.name.is_empty()
        && info.name.len() <= 64
        && info.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return None;
    }
    if info.description.is_empty() {
        info.description = first_line(body);
    }
    Some(AgentType { info, instructions: body.trim().to_string() })
}

/// The model an agent type asks for, as the session's provider names it:
/// Claude Code's `sonnet`, `opus` and `haiku` on Claude; `None` (the
/// session's model) for such a name on another provider.
pub fn model_for(agent: &AgentInfo, provider: &str) -> Option<String> {
    let model = agent.model.as_deref()?;
    let claude = crate::provider::ProviderKind::parse(provider) == Some(crate::provider::ProviderKind::Claude);
    match model {
        "sonnet" | "opus" | "haiku" if !claude => None,
        "sonnet" => Some("claude-sonnet-4-6".into()),
        "opus" => Some("claude-opus-4-7".into()),
        "haiku" => Some("claude-haiku-4-5".into()),
        other => Some(other.to_string()),
    }
}

/// The `task` tool's description: what it does and the agent types.
pub fn task_description(agents: &[AgentType]) -> String {
    let mut d = String::from(
        "Run a helper agent: a session of its own whose final answer is this call's result. It sees none of \
         this conversation: put all it needs in `prompt`. Task calls in one answer run at once. Types:\n",
    );
    for a in agents {
        d.push_str(&format!("- {}: {}", a.info.name, a.info.description));
        if let Some(tools) = &a.info.tools {
            d.push_str(&format!(" (tools: {})", tools.join(", ")));
        }
        d.push('\n');
    }
    d
}

/// What a helper agent's system prompt adds: that it is one, and its
/// agent type's instructions.
pub fn helper_prompt(helper: Option<&crate::store::HelperSpec>) -> String {
    let Some(h) = helper else { return String::new() };
    let mut p = format!(
        "\n\n# You are a helper agent\n\nAnother agent started you with its `task` tool (\"{}\", agent type {}). \
         Work on the task in the next message on your own: nobody answers questions. Your last answer is all \
         the other agent sees of your work, so end with a final answer that holds everything it asked for.\n",
        h.of.description, h.of.agent
    );
    if !h.instructions.is_empty() {
        p.push('\n');
        p.push_str(&h.instructions);
        p.push('\n');
    }
    p
}

/// The `task` tool as the model sees it. The session runs its calls
/// itself (a helper session each, see the machine's `helpers.rs`): this
/// executor only describes it and never runs.
pub struct TaskTool {
    description: String,
    agents: Vec<String>,
}

pub const TASK_TOOL: &str = "task";

/// A `task` call's arguments: the schema the model is offered, and what
/// the session's machine reads a call as (`machine/helpers.rs`).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// 3-5 words
    pub description: String,
    pub prompt: String,
    // One of the agent types, which `TaskTool::schema` lists.
    pub subagent_type: Option<String>,
}

impl TaskTool {
    pub fn new(agents: &[AgentType]) -> Self {
        TaskTool { description: task_description(agents), agents: agents.iter().map(|a| a.info.name.clone()).collect() }
    }
}

impl crate::tools::ToolExecutor for TaskTool {
    fn name(&self) -> &str {
        TASK_TOOL
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn schema(&self) -> serde_json::Value {
        let mut schema = crate::tools::schema_of::<TaskArgs>();
        // The agent types are known only at run time.
        if let Some(agent) = schema.pointer_mut("/properties/subagent_type").and_then(|a| a.as_object_mut()) {
            agent.insert("enum".into(), serde_json::json!(self.agents));
        }
        schema
    }
    fn is_side_effecting(&self) -> bool {
        // What the helper does, it asks for in its own session.
        false
    }
    fn starts_helper(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &serde_json::Value, _sandbox: &crate::tools::Sandbox) -> String {
        let d = args.get("description").and_then(serde_json::Value::as_str).unwrap_or("a task");
        crate::tools::short_summary(format!("start a helper agent: {d}"))
    }
    fn execute<'a>(&'a self, _args: serde_json::Value, _ctx: &'a crate::tools::ToolCtx) -> crate::tools::ToolFut<'a> {
        Box::pin(async {
            Err(crate::tools::ToolError::ExecutionFailed {
                tool: TASK_TOOL.into(),
                message: "a task call runs as a helper session, not as a tool".into(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_agent_files_are_read() {
        let text = "---\nname: code-reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep, Glob, Bash\nmodel: haiku\n---\nYou review code. List bugs by severity.\n";
        let a = parse("x", text, "project", Path::new("/p/.claude/agents/x.md")).unwrap_or_else(|| panic!("parsed"));
        assert_eq!(a.info.name, "code-reviewer");
        assert_eq!(
            a.info.tools.as_deref(),
            Some(&["read_file", "search", "glob", "run_command"].map(String::from)[..])
        );
        assert_eq!(model_for(&a.info, "claude").as_deref(), Some("claude-haiku-4-5"));
        assert_eq!(model_for(&a.info, "openai"), None, "an alias means nothing elsewhere");
        assert_eq!(a.instructions, "You review code. List bugs by severity.");
        assert!(parse("bad name", "hi", "user", Path::new("/x")).is_none());
    }

    #[test]
    fn tools_as_yaml_lists_are_read_too() {
        let block = "---\nname: r\ntools:\n  - Read\n  - Grep\n---\nRead.";
        let flow = "---\nname: r\ntools: [Read, \"Grep\"]\n---\nRead.";
        for text in [block, flow] {
            let a = parse("r", text, "user", Path::new("/r.md")).unwrap_or_else(|| panic!("parsed"));
            assert_eq!(a.info.tools.as_deref(), Some(&["read_file", "search"].map(String::from)[..]), "{text}");
        }
    }

    #[test]
    fn project_agents_only_in_a_trusted_folder() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path();
        std::fs::create_dir_all(p.join(".forge/agents")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".forge/agents/tester.md"), "---\ndescription: Runs tests\n---\nRun the tests.")
            .unwrap_or_else(|e| panic!("{e}"));
        let names = |v: Vec<AgentType>| v.into_iter().map(|a| a.info.name).collect::<Vec<_>>();
        assert_eq!(names(load(p, false)), [GENERAL_PURPOSE]);
        assert_eq!(names(load(p, true)), [GENERAL_PURPOSE, "tester"]);
    }
}
