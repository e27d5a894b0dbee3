//! One module per command group.

pub mod attach;
pub mod misc;
pub mod send;
pub mod session;
