//! `forgectl cancel`, `status`, `shutdown`.

use forge_client::ForgeClient;
use forge_proto::JournalHealth;
use forge_proto::params::{CancelParams, ModelsParams, SteerParams, UsageParams};

use crate::Global;
use crate::connect::{daemon, socket_path};
use crate::exit::{DAEMON_ERROR, Failure, UNREACHABLE};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
use crate::output::json_line;

pub async fn cancel(g: &Global, session: &str, drop_queued: bool) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn.client.session_cancel(CancelParams { session: session.to_string(), drop_queued }).await?;
    if g.json {
        json_line(&r);
    } else if r.cancelled {
        outln!("cancelled the running turn of {}", r.session_id);
    } else {
        outln!("session {} had no running turn", r.session_id);
    }
    if !g.json && r.dropped_queued > 0 {
        outln!("dropped {} queued message(s)", r.dropped_queued);
    }
    Ok(())
}

pub async fn steer(g: &Global, session: &str, text: String) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn.client.session_steer(SteerParams { session: session.to_string(), text }).await?;
    if g.json {
        json_line(&r);
    } else if r.started {
        outln!(
            "no turn was running: sent as a message ({}); `forgectl attach {}` follows it",
            r.message_id,
            r.session_id
        );
    } else {
        outln!("steer {} waits for the turn's next step (it runs next if the turn ends first)", r.message_id);
    }
    Ok(())
}

pub async fn commands(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let list = conn.client.commands_list(session.to_string()).await?;
    if g.json {
        for c in &list {
            json_line(c);
        }
        return Ok(());
    }
    if list.is_empty() {
        eprintln!(
            "forgectl: no commands of your own: add ~/.config/forge/commands/NAME.md (or .claude/commands/NAME.md in a trusted project)"
        );
    }
    for c in &list {
        let hint = c.argument_hint.as_deref().map(|h| format!(" {h}")).unwrap_or_default();
        outln!("/{}{hint}  {} ({})", c.name, crate::output::shown(&c.description), c.source);
    }
    Ok(())
}

pub async fn plan(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let p = conn.client.session_plan(forge_proto::params::SessionRef::from(session.to_string())).await?;
    if g.json {
        json_line(&p);
        return Ok(());
    }
    if p.steps.is_empty() {
        eprintln!("forgectl: session {} has no plan (the model makes one for multi-step tasks)", p.session_id);
        return Ok(());
    }
    for s in &p.steps {
        let mark = match s.status.as_str() {
            "completed" => "[x]",
            "in_progress" => "[>]",
            _ => "[ ]",
        };
        outln!("{mark} {}", crate::output::shown(&s.step));
    }
    if let Some(note) = &p.note {
        outln!("({})", crate::output::shown(note));
    }
    Ok(())
}

pub async fn models(g: &Global, provider: Option<String>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let models = conn.client.models_list(ModelsParams { provider }).await?;
    if g.json {
        for m in &models {
            json_line(m);
        }
        return Ok(());
    }
    outln!(
        "{:<28} {:<8} {:>10} {:>11} {:>10} {:>10}  SOURCE",
        "MODEL",
        "PROVIDER",
        "CONTEXT",
        "MAX OUTPUT",
        "$/M IN",
        "$/M OUT"
    );
    for m in &models {
        let (input, output) = match &m.price {
            Some(p) => (format!("{:.2}", p.input), format!("{:.2}", p.output)),
            None => ("-".to_string(), "-".to_string()),
        };
        let retired = match (&m.deprecated, &m.fallback) {
            (true, Some(f)) => format!(", deprecated: {f} answers"),
            (true, None) => ", deprecated".to_string(),
            (false, _) => String::new(),
        };
        outln!(
            "{:<28} {:<8} {:>10} {:>11} {:>10} {:>10}  {}{retired}",
            m.name,
            m.provider,
            m.context_window,
            m.max_output_tokens,
            input,
            output,
            m.source
        );
    }
    Ok(())
}

pub async fn usage(g: &Global, session: Option<String>, since: Option<String>) -> Result<(), Failure> {
    let since_ms = match since.as_deref() {
        None => None,
        Some(s) => Some(crate::output::parse_since(s, now_ms()).ok_or_else(|| {
            Failure::new(
                DAEMON_ERROR,
                "invalid_params",
                format!(
                    "--since {s:?} is not a date: use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC), or an age such as 30m, 24h, 7d, 2w"
                ),
            )
        })?),
    };
    let conn = daemon(g).await?;
    let r = conn.client.usage_report(UsageParams { session, since_ms }).await?;
    if g.json {
        json_line(&r);
        return Ok(());
    }
    let since = r.since_ms.map(|ms| format!(" since {}", crate::output::format_ms(ms))).unwrap_or_default();
    outln!("total{since}: {}, {} responses", forge_client::cost_words(&r.total), r.total.responses);
    if r.total.unpriced > 0 {
        outln!(
            "({} responses of models without a known price count as $0; add prices with [[models]])",
            r.total.unpriced
        );
    }
    if r.total.estimated > 0 {
        outln!(
            "({} responses are Forge's own estimate, marked ~: their provider sent no token counts)",
            r.total.estimated
        );
    }
    for (title, lines) in [("SESSION", &r.sessions), ("DIRECTORY", &r.cwds), ("MODEL", &r.models)] {
        if lines.is_empty() {
            continue;
        }
        outln!();
        outln!(
            "{:<40} {:>10} {:>10} {:>10} {:>10} {:>11}",
            title,
            "INPUT",
            "CACHED",
            "OUTPUT",
            "RESPONSES",
            "COST (USD)"
        );
        for l in lines {
            let t = &l.total.tokens;
            let cost = forge_client::usd(l.total.cost_usd);
            let cost = if l.total.unpriced > 0 { format!("{cost}+?") } else { cost };
            // `~`: counted by Forge's estimate, not the provider.
            let n = |v: u64| if l.total.estimated > 0 { format!("~{v}") } else { v.to_string() };
            outln!(
                "{:<40} {:>10} {:>10} {:>10} {:>10} {:>11}",
                l.key,
                n(t.input_tokens + t.cache_write_tokens),
                n(t.cache_read_tokens),
                n(t.output_tokens),
                l.total.responses,
                cost
            );
        }
    }
    Ok(())
}

#[derive(clap::Subcommand)]
pub enum ConfigAction {
    /// Validate $FORGE_HOME/config.toml and print the configuration in
    /// force (defaults filled in, API keys masked); exit 1 naming the
    /// file, line and key of an error. Restart forged (`forgectl
    /// shutdown`) for a change to take effect.
    Check,
    /// Print the path of config.toml (and whether it exists)
    Path,
}

/// `forgectl config`: the daemon binary checks the file (the same code
/// that loads it at start), so nothing needs to be running.
pub fn config(g: &Global, action: ConfigAction) -> Result<(), Failure> {
    let path = forge_proto::paths::forge_home().join("config.toml");
    match action {
        ConfigAction::Path => {
            if g.json {
                json_line(&serde_json::json!({"path": path, "exists": path.exists()}));
            } else if path.exists() {
                outln!("{}", path.display());
            } else {
                outln!("{} (does not exist: every setting is a default)", path.display());
            }
            Ok(())
        }
        ConfigAction::Check => {
            let bin = forge_client::autostart::forged_binary();
            let mut cmd = std::process::Command::new(&bin);
            cmd.arg("--check-config");
            if g.json {
                cmd.arg("--json");
            }
            let out = cmd.output().map_err(|e| {
                Failure::new(UNREACHABLE, "spawn", format!("cannot run {}: {e} (is forged installed?)", bin.display()))
            })?;
            out!("{}", String::from_utf8_lossy(&out.stdout));
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.trim().trim_start_matches("forged: ");
            if !out.status.success() {
                return Err(Failure::new(DAEMON_ERROR, "config", err.to_string()));
            }
            // Warnings (a hook that cannot run, a guard without fail_closed).
            for line in err.lines().filter(|l| !l.trim().is_empty()) {
                eprintln!("forgectl: {}", crate::output::shown(line));
            }
            Ok(())
        }
    }
}

pub async fn status(g: &Global) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let s = conn.client.daemon_status(()).await?;
    if g.json {
        json_line(&s);
        return Ok(());
    }
    let up = s.uptime_ms / 1000;
    outln!("forged {} (protocol {}), pid {}", s.version, s.protocol_version, s.pid);
    outln!("uptime:    {}h{:02}m{:02}s", up / 3600, (up % 3600) / 60, up % 60);
    outln!("socket:    {}", s.socket);
    outln!("home:      {}", s.home);
    outln!("sessions:  {} ({} active)", s.sessions, s.active_sessions);
    outln!("clients:   {}", s.clients);
    match &s.journal_reason {
        Some(r) => outln!("journal:   {} ({r})", health_word(s.journal)),
        None => outln!("journal:   {}", health_word(s.journal)),
    }
    if let Some(sandbox) = &s.sandbox {
        for line in super::sandbox::status_lines(sandbox) {
            outln!("{line}");
        }
    }
    Ok(())
}

fn health_word(h: JournalHealth) -> &'static str {
    match h {
        JournalHealth::Healthy => "healthy",
        JournalHealth::Degraded => "degraded",
        JournalHealth::Blocked => "BLOCKED",
        JournalHealth::Unknown => "unknown",
    }
}

#[derive(clap::Subcommand)]
pub enum JournalAction {
    /// Show health and statistics (the default)
    Status,
    /// After fixing a store failure: prove the store writable and resume
    Reset,
}

pub async fn journal(g: &Global, action: Option<JournalAction>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let st = match action.unwrap_or(JournalAction::Status) {
        JournalAction::Status => conn.client.journal_status(()).await?,
        JournalAction::Reset => {
            let st = conn.client.journal_reset(()).await?;
            if !g.json {
                if let Some(note) = &st.restored {
                    outln!("journal reset: {note}");
                }
                outln!("journal reset: the store is writable again");
            }
            st
        }
    };
    if g.json {
        json_line(&st);
        return Ok(());
    }
    outln!("health:        {}", health_word(st.health));
    if let Some(r) = &st.reason {
        outln!("reason:        {r}");
    }
    outln!("since:         {}", crate::output::format_ms(st.since_ms));
    outln!("durability:    {}", st.durability);
    outln!("database:      {} ({} KiB, WAL {} KiB)", st.path, st.db_bytes / 1024, st.wal_bytes / 1024);
    outln!("transactions:  {}", st.transactions);
    outln!("batches:       {} (largest group commit: {} batches)", st.batches, st.largest_group);
    outln!("rows written:  {}", st.rows);
    outln!("events stored: {}", st.events);
    outln!("open streams:  {}", st.open_streams);
    outln!("failed commits:{:>4}", st.failed_commits);
    outln!("last commit:   {} us", st.last_commit_us);
    Ok(())
}

pub async fn shutdown(g: &Global) -> Result<(), Failure> {
    let socket = socket_path(g);
    // Never start a daemon just to stop it.
    let g2 = crate::Global { no_autostart: true, ..g.clone() };
    let conn = match daemon(&g2).await {
        Ok(c) => c,
        Err(f) if f.kind == "daemon_not_running" => {
            if !g.json {
                outln!("no forged is running on {}", socket.display());
            }
            return Ok(());
        }
        Err(f) => return Err(f),
    };
    let pid = conn.hello.server.pid;
    conn.client.daemon_shutdown(()).await?;
    if let Some(url) = g.remote() {
        if g.json {
            json_line(&serde_json::json!({"type": "shutdown", "pid": pid}));
        } else {
            outln!("forged (pid {pid}) on {url} is stopping");
        }
        return Ok(());
    }
    // Wait until the daemon released its lock, which it does last, after
    // everything is on disk: then a new daemon can start at once.
    let lock_path = socket.with_extension("lock");
    for _ in 0..1500 {
        let released = match std::fs::File::open(&lock_path) {
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => true,
        };
        if released {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if g.json {
        json_line(&serde_json::json!({"type": "shutdown", "pid": pid}));
    } else {
        outln!("forged (pid {pid}) stopped");
    }
    Ok(())
}
