//! Shell completions and man pages for the command-line programs, made
//! from their clap definitions so they never drift from `--help`.

use std::io::Write;
use std::path::Path;

pub use clap_complete::Shell;

/// How to install `name`'s completions where each shell looks for a
/// user's, for its help text.
pub fn install_help(name: &str) -> String {
    format!(
        "Install (then open a new shell):
  bash: mkdir -p ~/.local/share/bash-completion/completions
        {name} completions bash > ~/.local/share/bash-completion/completions/{name}
  zsh:  mkdir -p ~/.zfunc && {name} completions zsh > ~/.zfunc/_{name}
        (and in ~/.zshrc, before compinit: fpath+=~/.zfunc)
  fish: mkdir -p ~/.config/fish/completions && {name} completions fish > ~/.config/fish/completions/{name}.fish"
    )
}

/// Writes the completion script of `cmd` for `shell` to `out` (a reader
/// that went away, `| head`, is no error).
pub fn completions(shell: Shell, mut cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    // Made whole first: the generator panics on a failed write.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    quiet_pipe(out.write_all(&script))
}

fn quiet_pipe(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// The man page of `cmd` (section 1) to `out`, or, with `dir`, one file
/// per command and subcommand there (`NAME.1`, `NAME-SUB.1`, ...).
/// Returns the files written.
pub fn man_pages(cmd: clap::Command, dir: Option<&Path>, out: &mut dyn Write) -> std::io::Result<Vec<String>> {
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page)?;
            quiet_pipe(out.write_all(&page))?;
            Ok(Vec::new())
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            let mut written = Vec::new();
            write_pages(cmd, dir, &mut written)?;
            Ok(written)
        }
    }
}

fn write_pages(cmd: clap::Command, dir: &Path, written: &mut Vec<String>) -> std::io::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    let line = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    let file = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    std::fs::write(&file, page)?;
    written.push(file.display().to_string());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        // Subcommand pages are named after the whole command line.
        let sub = sub
            .clone()
            .display_name(format!("{name}-{}", sub.get_name()))
            .bin_name(format!("{line} {}", sub.get_name()));
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
