//! `forge`: the terminal UI client. Until the TUI lands it points users to
//! `forgectl`, which already speaks the whole protocol.

use std::process::ExitCode;

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        Some("--version" | "-V") => {
            println!("forge {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "forge: the terminal UI is not part of this version yet.\n\
                 Use forgectl meanwhile: `forgectl send \"...\"` to talk to a model,\n\
                 `forgectl attach SESSION` to follow a session, `forgectl --help` for more."
            );
            ExitCode::from(2)
        }
    }
}
