//! forgectl's command line, before any daemon is involved.

use std::process::Command;

fn forgectl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_forgectl"))
}

#[test]
fn help_documents_exit_codes_and_json() {
    let out = forgectl().arg("--help").output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in [
        "send",
        "attach",
        "session",
        "history",
        "cancel",
        "status",
        "shutdown",
        "--json",
        "--no-autostart",
        "Exit status",
    ] {
        assert!(text.contains(needle), "--help lacks {needle}:\n{text}");
    }
}

#[test]
fn unknown_command_is_a_usage_error() {
    let out = forgectl().arg("frobnicate").output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn no_daemon_and_no_autostart_exits_3_with_a_hint() {
    let dir = std::env::temp_dir().join(format!("forgectl-cli-{}", std::process::id()));
    let out = forgectl()
        .args(["--no-autostart", "--socket"])
        .arg(dir.join("none.sock"))
        .arg("status")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no forged is running"), "{err}");
}
