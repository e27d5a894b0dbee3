//! The `[tools]` section of `config.toml`: what the tools and their
//! approval policy read. Parsed with the rest of the file by forge-core.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `[tools]` section of the seeds. Parsed and validated now so that a
/// complete seed configuration loads; the tool system uses it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// `enabled` (default): tools are offered to the model and run;
    /// `parse_only`: offered, but a client supplies the results;
    /// `disabled`: none are offered (for servers without tool support).
    pub mode: Option<ToolMode>,
    pub max_tool_calls_per_batch: Option<usize>,
    /// Also read as `max_tool_iterations`.
    #[serde(alias = "max_tool_iterations")]
    pub max_tool_iterations_per_user_turn: Option<u32>,
    pub max_tool_args_bytes: Option<usize>,
    #[serde(default)]
    pub definitions: Vec<ToolDefinitionConfig>,
    pub sandbox: Option<ToolSandboxConfig>,
    pub timeouts: Option<ToolTimeoutsConfig>,
    pub output: Option<ToolOutputConfig>,
    pub approval: Option<ToolApprovalConfig>,
    pub read_file: Option<ReadFileConfig>,
    pub apply_patch: Option<ApplyPatchConfig>,
    pub git: Option<GitToolsConfig>,
    pub web_search: Option<WebSearchConfig>,
    /// `[tools.task]`: helper agents.
    pub task: Option<TaskConfig>,
    /// Other per-tool tables (`[tools.search]`, ...), kept for their tools.
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

/// `[tools.task]`: helper agents the model starts with the `task` tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// `false`: no `task` tool.
    pub enabled: Option<bool>,
    /// How deep helpers may start helpers (1: a helper starts none).
    pub max_depth: Option<u32>,
    /// Helpers one answer may start (more calls get an error result).
    pub max_per_batch: Option<u32>,
}

impl TaskConfig {
    pub const DEFAULT_MAX_DEPTH: u32 = 1;
    pub const DEFAULT_MAX_PER_BATCH: u32 = 8;
}

/// `[tools.web_search]`: the provider's own web search (Claude's, and
/// OpenAI's on the Responses API), off unless enabled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    pub enabled: Option<bool>,
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    #[serde(default)]
    pub blocked_domains: Vec<String>,
    /// Searches one answer may make (Claude's `max_uses`).
    pub max_uses: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinitionConfig {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<toml::Table>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSandboxConfig {
    pub allowed_roots: Option<Vec<String>>,
    pub denied_patterns: Option<Vec<String>>,
    pub allow_absolute: Option<bool>,
    pub include_default_denies: Option<bool>,
    /// Default deny patterns that do not apply (as written in the
    /// defaults, e.g. `"**/node_modules/**"`); the others still do.
    pub lift_default_denies: Option<Vec<String>>,
    /// `kernel` (default where the kernel has Landlock): commands run
    /// confined by the kernel; `paths-only`: only the file tools' path
    /// checks, and every command asks.
    pub mode: Option<SandboxMode>,
    /// What commands may read (besides the session's roots); default: the
    /// system and the toolchains under `$HOME`. `~` is the home directory.
    pub read_roots: Option<Vec<String>>,
    /// More places commands may write, besides the roots and their
    /// private temporary directory.
    pub write_roots: Option<Vec<String>>,
    /// `deny` (default), `allow` or `localhost`.
    pub network: Option<NetworkAccess>,
    /// Memory of one command in all (its cgroup), and of each of its
    /// processes; default 8192 (where no memory cgroup is available, the
    /// machine's memory divided by 64, at least 256).
    pub max_memory_mb: Option<u64>,
    /// Processes and threads one command may have at once, default 1024
    /// (64 where no pids cgroup is available).
    pub max_processes: Option<u64>,
    /// CPU seconds per process, default 3600.
    pub max_cpu_seconds: Option<u64>,
    /// Environment variables commands get even though their names look
    /// secret (`*_KEY`, `*_TOKEN`, ...).
    pub pass_env: Option<Vec<String>>,
    /// Unix sockets outside the session's roots that commands may connect
    /// to (paths; `~` is the home directory). Every other one is refused.
    pub allow_unix_sockets: Option<Vec<String>>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    #[default]
    Kernel,
    PathsOnly,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkAccess {
    #[default]
    Deny,
    Allow,
    Localhost,
}

impl NetworkAccess {
    pub fn word(self) -> &'static str {
        match self {
            NetworkAccess::Deny => "deny",
            NetworkAccess::Allow => "allow",
            NetworkAccess::Localhost => "localhost",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTimeoutsConfig {
    pub default_seconds: Option<u64>,
    pub file_operations_seconds: Option<u64>,
    pub shell_commands_seconds: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputConfig {
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolApprovalConfig {
    pub enabled: Option<bool>,
    pub mode: Option<String>,
    pub allowlist: Option<Vec<String>>,
    pub denylist: Option<Vec<String>>,
    pub prompt_side_effects: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileConfig {
    pub max_file_read_bytes: Option<usize>,
    pub max_scan_bytes: Option<usize>,
}

/// `[tools.git]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitToolsConfig {
    /// Run the repository's hooks (pre-commit, ...) in the git tools;
    /// default false. They run in the command sandbox, with `.git/config`
    /// and the hooks read-only.
    pub run_hooks: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchConfig {
    pub max_patch_bytes: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    Disabled,
    /// Tools (built-in and `[[tools.definitions]]`) are offered; a client
    /// submits each result (`session.tool_result`, `forgectl tool-result`).
    ParseOnly,
    #[default]
    Enabled,
}
