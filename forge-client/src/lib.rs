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
