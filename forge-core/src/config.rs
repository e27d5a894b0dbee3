//! `$FORGE_HOME/config.toml`: the sections of the seed configuration, plus
//! `base_url` per provider and `[journal]`. Unknown keys and syntax errors
//! are reported with the file, line and key: a typo never silently falls
//! back to a default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::provider::ProviderKind;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid configuration in {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration in {path}: {message}")]
    Value { path: PathBuf, message: String },
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeConfig {
    #[serde(default)]
    pub app: AppConfig,
    #[serde(default)]
    pub api_keys: ApiKeys,
    #[serde(default)]
    pub context: ContextConfig,
    /// Legacy seed sections, accepted and ignored.
    pub cache: Option<toml::Table>,
    pub thinking: Option<toml::Table>,
    #[serde(default)]
    pub anthropic: AnthropicConfig,
    #[serde(default)]
    pub openai: OpenAiConfig,
    #[serde(default)]
    pub google: GoogleConfig,
    #[serde(default)]
    pub tools: ToolsConfig,
    #[serde(default)]
    pub journal: JournalConfig,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tui: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub ascii_only: Option<bool>,
    pub high_contrast: Option<bool>,
    pub reduced_motion: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeys {
    pub anthropic: Option<String>,
    pub openai: Option<String>,
    pub google: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    pub infinity: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    pub base_url: Option<String>,
    pub cache_enabled: Option<bool>,
    pub thinking_enabled: Option<bool>,
    pub thinking_budget_tokens: Option<u32>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    pub base_url: Option<String>,
    pub reasoning_effort: Option<String>,
    pub verbosity: Option<String>,
    pub truncation: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoogleConfig {
    pub base_url: Option<String>,
    pub thinking_enabled: Option<bool>,
    pub cache_enabled: Option<bool>,
    pub cache_ttl_seconds: Option<u64>,
}

/// The `[tools]` section of the seeds. Parsed and validated now so that a
/// complete seed configuration loads; the tool system uses it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// `enabled` (default): tools are offered to the model and run;
    /// `parse_only`: offered, but a client supplies the results;
    /// `disabled`: none are offered (for servers without tool support).
    pub mode: Option<ToolMode>,
    pub max_tool_calls_per_batch: Option<usize>,
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
    /// Other per-tool tables (`[tools.search]`, ...), kept for their tools.
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinitionConfig {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSandboxConfig {
    pub allowed_roots: Option<Vec<String>>,
    pub denied_patterns: Option<Vec<String>>,
    pub allow_absolute: Option<bool>,
    pub include_default_denies: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTimeoutsConfig {
    pub default_seconds: Option<u64>,
    pub file_operations_seconds: Option<u64>,
    pub shell_commands_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputConfig {
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolApprovalConfig {
    pub enabled: Option<bool>,
    pub mode: Option<String>,
    pub allowlist: Option<Vec<String>>,
    pub denylist: Option<Vec<String>>,
    pub prompt_side_effects: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileConfig {
    pub max_file_read_bytes: Option<usize>,
    pub max_scan_bytes: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchConfig {
    pub max_patch_bytes: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    Disabled,
    /// Tools (built-in and `[[tools.definitions]]`) are offered; a client
    /// submits each result (`session.tool_result`, `forgectl tool-result`).
    ParseOnly,
    #[default]
    Enabled,
}

/// How hard the store works to survive failures.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL with synchronous=NORMAL: survives any crash of forged, may lose
    /// the last transactions on power loss.
    #[default]
    Process,
    /// WAL with synchronous=FULL: also survives power loss, slower commits.
    Power,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalConfig {
    #[serde(default)]
    pub durability: Durability,
}

impl ForgeConfig {
    /// Loads `path`; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(ConfigError::Read { path: path.to_path_buf(), source }),
        };
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let cfg: ForgeConfig = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: describe_toml_error(text, &e) })?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        if let Some(p) = &self.app.provider
            && ProviderKind::parse(p).is_none()
        {
            return Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!(
                    "[app] provider = \"{p}\" is not a provider; use \"claude\" (or \"anthropic\"), \"openai\" or \"gemini\""
                ),
            });
        }
        Ok(())
    }
}

/// toml's message with the line number made explicit.
fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    let msg = err.message().trim().to_string();
    match err.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let snippet = text.lines().nth(line - 1).unwrap_or("").trim();
            format!("line {line}: {msg} (at `{snippet}`)")
        }
        None => msg,
    }
}

/// Expands `${VAR}` from the environment; an unset variable expands to "".
pub fn expand_env_vars(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let var = &after[..end];
                out.push_str(&std::env::var(var).unwrap_or_default());
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ForgeConfig, ConfigError> {
        ForgeConfig::parse(text, Path::new("/home/u/.forge/config.toml"))
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse("[app]\nmodel = \"x\"\nmodle = \"y\"\n").err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("/home/u/.forge/config.toml"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("modle"), "{err}");
    }

    #[test]
    fn syntax_error_names_line() {
        let err = parse("[app]\nmodel = \n").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn seed_configuration_loads() {
        let text = r#"
[app]
provider = "claude"
model = "claude-sonnet-4-5-20250929"
tui = "full"
max_output_tokens = 16000
ascii_only = false
[api_keys]
anthropic = "${ANTHROPIC_API_KEY}"
[context]
infinity = true
[anthropic]
cache_enabled = true
base_url = "http://127.0.0.1:9"
[openai]
reasoning_effort = "high"
[google]
thinking_enabled = true
[tools]
mode = "disabled"
max_tool_calls_per_batch = 8
[tools.sandbox]
allowed_roots = ["."]
[tools.approval]
mode = "prompt"
allowlist = ["read_file"]
[[tools.definitions]]
name = "custom_tool"
description = "A custom tool"
[tools.definitions.parameters]
type = "object"
[journal]
durability = "power"
"#;
        let cfg = parse(text).map_err(|e| e.to_string());
        assert!(cfg.is_ok(), "{cfg:?}");
        let cfg = cfg.unwrap_or_default();
        assert_eq!(cfg.journal.durability, Durability::Power);
        assert_eq!(cfg.tools.definitions.len(), 1);
    }

    #[test]
    fn bad_provider_is_rejected() {
        let err = parse("[app]\nprovider = \"clod\"\n").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("clod"), "{err}");
    }

    #[test]
    fn env_vars_expand() {
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("FORGE_TEST_EXPAND", "abc") };
        assert_eq!(expand_env_vars("x${FORGE_TEST_EXPAND}y${FORGE_TEST_UNSET_VAR}z"), "xabcyz");
        assert_eq!(expand_env_vars("${unterminated"), "${unterminated");
    }
}
