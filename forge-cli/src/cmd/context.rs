//! `forgectl context`: how much of the model's window a session uses, its
//! system prompt, a summary's originals, the repository map; and its
//! active files (`context add|remove`).

use clap::{Args, Subcommand};
use forge_client::ForgeClient;
use forge_proto::params::{ContextFilesParams, ContextParams};

use crate::Global;
use crate::connect::daemon;
use crate::exit::{DAEMON_ERROR, Failure};
use crate::output::json_line;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ContextArgs {
    #[command(subcommand)]
    action: Option<ContextAction>,
    /// Session id, id prefix or name
    #[arg(required = true)]
    session: Option<String>,
    /// Print the system prompt instead (as sent, byte for byte)
    #[arg(long)]
    system: bool,
    /// Print the original messages the N-th summary stands for (they
    /// stay in history; requests send the summary instead)
    #[arg(long, value_name = "N", conflicts_with = "system")]
    span: Option<u32>,
    /// Print the repository map the model gets instead: each file with
    /// a one-line summary ([context] repo_summaries = true), and how far
    /// its summaries are
    #[arg(long, conflicts_with_all = ["system", "span"])]
    repo: bool,
}

#[derive(Subcommand)]
enum ContextAction {
    /// Make files active: their whole current text goes with every
    /// request of the session (as the model's update_context tool does)
    Add {
        /// Session id, id prefix or name
        session: String,
        /// Paths relative to the session's directory (a git session's
        /// worktree), or absolute inside its roots
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Take files out of the session's active files
    #[command(visible_alias = "rm")]
    Remove {
        session: String,
        #[arg(required = true)]
        paths: Vec<String>,
    },
}

pub async fn run(g: &Global, a: ContextArgs) -> Result<(), Failure> {
    match (a.action, a.session) {
        (Some(ContextAction::Add { session, paths }), _) => files(g, session, paths, Vec::new()).await,
        (Some(ContextAction::Remove { session, paths }), _) => files(g, session, Vec::new(), paths).await,
        (None, Some(session)) => report(g, &session, a.system, a.span, a.repo).await,
        (None, None) => Err(Failure::new(DAEMON_ERROR, "invalid_params", "name a session: forgectl context SESSION")),
    }
}

async fn files(g: &Global, session: String, add: Vec<String>, remove: Vec<String>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let asked_out = remove.clone();
    let r = conn.client.session_context_files(ContextFilesParams { session, add, remove }).await?;
    for p in asked_out.iter().filter(|p| !r.removed.iter().any(|r| p.trim_start_matches("./") == r)) {
        eprintln!("forgectl: {p} was not an active file");
    }
    if g.json {
        json_line(&r);
    } else {
        for p in &r.added {
            outln!("added {p}");
        }
        for p in &r.removed {
            outln!("removed {p}");
        }
        for f in &r.files {
            outln!("  active: {} ({} bytes)", f.path, f.bytes);
        }
    }
    for f in &r.refused {
        eprintln!("forgectl: not added: {}: {}", f.path, f.reason);
    }
    match r.refused.is_empty() {
        true => Ok(()),
        false => Err(Failure::silent(DAEMON_ERROR)),
    }
}

async fn report(g: &Global, session: &str, system: bool, span: Option<u32>, repo: bool) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let c = conn.client.session_context(ContextParams { session: session.to_string(), system, span, repo }).await?;
    if g.json {
        json_line(&c);
        return Ok(());
    }
    if let Some(m) = c.repo_map.as_ref().filter(|_| repo) {
        print_repo_map(m);
        return Ok(());
    }
    if let Some(messages) = &c.span_messages {
        outln!("the {} original messages summary {} stands for:", messages.len(), span.unwrap_or(0));
        super::session::print_messages(messages);
        return Ok(());
    }
    if system {
        out!("{}", c.system_prompt.unwrap_or_default());
        return Ok(());
    }
    outln!("session {}: {}", c.session_id, forge_client::context_line(&c));
    if let Some(n) = c.last_input_tokens {
        outln!("the last request: {n} input tokens, as the provider counted them");
    }
    for (i, s) in c.summaries.iter().enumerate() {
        outln!(
            "summary {} ({}): the first {} messages, about {} tokens down to {} (`--span {}` shows them)",
            i + 1,
            s.summary_id,
            s.span.messages,
            s.span.tokens_before,
            s.span.tokens_after,
            i + 1
        );
    }
    if !c.tools_withheld.is_empty() {
        outln!(
            "tools: {} offered ({}); {} left out, their definitions would take too much of this window ({})",
            c.tools_offered.len(),
            c.tools_offered.join(", "),
            c.tools_withheld.len(),
            c.tools_withheld.join(", ")
        );
    }
    if !c.active_files.is_empty() {
        outln!("active files (their whole text in every request; `forgectl context remove` takes them out):");
        for f in &c.active_files {
            outln!("  {} ({} bytes)", f.path, f.bytes);
        }
    }
    if c.instruction_files.is_empty() {
        outln!("project instructions: none (AGENTS.md or CLAUDE.md in the directory or up to the repository root)");
    } else {
        outln!("project instructions (in the system prompt, nearest last):");
        for f in &c.instruction_files {
            outln!("  {f}");
        }
    }
    Ok(())
}

/// `context --repo`: the map as the model gets it, its state on stderr.
fn print_repo_map(m: &forge_proto::RepoMapInfo) {
    if !m.enabled {
        eprintln!(
            "forgectl: repository maps are off: set `repo_summaries = true` under [context] in config.toml (and restart forged)"
        );
        return;
    }
    let model = m.model.as_deref().map(|m| format!(", summaries by {m}")).unwrap_or_default();
    let state = match m.state.as_str() {
        "building" => {
            format!("being built: {} of {} shown files summarized, {} waiting", m.summarized, m.shown, m.waiting)
        }
        "ready" => format!("ready: {} of {} shown files summarized", m.summarized, m.shown),
        "failed" => format!("incomplete ({} waiting): {}", m.waiting, m.error.as_deref().unwrap_or("a request failed")),
        _ => "not built yet: it is built in the background; ask again in a moment".into(),
    };
    eprintln!(
        "forgectl: map of {}: {state}; {} files, {} shown, about {} of {} tokens{model}",
        m.root, m.files, m.shown, m.tokens, m.budget_tokens
    );
    if let Some(text) = &m.text {
        out!("{}", text.trim_start());
    }
}
