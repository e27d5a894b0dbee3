//! What forgectl does on this machine alone: completions and man pages
//! (no daemon, no runtime), and which commands `--remote` cannot apply to.

use std::process::ExitCode;

use crate::{Cli, Command};

/// Why `command` cannot go through `--remote`, if it cannot.
pub(crate) fn local_only(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Completions { .. } => "completions are for this machine's shell",
        Command::Man { .. } => "man pages are for this machine",
        Command::Daemon(_) => "`daemon` manages this machine's service units (run it on the remote with ssh)",
        Command::Config { .. } => {
            "it reads this machine's config file (run `ssh HOST forgectl config` for the remote's)"
        }
        Command::Doctor => "it checks this machine; `forgectl remote check URL` checks a remote",
        _ => return None,
    })
}

/// Completions and man pages: no daemon, no runtime.
pub(crate) fn generate(command: &Command) -> Option<ExitCode> {
    use clap::CommandFactory;
    let mut stdout = std::io::stdout();
    match command {
        Command::Completions { shell } => {
            if let Err(e) = forge_client::shell::completions(*shell, Cli::command(), &mut stdout) {
                eprintln!("forgectl: cannot write the completions: {e}");
                return Some(ExitCode::from(1));
            }
        }
        Command::Man { out_dir } => {
            match forge_client::shell::man_pages(Cli::command(), out_dir.as_deref(), &mut stdout) {
                Ok(files) => {
                    for f in files {
                        eprintln!("forgectl: wrote {f}");
                    }
                }
                Err(e) => {
                    eprintln!("forgectl: cannot write the man pages: {e}");
                    return Some(ExitCode::from(1));
                }
            }
        }
        _ => return None,
    }
    Some(ExitCode::SUCCESS)
}
