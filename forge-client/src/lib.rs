//! The Rust client of `forged`, for Forge's own clients (`forgectl`, the
//! TUI, the benchmarks) and anyone writing one: connect over the daemon's
//! Unix socket and say hello ([`connect`], or [`LineClient`] over JSON
//! lines), call the typed [`ForgeClient`] methods, follow a session over
//! JSON lines ([`Follow`]) and read its events the way every client does
//! ([`fold`]), or start the daemon when none answers ([`autostart`]).
//! The wire schema itself lives in `forge-proto`; the engine never links
//! this crate.

pub mod autostart;
mod connect_error;
mod connection;
pub mod endpoint;
pub mod fold;
pub mod images;
mod lines;
pub mod resume;
pub mod shell;
pub mod terminal;
pub mod tree;

pub use connection::*;
pub use endpoint::{Backoff, Endpoint, SshRemote};
pub use forge_proto::methods::ForgeClient;
/// Re-exported so clients use the same jsonrpsee as this crate.
pub use jsonrpsee;
pub use lines::*;
pub use resume::{Resume, Resumed};

/// A `retrying` event in words, the same in every client:
/// `retrying in 2.0s (attempt 2/5): overloaded`.
pub fn retrying_line(attempt: u32, max_attempts: u32, delay_ms: u64, reason: &str) -> String {
    format!("retrying in {:.1}s (attempt {attempt}/{max_attempts}): {reason}", delay_ms as f64 / 1000.0)
}

/// What `session.context` says, in one line, the same in every client.
pub fn context_line(c: &forge_proto::ContextInfo) -> String {
    let window = match (c.context_window, c.reserved_tokens) {
        (Some(w), Some(r)) if w > 0 => {
            let limit = w.saturating_sub(r).max(1);
            format!(
                " of the {limit} the model takes ({:.1}%; its window is {w}, {r} kept for the answer)",
                c.estimated_tokens as f64 * 100.0 / limit as f64
            )
        }
        (Some(w), None) if w > 0 => format!(" of {w} ({:.1}%)", c.estimated_tokens as f64 * 100.0 / w as f64),
        _ => " (window unknown for this model)".into(),
    };
    let infinity = if c.infinity { "on" } else { "off" };
    let summary = match &c.summary_id {
        Some(id) => format!(
            " (the first {} sent as their summary {id}, the other {} as they are)",
            c.summarized_messages,
            c.messages.saturating_sub(c.summarized_messages)
        ),
        None => String::new(),
    };
    format!(
        "{} messages{summary}; the next request is about {} tokens with the system prompt and tools{window}; model {}/{}; Context Infinity {infinity}",
        c.messages, c.estimated_tokens, c.provider, c.model
    )
}

/// A cost in US dollars as people read one: `$0.0042`, `$1.27` (the
/// daemon words its own amounts the same way).
pub use forge_proto::usd;

/// A session's or turn's own sampling parameters in words
/// (`temperature 0.2, top_p 0.9`), if any is set.
pub fn sampling_words(s: &forge_proto::Sampling) -> Option<String> {
    let words: Vec<String> = [("temperature", s.temperature), ("top_p", s.top_p)]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} {v}")))
        .collect();
    (!words.is_empty()).then(|| words.join(", "))
}

/// Tokens and cost in a few words, the same in every client:
/// `$0.0312 (12.4k tokens)`, with `+ unpriced` when some responses had
/// no known price, and `~` before the tokens when some were Forge's own
/// estimate (the provider sent no counts).
pub fn cost_words(t: &forge_proto::UsageTotal) -> String {
    let u = &t.tokens;
    let tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let tokens = if tokens >= 10_000 { format!("{:.1}k", tokens as f64 / 1000.0) } else { tokens.to_string() };
    let tokens = if t.estimated > 0 { format!("~{tokens}") } else { tokens };
    let unpriced = if t.unpriced > 0 { " + unpriced" } else { "" };
    format!("{}{unpriced} ({tokens} tokens)", usd(t.cost_usd))
}
