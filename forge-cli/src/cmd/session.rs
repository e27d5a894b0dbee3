//! `forgectl session ...` and `forgectl history`.

use clap::{Args, Subcommand};
use forge_client::ForgeClient;
use forge_proto::SessionInfo;
use forge_proto::params::{ConfigureParams, CreateParams, ModelsParams, RecallParams, RenameParams};
use forge_proto::{MessageStatus, RecoveryBadge, Role};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::{client_label, json_line, session_details, session_table};

#[derive(Subcommand)]
pub enum SessionCmd {
    /// Create a session and print it
    New {
        #[command(flatten)]
        new: NewSession,
        #[command(flatten)]
        sampling: SamplingArgs,
    },
    /// List sessions: state, what each waits on, attached clients
    #[command(visible_alias = "ls")]
    List,
    /// Show one session
    Show { session: String },
    /// Name a session (or clear its name with --clear)
    Rename {
        session: String,
        #[arg(required_unless_present = "clear")]
        name: Option<String>,
        #[arg(long, conflicts_with = "name")]
        clear: bool,
    },
    /// Remove sessions and their history
    #[command(visible_alias = "remove")]
    Rm {
        #[arg(required = true)]
        sessions: Vec<String>,
    },
}

/// Sampling parameters on the command line (a session's, or a turn's).
#[derive(Args, Default, Clone, Copy)]
pub struct SamplingArgs {
    /// Sampling temperature, 0 to 2: lower is more predictable (clamped to
    /// what the provider takes: Anthropic 0 to 1; OpenAI's reasoning models
    /// take none) [default: the model's `[[models]]` entry, else `[app]`]
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1 (Anthropic's current models take it only
    /// without a temperature)
    #[arg(long, value_name = "P")]
    pub top_p: Option<f64>,
}

impl From<SamplingArgs> for forge_proto::Sampling {
    fn from(a: SamplingArgs) -> Self {
        forge_proto::Sampling { temperature: a.temperature, top_p: a.top_p }
    }
}

/// `forgectl model`'s sampling: the session's own from now on.
#[derive(Args, Default, Clone, Copy)]
pub struct ConfigureSampling {
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Drop the session's own temperature and top_p first (the
    /// configuration's apply again)
    #[arg(long)]
    pub reset_sampling: bool,
}

/// How a new session is set up (`session new`, and `send` without `-s`).
#[derive(Args, Default)]
pub struct NewSession {
    /// The session's own sampling (`session new --temperature`).
    #[arg(skip)]
    pub sampling: forge_proto::Sampling,
    /// A name to refer to the session by
    #[arg(long)]
    pub name: Option<String>,
    /// claude (alias anthropic), openai or gemini [default: from config, else claude]
    #[arg(long)]
    pub provider: Option<String>,
    /// Model [default: from config, else the provider's default]
    #[arg(long)]
    pub model: Option<String>,
    /// Working directory [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,
    /// Work in `/`, the home directory itself or a system directory
    /// (refused otherwise: commands change anything under the directory
    /// without asking)
    #[arg(long)]
    pub allow_broad_root: bool,
    /// Git mode (in a git repository): the session works on its own
    /// branch forge/session/<id>, in a private worktree, and each turn
    /// becomes one commit there; your working tree, index and branch are
    /// never touched [default: `[git] mode` in config.toml]
    #[arg(long, conflicts_with = "no_git")]
    pub git: bool,
    /// Not in git mode, whatever `[git] mode` says
    #[arg(long)]
    pub no_git: bool,
    /// With --git: start the branch at REF (a commit, branch or tag)
    /// [default: HEAD]
    #[arg(long, value_name = "REF", conflicts_with = "from")]
    pub base: Option<String>,
    /// Resume from COMMIT, a turn of a git session (`forgectl git log`
    /// lists them): the conversation as it was then, on a branch of its
    /// own (implies --git)
    #[arg(long, value_name = "COMMIT")]
    pub from: Option<String>,
}

impl NewSession {
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.provider.is_none()
            && self.model.is_none()
            && self.cwd.is_none()
            && !self.allow_broad_root
            && !self.git
            && !self.no_git
            && self.base.is_none()
            && self.from.is_none()
            && self.sampling.is_empty()
    }

    /// Creates the session; its directory is this one unless `--cwd`
    /// (through `--remote`: `--cwd` on the far machine, or its user's home).
    pub async fn create(self, g: &Global, client: &impl ForgeClient) -> Result<SessionInfo, Failure> {
        let cwd = crate::connect::daemon_dir(g, self.cwd, "--cwd", false)?;
        let create = client.session_create(CreateParams {
            name: self.name,
            cwd,
            provider: self.provider,
            model: self.model,
            allow_broad_root: self.allow_broad_root,
            git: match (self.git || self.from.is_some() || self.base.is_some(), self.no_git) {
                (true, _) => Some(true),
                (false, true) => Some(false),
                _ => None,
            },
            base: self.base,
            from_commit: self.from,
            sampling: self.sampling,
        });
        let info = with_progress(create).await?;
        if let Some(u) = &info.untrusted {
            super::trust::notice(u);
        }
        if !info.tools_waiting.is_empty() {
            super::tools::notice(&info.tools_waiting);
        }
        for n in &info.notices {
            eprintln!("forgectl: note: {}", crate::output::shown(n));
        }
        Ok(info)
    }
}

/// Waits for `work`; past a second, says on a terminal's stderr how long
/// it has taken (a git session's worktree of a big repository is checked
/// out before the session exists).
async fn with_progress<T>(work: impl std::future::Future<Output = T>) -> T {
    use std::io::IsTerminal;
    let mut work = std::pin::pin!(work);
    let started = std::time::Instant::now();
    let show = std::io::stderr().is_terminal();
    let mut shown = false;
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
    );
    loop {
        tokio::select! {
            out = &mut work => {
                if shown {
                    eprint!("\r\x1b[K");
                }
                return out;
            }
            _ = tick.tick(), if show => {
                shown = true;
                eprint!(
                    "\rforgectl: creating the session (a git session checks out its worktree first)… {} s",
                    started.elapsed().as_secs()
                );
            }
        }
    }
}

pub async fn run(g: &Global, c: SessionCmd) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let client = &conn.client;
    match c {
        SessionCmd::New { mut new, sampling } => {
            new.sampling = sampling.into();
            let info = new.create(g, client).await?;
            if g.json {
                json_line(&info);
            } else {
                outln!("{}", info.id);
            }
        }
        SessionCmd::List => {
            let list = client.session_list(()).await?;
            if g.json {
                for s in &list {
                    json_line(s);
                }
            } else {
                session_table(&list);
            }
        }
        SessionCmd::Show { session } => {
            let info = client.session_show(session).await?;
            if g.json {
                json_line(&info);
            } else {
                session_details(&info);
            }
        }
        SessionCmd::Rename { session, name, clear } => {
            let info = client.session_rename(RenameParams { session, name: if clear { None } else { name } }).await?;
            if g.json {
                json_line(&info);
            } else {
                outln!("{} {}", info.id, info.name.as_deref().unwrap_or("(no name)"));
            }
        }
        SessionCmd::Rm { sessions } => {
            for s in sessions {
                let r = client.session_remove(s).await?;
                if g.json {
                    json_line(&r);
                } else {
                    outln!("removed {}", r.session_id);
                }
            }
        }
    }
    Ok(())
}

pub async fn model(
    g: &Global,
    session: &str,
    model: Option<String>,
    provider: Option<String>,
    set: ConfigureSampling,
) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let sampling: forge_proto::Sampling = set.sampling.into();
    let info = if model.is_none() && provider.is_none() && sampling.is_empty() && !set.reset_sampling {
        conn.client.session_show(session.to_string()).await?
    } else {
        let params = ConfigureParams {
            session: session.to_string(),
            provider,
            model,
            sampling,
            reset_sampling: set.reset_sampling,
        };
        conn.client.session_configure(params).await?
    };
    if g.json {
        json_line(&info);
        return Ok(());
    }
    let own = forge_client::sampling_words(&info.sampling).map(|s| format!(" ({s})")).unwrap_or_default();
    outln!("{} uses {}/{}{own}", info.id, info.provider, info.model);
    // A model the catalog does not know gets conservative limits: say so.
    let known = conn.client.models_list(ModelsParams { provider: Some(info.provider.clone()) }).await?;
    if !known.iter().any(|m| m.name == info.model) {
        eprintln!(
            "forgectl: note: {} is not in the catalog (`forgectl models`); Forge assumes a small window until a [[models]] entry in config.toml gives its figures",
            info.model
        );
    }
    Ok(())
}

pub async fn summarize(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn.client.session_summarize(session.to_string()).await?;
    if g.json {
        json_line(&r);
    } else {
        outln!(
            "summarizing the first {} messages of {} (about {} tokens); `forgectl attach {} --from live` shows when it is done",
            r.messages,
            r.session_id,
            r.tokens_before,
            r.session_id
        );
    }
    Ok(())
}

pub async fn recall(g: &Global, session: &str, query: &str, limit: u32) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn
        .client
        .session_recall(RecallParams { session: session.to_string(), query: query.to_string(), limit: Some(limit) })
        .await?;
    if g.json {
        json_line(&r);
        return Ok(());
    }
    if r.hits.is_empty() {
        outln!(
            "nothing recalled for \"{}\" in {} (only summarized messages are indexed; `forgectl context {}` lists the summaries)",
            r.query,
            r.session_id,
            r.session_id
        );
        return Ok(());
    }
    for (i, h) in r.hits.iter().enumerate() {
        outln!("{}. [{}] {}", i + 1, h.kind, h.fact);
        outln!(
            "   {} message {} ({}): {}",
            h.role.as_str(),
            h.node_id,
            crate::output::format_ms(h.created_ms),
            h.excerpt
        );
    }
    Ok(())
}

pub async fn history(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let h = conn.client.session_history(session.to_string()).await?;
    if g.json {
        for m in &h.messages {
            json_line(m);
        }
        return Ok(());
    }
    if h.messages.is_empty() {
        outln!("session {} has no messages yet", h.session_id);
    }
    print_messages(&h.messages);
    Ok(())
}

/// Messages as `forgectl history` prints them.
pub(super) fn print_messages(messages: &[forge_proto::HistoryMessage]) {
    for m in messages {
        let who = match m.role {
            Role::User => format!("user ({})", client_label(&m.meta.client)),
            Role::Assistant => format!("assistant ({})", m.meta.model.as_deref().unwrap_or("?")),
            Role::Tool => match &m.meta.tool_result {
                Some(t) if t.is_error => format!("tool {} (error)", t.name),
                Some(t) => format!("tool {}", t.name),
                None => "tool".into(),
            },
            Role::Summary => "summary".into(),
            Role::Other => "other".into(),
        };
        let mut badge = match m.status {
            MessageStatus::Complete => String::new(),
            other => format!(" [{}]", other.as_str()),
        };
        if let Some(r) = m.meta.recovered {
            let word = match r {
                RecoveryBadge::Complete => "complete",
                RecoveryBadge::Incomplete => "incomplete",
                RecoveryBadge::Errored => "errored",
                RecoveryBadge::Unknown => "unknown",
            };
            badge.push_str(&format!(" [recovered: {word}]"));
        }
        outln!("--- {who}{badge} {}", crate::output::format_ms(m.created_ms));
        for image in &m.meta.images {
            outln!("{}", image.placeholder());
        }
        outln!("{}", m.text);
        // Sent with the message, never typed by the user.
        let (hooks, schema) = m.meta.context_parts();
        for line in hooks.into_iter().flat_map(str::lines) {
            outln!("  + hooks added: {line}");
        }
        for line in schema.into_iter().flat_map(str::lines) {
            outln!("  + output schema: {line}");
        }
        for c in &m.meta.tool_calls {
            outln!("  -> tool call {}({}) [{}]", c.name, c.arguments, c.id);
        }
        for (i, c) in m.meta.citations.iter().enumerate() {
            let title = if c.title.is_empty() { String::new() } else { format!("{} ", c.title) };
            outln!("  [{}] {title}{}", i + 1, c.url);
        }
        if let Some(e) = &m.meta.error
            && m.status != MessageStatus::Complete
        {
            outln!("    ({e})");
        }
    }
}
