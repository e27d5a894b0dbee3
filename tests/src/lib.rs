//! Support for Forge's integration tests: the mock LLM provider and a
//! harness that runs the real `forged` and `forgectl` binaries on a
//! temporary socket and data directory.

pub mod harness;
pub mod mock;
pub mod sshd;
pub mod tmux;
