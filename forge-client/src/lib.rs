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
