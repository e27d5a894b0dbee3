//! An MCP server's tool as a Forge tool: offered as `server__tool`, its
//! arguments checked against the server's schema, called on the server's
//! live connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use forge_tools::{RiskLevel, ToolCtx, ToolError, ToolExecutor, ToolFut};
use serde_json::Value;

/// The live connection a tool is called on (a server of `server.rs`):
/// the tool holds it weakly, and knows no more of it than this.
pub(crate) trait Remote: Send + Sync {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: serde_json::Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>>;
}

/// The longest tool name providers take (OpenAI's limit).
const MAX_NAME_LEN: usize = 64;

pub struct McpTool {
    pub(crate) server: Weak<dyn Remote>,
    pub(crate) server_name: String,
    /// The name the server knows it by.
    pub(crate) remote_name: String,
    /// The name the model sees.
    pub(crate) exposed: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    validator: Option<jsonschema::Validator>,
    pub(crate) read_only: bool,
    destructive: bool,
    timeout: Duration,
}

impl McpTool {
    pub(crate) fn new(server: Weak<dyn Remote>, server_name: &str, tool: &Value, timeout: Duration) -> Option<Self> {
        let remote_name = tool.get("name")?.as_str()?.to_string();
        let schema = match tool.get("inputSchema") {
            Some(s) if s.is_object() => s.clone(),
            _ => serde_json::json!({"type": "object"}),
        };
        let validator = match jsonschema::validator_for(&schema) {
            Ok(v) => Some(v),
            Err(e) => {
                // The server checks its own arguments: a schema we cannot
                // compile only loses the early check.
                tracing::warn!(server = server_name, tool = %remote_name, "cannot compile the input schema: {e}");
                None
            }
        };
        let hints = tool.get("annotations");
        let hint = |key: &str| hints.and_then(|a| a.get(key)).and_then(Value::as_bool);
        let title = tool.get("title").and_then(Value::as_str);
        let description = tool.get("description").and_then(Value::as_str).or(title).unwrap_or("").to_string();
        Some(Self {
            server,
            server_name: server_name.to_string(),
            exposed: exposed_name(server_name, &remote_name),
            remote_name,
            description,
            schema,
            validator,
            read_only: hint("readOnlyHint").unwrap_or(false),
            destructive: hint("destructiveHint").unwrap_or(false),
            timeout,
        })
    }

    fn check(&self, args: &Value) -> Result<(), ToolError> {
        match &self.validator {
            Some(validator) => forge_tools::check_args(validator, args),
            None => Ok(()),
        }
    }
}

/// `server__tool`, in the characters every provider takes, at most 64 long;
/// a name cut short ends in a hash of the whole so two never collide.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean: String = format!("{server}__{tool}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if clean.len() <= MAX_NAME_LEN {
        return clean;
    }
    let digest = forge_tools::sha256(format!("{server}__{tool}").as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{}_{hash}", &clean[..MAX_NAME_LEN - 9])
}

impl ToolExecutor for McpTool {
    fn name(&self) -> &str {
        &self.exposed
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn schema(&self) -> Value {
        self.schema.clone()
    }

    /// Unless the server says the tool only reads, it may change anything.
    fn is_side_effecting(&self) -> bool {
        !self.read_only
    }

    fn risk_level(&self) -> RiskLevel {
        match (self.read_only, self.destructive) {
            (true, _) => RiskLevel::Low,
            (false, false) => RiskLevel::Medium,
            (false, true) => RiskLevel::High,
        }
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn own_timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    fn approval_summary(&self, args: &Value, _sandbox: &forge_tools::Sandbox) -> String {
        forge_tools::short_summary(format!("{} (MCP server `{}`) {}", self.remote_name, self.server_name, args))
    }

    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let failed = |message: String| ToolError::ExecutionFailed { tool: self.exposed.clone(), message };
            self.check(&args)?;
            let Some(server) = self.server.upgrade() else {
                return Err(failed(format!("the MCP server `{}` is no longer configured", self.server_name)));
            };
            let arguments = match args {
                Value::Object(map) => map,
                Value::Null => Default::default(),
                other => {
                    return Err(ToolError::BadArgs {
                        message: format!("the arguments must be an object, not {other}"),
                    });
                }
            };
            let result = server.call(&self.remote_name, arguments).await.map_err(failed)?;
            let (text, is_error, images) = crate::content::with_images(&result, ctx.images.is_some());
            if let Some(sink) = &ctx.images {
                sink.lock().unwrap_or_else(|p| p.into_inner()).extend(images);
            }
            if is_error { Err(failed(text)) } else { Ok(text) }
        })
    }
}

/// The tools of one server as the registry takes them.
pub(crate) fn as_executors(tools: &[Arc<McpTool>]) -> impl Iterator<Item = Arc<dyn ToolExecutor>> + '_ {
    tools.iter().map(|t| t.clone() as Arc<dyn ToolExecutor>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_namespaced_cleaned_and_bounded() {
        assert_eq!(exposed_name("git", "status"), "git__status");
        assert_eq!(exposed_name("web", "fetch.url"), "web__fetch_url");
        let long = exposed_name("srv", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_ne!(long, exposed_name("srv", &"x".repeat(101)), "cut names stay distinct");
    }

    /// A server already gone.
    struct Gone;

    impl Remote for Gone {
        fn call<'a>(
            &'a self,
            _: &'a str,
            _: serde_json::Map<String, Value>,
        ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>> {
            Box::pin(async { Err("gone".to_string()) })
        }
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let tool = McpTool::new(
            Weak::<Gone>::new(),
            "w",
            &json!({"name": "get", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                    "annotations": {"readOnlyHint": true}}),
            DEFAULT,
        )
        .unwrap_or_else(|| panic!("a tool"));
        assert!(tool.check(&json!({"city": "Oslo"})).is_ok());
        let err = tool.check(&json!({"city": 3})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("/city") && err.contains("string"), "{err}");
        let err = tool.check(&json!({})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("city"), "{err}");
        assert!(!tool.is_side_effecting());
        assert_eq!(tool.risk_level(), RiskLevel::Low);
    }

    const DEFAULT: Duration = Duration::from_secs(1);
}
