//! The Rust client of `forged`, for Forge's own clients (`forgectl`, the
//! TUI, the benchmarks) and anyone writing one: connect over the daemon's
//! Unix socket and say hello ([`connect`]), call the typed
//! [`ForgeApiClient`] methods, follow a session over JSON lines
//! ([`Follow`]), or start the daemon when none answers ([`autostart`]).
//! The wire schema itself lives in `forge-proto`; the engine never links
//! this crate.

pub mod autostart;
mod connection;

pub use connection::*;
pub use forge_proto::api::ForgeApiClient;
/// Re-exported so clients use the same jsonrpsee as this crate.
pub use jsonrpsee;

/// A `retrying` event in words, the same in every client:
/// `retrying in 2.0s (attempt 2/5): overloaded`.
pub fn retrying_line(attempt: u32, max_attempts: u32, delay_ms: u64, reason: &str) -> String {
    format!("retrying in {:.1}s (attempt {attempt}/{max_attempts}): {reason}", delay_ms as f64 / 1000.0)
}

/// A cost in US dollars as people read one: `$0.0042`, `$1.27`.
pub fn usd(cost: f64) -> String {
    if cost < 1.0 { format!("${cost:.4}") } else { format!("${cost:.2}") }
}

/// Tokens and cost in a few words, the same in every client:
/// `$0.0312 (12.4k tokens)`, with `+ unpriced` when some responses had
/// no known price.
pub fn cost_words(t: &forge_proto::UsageTotal) -> String {
    let u = &t.tokens;
    let tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let tokens = if tokens >= 10_000 { format!("{:.1}k", tokens as f64 / 1000.0) } else { tokens.to_string() };
    let unpriced = if t.unpriced > 0 { " + unpriced" } else { "" };
    format!("{}{unpriced} ({tokens} tokens)", usd(t.cost_usd))
}
