//! `forge`: the terminal UI of Forge, a thin client of `forged`. It attaches
//! to a session (starting the daemon if none answers), replays what the
//! session already shows, and follows it live; leaving never disturbs the
//! session, which keeps running in the daemon.

mod app;
mod attach;
mod blocks;
mod branches;
mod command;
mod draft;
mod input;
mod link;
mod markdown;
mod mentions;
mod msg;
mod picker;
mod render;
mod runtime;
mod theme;
mod transcript;

use forge_proto::params::CreateParams;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use forge_client::ForgeClient;
use forge_client::autostart::connect_or_start;

use crate::app::{App, UiOptions};

#[derive(Parser)]
#[command(
    name = "forge",
    version,
    about = "Forge's terminal UI: attach to a session of the forged daemon and work with the model",
    long_about = "Forge's terminal UI. With no argument it lists the sessions to pick from; \
        with SESSION (an id, id prefix or name) it attaches to that session; --new starts one.\n\n\
        Leaving (q, /quit, closing the terminal) never stops the session: a running turn goes on in \
        forged, and `forge SESSION` from any terminal shows it again, exactly.\n\n\
        Keys: i to type (Enter sends, Alt+Enter adds a line, Esc stops typing), : or / for commands \
        (/help lists them), Tab to pick a model, j/k and Ctrl-d/u to scroll, g/G top/bottom, q to leave. \
        When tool calls wait for approval: y approves all, n denies all, space picks, a approves the picked.",
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    generate: Option<Generate>,
    /// The session to attach to: id, unique id prefix, or name.
    session: Option<String>,
    /// Start a new session and attach to it.
    #[arg(long, conflicts_with = "session")]
    new: bool,
    /// Working directory of the new session (default: the current one).
    #[arg(long, requires = "new")]
    cwd: Option<PathBuf>,
    /// Work in `/`, the home directory itself or a system directory
    /// (refused otherwise: commands change anything under the directory
    /// without asking).
    #[arg(long, requires = "new")]
    allow_broad_root: bool,
    /// With --new, in a git repository: the session works on its own
    /// branch forge/session/<id> in a private worktree, one commit per
    /// turn; your working tree, index and branch are never touched.
    #[arg(long, requires = "new")]
    git: bool,
    /// With --git: start the branch at REF [default: HEAD].
    #[arg(long, requires = "git", value_name = "REF")]
    base: Option<String>,
    /// Model of the new session.
    #[arg(long, requires = "new")]
    model: Option<String>,
    /// Provider of the new session (claude, openai, gemini).
    #[arg(long, requires = "new")]
    provider: Option<String>,
    /// Name of the new session.
    #[arg(long, requires = "new")]
    name: Option<String>,
    /// The daemon's socket [default: $FORGE_SOCKET, else the one forged uses]
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Attach to the daemon of another machine through your own ssh:
    /// runs `forgectl bridge` there (which starts that daemon if none
    /// runs). --cwd is then a directory there. FORGE_SSH_COMMAND replaces
    /// `ssh` and its options; a dropped link is reconnected by itself
    #[arg(long, env = "FORGE_REMOTE", value_name = "ssh://[USER@]HOST[:PORT]")]
    remote: Option<String>,
    /// The remote forgectl when it is not on the remote PATH
    #[arg(long, env = "FORGE_REMOTE_BIN", value_name = "COMMAND")]
    remote_bin: Option<String>,
    /// Fail instead of starting forged when none answers.
    #[arg(long)]
    no_autostart: bool,
    /// Draw inline (no alternate screen) instead of full screen.
    #[arg(long)]
    inline: bool,
    /// Only ASCII glyphs.
    #[arg(long)]
    ascii: bool,
}

/// What `forge` can print instead of opening the UI.
#[derive(clap::Subcommand)]
enum Generate {
    /// Print forge's completion script for a shell (bash, zsh, fish,
    /// elvish, powershell)
    #[command(after_help = forge_client::shell::install_help("forge"))]
    Completions { shell: forge_client::shell::Shell },
    /// Print forge's man page, or write it to a directory
    Man {
        /// Write forge.1 here
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

fn generate(what: Generate) -> ExitCode {
    use clap::CommandFactory;
    let mut stdout = std::io::stdout();
    // The page describes the UI, not these two.
    let cmd = Args::command().mut_subcommand("completions", |c| c.hide(true)).mut_subcommand("man", |c| c.hide(true));
    let written = match what {
        Generate::Completions { shell } => forge_client::shell::completions(shell, Args::command(), &mut stdout),
        Generate::Man { out_dir } => {
            forge_client::shell::man_pages(cmd, out_dir.as_deref(), &mut stdout).map(|files| {
                for f in files {
                    eprintln!("forge: wrote {f}");
                }
            })
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forge: cannot write it: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if let Some(what) = args.generate.take() {
        return generate(what);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("forge: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // A panic must not leave the terminal in raw mode.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        runtime::restore(false);
        default_hook(info);
    }));
    match runtime.block_on(start(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forge: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn start(args: Args) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "this is a terminal UI, and stdin or stdout is not a terminal; for scripts and pipes use forgectl (e.g. `forgectl attach SESSION`)"
        );
    }
    // --socket on the command line wins over an exported FORGE_REMOTE;
    // both on the command line name two daemons.
    let remote_flag = std::env::args().any(|a| a == "--remote" || a.starts_with("--remote="));
    if remote_flag && args.socket.is_some() {
        anyhow::bail!("--remote and --socket name two daemons; give one");
    }
    let remote = args.remote.as_deref().filter(|r| !r.trim().is_empty() && (remote_flag || args.socket.is_none()));
    let endpoint = match remote {
        Some(url) => forge_client::Endpoint::Ssh(forge_client::SshRemote::parse(
            url,
            args.remote_bin.clone(),
            !args.no_autostart,
        )?),
        None => forge_client::Endpoint::Socket(args.socket.clone().unwrap_or_else(forge_proto::paths::default_socket)),
    };
    let started = |pid| eprintln!("forge: started forged (pid {pid}) on {endpoint}");
    let conn: forge_client::Connection =
        connect_or_start(&endpoint, runtime::client_info(), !args.no_autostart, started).await?;
    let options = ui_options(&args);
    let mut keys = crossterm::event::EventStream::new();
    // Where a new session works: here; through --remote, --cwd there (none:
    // the remote user's home).
    let cwd = match (&args.cwd, endpoint.remote()) {
        (Some(c), Some(r)) if !c.is_absolute() => {
            anyhow::bail!("--cwd {} is relative; through --remote give its absolute path on {}", c.display(), r.url)
        }
        (c, Some(_)) => c.clone(),
        (Some(c), None) => Some(std::fs::canonicalize(c).unwrap_or_else(|_| c.clone())),
        (None, None) => {
            let here = std::env::current_dir()?;
            Some(std::fs::canonicalize(&here).unwrap_or(here))
        }
    };
    let cwd = cwd.map(|c| c.display().to_string());
    let session = if args.new {
        let info = conn
            .client
            .session_create(CreateParams {
                name: args.name.clone(),
                cwd: cwd.clone(),
                provider: args.provider.clone(),
                model: args.model.clone(),
                allow_broad_root: args.allow_broad_root,
                git: args.git.then_some(true),
                base: args.base.clone(),
                from_commit: None,
                sampling: Default::default(),
            })
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the session: {}", runtime::error_text(e)))?;
        if let Some(folder) = &info.untrusted {
            ask_trust(&conn.client, folder).await;
        }
        if !info.tools_waiting.is_empty() {
            ask_tools(&conn.client, &info.cwd, &info.tools_waiting).await;
        }
        info.id
    } else if let Some(s) = &args.session {
        let info =
            conn.client.session_show(s.clone()).await.map_err(|e| anyhow::anyhow!("{}", runtime::error_text(e)))?;
        info.id
    } else {
        match picker::pick(&conn.client, &options, &mut keys, cwd).await? {
            Some(id) => id,
            None => return Ok(()),
        }
    };
    // The session followed before the screen is taken (ssh may ask for a
    // passphrase here); later links ask nothing, the screen being the UI's.
    let follow = forge_client::Follow::open_at(&endpoint, &runtime::client_info(), session.clone(), Some(1))
        .await
        .map_err(|e| anyhow::anyhow!("cannot follow the session: {}", forge_client::resume::transport_words(&e)))?;
    let app = App::new(&session, options);
    runtime::run(endpoint.asking_nothing(), conn.client, session, follow, app, &mut keys).await
}

/// `[app]` of `$FORGE_HOME/config.toml` (the daemon validates the whole
/// file; the TUI reads only its display options), flags and `NO_COLOR`.
fn ui_options(args: &Args) -> UiOptions {
    let path = forge_proto::paths::forge_home().join("config.toml");
    let table: toml::Table = std::fs::read_to_string(path).ok().and_then(|t| t.parse().ok()).unwrap_or_default();
    let app = table.get("app").and_then(|a| a.as_table());
    let flag = |k: &str| app.and_then(|a| a.get(k)).and_then(|v| v.as_bool()).unwrap_or(false);
    let tui = app.and_then(|a| a.get("tui")).and_then(|v| v.as_str()).unwrap_or("full");
    UiOptions {
        ascii_only: args.ascii || flag("ascii_only"),
        high_contrast: flag("high_contrast"),
        reduced_motion: flag("reduced_motion"),
        inline: args.inline || tui == "inline",
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    }
}

/// A new session's folder provides hooks or MCP servers that Forge
/// ignores until trusted: asked once, before the screen is taken.
/// The project's own tools wait for the user's word: each is shown, and
/// approved as the user saw it.
async fn ask_tools(
    client: &forge_client::jsonrpsee::async_client::Client,
    dir: &str,
    waiting: &[forge_proto::ProjectTool],
) {
    use std::io::Write;
    eprintln!("forge: this project declares tools the model gets once you approve them:");
    for t in waiting {
        let safe = |s: Option<&str>| forge_client::terminal::safe(s.unwrap_or("")).into_owned();
        let changed = if t.state == "changed" { " (changed since you approved it)" } else { "" };
        eprintln!("  {} ({}){changed}: {}", safe(t.name.as_deref()), t.file, safe(t.description.as_deref()));
        eprintln!("    runs: {}", safe(t.command.as_deref()));
    }
    eprint!("Approve them, to run in the sandbox without asking? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y") {
        let files = waiting
            .iter()
            .map(|t| forge_proto::params::ToolFileRef { file: t.file.clone(), sha256: t.sha256.clone() })
            .collect();
        let p = forge_proto::params::ApproveToolsParams { dir: dir.to_string(), files };
        match forge_client::ForgeClient::tools_approve(client, p).await {
            Ok(_) => eprintln!("forge: approved"),
            Err(e) => eprintln!("forge: cannot approve them: {}", runtime::error_text(e)),
        }
    } else {
        eprintln!("forge: not approved; `forgectl tools approve` approves them later");
    }
}

async fn ask_trust(client: &forge_client::jsonrpsee::async_client::Client, folder: &forge_proto::FolderTrust) {
    use std::io::Write;
    let what = forge_client::terminal::safe(&folder.provides.join(", ")).into_owned();
    eprint!(
        "forge: {} provides {what}. They run programs on your machine; Forge ignores them until you trust this folder.\nTrust it (as its files are now)? [y/N] ",
        folder.dir
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y") {
        match forge_client::ForgeClient::trust_add(client, folder.dir.clone()).await {
            Ok(_) => eprintln!("forge: trusted {}", folder.dir),
            Err(e) => eprintln!("forge: cannot trust it: {}", runtime::error_text(e)),
        }
    } else {
        eprintln!("forge: not trusted; `forgectl trust {}` trusts it later", folder.dir);
    }
}
