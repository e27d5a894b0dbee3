//! Usage and models on the wire: prices, totals, `usage.report` and
//! `models.list`.

use serde::{Deserialize, Serialize};

/// A model's list prices, in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

impl Price {
    /// What `usage` costs at these prices, in USD.
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write)
            / 1_000_000.0
    }
}

/// A cost in US dollars as people read one, the same from the daemon (a
/// budget's approval) and from every client: four decimals under a dollar
/// (`$0.0042`, a budget of `$0.0010`), cents from a dollar up (`$1.27`).
pub fn usd(amount: f64) -> String {
    if amount < 1.0 { format!("${amount:.4}") } else { format!("${amount:.2}") }
}

/// Tokens and their estimated cost, summed over provider responses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageTotal {
    pub tokens: Usage,
    /// Estimated from the catalog's prices; responses of models without a
    /// known price count as 0 (see `unpriced`).
    pub cost_usd: f64,
    /// Provider responses counted.
    pub responses: u64,
    /// Of those, responses whose model has no known price.
    #[serde(default)]
    pub unpriced: u64,
    /// Of those, responses whose provider sent no token counts: Forge
    /// counted them with its own estimate (see [`Usage::estimated`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated: u64,
}

impl UsageTotal {
    pub fn add(&mut self, usage: &Usage, price: Option<&Price>) {
        self.tokens.add(usage);
        self.responses += 1;
        self.estimated += u64::from(usage.estimated);
        match price {
            Some(p) => self.cost_usd += p.cost(usage),
            None => self.unpriced += 1,
        }
    }

    pub fn merge(&mut self, other: &UsageTotal) {
        self.tokens.add(&other.tokens);
        self.cost_usd += other.cost_usd;
        self.responses += other.responses;
        self.unpriced += other.unpriced;
        self.estimated += other.estimated;
    }
}

/// One line of a usage report: a session, a working directory or a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageLine {
    /// The session id, the directory, or `provider/model`.
    pub key: String,
    #[serde(flatten)]
    pub total: UsageTotal,
}

/// `usage.report`: tokens and cost summed per session, per working
/// directory and per model, most expensive first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageReport {
    /// Only responses from this time on (Unix ms), if given.
    pub since_ms: Option<i64>,
    pub total: UsageTotal,
    pub sessions: Vec<UsageLine>,
    pub cwds: Vec<UsageLine>,
    pub models: Vec<UsageLine>,
}

/// A model, as `models.list` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelInfo {
    pub name: String,
    /// `claude`, `openai` or `gemini`.
    pub provider: String,
    pub context_window: u64,
    pub max_output_tokens: u32,
    /// `builtin` (Forge's table of current models) or `config` (a
    /// `[[models]]` entry).
    pub source: String,
    /// List prices, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// It reads images (a model Forge knows nothing of: no, unless a
    /// `[[models]]` entry says `vision = true`).
    #[serde(default)]
    pub vision: bool,
    /// Retired or about to be: requests go to `fallback` instead, if known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// The model that answers in its place when it is deprecated or its
    /// provider no longer knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Input and output together may not pass this (some local servers'
    /// context): `max_tokens` is lowered so that the request fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    /// The model's own sampling defaults (`[[models]]`), used where the
    /// session and the turn set none.
    #[serde(default, flatten)]
    pub sampling: Sampling,
}

/// Sampling parameters as a user sets them (`[app]`, a `[[models]]`
/// entry, a session, a turn). Each provider takes its own range; Forge
/// clamps a value outside it, or leaves out one the model refuses, and
/// says so once (`sampling_adjusted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sampling {
    /// 0 to 2 (Anthropic takes 0 to 1; OpenAI's reasoning models none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

impl Sampling {
    pub fn is_empty(&self) -> bool {
        self.temperature.is_none() && self.top_p.is_none()
    }

    /// Each value of `self`, else `below`'s.
    pub fn or(self, below: Sampling) -> Sampling {
        Sampling { temperature: self.temperature.or(below.temperature), top_p: self.top_p.or(below.top_p) }
    }

    /// Why these values cannot be asked for by anyone (outside every
    /// provider's range, or not a number), if so.
    pub fn check(&self) -> Result<(), String> {
        let bad = |name: &str, v: f64, max: f64| {
            (!(0.0..=max).contains(&v)).then(|| format!("{name} must be between 0 and {max}, got {v}"))
        };
        match (self.temperature.and_then(|t| bad("temperature", t, 2.0)), self.top_p.and_then(|p| bad("top_p", p, 1.0)))
        {
            (Some(e), _) | (None, Some(e)) => Err(e),
            (None, None) => Ok(()),
        }
    }
}

/// Tokens of one provider response. `input_tokens` counts the input that
/// was neither read from nor written to the provider's cache, so the whole
/// input is `input_tokens + cache_read_tokens + cache_write_tokens` for
/// every provider. `output_tokens` includes `reasoning_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Searches the provider ran for the answer (`web_search`), billed
    /// apart from tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub web_search_requests: u64,
    /// The provider sent no counts (some local servers never do): these are
    /// Forge's own estimate of the request and the answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod usd_tests {
    #[test]
    fn four_decimals_under_a_dollar_and_cents_above() {
        assert_eq!(super::usd(12.346), "$12.35");
        assert_eq!(super::usd(0.5), "$0.5000");
        assert_eq!(super::usd(0.001), "$0.0010");
        assert_eq!(super::usd(0.005709), "$0.0057");
        assert_eq!(super::usd(0.0), "$0.0000");
    }
}
