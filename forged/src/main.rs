//! `forged`: the Forge daemon. One per user; hosts every session and serves
//! the JSON-RPC protocol on a Unix socket.

mod conn;
mod follow;
mod guard;
mod home_lock;
mod listener;
mod logging;
mod ndjson;
mod rpc;
mod scope;
mod served;
mod socket;
mod startup;
mod tcp;
mod web;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use forge_core::config::ForgeConfig;
use forge_core::tools::{confine, supervisor};
use forge_core::{Engine, EngineOptions};

#[derive(Parser, Debug)]
#[command(
    name = "forged",
    version,
    about = "The Forge daemon: hosts coding-agent sessions and serves clients on a Unix socket",
    long_about = "forged hosts Forge sessions: it streams from LLM providers, journals every event in SQLite \
(persisted before any client sees it), and serves the JSON-RPC 2.0 protocol on a Unix socket \
(newline-delimited JSON or WebSocket for calls and subscriptions, HTTP POST for calls; see docs/protocol.md). \
Clients: forgectl, forge, editor plugins.\n\n\
forgectl starts forged on demand, so running it by hand is rarely needed. It does not fork: run it \
under systemd (systemd/forged.service) or in the background.\n\n\
Files: $FORGE_HOME (default ~/.forge) holds config.toml, forge.db and logs/.\n\
Exit status: 0 after a clean shutdown, 1 on a start-up error (the message says why).",
    after_help = "Environment: FORGE_HOME, FORGE_SOCKET, XDG_RUNTIME_DIR, ANTHROPIC_API_KEY, OPENAI_API_KEY, \
GEMINI_API_KEY, ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GEMINI_BASE_URL, FORGE_LOG (log filter, default info)"
)]
struct Args {
    /// Socket to listen on [default: $XDG_RUNTIME_DIR/forge/forged.sock, else $FORGE_HOME/forged.sock]
    #[arg(long, env = "FORGE_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Data directory [default: ~/.forge]
    #[arg(long, env = "FORGE_HOME", value_name = "DIR")]
    home: Option<PathBuf>,
    /// Also log to stderr (logs always go to $FORGE_HOME/logs/)
    #[arg(long)]
    foreground: bool,
    /// Check $FORGE_HOME/config.toml and print the configuration in force
    /// (defaults filled in, API keys masked), then exit: 0 if it is valid,
    /// 1 with the file, line and key of the first error if not
    #[arg(long)]
    check_config: bool,
    /// With --check-config: print JSON instead of TOML
    #[arg(long, requires = "check_config")]
    json: bool,
}

fn main() -> ExitCode {
    // A command's supervisor (see forge_core::tools::supervisor), not the daemon.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == supervisor::SUPERVISE_ARG) {
        supervisor::run(&argv[2..]);
    }
    if argv.get(1).is_some_and(|a| a == confine::PROBE_ARG) {
        confine::probe_main(&argv[2..]);
    }
    let args = Args::parse();
    if args.check_config {
        return check_config(&args);
    }
    // Before anything is created or any thread started (see `startup`).
    socket::take_activation();
    forge_core::tools::set_user_umask(startup::private_umask());
    startup::no_dumps();
    startup::raise_fd_limit();
    startup::tune_allocator();
    let prepared = match prepare(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("forged: {e:#}");
            tracing::error!("exiting: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forged: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(prepared));
    drop(runtime);
    if let Some(tree) = confine::host().and_then(|h| h.totals.tree.as_ref()) {
        confine::cgroup::release(tree);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forged: {e:#}");
            tracing::error!("exiting: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--check-config`: nothing is started or created.
fn check_config(args: &Args) -> ExitCode {
    let home = args.home.clone().unwrap_or_else(forge_proto::paths::forge_home);
    let path = home.join("config.toml");
    let mut config = match ForgeConfig::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("forged: {e}");
            return ExitCode::FAILURE;
        }
    };
    config.capture_keys();
    let effective = forge_core::effective_config::effective(&config);
    let text = if args.json {
        serde_json::to_string(&effective).map_err(|e| e.to_string())
    } else {
        toml::to_string(&effective).map_err(|e| e.to_string())
    };
    match text {
        Ok(t) => {
            if !args.json {
                let state = if path.exists() { "valid" } else { "absent: every setting is a default" };
                println!("# {} ({state})", path.display());
            }
            // A base URL may carry a password (`https://user:pass@host`).
            println!("{}", forge_core::redact::scrub(t.trim_end()));
            for w in forge_core::hooks::config_warnings(&config.hooks, startup::home_dir().as_deref()) {
                eprintln!("warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("forged: cannot print the configuration: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What start-up settles while the process still has one thread.
struct Prepared {
    home: PathBuf,
    config: ForgeConfig,
    socket: PathBuf,
    /// Held for the daemon's life: one daemon per home.
    _lock: home_lock::HomeLock,
}

fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    let home = args.home.clone().unwrap_or_else(forge_proto::paths::forge_home);
    startup::create_home(&home).with_context(|| format!("cannot create {}", home.display()))?;
    let socket = args.socket.clone().unwrap_or_else(forge_proto::paths::default_socket);
    // Before anything in the home is touched: a second daemon on it exits.
    let lock = home_lock::HomeLock::take(&home, &socket)?;
    logging::init(&home, args.foreground)?;
    for path in startup::tighten_home(&home) {
        tracing::warn!(path = %path.display(), "made private to its owner (it was readable by other users)");
    }
    let mut config = ForgeConfig::load(&home.join("config.toml"))?;
    // Every secret the daemon can know of is taken out of what it shows,
    // stores and logs (read before the key variables are wiped).
    forge_core::redact::remember(forge_core::redact::secret_env_values());
    // Keys live in the configuration from here on, not in the environment
    // that same-user processes can read.
    startup::forget_key_variables(&config.capture_keys());
    forge_core::redact::remember(config.secrets());
    // Commands the model runs are supervised by this executable (whatever
    // its path is now: the file may have been replaced by a rebuild).
    supervisor::enable(PathBuf::from("/proc/self/exe"));
    let support = confine::Support::probe(std::path::Path::new("/proc/self/exe"));
    let totals = startup::command_totals();
    confine::init(confine::Host {
        home: startup::home_dir(),
        forge_home: Some(home.clone()),
        private: Vec::new(),
        masked: startup::sockets_to_mask(&socket),
        exe: std::env::current_exe().ok(),
        support,
        totals: totals.clone(),
    });
    let mode = config.tools.sandbox.as_ref().and_then(|s| s.mode).unwrap_or_default();
    match support.missing() {
        Some(why) if mode == confine::SandboxMode::Kernel => {
            tracing::warn!("commands are not confined by the kernel: {why}; every command asks for approval");
            if args.foreground {
                eprintln!("forged: commands are not confined by the kernel: {why}; every command asks for approval");
            }
        }
        _ => tracing::info!(
            landlock_abi = support.landlock_abi,
            user_namespaces = support.user_namespaces,
            fresh_proc = support.fresh_proc,
            pids_total = totals.pids,
            memory_total = totals.memory,
            totals = %totals.how,
            ?mode,
            "command sandbox"
        ),
    }
    Ok(Prepared { home, config, socket, _lock: lock })
}

async fn run(prepared: Prepared) -> anyhow::Result<()> {
    let Prepared { home, config, socket: socket_path, mut _lock } = prepared;

    // Handle SIGTERM/SIGINT from the start: a stop during start-up must
    // still leave the store consistent.
    let signals = listener::Signals::install()?;
    // Bound before anything else (the home lock is held already): a
    // listener that cannot start stops the daemon with the reason, and
    // a client that finds the socket finds the token file written.
    let tcp = tcp::Listeners::bind(&config.daemon, &home).await?;
    // Claim the socket before touching the store: a second daemon must not
    // open the database at all.
    let mut socket = socket::SocketClaim::claim(&socket_path)?;
    if socket.path != socket_path {
        _lock.name_socket(&socket.path)?;
    }
    let daemon_config = config.daemon.clone();
    let engine = Engine::open(EngineOptions { home: home.clone(), config }).await.context("cannot open the store")?;
    tracing::info!(
        pid = std::process::id(),
        socket = %socket_path.display(),
        home = %home.display(),
        version = env!("CARGO_PKG_VERSION"),
        "forged started"
    );
    let released = startup::release_code_pages();
    tracing::debug!(kib = released, "start-up code pages released");
    // Under socket activation, the socket systemd passed.
    let daemon = Arc::new(rpc::Daemon::new(engine.clone(), socket.path.clone(), home, daemon_config));
    tokio::spawn(trim_after_work(engine.clone()));
    tokio::spawn(watch_store(engine.clone()));
    socket::notify("READY=1");
    let result = listener::serve(&mut socket, daemon.clone(), signals, tcp).await;
    socket::notify("STOPPING=1");
    tracing::info!("shutting down: cancelling running turns and flushing the store");
    engine.shutdown().await;
    tracing::info!("forged stopped");
    drop(socket);
    result
}

/// Every second, the store on disk is checked to still be the one the
/// journal writes (two `stat`s): one deleted or replaced is written back
/// at once, not at the next write or `journal reset`. Every minute, the
/// blobs are kept under `[store] max_blob_mb`.
async fn watch_store(engine: Engine) {
    for tick in 1u64.. {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        engine.check_store().await;
        if tick % 60 == 0
            && let Err(e) = engine.keep_store_bound().await
        {
            tracing::warn!(error = %e, "cannot keep the store under [store] max_blob_mb");
        }
    }
}

/// Every few seconds after the journal wrote something, freed memory goes
/// back to the system and code pages the work mapped are let go: a daemon
/// that streamed for hours stays near its idle size.
async fn trim_after_work(engine: Engine) {
    let mut written = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        let now = engine.journal_rows_written();
        if now != written {
            written = now;
            tokio::task::spawn_blocking(|| {
                startup::trim_memory();
                startup::release_code_pages();
            });
        }
    }
}
