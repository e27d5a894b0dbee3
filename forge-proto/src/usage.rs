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
}

impl UsageTotal {
    pub fn add(&mut self, usage: &Usage, price: Option<&Price>) {
        self.tokens.add(usage);
        self.responses += 1;
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
