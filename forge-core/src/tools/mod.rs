//! Tools the model can call: the [`ToolExecutor`] trait, the
//! [`ToolRegistry`], the [`Sandbox`] every path goes through, and the
//! built-in tools.

pub mod builtin;
mod error;
pub mod lp1;
pub mod policy;
pub mod sandbox;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use error::{DenialReason, ToolError};
pub use sandbox::Sandbox;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    Low,
    Medium,
    High,
}

/// What a tool may use while it runs.
pub struct ToolCtx {
    pub sandbox: Sandbox,
    pub call_id: String,
    /// Output beyond this is cut, with a note saying so.
    pub max_output_bytes: usize,
    /// Where a long-running tool streams its output while it runs.
    pub output: Option<tokio::sync::mpsc::Sender<ToolOutput>>,
    /// SHA-256 of each file as the model last read or wrote it, for
    /// stale-file protection. Shared by the session's calls.
    pub file_hashes: FileHashes,
}

#[cfg(test)]
impl ToolCtx {
    /// A context for a tool's unit tests: `dir` is the working directory.
    pub(crate) fn for_tests(dir: &std::path::Path, max_output_bytes: usize) -> Self {
        Self {
            sandbox: Sandbox::new(dir, &[], &[], true, false),
            call_id: "test".into(),
            max_output_bytes,
            output: None,
            file_hashes: Default::default(),
        }
    }
}

/// Runs a tool to completion on a fresh runtime (unit tests).
#[cfg(test)]
pub(crate) fn run_blocking(tool: &dyn ToolExecutor, args: Value, ctx: &ToolCtx) -> Result<String, ToolError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(tool.execute(args, ctx))
}

pub type FileHashes = Arc<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, Vec<u8>>>>;

pub fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}

/// A piece of a running tool's output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    pub text: String,
}

pub type ToolFut<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

pub trait ToolExecutor: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// JSON Schema of the arguments (an object schema).
    fn schema(&self) -> Value;
    fn is_side_effecting(&self) -> bool;
    fn risk_level(&self) -> RiskLevel {
        if self.is_side_effecting() { RiskLevel::Medium } else { RiskLevel::Low }
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
    /// What a user approving this call should see (it may read files
    /// through the sandbox, e.g. to show a diff).
    fn approval_summary(&self, args: &Value, _sandbox: &Sandbox) -> String {
        let mut text = format!("{} {}", self.name(), args);
        if text.len() > 400 {
            let mut end = 400;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(" ...");
        }
        text
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a>;
}

/// A tool as advertised to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn ToolExecutor>>,
}

impl ToolRegistry {
    /// The built-in tools.
    pub fn builtin() -> Self {
        let mut r = Self::default();
        for t in builtin::all() {
            // Built-in names are distinct; a clash is a bug caught by tests.
            let _ = r.register(t);
        }
        r
    }

    pub fn register(&mut self, tool: Arc<dyn ToolExecutor>) -> Result<(), ToolError> {
        let name = tool.name().to_string();
        if self.tools.contains_key(&name) {
            return Err(ToolError::DuplicateTool { name });
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The tool called `name`, or the one it is an alias of.
    pub fn get(&self, name: &str) -> Option<Arc<dyn ToolExecutor>> {
        self.tools.get(name).cloned().or_else(|| {
            builtin::aliases().iter().find(|(alias, _)| *alias == name).and_then(|(_, tool)| self.tools.get(*tool).cloned())
        })
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .map(|t| ToolSpec { name: t.name().into(), description: t.description().into(), parameters: t.schema() })
            .collect()
    }
}

/// Cuts `text` to at most `max` bytes on a char boundary, saying so.
pub fn truncate_output(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n[output truncated: {max} of {total} bytes shown]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_names_are_rejected() {
        let mut r = ToolRegistry::builtin();
        let again = builtin::all().remove(0);
        assert!(matches!(r.register(again), Err(ToolError::DuplicateTool { .. })));
        assert!(r.specs().iter().any(|s| s.name == "read_file"));
        assert_eq!(r.get("rg").map(|t| t.name()), Some("search"), "aliases resolve");
        assert!(!r.specs().iter().any(|s| s.name == "rg"), "but are not advertised");
    }

    #[test]
    fn output_is_truncated_on_a_char_boundary() {
        let t = truncate_output("ab\u{1f44b}cd".into(), 4);
        assert!(t.starts_with("ab\n") || t.starts_with("ab"), "{t}");
        assert!(t.contains("truncated"));
    }
}
