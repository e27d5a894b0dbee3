//! Tools the model can call: the [`ToolExecutor`] trait, the
//! [`ToolRegistry`], the [`Sandbox`] every path goes through, and the
//! built-in tools.

pub mod builtin;
pub mod config;
pub mod confine;
mod error;
pub mod escape_suite;
pub mod git_guard;
pub mod grants;
pub mod lexical;
pub mod lp1;
pub mod policy;
pub mod repo_tools;
pub mod roots;
pub mod sandbox;
pub mod schema;
pub mod supervisor;

pub use jsonschema;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use error::{DenialReason, ToolError};
pub use sandbox::Sandbox;
pub use schema::schema_of;

/// The umask of the user who started the daemon. The daemon itself runs
/// with 077 to keep its own files private; what the model creates in a
/// project (files, directories, whatever a command writes) gets the modes
/// the user's own tools would give it.
static USER_UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Called once by the daemon at start-up, with the umask it replaced.
pub fn set_user_umask(mask: u32) {
    let _ = USER_UMASK.set(mask & 0o777);
}

/// The user's umask (022 unless the daemon said otherwise).
pub fn user_umask() -> u32 {
    USER_UMASK.get().copied().unwrap_or(0o022)
}

/// `mode` as the user's umask leaves it.
pub fn user_mode(mode: u32) -> u32 {
    mode & !user_umask()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    Low,
    Medium,
    High,
}

/// Size limits from `[tools.output]`, `[tools.read_file]` and
/// `[tools.apply_patch]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ToolLimits {
    /// A result beyond this is cut, with a note saying so
    /// (`tools.output.max_bytes`).
    pub output_bytes: usize,
    /// Most text `read_file` returns (`tools.read_file.max_file_read_bytes`).
    pub file_read_bytes: usize,
    /// Most of a file `read_file` looks at (`tools.read_file.max_scan_bytes`).
    pub scan_bytes: usize,
    /// Largest patch `apply_patch` takes (`tools.apply_patch.max_patch_bytes`).
    pub patch_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            output_bytes: 100 * 1024,
            file_read_bytes: 200 * 1024,
            scan_bytes: 2 * 1024 * 1024,
            patch_bytes: 512 * 1024,
        }
    }
}

impl ToolLimits {
    pub fn from_config(cfg: &crate::config::ToolsConfig) -> Self {
        let d = Self::default();
        Self {
            output_bytes: cfg.output.as_ref().and_then(|o| o.max_bytes).unwrap_or(d.output_bytes),
            file_read_bytes: cfg.read_file.as_ref().and_then(|r| r.max_file_read_bytes).unwrap_or(d.file_read_bytes),
            scan_bytes: cfg.read_file.as_ref().and_then(|r| r.max_scan_bytes).unwrap_or(d.scan_bytes),
            patch_bytes: cfg.apply_patch.as_ref().and_then(|a| a.max_patch_bytes).unwrap_or(d.patch_bytes),
        }
    }
}

/// What a tool may use while it runs.
pub struct ToolCtx {
    pub sandbox: Sandbox,
    pub call_id: String,
    pub limits: ToolLimits,
    /// Where a long-running tool streams its output while it runs.
    pub output: Option<tokio::sync::mpsc::Sender<ToolOutput>>,
    /// SHA-256 of each file as the model last read or wrote it, for
    /// stale-file protection. Shared by the session's calls.
    pub file_hashes: FileHashes,
    /// What `introspect` reports: the session, its tools and limits, as
    /// the session sees them when the call runs.
    pub about: Option<Arc<Value>>,
    /// What `recall` searches: the session's facts and messages.
    pub library: Option<Arc<dyn Library>>,
    /// How long the call may run, for tools that stop themselves on
    /// time ([`ToolExecutor::stops_on_time`]).
    pub timeout: Option<Duration>,
    /// Where a tool puts images its result carries (an MCP server's), for
    /// the model to see with the result's text.
    pub images: Option<ImageSink>,
}

/// An image a tool's result carries: its MIME type and bytes, base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolImage {
    pub mime_type: String,
    pub data: String,
}

pub type ImageSink = Arc<std::sync::Mutex<Vec<ToolImage>>>;

pub type LibraryFut<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The session's memory as `recall` sees it (the store, in the daemon).
pub trait Library: Send + Sync {
    /// Facts matching `query`, best first.
    fn search<'a>(&'a self, query: &'a str, limit: usize) -> LibraryFut<'a, Vec<RecalledFact>>;
    /// A message of the session, as it was written.
    fn message<'a>(&'a self, node: &'a str) -> LibraryFut<'a, Option<RecalledMessage>>;
}

/// A fact `recall` found, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct RecalledFact {
    pub kind: String,
    pub fact: String,
    pub node_id: String,
    pub role: String,
    /// The cited message around what matched.
    pub excerpt: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecalledMessage {
    pub node_id: String,
    pub role: String,
    pub text: String,
}

#[cfg(test)]
impl ToolCtx {
    /// A context for a tool's unit tests: `dir` is the working directory.
    pub(crate) fn for_tests(dir: &std::path::Path, max_output_bytes: usize) -> Self {
        Self {
            sandbox: Sandbox::new(dir, &[], &[], true, false),
            call_id: "test".into(),
            limits: ToolLimits { output_bytes: max_output_bytes, ..Default::default() },
            output: None,
            file_hashes: Default::default(),
            about: None,
            library: None,
            timeout: None,
            images: None,
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
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments (an object schema); a built-in tool's
    /// is [`schema_of`] its `Args`.
    fn schema(&self) -> Value;
    fn is_side_effecting(&self) -> bool;
    fn risk_level(&self) -> RiskLevel {
        if self.is_side_effecting() { RiskLevel::Medium } else { RiskLevel::Low }
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
    /// A timeout configured for this tool itself (an MCP server's
    /// `tool_timeout_seconds`), which wins over `[tools.timeouts]`.
    fn own_timeout(&self) -> Option<Duration> {
        None
    }
    /// What a user approving this call should see (it may read files
    /// through the sandbox, e.g. to show a diff).
    fn approval_summary(&self, args: &Value, _sandbox: &Sandbox) -> String {
        short_summary(format!("{} {}", self.name(), args))
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a>;
    /// A call starts a helper agent's session instead of running here
    /// (the `task` tool): the session handles it.
    fn starts_helper(&self) -> bool {
        false
    }
    /// The files (as the model named them) a call with these arguments
    /// may change: their content before and after is recorded for rewind.
    fn touches(&self, _args: &Value) -> Vec<String> {
        Vec::new()
    }
    /// The tool runs commands (which the kernel sandbox confines, so that
    /// the approval policy may let them run without asking).
    fn runs_commands(&self) -> bool {
        false
    }
    /// The user approved this tool itself (a project's tool file, by its
    /// content): its calls run without asking where the kernel sandbox
    /// confines commands.
    fn approved_in_advance(&self) -> bool {
        false
    }
    /// The tool stops itself at `ToolCtx::timeout` and says what it
    /// stopped (the caller then waits a little longer before it gives
    /// up on it).
    fn stops_on_time(&self) -> bool {
        false
    }
    /// A call may change any file under the session's roots (a shell
    /// command, git switching files): the roots are compared before and
    /// after it to record what changed.
    fn changes_files_anywhere(&self) -> bool {
        false
    }
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
    /// The specs, made once: every request of a session sends them, and a
    /// schema derived from its `Args` is built, not a literal.
    specs: std::sync::OnceLock<Vec<ToolSpec>>,
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
        self.specs = Default::default();
        Ok(())
    }

    /// The tool called `name`, or the one it is an alias of.
    pub fn get(&self, name: &str) -> Option<Arc<dyn ToolExecutor>> {
        self.tools.get(name).cloned().or_else(|| {
            builtin::aliases()
                .iter()
                .find(|(alias, _)| *alias == name)
                .and_then(|(_, tool)| self.tools.get(*tool).cloned())
        })
    }

    /// Only the tools `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.tools.retain(|name, _| keep(name));
        self.specs = Default::default();
    }

    /// The registered tools, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn ToolExecutor>> {
        self.tools.values()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        let made = || {
            self.tools
                .values()
                .map(|t| ToolSpec {
                    name: t.name().into(),
                    description: t.description().into(),
                    parameters: t.schema(),
                })
                .collect()
        };
        self.specs.get_or_init(made).clone()
    }
}

/// An approval summary cut to 400 bytes (on a char boundary).
pub fn short_summary(mut text: String) -> String {
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

/// A tool's arguments as its `Args` type; a mismatch is `BadArgs`, which
/// the model sees and can correct.
pub fn parse_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::BadArgs { message: e.to_string() })
}

/// The first few ways `value` fails `validator`, each with where.
pub fn schema_problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
        })
        .collect()
}

/// `args` checked against a tool's input schema: `BadArgs` naming the
/// first few mismatches, which the model sees and can correct.
pub fn check_args(validator: &jsonschema::Validator, args: &Value) -> Result<(), ToolError> {
    let problems = schema_problems(validator, args);
    if problems.is_empty() {
        return Ok(());
    }
    Err(ToolError::BadArgs {
        message: format!("the arguments do not match the tool's input schema: {}", problems.join("; ")),
    })
}

/// Cuts `text` on a char boundary so that, with the note saying so, it
/// holds at most `max` bytes (cutting again changes nothing).
pub fn truncate_output(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    // The note's length depends on the number shown; one digit of slack.
    let note_len = format!("\n[output truncated: {max}0 of {total} bytes shown]").len();
    let mut end = max.saturating_sub(note_len);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n[output truncated: {end} of {total} bytes shown]"));
    text
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
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
        assert_eq!(r.get("rg").map(|t| t.name().to_string()).as_deref(), Some("search"), "aliases resolve");
        assert!(!r.specs().iter().any(|s| s.name == "rg"), "but are not advertised");
    }

    #[test]
    fn output_is_truncated_on_a_char_boundary() {
        let long = format!("ab\u{1f44b}{}", "x".repeat(200));
        let t = truncate_output(long.clone(), 60);
        assert!(t.len() <= 60 && t.contains("truncated") && t.contains("of 206 bytes"), "{t}");
        assert_eq!(truncate_output(t.clone(), 60), t, "cutting twice changes nothing");
        // Never inside a character.
        for max in 0..70 {
            let t = truncate_output(long.clone(), max);
            assert!(t.contains("truncated"), "{max}: {t}");
        }
    }
}
