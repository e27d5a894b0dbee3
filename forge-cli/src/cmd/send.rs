//! `forgectl send`: send a message and stream the answer.

use forge_proto::params::{AnswerParams, CancelParams, SendParams};
use std::io::{Read, Write};

use clap::Args;
use forge_client::ForgeClient;
use forge_client::{LineClient, Resume, Resumed};
use forge_proto::{ApprovalDecision, EventKind, JournalHealth, SubscriptionItem, TurnStatus};

use crate::Global;
use crate::cmd::session::NewSession;
use crate::connect::daemon_lines;
use crate::exit::{DAEMON_ERROR, Failure, INTERRUPTED, TURN_CANCELLED, TURN_FAILED};
use crate::output::json_line;

#[derive(Args)]
pub struct SendArgs {
    /// Session id, id prefix or name [default: create a new session]
    #[arg(short, long)]
    session: Option<String>,
    #[command(flatten)]
    new: NewSession,
    /// This turn's own temperature and top_p (a new session's own: `session
    /// new --temperature`, or `forgectl model SESSION --temperature`)
    #[command(flatten)]
    sampling: super::session::SamplingArgs,
    /// Return once the message is accepted; do not wait for the answer
    #[arg(long)]
    no_wait: bool,
    /// Approve this turn's tool calls that would ask (never what the
    /// denylist or the sandbox forbids)
    #[arg(long)]
    auto_approve: bool,
    /// Also print the model's thinking, on stderr (the answer alone goes
    /// to stdout)
    #[arg(long)]
    thinking: bool,
    /// Ask for N answers to the message, each a sibling branch of the
    /// others (only while tools are off: `[tools] mode = "disabled"`)
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1)]
    n: u32,
    /// Send no message: the model answers what the session holds now (an
    /// unanswered message after a checkout or a failed turn, or more of
    /// its last answer). Needs -s
    #[arg(long = "continue", requires = "session", conflicts_with = "message")]
    continue_: bool,
    /// The final answer must be JSON valid against the JSON schema in
    /// FILE: the validated object is printed (with --json, as the
    /// `structured_output` event); one the model cannot make valid exits 6
    /// with the errors
    #[arg(long, value_name = "FILE", conflicts_with = "continue_")]
    output_schema: Option<std::path::PathBuf>,
    /// Attach an MCP server's resource, read by the daemon and added after
    /// the message (repeatable; `forgectl mcp resources` lists them)
    #[arg(long = "resource", value_name = "SERVER:URI", conflicts_with = "continue_")]
    resources: Vec<String>,
    /// Attach an image (PNG, JPEG, GIF or WebP, at most 6 MiB; repeatable):
    /// the model sees it with the message, which may then be empty (`-`
    /// reads the message from stdin)
    #[arg(long = "image", value_name = "FILE", conflicts_with = "continue_")]
    images: Vec<std::path::PathBuf>,
    /// The message; `-` reads it from stdin
    #[arg(required_unless_present_any = ["continue_", "images"], num_args = 1.., value_name = "MESSAGE")]
    message: Vec<String>,
}

pub fn read_message(parts: &[String]) -> Result<String, Failure> {
    if parts.len() == 1 && parts[0] == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::new(2, "invalid_input", format!("cannot read the message from stdin: {e}")))?;
        return Ok(text);
    }
    Ok(parts.join(" "))
}

/// Each image file, read and checked for what a client can tell (there,
/// a file, not too large); the daemon checks the rest.
fn read_images(paths: &[std::path::PathBuf]) -> Result<Vec<forge_client::images::Attachment>, Failure> {
    paths.iter().map(|p| forge_client::images::read(p).map_err(|e| Failure::new(2, "invalid_input", e))).collect()
}

pub async fn run(g: &Global, a: SendArgs) -> Result<(), Failure> {
    let text = if a.continue_ || a.message.is_empty() { String::new() } else { read_message(&a.message)? };
    if text.trim().is_empty() && !a.continue_ && a.images.is_empty() {
        return Err(Failure::new(2, "invalid_params", "the message is empty"));
    }
    if a.session.is_some() && !a.new.is_empty() {
        return Err(Failure::new(
            2,
            "invalid_params",
            "--provider, --model, --cwd and --name apply to a new session; drop them or drop -s",
        ));
    }
    let output_schema = match &a.output_schema {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| Failure::new(2, "invalid_input", format!("cannot read {}: {e}", path.display())))?;
            let schema: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| Failure::new(2, "invalid_input", format!("{} is not JSON: {e}", path.display())))?;
            Some(schema)
        }
        None => None,
    };
    let images = read_images(&a.images)?;
    // The whole turn on one JSON-lines connection: hello, send, follow.
    let client = daemon_lines(g).await?;
    let attached = forge_client::images::put_all(&client, images).await?;
    let session = match a.session {
        Some(s) => s,
        None => {
            let info = a.new.create(g, &client).await?;
            eprintln!("session: {} ({}/{})", info.id, info.provider, info.model);
            if g.json {
                json_line(&serde_json::json!({"type": "session", "session": info}));
            }
            info.id
        }
    };
    let (text, n, cont) =
        (Some(text).filter(|t| !t.is_empty()), (a.n != 1).then_some(a.n), Some(a.continue_).filter(|c| *c));
    let sent = client
        .session_send(SendParams {
            session: session.clone(),
            text,
            n,
            continued: cont.unwrap_or_default(),
            output_schema: output_schema.clone(),
            resources: a.resources,
            images: attached,
            sampling: a.sampling.into(),
        })
        .await?;
    if let Some(pos) = sent.queue_position {
        eprintln!(
            "forgectl: a turn is running in session {}; your message is queued (#{pos}) and runs next",
            sent.session_id
        );
    }
    if a.no_wait {
        if g.json {
            json_line(&serde_json::json!({"type": "sent", "result": sent}));
        } else if sent.queue_position.is_none() {
            eprintln!("forgectl: sent; follow with `forgectl attach {} --from {}`", sent.session_id, sent.seq);
        }
        return Ok(());
    }

    let turn = Turn {
        session_id: &sent.session_id,
        message_id: &sent.message_id,
        commits: sent.commits,
        structured: output_schema.is_some(),
    };
    let (endpoint, info) = (client.endpoint.clone(), client.info.clone());
    let sub = client.follow(sent.session_id.clone(), Some(sent.seq)).await?;
    let sub = Resume::from_follow(&endpoint, &info, sent.session_id.clone(), sub, Some(sent.seq))
        .give_up_after(crate::connect::GIVE_UP_AFTER);
    follow_turn(g, sub, turn, a.auto_approve, a.thinking).await
}

/// Ctrl-C, watched for the whole follow: a signal that comes while an
/// event is being printed waits here instead of being lost (a
/// `tokio::signal::ctrl_c()` made anew for each event misses it, and the
/// process, whose handler is installed, would ignore it).
pub fn interrupts() -> Result<tokio::signal::unix::Signal, Failure> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::new(DAEMON_ERROR, "internal", format!("cannot watch for Ctrl-C: {e}")))
}

/// The connection for calls made while following a turn (cancel,
/// approve), opened on first use: most turns make none.
async fn caller<'a>(g: &Global, slot: &'a mut Option<LineClient>) -> Result<&'a LineClient, Failure> {
    let client = match slot.take() {
        Some(c) => c,
        None => daemon_lines(g).await?,
    };
    Ok(slot.insert(client))
}

/// Asks the daemon to cancel the turn; false if it could not be asked.
async fn cancel(g: &Global, rpc: &mut Option<LineClient>, session_id: &str) -> bool {
    let Ok(client) = caller(g, rpc).await else { return false };
    let params = CancelParams { session: session_id.to_string(), ..Default::default() };
    match client.session_cancel(params).await {
        Ok(_) => true,
        Err(e) => {
            *rpc = None;
            Failure::from(e).code != crate::exit::UNREACHABLE
        }
    }
}

/// `--auto-approve`: approves every call of `approval_id`; true if the
/// link kept the answer from the daemon (to be given again).
async fn approve(g: &Global, rpc: &mut Option<LineClient>, session_id: &str, approval_id: &str, calls: usize) -> bool {
    let answer = AnswerParams {
        session: session_id.to_string(),
        decision: ApprovalDecision::ApproveAll,
        approval_id: Some(approval_id.to_string()),
        ..Default::default()
    };
    let r = match caller(g, rpc).await {
        Ok(client) => client.approval_answer(answer).await.map_err(Failure::from),
        Err(f) => Err(f),
    };
    match r {
        Ok(_) => eprintln!("forgectl: approved {calls} tool call(s) (--auto-approve)"),
        Err(f) if f.code == crate::exit::UNREACHABLE => {
            *rpc = None;
            eprintln!("forgectl: could not approve yet ({}); again once the link is back", f.message);
            return true;
        }
        Err(f) => eprintln!("forgectl: could not approve: {}", f.message),
    }
    false
}

/// The turn a client follows.
pub struct Turn<'a> {
    pub session_id: &'a str,
    pub message_id: &'a str,
    /// Git mode: it ends with its commit (`SendResult::commits`).
    pub commits: bool,
    /// The answer is JSON on a schema: the validated object is printed,
    /// not the streamed text.
    pub structured: bool,
}

/// Streams the turn answering `message_id` from `sub` (which follows its
/// session from `from_seq`) until it ends: the answer on stdout, the rest
/// on stderr, or every event as JSON with `--json`.
pub async fn follow_turn(
    g: &Global,
    mut sub: Resume,
    turn: Turn<'_>,
    auto_approve: bool,
    thinking: bool,
) -> Result<(), Failure> {
    let Turn { session_id, message_id, commits, structured: turn_structured } = turn;
    // Git mode: how the turn ended, kept until its commit is journaled.
    let mut ended: Option<Result<(), Failure>> = None;
    let mut rpc = None;
    let mut interrupt = interrupts()?;
    let mut in_turn = false;
    // Thinking is being printed on stderr: end its line before anything else.
    let mut thinking_shown = false;
    let mut interrupted = false;
    // A cancel or an --auto-approve answer a dropped link kept from the
    // daemon, asked again when it is back.
    let (mut cancel_pending, mut approve_pending) = (false, None::<(String, usize)>);
    let mut stdout = crate::output::stdout();
    let mut ends_with_newline = true;
    // Answers given so far, and whether another was asked for after one.
    // With `-n`: the answers given so far, and the last one's node.
    // Answers to the same message (`-n`) so far, as the fold tells them.
    let (mut siblings, mut fold) = (0u32, forge_client::fold::Fold::default());
    // The sources the answer cites (url, title), once each.
    let mut sources: Vec<(String, String)> = Vec::new();
    loop {
        let item = tokio::select! {
            item = sub.next() => item,
            _ = interrupt.recv() => {
                if interrupted {
                    return Err(Failure::new(
                        crate::exit::INTERRUPTED,
                        "interrupted",
                        format!("stopped following; the turn may go on (`forgectl attach {session_id} --from live`)"),
                    ));
                }
                interrupted = true;
                eprintln!("\nforgectl: cancelling the turn (the partial answer is kept; Ctrl-C again stops following)...");
                // Through a dropped link, it is asked again once the link is back.
                cancel_pending = !cancel(g, &mut rpc, session_id).await;
                continue;
            }
        };
        let item = match item {
            Some(Ok(Resumed::Item(item))) => item,
            // The turn goes on over there; the follow resumes where it
            // stopped, so the answer is printed whole, once.
            Some(Ok(Resumed::Lost { why, retry_in })) => {
                rpc = None;
                if !ends_with_newline && !g.json {
                    eprintln!();
                }
                eprintln!("forgectl: {why}; reconnecting in {:.1} s", retry_in.as_secs_f64());
                continue;
            }
            Some(Ok(Resumed::Back)) => {
                eprintln!("forgectl: reconnected; the turn goes on");
                if cancel_pending {
                    cancel_pending = !cancel(g, &mut rpc, session_id).await;
                }
                if let Some((id, n)) = approve_pending.take() {
                    approve_pending = approve(g, &mut rpc, session_id, &id, n).await.then_some((id, n));
                }
                continue;
            }
            Some(Err(e)) => return Err(e.into()),
            None => {
                return Err(Failure::new(
                    crate::exit::UNREACHABLE,
                    "daemon_gone",
                    "the daemon closed the stream before the turn ended",
                ));
            }
        };
        let ev = match item {
            SubscriptionItem::Event(ev) => ev,
            SubscriptionItem::Closed { reason } => {
                return Err(Failure::new(DAEMON_ERROR, "closed", format!("the session stream closed: {reason}")));
            }
            SubscriptionItem::Journal { health: JournalHealth::Blocked, reason } => {
                if !ends_with_newline {
                    let _ = writeln!(stdout);
                }
                return Err(Failure::new(
                    DAEMON_ERROR,
                    "persistence_blocked",
                    format!(
                        "the turn stopped: {} (what was shown is kept; `forgectl journal` shows the state)",
                        reason.unwrap_or_else(|| "the store cannot be written".into())
                    ),
                ));
            }
            _ => continue,
        };
        if g.json {
            json_line(&ev);
        }
        let Some(seen) = fold.apply(&ev) else { continue };
        // Another answer to the same message: say which node the one
        // before is, on a line of its own.
        if in_turn
            && seen.sibling
            && !g.json
            && let Some(node) = &fold.answer_node
        {
            siblings += 1;
            if !ends_with_newline {
                let _ = writeln!(stdout);
                ends_with_newline = true;
            }
            eprintln!("forgectl: answer {siblings} is node {node}");
        }
        match &ev.kind {
            EventKind::TurnStarted { message_id: m, .. } if m == message_id => in_turn = true,
            EventKind::WebSearch { query } if in_turn && !g.json => {
                eprintln!("forgectl: searching the web: {}", crate::output::shown(query))
            }
            EventKind::Citation { url, title, .. } if in_turn && !sources.iter().any(|(u, _)| u == url) => {
                sources.push((url.clone(), title.clone()));
            }
            EventKind::ThinkingDelta { text } if in_turn && thinking && !g.json => {
                if !thinking_shown {
                    eprint!("forgectl: thinking: ");
                    thinking_shown = true;
                }
                eprint!("{}", crate::output::shown(text));
            }
            EventKind::StructuredOutput { output, .. } if in_turn && !g.json => {
                let pretty = serde_json::to_string_pretty(output).unwrap_or_default();
                crate::output::stdout_result(writeln!(stdout, "{pretty}"));
                ends_with_newline = true;
            }
            EventKind::TextDelta { .. } if turn_structured => {}
            EventKind::TextDelta { text } if in_turn && !g.json => {
                if std::mem::take(&mut thinking_shown) {
                    eprintln!();
                }
                crate::output::stdout_result(stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()));
                ends_with_newline = text.ends_with('\n');
            }
            EventKind::ApprovalRequested { approval_id, calls, .. } if in_turn => {
                if auto_approve {
                    // Not answered (the link dropped): answered once it is back.
                    let failed = approve(g, &mut rpc, session_id, approval_id, calls.len()).await;
                    approve_pending = failed.then(|| (approval_id.clone(), calls.len()));
                } else {
                    if !ends_with_newline && !g.json {
                        let _ = writeln!(stdout);
                        ends_with_newline = true;
                    }
                    crate::output::approval_prompt(session_id, calls, false);
                }
            }
            EventKind::AwaitingToolResults { calls } if in_turn && !g.json => {
                if !ends_with_newline {
                    let _ = writeln!(stdout);
                    ends_with_newline = true;
                }
                eprintln!(
                    "forgectl: the model called {} tool(s); parse-only mode waits for their results:",
                    calls.len()
                );
                for c in calls {
                    eprintln!("  {} {}({})", c.id, c.name, crate::output::shown(&c.arguments));
                }
                eprintln!("  answer with: forgectl tool-result {session_id} CALL_ID [--error] OUTPUT");
            }
            // Said before the answer starts: a plain line each.
            // The project's command was not run.
            EventKind::CommandIgnored { .. }
            | EventKind::GitSettingsUndone { .. }
            | EventKind::SamplingAdjusted { .. }
            | EventKind::ModelFallback { .. }
            | EventKind::ModelDeprecated { .. }
            | EventKind::ActiveFilesChanged { .. }
            | EventKind::GitCheckpoint { .. }
                if !g.json =>
            {
                if let Some(notice) = seen.notice.as_ref() {
                    eprintln!("forgectl: {}", notice.text);
                }
            }
            EventKind::McpWaiting { .. } | EventKind::McpWaited { .. } if in_turn && !g.json => {
                if let Some(notice) = seen.notice.as_ref().filter(|n| !n.routine) {
                    eprintln!("forgectl: {}", notice.text);
                }
            }
            EventKind::Retrying { attempt, max_attempts, delay_ms, reason, .. } if in_turn && !g.json => {
                eprintln!("forgectl: {}", forge_client::retrying_line(*attempt, *max_attempts, *delay_ms, reason));
            }
            EventKind::ToolRunning { name, .. } if in_turn && !g.json => {
                if !ends_with_newline {
                    let _ = writeln!(stdout);
                    ends_with_newline = true;
                }
                eprintln!("forgectl: running tool {name}");
            }
            EventKind::ToolResult { name, is_error, output, .. } if in_turn && !g.json => {
                let verdict = if *is_error { "failed" } else { "done" };
                eprintln!(
                    "forgectl: tool {name} {verdict}: {}",
                    crate::output::shown(&crate::output::first_line(output, 100))
                );
            }
            EventKind::TurnFinished { message_id: m, status, error, error_kind, .. } if m == message_id => {
                if std::mem::take(&mut thinking_shown) {
                    eprintln!();
                }
                if !g.json && !ends_with_newline {
                    let _ = writeln!(stdout);
                }
                // What the answer cites, after it.
                if !g.json && !sources.is_empty() {
                    let _ = writeln!(stdout, "\nSources:");
                    for (i, (url, title)) in sources.iter().enumerate() {
                        let _ = writeln!(
                            stdout,
                            "  [{}] {}{url}",
                            i + 1,
                            if title.is_empty() { String::new() } else { format!("{title} ") }
                        );
                    }
                }
                if let Some(node) = fold.answer_node.as_ref().filter(|_| siblings > 0 && !g.json) {
                    eprintln!("forgectl: answer {} is node {node}", siblings + 1);
                }
                let outcome = match status {
                    TurnStatus::Complete => Ok(()),
                    TurnStatus::Cancelled | TurnStatus::Interrupted if interrupted => Err(Failure::silent(INTERRUPTED)),
                    TurnStatus::Cancelled | TurnStatus::Interrupted => {
                        eprintln!("forgectl: the turn was {}", status.as_str());
                        Err(Failure::silent(TURN_CANCELLED))
                    }
                    _ if error_kind.as_deref() == Some("output_schema_invalid") => {
                        let msg = error.clone().unwrap_or_default();
                        eprintln!("forgectl: {}", crate::output::shown(&msg));
                        Err(Failure::silent(crate::exit::OUTPUT_INVALID))
                    }
                    _ => {
                        let msg = error.clone().unwrap_or_else(|| "the turn failed".into());
                        eprintln!("forgectl: [Stream error] {}", crate::output::shown(&msg));
                        Err(Failure::silent(TURN_FAILED))
                    }
                };
                if !commits {
                    return outcome;
                }
                ended = Some(outcome);
            }
            // Git mode: the turn is over once its commit is journaled.
            EventKind::GitCommitted { message_id: m, .. } | EventKind::GitCommitFailed { message_id: m, .. }
                if m == message_id && ended.is_some() =>
            {
                if !g.json
                    && let Some(notice) = &seen.notice
                {
                    eprintln!("forgectl: {}", notice.text);
                }
                return ended.unwrap_or(Ok(()));
            }
            _ => {}
        }
    }
}
