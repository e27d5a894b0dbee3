//! One module per command group.

pub mod acp;
pub mod approvals;
pub mod attach;
pub mod bridge;
pub mod context;
pub mod daemon;
pub mod doctor;
pub mod export;
pub mod git;
pub mod mcp;
pub mod misc;
pub mod remote;
pub mod sandbox;
pub mod send;
pub mod session;
pub mod store;
pub mod tools;
pub mod tree;
pub mod trust;
pub mod web;
