//! `forgectl git`: a git session's turns as commits (`log`), one turn's
//! conversation and diff (`show`), what its branch would bring (`diff`),
//! and bringing it over (`merge`, `rebase`).

use forge_client::ForgeClient;
use forge_proto::GitCommit;
use forge_proto::params::{GitDiffParams, GitLogParams, GitMergeParams, GitRewordParams, GitShowParams, SessionRef};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

#[derive(Debug, clap::Subcommand)]
pub enum GitCmd {
    /// A git session's turns, newest first: commit, time, subject and the
    /// files each changed
    Log {
        /// Session id, id prefix or name
        session: String,
        /// At most this many
        #[arg(long, short = 'n', default_value_t = 100)]
        limit: u32,
    },
    /// One turn's commit: the conversation it holds, then its diff
    Show {
        /// A commit id or prefix (or a branch, a tag)
        commit: String,
        /// A directory in the repository [default: the current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<std::path::PathBuf>,
    },
    /// What merging the session's branch into your HEAD would bring
    /// (`forgectl git merge` does it); --turn: what the running turn has
    /// changed so far, before its commit is final
    Diff {
        /// Session id, id prefix or name
        session: String,
        /// The worktree's changes not committed yet
        #[arg(long)]
        turn: bool,
    },
    /// Edit the message of the session branch's last commit (its Forge
    /// trailers kept; the old commit kept as refs/forge/session/<id>/prev-N)
    Reword {
        /// Session id, id prefix or name
        session: String,
        /// The new message (first line: the subject)
        message: String,
    },
    /// Merge the session's branch into your current branch: a fast-forward
    /// when it can be, else a merge commit. Only when your tracked files
    /// hold no uncommitted change and the session runs no turn; a conflict
    /// stops it with the files named and nothing changed. Files that run
    /// code later (git hooks, .gitattributes, agent settings, ...), links
    /// out of the repository and binaries over 1 MiB are named first and
    /// taken only on your word: asked on a terminal, refused without one
    /// unless --yes
    Merge {
        /// Session id, id prefix or name
        session: String,
        /// One commit holding all the session's work
        #[arg(long)]
        squash: bool,
        /// Leave the session state files (.forge/sessions/*.json) out
        #[arg(long)]
        without_state: bool,
        /// Take files that need your word without asking
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Rebase the session's branch and worktree onto your current branch
    /// (the old tip kept as refs/forge/session/<id>/prev-N); a conflict
    /// stops it with the files named and nothing changed
    Rebase {
        /// Session id, id prefix or name
        session: String,
    },
}

pub async fn run(g: &Global, cmd: GitCmd) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    match cmd {
        GitCmd::Log { session, limit } => {
            let log = conn.client.git_log(GitLogParams { session, limit: Some(limit) }).await?;
            if g.json {
                for c in &log.commits {
                    json_line(c);
                }
                return Ok(());
            }
            if log.commits.is_empty() {
                outln!("{}: no turn committed yet", log.branch);
            }
            for c in &log.commits {
                line(c);
            }
            // The tips an undo, a checkout, a reword or a rebase left.
            if !log.kept.is_empty() {
                outln!("kept tips (refs/forge/session/<id>/prev-N):");
                for k in &log.kept {
                    out!("{:>8} ", k.name);
                    line(&k.commit);
                }
            }
        }
        GitCmd::Show { commit, cwd } => {
            let cwd = crate::connect::daemon_dir(g, cwd, "--cwd", false)?;
            let params = GitShowParams { commit, cwd };
            let shown = conn.client.git_show(params).await?;
            if g.json {
                json_line(&shown);
                return Ok(());
            }
            outln!("commit {}", shown.commit.id);
            if let Some(s) = &shown.commit.session {
                outln!("session {s}");
            }
            outln!("{}", time(shown.commit.time));
            outln!();
            let message: Vec<&str> = shown.commit.message.lines().filter(|l| !l.starts_with("Forge-")).collect();
            for l in message.join("\n").trim_end().lines() {
                outln!("    {l}");
            }
            if let Some(messages) = shown.state.as_ref().and_then(|s| s.get("messages")).and_then(|m| m.as_array()) {
                outln!();
                for m in messages {
                    conversation(m);
                }
            }
            if !shown.diff.is_empty() {
                outln!();
                outln!("{}", shown.diff.trim_end());
            }
        }
        GitCmd::Merge { session, squash, without_state, yes } => {
            let params = |dry_run, accept_marked| GitMergeParams {
                session: session.clone(),
                squash,
                without_state,
                dry_run,
                accept_marked,
            };
            // What it would bring first: files that need the user's word
            // are named, and taken only on it.
            let planned = conn.client.git_merge(params(true, false)).await?;
            if !planned.marked.is_empty() && !yes {
                eprintln!("forgectl: merging {} would bring files that need your word:", planned.session_id);
                mark_lines(&planned.marked);
                if g.json || !crate::output::interactive() {
                    return Err(Failure::new(
                        crate::exit::DAEMON_ERROR,
                        "git_marked",
                        "nothing was changed; look with `forgectl git diff`, then merge with --yes to take them",
                    ));
                }
                if !crate::output::ask("Take them? [y/N] ") {
                    return Err(Failure::new(crate::exit::DAEMON_ERROR, "git_marked", "nothing was changed"));
                }
            }
            let m = conn.client.git_merge(params(false, true)).await?;
            if g.json {
                json_line(&m);
            } else if m.how == "up_to_date" {
                outln!("{} has nothing {} does not have", m.session_id, m.into);
            } else {
                let how = m.how.replace('_', "-");
                let short: String = m.commit.chars().take(10).collect();
                outln!(
                    "{how} of session {} into {}: now at {short}, {} file(s) changed",
                    m.session_id,
                    m.into,
                    m.files.len()
                );
                for f in &m.files {
                    outln!("  {f}");
                }
            }
        }
        GitCmd::Rebase { session } => {
            let r = conn.client.git_rebase(SessionRef { session }).await?;
            if g.json {
                json_line(&r);
            } else if let (Some(commit), Some(kept)) = (&r.commit, &r.kept) {
                let short: String = commit.chars().take(10).collect();
                outln!("{} rebased onto your current branch: now at {short}; the old tip is kept as {kept}", r.branch);
            } else {
                outln!("{} is on top of your current branch already", r.branch);
            }
        }
        GitCmd::Reword { session, message } => {
            let r = conn.client.git_reword(GitRewordParams { session, message }).await?;
            if g.json {
                json_line(&r);
            } else if let (Some(commit), Some(kept)) = (&r.commit, &r.kept) {
                let short: String = commit.chars().take(10).collect();
                outln!("{}: its last commit is now {short}; the old one is kept as {kept}", r.branch);
            }
        }
        GitCmd::Diff { session, turn } => {
            let d = conn.client.git_diff(GitDiffParams { session, turn }).await?;
            if g.json {
                json_line(&d);
            } else if d.diff.is_empty() && turn {
                outln!("the running turn has changed nothing on {} yet", d.branch);
            } else if d.diff.is_empty() {
                outln!("{} brings no change to your HEAD", d.branch);
            } else {
                outln!("{}", d.diff.trim_end());
            }
            if !g.json && !d.marked.is_empty() {
                eprintln!("forgectl: files in it that need your word before a merge takes them:");
                mark_lines(&d.marked);
            }
        }
    }
    Ok(())
}

fn time(secs: i64) -> String {
    crate::output::format_ms(secs.saturating_mul(1000))
}

fn line(c: &GitCommit) {
    let short: String = c.id.chars().take(10).collect();
    let files = match c.files.len() {
        0 => "no file changed".to_string(),
        1 => c.files[0].clone(),
        n => format!("{} and {} more", c.files[0], n - 1),
    };
    outln!("{short}  {}  {}  ({files})", time(c.time), c.summary);
}

fn conversation(m: &serde_json::Value) {
    let role = m.get("role").and_then(|r| r.as_str()).unwrap_or("?");
    let text = m.get("text").and_then(|t| t.as_str()).unwrap_or_default();
    outln!("--- {role}");
    if !text.is_empty() {
        outln!("{text}");
    }
    for call in m.get("tool_calls").and_then(|c| c.as_array()).into_iter().flatten() {
        let name = call.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        let args = call.get("arguments").and_then(|a| a.as_str()).unwrap_or_default();
        outln!("  -> tool call {name}({args})");
    }
}

/// Files a merge would bring that need the user's word, one a line.
fn mark_lines(marked: &[forge_proto::git::GitMarked]) {
    for m in marked {
        eprintln!("  ! {}: {}", crate::output::shown(&m.path), m.detail);
    }
}
