//! Tool calls on the wire: approvals, recovery of interrupted calls, the
//! tools a session offers, the command sandbox and MCP servers.

use serde::{Deserialize, Serialize};

/// The command sandbox on this machine under the configuration in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxStatus {
    /// `kernel`: commands run confined by the kernel (Landlock, seccomp,
    /// namespaces) and the default approval policy runs them without
    /// asking; `paths-only`: configured so, every command asks;
    /// `unavailable`: `kernel` was asked for but this kernel cannot, every
    /// command asks.
    pub mode: String,
    /// Landlock ABI of the kernel (0: none).
    pub landlock_abi: i32,
    /// Commands get user namespaces of their own (the process limit per
    /// command, `.git` read-only, the network namespace).
    pub user_namespaces: bool,
    /// `deny`, `allow` or `localhost`.
    pub network: String,
    /// Memory of a command: in all where `memory_bounded`, else per
    /// process.
    pub max_memory_mb: u64,
    /// Processes and threads of a command at once.
    pub max_processes: u64,
    pub max_cpu_seconds: u64,
    /// `max_processes` bounds all of a command's processes together, root
    /// included (a pids cgroup of its own).
    #[serde(default)]
    pub processes_bounded: bool,
    /// `max_memory_mb` bounds a command's memory in all (a memory cgroup
    /// of its own), not only each process's.
    #[serde(default)]
    pub memory_bounded: bool,
    /// Where the totals are bounded (the cgroup), or why they are not.
    #[serde(default)]
    pub totals: String,
    /// What confines commands, in words (`mode` = `kernel` only): the
    /// files (Landlock, or a mount namespace of the granted trees where
    /// the kernel's Landlock is older than ABI 3), the network, processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_by: Option<String>,
    /// The daemon's kernel release (`uname -r`).
    #[serde(default)]
    pub kernel: String,
    /// Why commands are not confined, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Toolchain entries of the home (`~/.cargo`, `~/go`, ...) that lead to
    /// the home itself or above it, and so are not readable by commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_toolchains: Vec<String>,
}

/// One probe of the escape suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxProbe {
    /// What the probe tries.
    pub probe: String,
    /// `refused` or `allowed`: what this configuration should do.
    pub expected: String,
    /// `refused`, `allowed` or `skipped`.
    pub outcome: String,
    /// What was seen (the command's message, or what changed on disk).
    pub detail: String,
    /// The outcome is the expected one (or the probe was skipped).
    pub ok: bool,
}

/// `sandbox.test`: the sandbox and what the escape suite found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxReport {
    pub status: SandboxStatus,
    pub probes: Vec<SandboxProbe>,
    /// Every probe had the expected outcome.
    pub passed: bool,
}

/// The name of the one "call" a budget approval holds: going past
/// `[app] session_budget_usd` (it runs no tool).
pub const BUDGET_CALL: &str = "session_budget";

/// The name of each "call" of a git session's held files' approval: a
/// file that makes something run later, which a command of the turn
/// wrote, committed with the turn only if approved (it runs no tool).
pub const HELD_CALL: &str = "commit_run_later";

/// Such a call's id is this, then the file's path in the repository.
pub const HELD_CALL_PREFIX: &str = "run_later:";

/// What an approval asks for, in words: "1 tool call", "3 tool calls",
/// going past the session's budget, or committing files that run later.
pub fn approval_subject(calls: &[ApprovalCall]) -> String {
    match calls {
        [one] if one.name == BUDGET_CALL => "going past its budget".into(),
        [first, ..] if first.name == HELD_CALL => {
            format!("committing {} changed file(s) that run something later", calls.len())
        }
        [_] => "1 tool call".into(),
        many => format!("{} tool calls", many.len()),
    }
}

/// One tool call waiting for a user's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalCall {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    /// `low`, `medium` or `high`.
    pub risk: String,
    /// What approving it would do, readable (a diff or a preview where the
    /// tool can show one).
    pub summary: String,
}

/// A pending approval, as `approval.list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingApproval {
    pub session_id: String,
    pub session_name: Option<String>,
    pub approval_id: String,
    pub calls: Vec<ApprovalCall>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    ApproveAll,
    #[default]
    DenyAll,
    /// Approve the calls named by `call_ids` (or 1-based `indices`); deny
    /// the others.
    ApproveSelected,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalResult {
    pub session_id: String,
    pub approval_id: String,
    pub approved: Vec<String>,
    pub denied: Vec<String>,
}

/// A tool call of an interrupted batch, as `tool_recovery` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveryCall {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    /// True if it had started running when the daemon stopped (its effect
    /// may be partial); false if it never started.
    pub interrupted: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecoverAction {
    /// Run what is safe to run again and continue the turn.
    #[default]
    Resume,
    /// Answer every unfinished call as discarded and end the turn.
    Discard,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoverResult {
    pub session_id: String,
    /// Calls that will run (subject to the approval policy).
    pub rerun: Vec<String>,
    /// Calls answered with an error instead: discarded, or interrupted
    /// side effects that are never re-run behind the user's back.
    pub not_rerun: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolResultAccepted {
    pub session_id: String,
    pub call_id: String,
    /// Calls still waiting for a result.
    pub remaining: Vec<String>,
}

/// A tool the model may call, as `tools.list` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// `low`, `medium` or `high`.
    pub risk: String,
    /// `run` (no question asked), `ask` (a user approves each call) or
    /// `deny` (refused by the policy).
    pub approval: String,
}

/// A session's own approval rules (`session.approval_rules`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRules {
    pub session_id: String,
    /// The session's approval mode, replacing `[tools.approval] mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Tools allowed always in this session ("allow always").
    #[serde(default)]
    pub always_allow: Vec<String>,
}

/// An MCP server a client gives a session: `command` (+ `args`, `env`)
/// for stdio, or `url` (+ `headers`) for streamable HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// An MCP server and its tools, as `mcp.list` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerInfo {
    /// `name` in `[[mcp.servers]]` (or as an editor named it).
    pub name: String,
    /// The session it belongs to: servers an editor gave one session
    /// (over ACP). Absent for config.toml's, which every session has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `stdio` or `http`.
    pub transport: String,
    /// The command line or the URL.
    pub target: String,
    /// `starting`, `ready`, `failed` (down, `error` says why; started
    /// again in `retry_in_seconds`), `restarting` or `stopped`.
    pub state: String,
    /// Why it is down, or (when up again) its last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_seconds: Option<u64>,
    /// `name version` as the server introduced itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// Times it was started again (after a failure or a restart).
    pub restarts: u32,
    /// Tool calls made to it since forged started.
    pub calls: u64,
    pub tools: Vec<McpToolInfo>,
    /// Its prompts, each a `/server:prompt` command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
    /// How many resources it lists (`mcp.resources`).
    #[serde(default)]
    pub resources: u32,
}

/// A resource an MCP server lists: `server:uri` attaches it to a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpResourceInfo {
    pub server: String,
    pub uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One tool of an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpToolInfo {
    /// The name the model calls it by: `server__tool`.
    pub name: String,
    /// The name the server gave it.
    pub remote_name: String,
    pub description: String,
    /// The server says it only reads (`readOnlyHint`): it runs without
    /// asking where reading tools do.
    pub read_only: bool,
}
