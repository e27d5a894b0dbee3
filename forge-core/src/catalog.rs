//! The model catalog: what Forge knows of each model (context window, most
//! output tokens, list prices) for the current models of each provider, families by
//! prefix, `[[models]]` entries from the configuration for local models, and
//! a conservative default for anything else. Also the rule that sizes a
//! request's output: the smallest of what was asked for, the model's limit
//! and what is left of its window, never below 1.

pub use forge_proto::Price;
use forge_proto::Usage;

use crate::config::ForgeConfig;
use crate::provider_kind::ProviderKind;

/// What Forge knows of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub name: String,
    pub provider: ProviderKind,
    pub context_window: u64,
    pub max_output_tokens: u32,
    pub source: Source,
    /// List prices, when known (a family or an unknown model has none).
    pub price: Option<Price>,
    /// It reads images: every model of the built-in table and families;
    /// one Forge knows nothing of only if `[[models]]` says so.
    pub vision: bool,
    /// Retired (the built-in list) or said so by `[[models]]`.
    pub deprecated: bool,
    /// The model that answers in its place when it is deprecated or its
    /// provider does not know it.
    pub fallback: Option<String>,
    /// Input plus output may not pass this (`[[models]]`).
    pub max_total_tokens: Option<u64>,
    /// The model's own sampling defaults (`[[models]]`).
    pub sampling: forge_proto::Sampling,
}

impl ModelInfo {
    /// What `usage` cost, when the price is known.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        // Web searches are billed per search (list prices, 2026): Claude
        // and OpenAI $10 per 1,000, Gemini's grounding $14.
        let per_search = match self.provider {
            ProviderKind::Claude | ProviderKind::OpenAi => 0.010,
            ProviderKind::Gemini => 0.014,
        };
        self.price.map(|p| p.cost(usage) + per_search * usage.web_search_requests as f64)
    }
}

/// Where a model's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Forge's own table of current models.
    Builtin,
    /// A `[[models]]` entry.
    Config,
    /// The model's family (its name's prefix).
    Family,
    /// Nothing known: conservative figures.
    Default,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Builtin => "builtin",
            Source::Config => "config",
            Source::Family => "family",
            Source::Default => "default",
        }
    }
}

use ProviderKind::{Claude, Gemini, OpenAi};

/// USD per million tokens: input, output, cache read, cache write.
const fn usd(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Option<Price> {
    Some(Price { input, output, cache_read, cache_write })
}

/// Current models: (name, provider, context window, max output tokens,
/// list price). Figures from the vendors' model and pricing pages (2026;
/// standard tier, 5-minute cache writes, prompts under any long-context
/// surcharge); treat them as defaults that `[[models]]` can override. A
/// model whose price was not published when this was written has none:
/// its cost shows as unknown rather than as a guess.
const KNOWN: &[(&str, ProviderKind, u64, u32, Option<Price>)] = &[
    ("claude-opus-5", Claude, 1_000_000, 128_000, usd(5.0, 25.0, 0.5, 6.25)),
    ("claude-sonnet-5", Claude, 1_000_000, 128_000, usd(2.0, 10.0, 0.2, 2.5)),
    ("claude-fable-5", Claude, 1_000_000, 128_000, usd(10.0, 50.0, 1.0, 12.5)),
    ("claude-opus-4-7", Claude, 1_000_000, 128_000, usd(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4-6", Claude, 1_000_000, 128_000, usd(5.0, 25.0, 0.5, 6.25)),
    ("claude-sonnet-4-6", Claude, 1_000_000, 64_000, usd(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", Claude, 200_000, 64_000, usd(1.0, 5.0, 0.1, 1.25)),
    ("gpt-5.5", OpenAi, 1_050_000, 128_000, None),
    ("gpt-5.4", OpenAi, 1_000_000, 128_000, usd(2.5, 15.0, 0.25, 0.0)),
    ("gpt-5.4-mini", OpenAi, 400_000, 128_000, usd(0.75, 4.5, 0.075, 0.0)),
    ("gpt-5.2", OpenAi, 400_000, 128_000, usd(1.75, 14.0, 0.175, 0.0)),
    ("gpt-5.1", OpenAi, 400_000, 128_000, usd(1.25, 10.0, 0.125, 0.0)),
    ("gpt-5", OpenAi, 400_000, 128_000, usd(1.25, 10.0, 0.125, 0.0)),
    ("gemini-3.5-pro", Gemini, 1_048_576, 65_536, None),
    ("gemini-3.5-flash", Gemini, 1_048_576, 65_536, usd(1.5, 9.0, 0.15, 0.0)),
    ("gemini-3.1-pro-preview", Gemini, 1_048_576, 65_536, usd(2.0, 12.0, 0.2, 0.0)),
    ("gemini-3-flash-preview", Gemini, 1_048_576, 65_536, usd(0.5, 3.0, 0.05, 0.0)),
];

/// Retired models and their successors: a session still naming one is
/// answered by the successor (with a notice) rather than failing.
const RETIRED: &[(&str, ProviderKind, &str)] = &[
    ("claude-3-opus-20240229", Claude, "claude-opus-4-7"),
    ("claude-3-sonnet-20240229", Claude, "claude-sonnet-4-6"),
    ("claude-3-5-sonnet-20240620", Claude, "claude-sonnet-4-6"),
    ("claude-3-5-sonnet-20241022", Claude, "claude-sonnet-4-6"),
    ("claude-3-5-haiku-20241022", Claude, "claude-haiku-4-5"),
    ("claude-3-7-sonnet-20250219", Claude, "claude-sonnet-4-6"),
    ("gpt-4.5-preview", OpenAi, "gpt-5.4"),
    ("o1-preview", OpenAi, "gpt-5.4"),
    ("o1-mini", OpenAi, "gpt-5.4-mini"),
    ("gemini-1.5-pro", Gemini, "gemini-3.5-pro"),
    ("gemini-1.5-flash", Gemini, "gemini-3.5-flash"),
    ("gemini-2.0-flash-exp", Gemini, "gemini-3.5-flash"),
];

/// Families by name prefix, for models not in the table.
const FAMILIES: &[(&str, u64, u32)] = &[
    ("claude", 200_000, 64_000),
    ("gpt-5", 400_000, 128_000),
    ("gpt-4.1", 1_000_000, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("o3", 200_000, 100_000),
    ("o4", 200_000, 100_000),
    ("gemini", 1_048_576, 65_536),
];

/// For a model nothing is known of (a local server's, say): small enough
/// not to overrun it. A `[[models]]` entry gives the real figures.
const UNKNOWN: (u64, u32) = (32_768, 4_096);

/// What is known of `model` at `provider`: a `[[models]]` entry first
/// (what it leaves out taken from below), then the built-in table (and its
/// list of retired models), the family, or the conservative default.
pub fn lookup(config: &ForgeConfig, provider: ProviderKind, model: &str) -> ModelInfo {
    let info = |(context_window, max_output_tokens), source, price| ModelInfo {
        name: model.to_string(),
        provider,
        context_window,
        max_output_tokens,
        source,
        price,
        vision: source != Source::Default,
        deprecated: false,
        fallback: None,
        max_total_tokens: None,
        sampling: Default::default(),
    };
    let lower = model.to_ascii_lowercase();
    let family = FAMILIES.iter().find(|(prefix, _, _)| lower.starts_with(prefix)).map(|(_, w, o)| (*w, *o));
    let retired = RETIRED.iter().find(|(name, p, _)| *name == model && *p == provider).map(|r| r.2.to_string());
    let known = match KNOWN.iter().find(|(name, p, ..)| *name == model && *p == provider) {
        Some((_, _, window, out, price)) => info((*window, *out), Source::Builtin, *price),
        None if retired.is_some() => info(family.unwrap_or(UNKNOWN), Source::Builtin, None),
        None => match family {
            Some(figures) => info(figures, Source::Family, None),
            None => info(UNKNOWN, Source::Default, None),
        },
    };
    let known = ModelInfo { deprecated: retired.is_some(), fallback: retired, ..known };
    let Some(m) = config.models.iter().find(|m| m.name == model && ProviderKind::parse(&m.provider) == Some(provider))
    else {
        return known;
    };
    // An entry without prices keeps the built-in ones, if any.
    let price = match (m.input_price, m.output_price) {
        (Some(input), Some(output)) => Some(Price {
            input,
            output,
            cache_read: m.cache_read_price.unwrap_or(0.0),
            cache_write: m.cache_write_price.unwrap_or(0.0),
        }),
        _ => known.price,
    };
    ModelInfo {
        context_window: m.context_window.unwrap_or(known.context_window),
        max_output_tokens: m.max_output_tokens.unwrap_or(known.max_output_tokens),
        source: Source::Config,
        price,
        vision: m.vision.unwrap_or(known.source != Source::Default),
        deprecated: m.deprecated || known.deprecated,
        fallback: m.fallback.clone().or(known.fallback),
        max_total_tokens: m.max_total_tokens,
        sampling: forge_proto::Sampling { temperature: m.temperature, top_p: m.top_p },
        ..known
    }
}

/// The provider a model belongs to, when that is known: a `[[models]]`
/// entry, the built-in table, or the family its name starts with (`None`
/// for a local server's model, say).
pub fn provider_of(config: &ForgeConfig, model: &str) -> Option<ProviderKind> {
    if let Some(m) = config.models.iter().find(|m| m.name == model) {
        return ProviderKind::parse(&m.provider);
    }
    if let Some((_, p, ..)) = KNOWN.iter().find(|(name, ..)| *name == model) {
        return Some(*p);
    }
    let lower = model.to_ascii_lowercase();
    if lower.starts_with("claude") {
        Some(ProviderKind::Claude)
    } else if lower.starts_with("gemini") {
        Some(ProviderKind::Gemini)
    } else if ["gpt-", "o1", "o3", "o4"].iter().any(|p| lower.starts_with(p)) {
        Some(ProviderKind::OpenAi)
    } else {
        None
    }
}

/// Every model the catalog names (built-in and configured), optionally of
/// one provider.
pub fn list(config: &ForgeConfig, provider: Option<ProviderKind>) -> Vec<ModelInfo> {
    let configured = config.models.iter().filter_map(|m| {
        let p = ProviderKind::parse(&m.provider)?;
        Some(lookup(config, p, &m.name))
    });
    let builtin = KNOWN.iter().map(|(name, p, ..)| lookup(config, *p, name));
    let mut all: Vec<ModelInfo> = configured.collect();
    for m in builtin {
        if !all.iter().any(|c| c.name == m.name && c.provider == m.provider) {
            all.push(m);
        }
    }
    all.retain(|m| provider.is_none_or(|p| p == m.provider));
    all
}

/// The output tokens a request may ask for: what was asked (`requested`),
/// no more than the model gives or than what is left of its window (and
/// of its `max_total_tokens`) after `input_tokens`, and never below 1.
pub fn effective_max_output(requested: u32, model: &ModelInfo, input_tokens: u64) -> u32 {
    let total = model.max_total_tokens.map_or(model.context_window, |t| t.min(model.context_window));
    let left = total.saturating_sub(input_tokens);
    let left = u32::try_from(left).unwrap_or(u32::MAX);
    requested.min(model.max_output_tokens).min(left).max(1)
}

/// A cautious count of the tokens in `bytes` of text, code or JSON (about
/// 3.5 bytes a token: it over-counts rather than under-counts).
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64 * 2).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration as written, not yet validated.
    fn config(text: &str) -> ForgeConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_configured_model_comes_first_then_the_table_the_family_and_the_default() {
        let c = config(
            "[[models]]\nname = \"llama3.2\"\nprovider = \"openai\"\ncontext_window = 8192\nmax_output_tokens = 1024\n",
        );
        let llama = lookup(&c, OpenAi, "llama3.2");
        assert_eq!((llama.context_window, llama.max_output_tokens, llama.source), (8192, 1024, Source::Config));
        assert_eq!(lookup(&c, Claude, "claude-haiku-4-5").source, Source::Builtin);
        assert_eq!(lookup(&c, Claude, "claude-next-9").source, Source::Family);
        let unknown = lookup(&c, OpenAi, "qwen-coder");
        assert_eq!((unknown.context_window, unknown.source), (32_768, Source::Default));
        assert!(list(&c, Some(OpenAi)).iter().any(|m| m.name == "llama3.2"));
        assert!(list(&c, Some(Gemini)).iter().all(|m| m.provider == Gemini));
    }

    #[test]
    fn retired_models_name_their_successor_and_an_entry_may_add_one() {
        let c = config(
            "[[models]]\nname = \"old\"\nprovider = \"openai\"\ndeprecated = true\nfallback = \"new\"\ntemperature = 0.3\n",
        );
        let retired = lookup(&c, Claude, "claude-3-5-sonnet-20241022");
        assert!(retired.deprecated);
        assert_eq!(retired.fallback.as_deref(), Some("claude-sonnet-4-6"));
        let old = lookup(&c, OpenAi, "old");
        assert!(old.deprecated);
        assert_eq!((old.fallback.as_deref(), old.context_window), (Some("new"), 32_768), "figures from below");
        assert_eq!(old.sampling.temperature, Some(0.3));
        assert!(!lookup(&c, Claude, "claude-sonnet-4-6").deprecated);
    }

    #[test]
    fn output_is_clamped_to_the_model_and_the_window_and_never_below_one() {
        let small = ModelInfo {
            name: "m".into(),
            provider: OpenAi,
            context_window: 8192,
            max_output_tokens: 1024,
            source: Source::Config,
            price: None,
            vision: false,
            deprecated: false,
            fallback: None,
            max_total_tokens: None,
            sampling: Default::default(),
        };
        assert_eq!(effective_max_output(8192, &small, 100), 1024, "the model's limit");
        assert_eq!(effective_max_output(512, &small, 100), 512, "what was asked");
        assert_eq!(effective_max_output(8192, &small, 7800), 392, "what is left of the window");
        assert_eq!(effective_max_output(8192, &small, 9000), 1, "never below 1");
        let total = ModelInfo { max_total_tokens: Some(4096), ..small };
        assert_eq!(effective_max_output(8192, &total, 3500), 596, "what max_total_tokens leaves");
    }

    #[test]
    fn bad_entries_are_refused_with_their_place() {
        let parse = |text: &str| ForgeConfig::parse(text, std::path::Path::new("config.toml"));
        let bad = "[[models]]\nname = \"x\"\nprovider = \"acme\"\ncontext_window = 1\nmax_output_tokens = 1\n";
        let err = parse(bad).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("entry 1") && err.contains("acme"), "{err}");
        assert!(parse("[app]\nmax_output_tokens = 0\n").is_err());
    }
}
