//! `forge` as a command: its help and version, and a clear refusal when it
//! has no terminal. (Also makes `cargo test --workspace` build the binary
//! the end-to-end tests in `tests/` drive in tmux.)

use std::process::{Command, Stdio};

fn forge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_forge"))
}

#[test]
fn help_and_version_explain_the_tui() {
    let out = forge().arg("--help").output().unwrap_or_else(|e| panic!("{e}"));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(help.contains("--new") && help.contains("never stops the session"), "{help}");
    let out = forge().arg("--version").output().unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("forge "));
}

#[test]
fn without_a_terminal_it_points_to_forgectl() {
    let out = forge()
        .arg("some-session")
        .env("FORGE_SOCKET", "/nonexistent/forged.sock")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a terminal") && err.contains("forgectl"), "{err}");
}
