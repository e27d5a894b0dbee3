//! What the model is offered of the session's tools (every definition,
//! or only the core ones on a window too small for all of them), the
//! limits calls run under, and what `introspect` reports of both.

use std::sync::Arc;

use serde_json::Value;

use super::Session;
use super::state::OperationState;
use super::tools::{DEFAULT_MAX_ARGS_BYTES, DEFAULT_MAX_CALLS_PER_BATCH, sandbox_for, timeout_for};
use crate::tools::{ToolLimits, ToolSpec};

/// The tools a small window still gets: reading, changing and finding
/// files, running commands, and recalling what was summarized.
const CORE_TOOLS: [&str; 8] =
    ["read_file", "write_file", "edit", "apply_patch", "run_command", "search", "glob", "recall"];
/// The share of a model's input that every tool definition together may
/// take before only the core tools are offered.
const TOOLS_SHARE: f64 = 0.25;

/// The bytes tool definitions add to every request.
pub(super) fn spec_bytes(specs: &[ToolSpec]) -> usize {
    specs.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum()
}

impl Session {
    /// Decides, for the session's model, whether only the core tools are
    /// offered (every definition would take more than its share of the
    /// model's input), and what the offered ones weigh. Run when the model
    /// is set; decided by the uncalibrated estimate, so that the tools
    /// offered never change with calibration (a change costs the prompt
    /// cache).
    pub(super) fn size_tools(&mut self) {
        let all = spec_bytes(&self.tools.specs());
        self.core_tools_only = self.context_budget().is_some_and(|b| {
            crate::context::TokenEstimator::default().tokens(all) as f64 > b.input_limit() as f64 * TOOLS_SHARE
        });
        self.tools_bytes = spec_bytes(&self.tool_specs());
    }

    /// The tools offered from the next request on (an MCP server's tools
    /// came or changed); never in the middle of a turn's tool batch.
    pub(crate) fn set_tools(&mut self, tools: Arc<crate::tools::ToolRegistry>) {
        self.tools = tools;
        self.size_tools();
    }

    /// What `introspect` reports, as of now.
    pub(super) fn introspection(&self) -> Value {
        let config = &self.config;
        let policy = self.policy();
        let offered = self.tool_specs();
        let tools: Vec<Value> = self
            .tools
            .iter()
            .filter(|t| offered.iter().any(|o| o.name == t.name()))
            .map(|t| {
                let approval = policy.decide(t.as_ref(), None).describe();
                serde_json::json!({
                    "name": t.name(),
                    "risk": t.risk_level(),
                    "side_effects": t.is_side_effecting(),
                    "approval": approval,
                    "timeout_seconds": timeout_for(t.as_ref(), config).as_secs(),
                })
            })
            .collect();
        let limits = self.tool_limits();
        let iteration = match &self.state {
            OperationState::ToolLoop(l) => Some(l.iteration),
            _ => None,
        };
        serde_json::json!({
            "forge": {"version": env!("CARGO_PKG_VERSION"), "daemon": "forged"},
            "session": {
                "id": self.row.id,
                "name": self.row.name,
                "provider": self.row.provider,
                "model": self.row.model,
                "cwd": self.row.cwd,
                "messages_in_context": self.path.len(),
                "tool_iteration": iteration,
            },
            "tools": tools,
            "sandbox": sandbox_for(&self.row, config).describe(),
            "limits": {
                "max_tool_calls_per_batch": config.tools.max_tool_calls_per_batch.unwrap_or(DEFAULT_MAX_CALLS_PER_BATCH),
                "max_tool_iterations_per_user_turn": self.max_iterations(),
                "max_tool_args_bytes": config.tools.max_tool_args_bytes.unwrap_or(DEFAULT_MAX_ARGS_BYTES),
                "output_max_bytes": limits.output_bytes,
                "read_file_max_bytes": limits.file_read_bytes,
                "read_file_max_scan_bytes": limits.scan_bytes,
                "apply_patch_max_bytes": limits.patch_bytes,
            },
        })
    }

    /// The tools the model is offered, as `[tools] mode` says; on a window
    /// too small for every definition, only the core ones.
    pub(super) fn tool_specs(&self) -> Vec<ToolSpec> {
        match self.config.tools.mode.unwrap_or_default() {
            crate::config::ToolMode::Enabled => {
                let all = self.tools.specs();
                if self.core_tools_only {
                    all.into_iter().filter(|t| CORE_TOOLS.contains(&t.name.as_str())).collect()
                } else {
                    all
                }
            }
            crate::config::ToolMode::ParseOnly => {
                let mut specs = self.tools.specs();
                specs.extend(self.config.tools.definitions.iter().map(|d| {
                    ToolSpec {
                        name: d.name.clone(),
                        description: d.description.clone().unwrap_or_default(),
                        parameters: d
                            .parameters
                            .as_ref()
                            .and_then(|p| serde_json::to_value(p).ok())
                            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    }
                }));
                specs
            }
            crate::config::ToolMode::Disabled => Vec::new(),
        }
    }

    pub(super) fn tool_limits(&self) -> ToolLimits {
        ToolLimits::from_config(&self.config.tools)
    }
}
