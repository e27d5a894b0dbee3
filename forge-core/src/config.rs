//! `$FORGE_HOME/config.toml`: the sections of the seed configuration, plus
//! `base_url` per provider and `[journal]`. Unknown keys and syntax errors
//! are reported with the file, line and key: a typo never silently falls
//! back to a default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use forge_tools::config::{
    ApplyPatchConfig, ReadFileConfig, ToolApprovalConfig, ToolDefinitionConfig, ToolMode, ToolOutputConfig,
    ToolSandboxConfig, ToolTimeoutsConfig, ToolsConfig,
};

use crate::provider_kind::ProviderKind;
use crate::redact::redact_secrets;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid configuration in {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration in {path}: {message}")]
    Value { path: PathBuf, message: String },
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
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
    /// `[store]`: how much rewind content the blob store keeps.
    #[serde(default)]
    pub store: StoreConfig,
    /// Models the built-in catalog does not know (local servers' above all).
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// `[[mcp.servers]]`: tool servers whose tools every session offers.
    #[serde(default)]
    pub mcp: forge_mcp::McpConfig,
    /// `[[hooks]]`: commands run at points of a session.
    #[serde(default)]
    pub hooks: crate::hooks::HooksConfig,
    /// `[git]`: git-backed sessions.
    #[serde(default)]
    pub git: GitConfig,
    /// `[daemon]`: network listeners beside the socket.
    #[serde(default)]
    pub daemon: crate::daemon_config::DaemonConfig,
}

/// `[git]`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    /// `branch`: new sessions in a git repository work on a branch of
    /// their own, one commit per turn; `off` (the default): in the
    /// directory itself.
    #[serde(default)]
    pub mode: GitMode,
    /// The model that writes commit messages (default: the session's).
    pub message_model: Option<String>,
    /// In a git session file edits run without asking, each being part of
    /// a commit the user can undo; `true` asks as elsewhere.
    pub ask_for_edits: Option<bool>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GitMode {
    #[default]
    Off,
    Branch,
}

/// A `[[models]]` entry.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub name: String,
    /// claude, openai or gemini (the wire format it speaks).
    pub provider: String,
    /// Default: what Forge knows of the model (its table, its family),
    /// else 32768 and 4096.
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u32>,
    /// Input plus output may not pass this (a local server's context):
    /// `max_tokens` is lowered so that the request fits.
    pub max_total_tokens: Option<u64>,
    /// The model is retired (or about to be): requests go to `fallback`.
    #[serde(default)]
    pub deprecated: bool,
    /// The model that answers in its place when it is deprecated or its
    /// provider answers that it does not know it.
    pub fallback: Option<String>,
    /// The model's own sampling defaults (below a session's and a turn's).
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// List prices in USD per million tokens, for the cost estimates.
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
    pub cache_read_price: Option<f64>,
    pub cache_write_price: Option<f64>,
    /// It reads images (default: as Forge knows the model, else no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tui: Option<String>,
    pub max_output_tokens: Option<u32>,
    /// Sampling for every request, below a model's, a session's and a
    /// turn's own (clamped to each provider's range; left out where a
    /// model takes none).
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Retries of a provider request that failed before any output with a
    /// transient error (default 4).
    pub max_retries: Option<u32>,
    /// A file whose text replaces Forge's system prompt (`{{cwd}}` and the
    /// other placeholders are filled in).
    pub system_prompt_file: Option<String>,
    /// Text added at the end of the system prompt.
    pub system_prompt_append: Option<String>,
    /// USD: once a session has cost this much (estimated), its next turn
    /// waits for a user to confirm, and again after each further amount.
    pub session_budget_usd: Option<f64>,
    pub ascii_only: Option<bool>,
    pub high_contrast: Option<bool>,
    pub reduced_motion: Option<bool>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeys {
    pub anthropic: Option<String>,
    pub openai: Option<String>,
    pub google: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    pub infinity: Option<bool>,
    /// Project instruction files looked for in the session's directory and
    /// its parents up to the repository root (default AGENTS.md, CLAUDE.md).
    pub instruction_files: Option<Vec<String>>,
    /// Summarize once a request would fill this share of the window
    /// (default 0.8).
    pub summarize_at: Option<f64>,
    /// The model that writes summaries (the session's provider; default the
    /// session's model).
    pub summarizer_model: Option<String>,
    /// Give the model a map of the repository: each file with a one-line
    /// summary by a cheap model, kept by content hash (default false).
    pub repo_summaries: Option<bool>,
    /// The model that writes the map's summaries (default
    /// `summarizer_model`, else the provider's small model for a session on
    /// one of the provider's own models, else the session's model).
    pub repo_summary_model: Option<String>,
    /// The most tokens the map takes in the system prompt (default 1024).
    pub repo_map_tokens: Option<u32>,
    /// Forge's own token estimates count this many percent more, so that
    /// a provider counting differently does not overrun the window
    /// (default 10; counts the provider reported are taken as they are).
    pub estimate_margin_percent: Option<u32>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    pub base_url: Option<String>,
    pub cache_enabled: Option<bool>,
    pub thinking_enabled: Option<bool>,
    pub thinking_budget_tokens: Option<u32>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    pub base_url: Option<String>,
    /// `responses` or `chat`; unset: Responses for OpenAI's own endpoint,
    /// Chat Completions for any other `base_url`.
    pub wire_api: Option<String>,
    pub reasoning_effort: Option<String>,
    pub verbosity: Option<String>,
    pub truncation: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoogleConfig {
    pub base_url: Option<String>,
    pub thinking_enabled: Option<bool>,
    pub cache_enabled: Option<bool>,
    pub cache_ttl_seconds: Option<u64>,
}

pub use crate::store::Durability;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalConfig {
    #[serde(default)]
    pub durability: Durability,
}

/// `[store]`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// MiB of blobs past which the oldest rewind content is evicted
    /// (default 4096); images a message shows are never evicted.
    pub max_blob_mb: Option<u64>,
}

/// `[store] max_blob_mb` when unset.
pub const DEFAULT_MAX_BLOB_MB: u64 = 4096;

impl StoreConfig {
    pub fn max_blob_bytes(&self) -> u64 {
        self.max_blob_mb.unwrap_or(DEFAULT_MAX_BLOB_MB).saturating_mul(1024 * 1024)
    }
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
        cfg.validate(path).map_err(|e| match e {
            ConfigError::Value { path, message } => {
                let message = match locate(text, &message) {
                    Some(line) => format!("line {line}: {message}"),
                    None => message,
                };
                ConfigError::Value { path, message }
            }
            other => other,
        })?;
        Ok(cfg)
    }

    /// Resolves every API key now (`${VAR}` expanded, else the provider's
    /// variable, e.g. `ANTHROPIC_API_KEY`) and returns the names of the
    /// environment variables that were read, so that the daemon can remove
    /// them from its environment: a process that can read the daemon's
    /// `/proc/PID/environ` then finds no key there.
    pub fn capture_keys(&mut self) -> Vec<String> {
        let mut read = Vec::new();
        for kind in [ProviderKind::Claude, ProviderKind::OpenAi, ProviderKind::Gemini] {
            let slot = match kind {
                ProviderKind::Claude => &mut self.api_keys.anthropic,
                ProviderKind::OpenAi => &mut self.api_keys.openai,
                ProviderKind::Gemini => &mut self.api_keys.google,
            };
            if let Some(template) = slot.as_deref() {
                read.extend(referenced_vars(template));
            }
            let from_config = slot.as_deref().map(expand_env_vars).filter(|k| !k.trim().is_empty());
            read.push(kind.key_env().to_string());
            *slot = from_config.or_else(|| std::env::var(kind.key_env()).ok().filter(|k| !k.trim().is_empty()));
        }
        // MCP servers' bearer tokens, likewise.
        read.extend(self.mcp.capture_secrets());
        read.sort();
        read.dedup();
        read
    }

    /// Every secret value the configuration holds (after
    /// [`Self::capture_keys`]): API keys and MCP bearer tokens.
    pub fn secrets(&self) -> Vec<String> {
        let keys = [&self.api_keys.anthropic, &self.api_keys.openai, &self.api_keys.google];
        keys.into_iter()
            .flatten()
            .cloned()
            .chain(self.mcp.servers.iter().filter_map(|s| s.bearer_token.clone()))
            .collect()
    }

    /// The provider new sessions get: `[app] provider`, else the first
    /// provider with a key (Claude, OpenAI, Gemini), else Claude. Call
    /// after [`Self::capture_keys`].
    pub fn default_provider(&self) -> ProviderKind {
        if let Some(p) = self.app.provider.as_deref().and_then(ProviderKind::parse) {
            return p;
        }
        let keys = [
            (ProviderKind::Claude, &self.api_keys.anthropic),
            (ProviderKind::OpenAi, &self.api_keys.openai),
            (ProviderKind::Gemini, &self.api_keys.google),
        ];
        keys.iter()
            .find(|(_, k)| k.as_deref().is_some_and(|k| !k.trim().is_empty()))
            .map(|(p, _)| *p)
            .unwrap_or(ProviderKind::Claude)
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
        let one_of = |section: &str, key: &str, value: &Option<String>, allowed: &[&str]| match value {
            Some(v) if !allowed.contains(&v.as_str()) => Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!("[{section}] {key} = \"{v}\" is not one of {}", allowed.join(", ")),
            }),
            _ => Ok(()),
        };
        self.hooks.validate().map_err(|message| ConfigError::Value { path: path.to_path_buf(), message })?;
        self.daemon.validate().map_err(|message| ConfigError::Value { path: path.to_path_buf(), message })?;
        if let Some(f) = self.context.summarize_at
            && !(f.is_finite() && (0.1..=1.0).contains(&f))
        {
            return Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!("[context] summarize_at = {f} must be a share of the window between 0.1 and 1.0"),
            });
        }
        if let Some(t) = self.context.repo_map_tokens
            && !(64..=32_768).contains(&t)
        {
            return Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!("[context] repo_map_tokens = {t} must be between 64 and 32768"),
            });
        }
        if let Some(b) = self.app.session_budget_usd
            && !(b.is_finite() && b > 0.0)
        {
            return Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!("[app] session_budget_usd = {b} must be a positive number of US dollars"),
            });
        }
        one_of("openai", "wire_api", &self.openai.wire_api, &["responses", "chat"])?;
        one_of(
            "openai",
            "reasoning_effort",
            &self.openai.reasoning_effort,
            &["none", "minimal", "low", "medium", "high", "xhigh"],
        )?;
        one_of("openai", "verbosity", &self.openai.verbosity, &["low", "medium", "high"])?;
        one_of("openai", "truncation", &self.openai.truncation, &["auto", "none", "preserve", "disabled"])?;
        if let Some(b) = self.anthropic.thinking_budget_tokens
            && b < 1024
        {
            return Err(ConfigError::Value {
                path: path.to_path_buf(),
                message: format!(
                    "[anthropic] thinking_budget_tokens = {b} is below 1024, the least the API takes; raise it or set thinking_enabled = false"
                ),
            });
        }
        self.mcp.validate().map_err(|message| ConfigError::Value { path: path.to_path_buf(), message })?;
        validate_models(self).map_err(|message| ConfigError::Value { path: path.to_path_buf(), message })
    }
}

/// Checks the `[[models]]` entries: a known provider, figures above zero.
fn validate_models(config: &ForgeConfig) -> Result<(), String> {
    for (i, m) in config.models.iter().enumerate() {
        let which = format!("[[models]] entry {} (`{}`)", i + 1, m.name);
        let bad = |what: String| Err(format!("{which}: {what}"));
        if m.name.trim().is_empty() {
            return bad("`name` is empty".into());
        }
        if crate::provider_kind::ProviderKind::parse(&m.provider).is_none() {
            return bad(format!("unknown provider \"{}\"; use claude, openai or gemini", m.provider));
        }
        if m.context_window == Some(0) || m.max_output_tokens == Some(0) || m.max_total_tokens == Some(0) {
            return bad("`context_window`, `max_output_tokens` and `max_total_tokens` must be at least 1".into());
        }
        if m.fallback.as_deref().is_some_and(|f| f.trim().is_empty() || f == m.name) {
            return bad("`fallback` must name another model".into());
        }
        forge_proto::Sampling { temperature: m.temperature, top_p: m.top_p }.check().or_else(bad)?;
        let prices = [m.input_price, m.output_price, m.cache_read_price, m.cache_write_price];
        if prices.iter().flatten().any(|p| !p.is_finite() || *p < 0.0) {
            return bad("prices must be numbers of US dollars per million tokens, 0 or more".into());
        }
        if m.output_price.is_some() != m.input_price.is_some() {
            return bad("give both `input_price` and `output_price` (USD per million tokens), or neither".into());
        }
    }
    if config.app.max_output_tokens == Some(0) {
        return Err("[app] max_output_tokens must be at least 1".into());
    }
    let app = forge_proto::Sampling { temperature: config.app.temperature, top_p: config.app.top_p };
    app.check().map_err(|e| format!("[app] {e}"))?;
    if config.context.estimate_margin_percent.is_some_and(|p| p > 100) {
        return Err("[context] estimate_margin_percent must be between 0 and 100".into());
    }
    Ok(())
}

/// The line a value error is about: its message starts with `[section]
/// key` or `[[models]] entry N`.
fn locate(text: &str, message: &str) -> Option<usize> {
    for list in ["[[models]]", "[[mcp.servers]]"] {
        let Some(rest) = message.strip_prefix(list).and_then(|r| r.strip_prefix(" entry ")) else { continue };
        let n: usize = rest.split_whitespace().next()?.parse().ok()?;
        return text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim().starts_with(list))
            .nth(n.checked_sub(1)?)
            .map(|(i, _)| i + 1);
    }
    let rest = message.strip_prefix('[')?;
    let (section, rest) = rest.split_once(']')?;
    let key = rest.split_whitespace().next()?;
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            continue;
        }
        let Some((k, _)) = l.split_once('=') else { continue };
        let k = k.trim();
        if (current == section && k == key) || k == format!("{section}.{key}") {
            return Some(i + 1);
        }
    }
    None
}

/// toml's message with the line number made explicit, and the line itself
/// unless it could hold a secret (see [`shown_line`]).
fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    let msg = redact_secrets(err.message().trim(), &[]);
    match err.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let line = text[..start].matches('\n').count() + 1;
            let snippet = shown_line(text, line);
            format!("line {line}: {msg} (at `{snippet}`)")
        }
        None => msg,
    }
}

/// Line `n` (from 1) of `text` as an error may show it: a line under
/// `[api_keys]`, or whose value looks like a key, shows only its key name.
/// Errors end up in terminals, logs and bug reports.
fn shown_line(text: &str, n: usize) -> String {
    let line = text.lines().nth(n - 1).unwrap_or("").trim();
    let section = text
        .lines()
        .take(n - 1)
        .filter_map(|l| {
            let l = l.trim();
            l.starts_with('[').then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_string())
        })
        .last()
        .unwrap_or_default();
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v)),
        None => (line, None),
    };
    let in_keys = section == "api_keys" || key == "api_keys" || key.starts_with("api_keys.");
    match value {
        Some(v) if in_keys || looks_like_a_key(v) => format!("{key} = <value hidden>"),
        None if in_keys && !line.starts_with('[') => "<line hidden: it may hold an API key>".to_string(),
        _ => redact_secrets(line, &[]),
    }
}

/// A value shaped like a credential: a known key prefix, or one long
/// mixed-case-and-digits word (what generated tokens look like; model names
/// and paths do not).
fn looks_like_a_key(value: &str) -> bool {
    let v = value.trim().trim_matches(|c| c == '"' || c == '\'');
    if ["sk-", "AIza", "ghp_", "gho_", "github_pat_", "xox", "AKIA", "-----BEGIN"].iter().any(|p| v.contains(p)) {
        return true;
    }
    let word = v.split_whitespace().next().unwrap_or("");
    word.len() >= 32
        && word.chars().any(|c| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_lowercase())
        && word.chars().any(|c| c.is_ascii_digit())
}

/// The names of the `${VAR}`s in `value`.
fn referenced_vars(value: &str) -> Vec<String> {
    let mut vars = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        vars.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    vars
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
    fn a_syntax_error_never_shows_an_api_key_but_names_line_and_key() {
        let cases = [
            "[app]\nmodel = \"x\"\n[api_keys]\nanthropic = \"sk-ant-api03-abcdefghijklmnop\n",
            "[api_keys]\nopenai = \"plainsecretvalue\n",
            "[api_keys]\nopenai = \"plainsecretvalue\"\nopenia = \"plainsecretvalue\"\n",
            "api_keys.google = \"AIzaSyA-abcdefghijklmnopqrstu\n",
            "[app]\nmodel = \"sk-proj-abcdefghijklmnopqrstuvwx\n",
        ];
        for text in cases {
            let err = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("/home/u/.forge/config.toml") && err.contains("line "), "{err}");
            for secret in ["abcdefghijklmnop", "plainsecretvalue", "abcdefghijklmnopqrstu"] {
                assert!(!err.contains(secret), "the error shows a key: {err}");
            }
            let key =
                ["anthropic", "openai", "openia", "api_keys.google", "model"].into_iter().find(|k| text.contains(k));
            assert!(key.is_some_and(|k| err.contains(k)), "the error names the key: {err}");
        }
        // Ordinary lines are still shown as they are.
        let err =
            parse("[app]\nmodel = \"claude-sonnet-4-5-20250929\n").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("claude-sonnet-4-5-20250929"), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_line() {
        let err = parse("[app]\nmodel = \"x\"\n[openai]\nbase_url = \"u\"\nwire_api = \"soap\"\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("line 5") && err.contains("wire_api") && err.contains("soap"), "{err}");
        let err = parse("[[models]]\nname = \"a\"\nprovider = \"openai\"\ncontext_window = 1\nmax_output_tokens = 1\n\n[[models]]\nname = \"b\"\nprovider = \"x\"\ncontext_window = 1\nmax_output_tokens = 1\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("line 7") && err.contains("entry 2"), "{err}");
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
