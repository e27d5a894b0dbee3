//! `forgectl`: the scripting CLI for the Forge daemon, and the universal
//! adapter for editors (`forgectl attach --json` prints JSON Lines).

/// `println!` for stdout that stops quietly once the reader is gone
/// (`forgectl ... | head`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let r = writeln!($crate::output::stdout(), $($arg)*);
        $crate::output::stdout_result(r);
    }};
}

/// `print!` for stdout, as [`outln`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = $crate::output::stdout();
        let r = write!(stdout, $($arg)*).and_then(|()| stdout.flush());
        $crate::output::stdout_result(r);
    }};
}

mod cmd;
mod connect;
mod exit;
mod local;
mod output;
mod tree_commands;

use local::{generate, local_only};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Sessions are named by id, a unique id prefix, or name.

Output: human-readable by default; with --json, JSON Lines on stdout (one
object per event or result) for scripts. Errors go to stderr.

Exit status:
  0  success (for send: the turn completed)
  1  the daemon refused the request (message on stderr; with --json also a
     JSON object {\"error\":{...}} with a stable \"kind\")
  2  bad command line
  3  no daemon could be reached or started
  4  the turn failed (provider error: auth, rate limit, network, ...)
  5  the turn was cancelled or interrupted
  6  send --output-schema: the answer never validated (the errors on stderr)
  130 interrupted by Ctrl-C

Environment: FORGE_SOCKET, FORGE_HOME, XDG_RUNTIME_DIR; FORGE_REMOTE, FORGE_SSH_COMMAND and \
FORGE_REMOTE_BIN for a daemon on another machine (see --remote). A daemon forgectl starts gets its \
environment, so the provider variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, \
ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GEMINI_BASE_URL) set here reach it.";

#[derive(Parser)]
#[command(
    name = "forgectl",
    version,
    about = "Control the Forge daemon: send messages, follow sessions, manage history",
    long_about = "forgectl talks to forged, the Forge daemon, over its Unix socket. If no daemon answers, \
it starts one in the background (like tmux) unless --no-autostart is given.",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
pub struct Global {
    /// Daemon socket [default: $FORGE_SOCKET, else $XDG_RUNTIME_DIR/forge/forged.sock, else $FORGE_HOME/forged.sock]
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print JSON Lines on stdout: one object per event or result
    #[arg(long, global = true)]
    pub json: bool,
    /// Fail (exit 3) instead of starting forged when none is running
    #[arg(long, global = true)]
    pub no_autostart: bool,
    /// Reach the daemon of another machine through your own ssh (config,
    /// agent, keys, jump hosts): runs `forgectl bridge` there, which starts
    /// that daemon if none runs. Paths (--cwd, --dir) are then the
    /// remote's. FORGE_SSH_COMMAND replaces `ssh` and its options
    #[arg(long, global = true, env = "FORGE_REMOTE", value_name = "ssh://[USER@]HOST[:PORT]")]
    pub remote: Option<String>,
    /// The remote forgectl when it is not on the remote PATH: a path, or a
    /// command line for the remote shell
    #[arg(long, global = true, env = "FORGE_REMOTE_BIN", value_name = "COMMAND")]
    pub remote_bin: Option<String>,
    /// `--remote` was on the command line (not only in `FORGE_REMOTE`).
    #[arg(skip)]
    pub remote_flag: bool,
    /// Write model and tool text byte for byte: without it, control
    /// sequences in it (a clipboard write, a clear-screen, a hidden link)
    /// are shown as text (`^[`), so they cannot drive your terminal
    #[arg(long, global = true)]
    pub raw: bool,
}

impl Global {
    /// `--remote` (or `FORGE_REMOTE`), when set.
    /// `--socket` on the command line wins over an exported `FORGE_REMOTE`.
    pub fn remote(&self) -> Option<&str> {
        if self.socket.is_some() && !self.remote_flag {
            return None;
        }
        self.remote.as_deref().filter(|r| !r.trim().is_empty())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Send a message and stream the answer to stdout
    #[command(after_help = "Without -s a new session is created; its id is printed on stderr.\n\
A message sent while a turn runs is queued and runs next; send says so on stderr.\n\
Ctrl-C cancels the turn (the partial answer is kept, marked cancelled).")]
    Send(cmd::send::SendArgs),
    /// Follow a session's events: replay from --from, then live
    #[command(after_help = "Ctrl-C detaches; the session goes on in the daemon.")]
    Attach(cmd::attach::AttachArgs),
    /// Create, list, show, rename and remove sessions
    #[command(subcommand)]
    Session(cmd::session::SessionCmd),
    /// List sessions with their state (alias of `session list`)
    Ps,
    /// Print a session's history (its current path, oldest first)
    History {
        /// Session id, id prefix or name
        session: String,
    },
    // The conversation tree's commands, flattened: each stays a command of
    // its own, in this place in the list.
    #[command(flatten)]
    Tree(tree_commands::TreeCommand),
    /// Switch a session's model (and provider) from its next request on,
    /// or show the current one. The conversation so far, tool calls
    /// included, goes to the new provider in its own format.
    #[command(
        after_help = "Examples:\n  forgectl model my-session                      # show\n  forgectl model my-session gpt-5.4 --provider openai\n  forgectl model my-session --provider gemini    # its default model\n  forgectl model my-session claude-opus-5        # same provider\n  forgectl model my-session --temperature 0.2    # the session's own sampling\n  forgectl model my-session --reset-sampling     # back to config.toml's"
    )]
    Model {
        /// Session id, id prefix or name
        session: String,
        /// The model (see `forgectl models`); without it, --provider's default
        model: Option<String>,
        /// claude (alias anthropic), openai or gemini [default: the session's]
        #[arg(long)]
        provider: Option<String>,
        #[command(flatten)]
        sampling: cmd::session::ConfigureSampling,
    },
    /// Show how much of the model's context window a session uses, or
    /// (--system) the system prompt its requests carry; `context add|remove
    /// SESSION PATH...` keeps files' whole text in every request
    Context(cmd::context::ContextArgs),
    /// This machine's daemon on stdin and stdout, for a client elsewhere
    /// (`ssh -T host forgectl bridge`); starts the daemon if none runs
    Bridge,
    /// List the models Forge knows: context window and most output tokens
    /// (add local models with [[models]] in config.toml)
    Models {
        /// Only this provider's (claude, openai, gemini)
        #[arg(long)]
        provider: Option<String>,
    },
    /// Summarize a session's conversation up to its newest exchange now
    /// (requests send the summary in its place; the messages stay in history)
    Summarize {
        /// Session id, id prefix or name
        session: String,
    },
    /// Search what a session's summarized messages said: requests, files,
    /// commands and their outcome, errors, decisions, names (the facts kept
    /// when they were summarized; each hit names its original message)
    #[command(
        after_help = "Examples:\n  forgectl recall my-session \"which port did we pick\"\n  forgectl recall my-session migration --limit 3 --json\n\nEach hit names the message it came from; `forgectl history SESSION` shows it in full."
    )]
    Recall {
        /// Session id, id prefix or name
        session: String,
        /// Words to look for (any of them; the best matches come first)
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Most hits to show (1-50)
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=50))]
        limit: u32,
    },
    /// Tokens and estimated cost (USD, from the catalog's list prices) per
    /// session, working directory and model
    #[command(
        after_help = "Examples:\n  forgectl usage                    # everything\n  forgectl usage --since 7d         # the last 7 days (also 24h, 30m, 2w)\n  forgectl usage --since 2026-11-01 # from a date (UTC), or 2026-11-01T09:30\n  forgectl usage my-session --json"
    )]
    Usage {
        /// Only this session (id, id prefix or name)
        session: Option<String>,
        /// Only responses since DATE: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC), or an age: 30m, 24h, 7d, 2w
        #[arg(long, value_name = "DATE")]
        since: Option<String>,
    },
    /// Check config.toml or show where it is
    Config {
        #[command(subcommand)]
        action: cmd::misc::ConfigAction,
    },
    /// The session's commands of one's own: `/NAME args` sent to it becomes
    /// the command's prompt
    #[command(
        after_help = "A command is a Markdown file: ~/.config/forge/commands/NAME.md (yours), or .claude/commands/NAME.md \
and .forge/commands/NAME.md in a folder you trust (`forgectl trust`); a file in a subfolder DIR is /DIR:NAME. \
Front matter (description, argument-hint) describes it; in the body $ARGUMENTS is what follows the name and \
$1..$9 each word of it.\n\nExample:\n  forgectl send -s demo \"/review src/\""
    )]
    Commands {
        /// Session id, id prefix or name
        session: String,
    },
    /// The model's plan for the session's task (update_plan): each step
    /// pending, in progress or completed
    Plan {
        /// Session id, id prefix or name
        session: String,
    },
    /// Steer the running turn: TEXT joins it at its next step (after the
    /// tool calls under way, before the model is asked again)
    #[command(
        after_help = "The text never cuts into an answer being written: it waits, kept on disk, for the turn's next \
request and enters the history there as your message. If the turn ends first it runs as the next message, before \
anything queued. With no turn running it is sent at once, like `forgectl send`.\n\nExample, from a second terminal:\n  \
forgectl steer demo \"use the v2 API instead\""
    )]
    Steer {
        /// Session id, id prefix or name
        session: String,
        /// What to tell the model
        text: String,
    },
    /// Cancel the running turn of a session (the partial answer is kept)
    Cancel {
        /// Session id, id prefix or name
        session: String,
        /// Also drop messages queued behind the running turn
        #[arg(long)]
        drop_queued: bool,
    },
    /// Decide about tool calls interrupted by a daemon stop
    #[command(after_help = "--resume re-runs calls that never started and read-only ones; a side-effecting call \
that was running when forged stopped is answered with an error instead (it may have partly happened), and \
the model decides what to do. --discard answers all of them as discarded and ends the turn.")]
    Recover {
        /// Session id, id prefix or name
        session: String,
        #[arg(long, conflicts_with = "discard", required_unless_present = "discard")]
        resume: bool,
        #[arg(long)]
        discard: bool,
    },
    /// Parse-only mode: give the result of a tool call the model made
    ToolResult {
        /// Session id, id prefix or name
        session: String,
        /// The call's id (shown by `send` and `attach`)
        call_id: String,
        /// The result is an error message
        #[arg(long)]
        error: bool,
        /// The result text; `-` reads it from stdin
        #[arg(required = true, num_args = 1..)]
        output: Vec<String>,
    },
    /// List every pending tool approval, across all sessions, and the
    /// sessions' own rules ("allow always")
    Approvals {
        /// Forget a session's own rules: its calls ask as config.toml says
        #[arg(long, value_name = "SESSION")]
        forget: Option<String>,
    },
    /// Approve a session's pending tool calls: all, or the numbered ones
    #[command(
        after_help = "Numbers are the #N shown by `forgectl approvals` or `forgectl send`; the calls not named are denied."
    )]
    Approve {
        /// Session id, id prefix or name
        session: String,
        /// Approve every call of the pending approval
        #[arg(long, conflicts_with = "calls")]
        all: bool,
        /// The calls to approve (1-based)
        #[arg(required_unless_present = "all")]
        calls: Vec<u32>,
        /// Allow the approved calls' tools always in this session: later
        /// calls to them run without asking
        #[arg(long)]
        always: bool,
    },
    /// Deny all of a session's pending tool calls (the model is told)
    Deny {
        /// Session id, id prefix or name
        session: String,
    },
    /// The sandbox commands run in: `sandbox` shows it, `sandbox test`
    /// runs the escape suite against it
    #[command(
        after_help = "Configured in config.toml:\n\n  [tools.sandbox]\n  mode = \"kernel\"          # or \"paths-only\"\n  \
network = \"deny\"         # or \"allow\", \"localhost\"\n  read_roots = [\"/\", \"~/.cargo\"]   # default: the system and the toolchains in ~\n  \
write_roots = []          # besides the session's roots and $TMPDIR\n  max_memory_mb = 8192\n  max_processes = 1024\n  max_cpu_seconds = 3600\n  \
pass_env = [\"NPM_TOKEN\"]  # secret-looking variables commands may see\n\n\
Exit status of `sandbox test`: 0 if every probe was refused (or allowed, where the configuration allows it, or \"asks first\" where commands are not confined and none was run), 1 otherwise."
    )]
    Sandbox {
        #[command(subcommand)]
        action: Option<cmd::sandbox::SandboxAction>,
    },
    /// What holds on this machine and what is missing, each missing piece
    /// with its cause and fix: the command sandbox (kernel, user
    /// namespaces, an AppArmor profile for forged), the network, totals
    /// per command (`daemon install`), the configuration's warnings
    #[command(after_help = "Exit status: 0 when everything holds, 1 when something is missing. --json prints one \
object per check: {check, ok, detail, fix?}.")]
    Doctor,
    /// Trust a folder's own hooks and MCP servers (its .claude/settings.json
    /// and .mcp.json, as they are now); --list, --revoke, --show
    #[command(
        after_help = "A freshly cloned repository's hooks and MCP servers run programs on your machine: Forge honours them only in folders you trust, and only as their files were when you trusted them (a change, yours or a command's, needs your word again). Until then a new session says once what it ignored. A trusted folder's own slash commands (.claude/commands, .forge/commands) are honoured too."
    )]
    Trust(cmd::trust::TrustArgs),
    /// The web client: a link (and QR code) that pairs a browser or a
    /// phone with the daemon's TCP listener; `devices`, `revoke`
    #[command(
        after_help = "The page is served by forged on its TCP listener ([daemon] listen, loopback by default; see docs/remote.md). The link carries a one-time code (valid 5 minutes, once); opening it pairs the browser, which then holds a device cookie instead of the listener's token. `forgectl web revoke ID|--all` signs browsers out at once; rotating the listener token signs every one out."
    )]
    Web(cmd::web::WebArgs),
    /// The tools the model may call, and the project's own
    /// (.forge/tools/*.toml): `list`, `approve`, `revoke`
    #[command(after_help = "A project declares its own tools in .forge/tools/NAME.toml:\n\n  \
name = \"test\"\n  description = \"Run the tests of one package\"\n  command = \"cargo test -p {package}\"\n  \
timeout_seconds = 600\n  [parameters]\n  type = \"object\"\n  required = [\"package\"]\n  \
properties.package = { type = \"string\" }\n\n\
{package} is replaced by the argument, quoted for the shell. The model gets a tool once you approve its file as it is \
(`forgectl tools approve`); its calls then run in the sandbox without asking. A file that changes afterwards (your edit, \
a command's or the model's) is withdrawn until you approve it again.")]
    Tools {
        #[command(subcommand)]
        cmd: cmd::tools::ToolsCmd,
    },
    /// Git sessions: their turns as commits (`log`), one turn's
    /// conversation and diff (`show`), what a branch would bring (`diff`)
    #[command(
        after_help = "A git session (`forgectl session new --git`, or `[git] mode = \"branch\"` in config.toml) works on its own branch forge/session/<id> in a private worktree; each turn becomes one commit holding the code and .forge/sessions/<id>.json, the conversation that made it. Your working tree, index and branch are never touched: merge when you want it (`git merge forge/session/<id>`), or resume any turn (`forgectl session new --git --from COMMIT`)."
    )]
    Git {
        #[command(subcommand)]
        cmd: cmd::git::GitCmd,
    },
    /// MCP tool servers: state, tools and calls; `mcp restart NAME`
    #[command(after_help = "Servers come from [[mcp.servers]] in config.toml, e.g.\n\n  \
[[mcp.servers]]\n  name = \"files\"\n  command = \"npx\"\n  args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]\n\n  \
[[mcp.servers]]\n  name = \"docs\"\n  url = \"https://example.com/mcp\"\n  bearer_token_env_var = \"DOCS_TOKEN\"\n\n\
The model sees their tools as NAME__TOOL. A failed server is started again with backoff (1 s, doubling, at most 60 s).")]
    Mcp {
        #[command(subcommand)]
        action: Option<cmd::mcp::McpAction>,
        /// Show the servers this session sees (its own, from an editor, too)
        #[arg(long, short)]
        session: Option<String>,
    },
    /// Speak the Agent Client Protocol on stdin/stdout, for editors (Zed,
    /// JetBrains, Neovim, Emacs): their sessions are daemon sessions
    #[command(after_help = "Editors start this themselves; see docs/editors.md for each one's configuration.")]
    Acp,
    /// Show the daemon's pid, version, uptime and sessions
    Status,
    /// Show the journal's health and statistics, or reset it after a failure
    #[command(after_help = "When the store cannot be written (disk full, read-only or deleted database), \
the daemon stops running turns and refuses new ones (error kind persistence_blocked). Nothing already \
acknowledged is lost. Fix the cause, then `forgectl journal reset`: sessions recover what was interrupted.")]
    Journal {
        #[command(subcommand)]
        action: Option<cmd::misc::JournalAction>,
    },
    /// Show what the store weighs (database, rewind contents, images, per
    /// session), or collect what no record needs
    #[command(after_help = "Undo and rewind keep the contents of the files tools and commands changed. Past \
[store] max_blob_mb (4096 by default) the oldest of them are evicted, and undo names the files it can no \
longer restore; images a message shows are never evicted. Removing a session frees its contents at the \
next `forgectl store gc` (or daemon start).")]
    Store {
        #[command(subcommand)]
        action: Option<cmd::store::StoreAction>,
    },
    /// Stop the daemon gracefully (running turns are cancelled and kept)
    Shutdown,
    /// forged as a systemd user service: install, status, stop, logs
    #[command(subcommand)]
    Daemon(cmd::daemon::DaemonCmd),
    /// Write a whole session out: JSON lines that `forgectl import` reads
    /// back exactly, or its conversation as Markdown
    #[command(
        after_help = "Examples:\n  forgectl export my-session > my-session.jsonl\n  forgectl export my-session --format markdown -o notes.md\n\nThe JSON lines hold the session, every node of its tree, its bookmarks, the facts kept from its summaries and its event log. Not exported: what tools did to files (rewind records are about this machine's files) and queued messages; a fork is exported whole."
    )]
    Export {
        /// Session id, id prefix or name
        session: String,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: cmd::export::Format,
        /// Write to FILE (created private to you) instead of stdout
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Bring in a session exported with `forgectl export` (its ids kept;
    /// refused if this daemon has it already)
    Import {
        /// The export (JSON lines); `-` reads stdin
        file: String,
        /// Re-root the session in DIR instead of the directory it was
        /// exported from (needed when that was `/`, a home directory or a
        /// system directory)
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Keep a broad directory (`/`, the home directory itself, a
        /// system directory) as the session's directory
        #[arg(long)]
        allow_broad_root: bool,
    },
    /// Check a remote for --remote: ssh, forgectl there, its daemon
    #[command(subcommand)]
    Remote(cmd::remote::RemoteCmd),
    /// Print forgectl's completion script for a shell (bash, zsh, fish,
    /// elvish, powershell)
    #[command(after_help = forge_client::shell::install_help("forgectl"))]
    Completions { shell: forge_client::shell::Shell },
    /// Print forgectl's man page, or write one per command to a directory
    #[command(
        after_help = "Examples:\n  forgectl man | man -l -\n  forgectl man --out-dir ~/.local/share/man/man1   # then: man forgectl-send"
    )]
    Man {
        /// Write forgectl.1 and a page per subcommand (forgectl-send.1, ...) here
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    cli.global.remote_flag = std::env::args().any(|a| a == "--remote" || a.starts_with("--remote="));
    if let Some(why) = local_only(&cli.command) {
        if let (Some(url), true) = (cli.global.remote(), cli.global.remote_flag) {
            eprintln!("forgectl: --remote {url} does not apply here: {why}");
            return ExitCode::from(2);
        }
        // A FORGE_REMOTE exported for every command: this one is about here.
        cli.global.remote = None;
    }
    if let Some(code) = generate(&cli.command) {
        return code;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forgectl: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let json = cli.global.json;
    output::set_raw(cli.global.raw);
    let result = runtime.block_on(async move {
        let g = cli.global;
        match cli.command {
            Command::Send(a) => cmd::send::run(&g, a).await,
            Command::Attach(a) => cmd::attach::run(&g, a).await,
            Command::Session(c) => cmd::session::run(&g, c).await,
            Command::Ps => cmd::session::run(&g, cmd::session::SessionCmd::List).await,
            Command::History { session } => cmd::session::history(&g, &session).await,
            Command::Tree(c) => c.run(&g).await,
            Command::Context(a) => cmd::context::run(&g, a).await,
            Command::Bridge => cmd::bridge::run(&g).await,
            Command::Remote(c) => cmd::remote::run(&g, c).await,
            Command::Model { session, model, provider, sampling } => {
                cmd::session::model(&g, &session, model, provider, sampling).await
            }
            Command::Cancel { session, drop_queued } => cmd::misc::cancel(&g, &session, drop_queued).await,
            Command::Steer { session, text } => cmd::misc::steer(&g, &session, text).await,
            Command::Plan { session } => cmd::misc::plan(&g, &session).await,
            Command::Commands { session } => cmd::misc::commands(&g, &session).await,
            Command::Status => cmd::misc::status(&g).await,
            Command::Acp => cmd::acp::run(&g).await,
            Command::Mcp { action, session } => cmd::mcp::run(&g, action, session).await,
            Command::Git { cmd } => cmd::git::run(&g, cmd).await,
            Command::Sandbox { action } => cmd::sandbox::run(&g, action).await,
            Command::Doctor => cmd::doctor::run(&g).await,
            Command::Trust(a) => cmd::trust::run(&g, a).await,
            Command::Web(a) => cmd::web::run(&g, a).await,
            Command::Tools { cmd } => cmd::tools::run(&g, cmd).await,
            Command::Models { provider } => cmd::misc::models(&g, provider).await,
            Command::Usage { session, since } => cmd::misc::usage(&g, session, since).await,
            Command::Summarize { session } => cmd::session::summarize(&g, &session).await,
            Command::Recall { session, query, limit } => {
                cmd::session::recall(&g, &session, &query.join(" "), limit).await
            }
            Command::Config { action } => cmd::misc::config(&g, action),
            Command::Approvals { forget } => cmd::approvals::list(&g, forget).await,
            Command::ToolResult { session, call_id, error, output } => {
                cmd::approvals::tool_result(&g, &session, call_id, error, output).await
            }
            Command::Recover { session, resume, .. } => cmd::approvals::recover(&g, &session, resume).await,
            Command::Approve { session, all, calls, always } => {
                cmd::approvals::approve(&g, &session, all, calls, always).await
            }
            Command::Deny { session } => cmd::approvals::deny(&g, &session).await,
            Command::Journal { action } => cmd::misc::journal(&g, action).await,
            Command::Store { action } => cmd::store::run(&g, action).await,
            Command::Shutdown => cmd::misc::shutdown(&g).await,
            Command::Daemon(c) => cmd::daemon::run(&g, c).await,
            Command::Export { session, format, output } => {
                cmd::export::export(&g, &session, format, output.as_deref()).await
            }
            Command::Import { file, cwd, allow_broad_root } => {
                cmd::export::import(&g, &file, cwd.as_deref(), allow_broad_root).await
            }
            Command::Completions { .. } | Command::Man { .. } => Ok(()),
        }
    });
    // A read of stdin still blocked (the bridge's, once the daemon is
    // gone) must not keep forgectl from exiting.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            f.report(json);
            ExitCode::from(f.code)
        }
    }
}
