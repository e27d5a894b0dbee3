//! The daemon's command line as a user meets it first.

use std::process::Command;

fn forged() -> Command {
    Command::new(env!("CARGO_BIN_EXE_forged"))
}

#[test]
fn help_explains_files_and_environment() {
    let out = forged().arg("--help").output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in ["--socket", "--foreground", "FORGE_HOME", "ANTHROPIC_API_KEY", "Exit status"] {
        assert!(text.contains(needle), "--help lacks {needle}:\n{text}");
    }
}

#[test]
fn version_prints_the_package_version() {
    let out = forged().arg("--version").output().unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}
