//! The configuration in force, for `forged --check-config`: what
//! config.toml says, every default Forge uses where it is silent, the
//! provider and model it would pick, and the API keys masked.

use toml::{Table, Value};

use crate::config::ForgeConfig;
use crate::provider::{ProviderKind, ProviderSettings, Wire};

/// The defaults Forge uses where config.toml says nothing (the provider,
/// model, base URLs and `wire_api` are resolved separately).
fn defaults() -> Table {
    let text = format!(
        r#"
[app]
max_output_tokens = 8192
max_retries = 4
ascii_only = false
high_contrast = false
reduced_motion = false

[context]
infinity = true
instruction_files = ["AGENTS.md", "CLAUDE.md"]
repo_summaries = false
repo_map_tokens = 1024
estimate_margin_percent = {margin}

[anthropic]
cache_enabled = true
thinking_enabled = false
thinking_budget_tokens = {budget}

[google]
thinking_enabled = true
cache_enabled = true
cache_ttl_seconds = {ttl}

[tools]
mode = "enabled"

[tools.sandbox]
allowed_roots = ["."]
allow_absolute = false
include_default_denies = true
lift_default_denies = []
mode = "kernel"
network = "deny"
write_roots = []
max_memory_mb = {memory}
max_processes = {processes}
max_cpu_seconds = {cpu}
pass_env = []

[tools.approval]
enabled = true
prompt_side_effects = true

[journal]
durability = "process"

[store]
max_blob_mb = {max_blob_mb}
"#,
        margin = crate::context::DEFAULT_ESTIMATE_MARGIN,
        budget = crate::provider::DEFAULT_THINKING_BUDGET,
        ttl = crate::provider::DEFAULT_GEMINI_CACHE_TTL,
        memory = crate::tools::confine::DEFAULT_LIMITS.memory_mb,
        processes = crate::tools::confine::DEFAULT_LIMITS.processes,
        cpu = crate::tools::confine::DEFAULT_LIMITS.cpu_seconds,
        max_blob_mb = crate::config::DEFAULT_MAX_BLOB_MB,
    );
    text.parse().unwrap_or_default()
}

/// Fills what `into` lacks from `from`, table by table.
fn fill(into: &mut Table, from: Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Table(a)), Value::Table(b)) => fill(a, b),
            (Some(_), _) => {}
            (None, v) => {
                into.insert(key, v);
            }
        }
    }
}

fn section<'a>(table: &'a mut Table, name: &str) -> &'a mut Table {
    let entry = table.entry(name.to_string()).or_insert_with(|| Value::Table(Table::new()));
    if !entry.is_table() {
        *entry = Value::Table(Table::new());
    }
    match entry {
        Value::Table(t) => t,
        // Made a table just above.
        _ => unreachable!(),
    }
}

/// The configuration in force as TOML. `[api_keys]` says only whether each
/// key is set (and where it came from), never the key.
pub fn effective(cfg: &ForgeConfig) -> Table {
    let mut table = Table::try_from(cfg).unwrap_or_default();
    // Seed sections Forge accepts and ignores: not in force.
    table.remove("cache");
    table.remove("thinking");
    // Empty lists say nothing.
    if cfg.models.is_empty() {
        table.remove("models");
    }
    if cfg.tools.definitions.is_empty() {
        section(&mut table, "tools").remove("definitions");
    }
    // MCP servers' environment and headers may hold tokens: only their
    // names are shown.
    if let Some(Value::Array(servers)) = table.get_mut("mcp").and_then(|m| m.get_mut("servers")) {
        for server in servers.iter_mut().filter_map(Value::as_table_mut) {
            for key in ["env", "headers"] {
                if let Some(Value::Table(t)) = server.get_mut(key) {
                    for (_, v) in t.iter_mut() {
                        *v = Value::String("<set>".into());
                    }
                }
            }
        }
    }
    fill(&mut table, defaults());
    let provider = cfg.default_provider();
    let app = section(&mut table, "app");
    app.insert("provider".into(), Value::String(provider.as_str().into()));
    if !app.contains_key("model") {
        app.insert("model".into(), Value::String(provider.default_model().into()));
    }
    let mut keys = Table::new();
    for kind in [ProviderKind::Claude, ProviderKind::OpenAi, ProviderKind::Gemini] {
        let settings = ProviderSettings::resolve(kind, cfg);
        let name = match kind {
            ProviderKind::Claude => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Gemini => "google",
        };
        let s = section(&mut table, name);
        s.insert("base_url".into(), Value::String(settings.base_url.clone()));
        if kind == ProviderKind::OpenAi {
            let wire = if Wire::of(&settings) == Wire::OpenAiResponses { "responses" } else { "chat" };
            s.insert("wire_api".into(), Value::String(wire.into()));
        }
        let state = if settings.has_key() { "<set>" } else { "<not set>" };
        keys.insert(name.into(), Value::String(state.into()));
    }
    table.insert("api_keys".into(), Value::Table(keys));
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_fill_the_gaps_and_keys_never_show() {
        let text = "[app]\nmax_retries = 1\n[api_keys]\nopenai = \"sk-proj-abcdefghijklmnopqrstuvwx\"\n[openai]\nbase_url = \"http://localhost:8080/v1\"\n";
        let mut cfg = ForgeConfig::parse(text, Path::new("/x/config.toml")).unwrap_or_else(|e| panic!("{e}"));
        cfg.capture_keys();
        let t = effective(&cfg);
        let shown = toml::to_string(&t).unwrap_or_default();
        assert!(!shown.contains("abcdefghijklmnop"), "{shown}");
        assert_eq!(t["app"]["max_retries"].as_integer(), Some(1), "what the file says");
        assert_eq!(t["app"]["max_output_tokens"].as_integer(), Some(8192), "a default");
        assert_eq!(t["api_keys"]["openai"].as_str(), Some("<set>"));
        assert_eq!(t["openai"]["wire_api"].as_str(), Some("chat"), "a local server speaks Chat");
        assert_eq!(t["anthropic"]["thinking_budget_tokens"].as_integer(), Some(10_000));
        // The only key set picks the provider (unless [app] provider says).
        if std::env::var("ANTHROPIC_API_KEY").is_err() {
            assert_eq!(t["app"]["provider"].as_str(), Some("openai"));
            assert_eq!(t["app"]["model"].as_str(), Some(ProviderKind::OpenAi.default_model()));
        }
    }
}
