//! Context budgets: how much of a model's window a request may fill (the
//! window less the output kept for the answer), a token estimate that the
//! usage providers report keeps calibrated, and whether the next request
//! fits. With Context Infinity off, a request that does not fit is refused
//! with a clear error before anything is sent.

use crate::catalog::{ModelInfo, estimate_tokens};
use crate::config::ForgeConfig;
use crate::provider::ChatMessage;

/// `FORGE_CONTEXT_INFINITY=0|1`: Context Infinity when config.toml says
/// nothing (the seed's precedence: config file, environment, default on).
pub const INFINITY_ENV: &str = "FORGE_CONTEXT_INFINITY";

/// Whether Context Infinity is on for this configuration.
pub fn infinity(config: &ForgeConfig) -> bool {
    if let Some(on) = config.context.infinity {
        return on;
    }
    match std::env::var(INFINITY_ENV).ok().as_deref().map(str::trim) {
        Some("0" | "false" | "off" | "no") => false,
        Some(_) | None => true,
    }
}

/// A request's room: the window, and the output kept free for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    pub window: u64,
    pub reserve: u64,
}

impl ContextBudget {
    /// `requested` output tokens (clamped to the model's limit) are kept
    /// free for the answer.
    pub fn for_model(model: &ModelInfo, requested: u32) -> Self {
        let reserve = u64::from(requested.min(model.max_output_tokens));
        // A window smaller than the reserve still leaves half for input.
        Self { window: model.context_window, reserve: reserve.min(model.context_window / 2) }
    }

    /// The most input a request may carry.
    pub fn input_limit(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }
}

/// Tokens from bytes: the catalog's cautious estimate times a ratio learnt
/// from what providers count (their reported input against the estimate
/// for the same request), so that the estimate converges on the model's
/// tokenizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimator {
    ratio: f64,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        Self { ratio: 1.0 }
    }
}

impl TokenEstimator {
    pub fn tokens(&self, bytes: usize) -> u64 {
        (estimate_tokens(bytes) as f64 * self.ratio).ceil() as u64
    }

    /// A provider counted `actual` input tokens for a request this
    /// estimated at `estimated` (both with the ratio in force then).
    pub fn observe(&mut self, estimated: u64, actual: u64) {
        if estimated == 0 || actual == 0 {
            return;
        }
        let seen = self.ratio * actual as f64 / estimated as f64;
        // Move halfway each time; never trust a wild single sample fully.
        self.ratio = (0.5 * self.ratio + 0.5 * seen).clamp(0.25, 4.0);
    }

    pub fn ratio(&self) -> f64 {
        self.ratio
    }
}

/// The bytes a message adds to a request (text, tool calls and their
/// arguments; the wire format's own framing is in the calibration).
pub fn message_bytes(m: &ChatMessage) -> usize {
    m.text.len() + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.len() + c.id.len()).sum::<usize>()
}

/// Whether a request of `fixed_bytes` (system prompt, tool definitions)
/// and `messages` fits `budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Fits { tokens: u64 },
    TooLong { tokens: u64, limit: u64 },
}

pub fn fit(budget: &ContextBudget, estimator: &TokenEstimator, fixed_bytes: usize, messages: &[ChatMessage]) -> Fit {
    let bytes = fixed_bytes + messages.iter().map(message_bytes).sum::<usize>();
    let tokens = estimator.tokens(bytes);
    let limit = budget.input_limit();
    if tokens > limit { Fit::TooLong { tokens, limit } } else { Fit::Fits { tokens } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Source;
    use crate::provider_kind::ProviderKind;

    fn model(window: u64, max_out: u32) -> ModelInfo {
        ModelInfo {
            name: "m".into(),
            provider: ProviderKind::OpenAi,
            context_window: window,
            max_output_tokens: max_out,
            source: Source::Config,
            price: None,
        }
    }

    #[test]
    fn the_budget_keeps_the_answer_room_and_a_long_request_does_not_fit() {
        let b = ContextBudget::for_model(&model(8192, 1024), 8192);
        assert_eq!((b.reserve, b.input_limit()), (1024, 7168));
        let e = TokenEstimator::default();
        let short = vec![ChatMessage::user("hello")];
        assert!(matches!(fit(&b, &e, 1000, &short), Fit::Fits { .. }));
        let long = vec![ChatMessage::user("x".repeat(30_000))];
        assert!(matches!(fit(&b, &e, 1000, &long), Fit::TooLong { limit: 7168, .. }));
    }

    #[test]
    fn the_estimate_learns_from_what_providers_count() {
        let mut e = TokenEstimator::default();
        let estimated = e.tokens(7000);
        assert_eq!(estimated, 2000);
        // The provider counted fewer: the estimate moves towards it.
        for _ in 0..8 {
            let est = e.tokens(7000);
            e.observe(est, 1500);
        }
        let now = e.tokens(7000);
        assert!((1500..=1520).contains(&now), "{now}");
        // A nonsense sample moves it only so far.
        e.observe(now, 1);
        assert!(e.ratio() >= 0.25);
    }

    #[test]
    fn infinity_follows_the_config_then_the_environment_then_defaults_on() {
        let mut c = ForgeConfig::default();
        c.context.infinity = Some(false);
        assert!(!infinity(&c), "the file decides when it says");
        c.context.infinity = None;
        // Without the variable set in this test process, the default holds.
        if std::env::var(INFINITY_ENV).is_err() {
            assert!(infinity(&c));
        }
    }
}
