//! The running TUI: the terminal, the daemon connection and the loop that
//! ties them to the pure [`App`].
//!
//! Keys are read first in every turn of the loop, daemon items are applied
//! in bounded batches, and drawing happens at most once per frame interval,
//! so a flood of deltas never delays a key by more than one frame.

use forge_proto::params::{
    AnswerParams, CancelParams, CheckoutParams, ConfigureParams, ContextParams, EditParams, ForkParams, ModelsParams,
    RecoverParams, RewindParams, SendParams, SteerParams, ToolResultParams,
};
use std::io::Stdout;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, Event, EventStream};
use crossterm::execute;
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
use forge_client::Endpoint;
use forge_client::ForgeClient;
use forge_client::jsonrpsee::async_client::Client;
use forge_proto::{ApprovalDecision, RecoverAction, SubscriptionItem};
use futures::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::{Terminal, TerminalOptions, Viewport};
use tokio::sync::mpsc;

use crate::app::{Action, App, Connection};
use crate::branches::TreeOpen;
use crate::link::{spawn_follow, spawn_keeper};
use crate::msg::Msg;
pub use crate::msg::client_info;
use crate::render::{RenderCache, draw};
use crate::transcript::Level;

/// Redraws at most this often.
const FRAME: Duration = Duration::from_millis(16);
/// Daemon items applied before keys are looked at again.
const ITEMS_PER_BATCH: usize = 512;
const INLINE_HEIGHT: u16 = 16;

/// Following again, while the connection for calls is still being made.
const CALLS_DOWN: &str = "following again; reconnecting for calls";

type Term = Terminal<CrosstermBackend<Stdout>>;

/// Inline mode draws below what the terminal shows (a return from full
/// screen draws a fresh area rather than risk overwriting the user's lines).
fn setup(inline: bool) -> anyhow::Result<Term> {
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    if !inline {
        execute!(out, EnterAlternateScreen)?;
    }
    execute!(out, EnableBracketedPaste)?;
    let backend = CrosstermBackend::new(std::io::stdout());
    let viewport = if inline { Viewport::Inline(INLINE_HEIGHT) } else { Viewport::Fullscreen };
    let mut term = Terminal::with_options(backend, TerminalOptions { viewport })?;
    if inline {
        term.clear()?;
    }
    Ok(term)
}

pub fn restore(inline: bool) {
    let mut out = std::io::stdout();
    let _ = execute!(out, DisableBracketedPaste);
    if !inline {
        let _ = execute!(out, LeaveAlternateScreen);
    }
    let _ = disable_raw_mode();
    let _ = execute!(out, crossterm::cursor::Show);
}

/// Attaches to `session` until the user leaves. The session keeps running
/// in the daemon whatever happens here.
pub async fn run(
    endpoint: Endpoint,
    client: Client,
    session: String,
    follow: forge_client::Follow,
    mut app: App,
    keys: &mut EventStream,
) -> anyhow::Result<()> {
    let mut inline = app.options.inline;
    let mut term = setup(inline)?;
    let result = run_loop(&mut term, &mut inline, (endpoint, follow), Arc::new(client), &session, &mut app, keys).await;
    restore(inline);
    if inline {
        println!();
    }
    result
}

async fn run_loop(
    term: &mut Term,
    inline: &mut bool,
    (endpoint, follow): (Endpoint, forge_client::Follow),
    mut client: Arc<Client>,
    session: &str,
    app: &mut App,
    keys: &mut EventStream,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::channel::<Msg>(4096);
    spawn_follow(endpoint.clone(), session.to_string(), follow, tx.clone());
    spawn_keeper(endpoint, client.clone(), tx.clone());
    {
        // The picker lists what the daemon's catalog knows (`forgectl models`).
        let (c, t) = (client.clone(), tx.clone());
        tokio::spawn(async move {
            if let Ok(models) = c.models_list(ModelsParams::default()).await {
                let _ = t.send(Msg::Models(models)).await;
            }
        });
        let (client, tx, session) = (client.clone(), tx.clone(), session.to_string());
        tokio::spawn(async move {
            if let Ok(commands) = client.commands_list(session.clone()).await {
                let _ = tx.send(Msg::Commands(commands)).await;
            }
            let listed = client.mcp_resources(forge_proto::params::McpListParams { session: Some(session) }).await;
            if let Ok(resources) = listed {
                let _ = tx.send(Msg::Resources(resources)).await;
            }
        });
    }
    let mut cache = RenderCache::default();
    let mut tick = tokio::time::interval(FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let mut last_frame = Instant::now();
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    while !app.should_quit() {
        tokio::select! {
            biased;
            _ = hangup.recv() => break,
            _ = terminate.recv() => break,
            ev = keys.next() => {
                let Some(Ok(ev)) = ev else { break };
                let actions = match ev {
                    Event::Key(k) => app.on_key(k),
                    Event::Paste(text) => { app.on_paste(&text); Vec::new() }
                    _ => Vec::new(),
                };
                for a in actions {
                    if let Action::ToggleScreen = a {
                        restore(*inline);
                        *inline = !*inline;
                        *term = setup(*inline)?;
                        cache = RenderCache::default();
                    } else {
                        perform(a, &client, session, app, &tx);
                    }
                }
                dirty = true;
            }
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                apply(msg, app, &mut client, session, &tx);
                // A bounded batch of what else is waiting, then keys again.
                for _ in 1..ITEMS_PER_BATCH {
                    match rx.try_recv() {
                        Ok(m) => apply(m, app, &mut client, session, &tx),
                        Err(_) => break,
                    }
                }
                dirty = true;
            }
            _ = tick.tick() => {
                let now = Instant::now();
                if app.modal.is_some() {
                    app.tick(now - last_frame);
                    dirty = true;
                }
                last_frame = now;
                if dirty {
                    let mut drawn = Default::default();
                    term.draw(|f| {
                        drawn = draw(f, app, &mut cache);
                        terminal_safe(f.buffer_mut());
                    })?;
                    app.total_lines = drawn.total_lines;
                    app.page_lines = drawn.page_lines;
                    if let Some(offset) = drawn.focused {
                        app.focus = None;
                        app.scroll = crate::app::ScrollState::Manual { offset_from_top: offset };
                    }
                    dirty = false;
                }
            }
        }
    }
    Ok(())
}

fn apply(msg: Msg, app: &mut App, client: &mut Arc<Client>, session: &str, tx: &mpsc::Sender<Msg>) {
    match msg {
        Msg::Item(item) => match *item {
            SubscriptionItem::Event(ev) => {
                use forge_proto::EventKind;
                app.on_event(&ev);
                // Another branch: show its messages (read once the
                // replay is over, and after each move seen live).
                if matches!(ev.kind, EventKind::HeadMoved { .. }) && !app.replaying {
                    app.path_mark = Some(app.transcript.items.len());
                    spawn_path_reload(client, session, tx);
                }
                // The tree changed: the marks ("2/3") follow.
                let changed = matches!(
                    ev.kind,
                    EventKind::HeadMoved { .. }
                        | EventKind::TurnFinished { .. }
                        | EventKind::NodeEdited { .. }
                        | EventKind::NodesDeleted { .. }
                        | EventKind::NodeSplit { .. }
                );
                if changed && !app.replaying {
                    spawn_tree_read(client, session, tx, TreeOpen::Nothing);
                }
            }
            SubscriptionItem::Live { .. } => {
                if app.replaying && app.transcript.fold.head_moved {
                    spawn_path_reload(client, session, tx);
                }
                app.replaying = false;
                spawn_tree_read(client, session, tx, TreeOpen::Nothing);
            }
            SubscriptionItem::Journal { health, reason } => app.journal = (health, reason),
            SubscriptionItem::Closed { reason } => {
                app.notify(Level::Warn, format!("the daemon closed this session's stream: {reason}"));
            }
            _ => {}
        },
        Msg::Lost(reason) => app.connection = Connection::Lost { reason },
        // Connected again once both the follow and the calls' connection are.
        Msg::Back if client.is_connected() => {
            if app.connection != Connection::Connected {
                app.connection = Connection::Connected;
                app.notify(Level::Info, "reconnected to forged; nothing was missed");
            }
        }
        Msg::Back => app.connection = Connection::Lost { reason: CALLS_DOWN.into() },
        Msg::Reconnected(c) => {
            *client = c;
            if app.connection == (Connection::Lost { reason: CALLS_DOWN.into() }) {
                app.connection = Connection::Connected;
                app.notify(Level::Info, "reconnected to forged; nothing was missed");
            }
        }
        Msg::Notice(level, text) => app.notify(level, text),
        Msg::Models(models) if !models.is_empty() => {
            app.models = models.into_iter().map(|m| (m.provider, m.name)).collect();
        }
        Msg::Models(_) => {}
        Msg::Commands(commands) => app.own_commands = commands,
        Msg::Resources(resources) => app.mcp_resources = resources,
        Msg::SessionGone(text) => {
            app.connection = Connection::Gone;
            app.notify(Level::Error, text);
        }
        Msg::Reattach(images) => app.attached.extend(images),
        Msg::Pasted(read) => app.attached_one(read),
        Msg::SendFailed(text, why) => {
            app.input.restore_draft(&text);
            app.notify(Level::Error, format!("not sent: {why} (your message is back in the draft)"));
        }
        Msg::Path(messages) => app.on_path(&messages),
        Msg::Tree(tree, open) => app.on_tree(*tree, open),
    }
}

/// Reads the session's tree, for the marks and the view or picker.
fn spawn_tree_read(client: &Arc<Client>, session: &str, tx: &mpsc::Sender<Msg>, open: TreeOpen) {
    let (c, s, tx) = (client.clone(), session.to_string(), tx.clone());
    tokio::spawn(async move {
        let msg = match c.session_tree(s).await {
            Ok(t) => Msg::Tree(Box::new(t), open),
            Err(e) if open != TreeOpen::Nothing => Msg::Notice(Level::Warn, format!("tree: {}", error_text(e))),
            Err(_) => return,
        };
        let _ = tx.send(msg).await;
    });
}

/// Reads the session's path again (after its head moved), for the
/// transcript to show that branch.
fn spawn_path_reload(client: &Arc<Client>, session: &str, tx: &mpsc::Sender<Msg>) {
    let (c, s, tx) = (client.clone(), session.to_string(), tx.clone());
    tokio::spawn(async move {
        if let Ok(h) = c.session_history(s).await {
            let _ = tx.send(Msg::Path(h.messages)).await;
        }
    });
}

/// Keeps each attached image in the daemon and names them for the send.
async fn put_images(
    c: &Client,
    attached: &[crate::attach::Attachment],
) -> Result<Vec<forge_proto::ImageInput>, String> {
    forge_client::images::put_all(c, attached.to_vec()).await.map_err(error_text)
}

/// Asks the daemon; the answer comes back as a message, never blocking keys.
fn perform(action: Action, client: &Arc<Client>, session: &str, app: &mut App, tx: &mpsc::Sender<Msg>) {
    if matches!(app.connection, Connection::Lost { .. } | Connection::Gone) {
        if let Action::Send(msg) = action {
            app.input.restore_draft(msg.text());
        }
        if !app.should_quit() {
            let why = if app.connection == Connection::Gone {
                "this session was removed; q leaves"
            } else {
                "forged is not reachable; waiting for it to return"
            };
            app.notify(Level::Warn, why);
        }
        return;
    }
    let (c, s, tx) = (client.clone(), session.to_string(), tx.clone());
    let say = |tx: mpsc::Sender<Msg>, level: Level, text: String| async move {
        let _ = tx.send(Msg::Notice(level, text)).await;
    };
    match action {
        Action::Quit | Action::ToggleScreen => {}
        Action::PasteImage => {
            let tx = tx.clone();
            tokio::spawn(async move {
                let read = tokio::task::spawn_blocking(|| {
                    let path = std::env::var_os("PATH").unwrap_or_default();
                    let has = |v: &str| std::env::var_os(v).is_some_and(|v| !v.is_empty());
                    crate::attach::from_clipboard(&path, has("WAYLAND_DISPLAY"), has("DISPLAY"))
                })
                .await
                .unwrap_or_else(|e| Err(format!("reading the clipboard failed: {e}")));
                let _ = tx.send(Msg::Pasted(read)).await;
            });
        }
        Action::Send(msg) => {
            let text = msg.text().to_string();
            let resources = crate::mentions::attached(&text, &app.mcp_resources);
            let attached = std::mem::take(&mut app.attached);
            tokio::spawn(async move {
                let images = match put_images(&c, &attached).await {
                    Ok(images) => images,
                    Err(e) => {
                        let _ = tx.send(Msg::Reattach(attached)).await;
                        return drop(tx.send(Msg::SendFailed(text, e)).await);
                    }
                };
                let params =
                    SendParams { session: s, text: Some(text.clone()), resources, images, ..Default::default() };
                let sent = c.session_send(params).await;
                if sent.is_err() {
                    let _ = tx.send(Msg::Reattach(attached)).await;
                }
                match sent {
                    Ok(r) if r.queued => {
                        say(
                            tx,
                            Level::Info,
                            format!("queued (position {}): runs after the current turn", r.queue_position.unwrap_or(0)),
                        )
                        .await
                    }
                    Ok(_) => {}
                    Err(e) => drop(tx.send(Msg::SendFailed(text, error_text(e))).await),
                }
            });
        }
        Action::Steer(msg) => {
            let text = msg.text().to_string();
            tokio::spawn(async move {
                match c.session_steer(SteerParams { session: s, text: text.clone() }).await {
                    Ok(r) if !r.started => {
                        say(tx, Level::Info, "steer: joins the turn at its next step (or runs next)".into()).await
                    }
                    Ok(_) => {}
                    Err(e) => drop(tx.send(Msg::SendFailed(text, error_text(e))).await),
                }
            });
        }
        Action::Cancel => {
            tokio::spawn(async move {
                if let Err(e) = c.session_cancel(CancelParams { session: s, ..Default::default() }).await {
                    say(tx, Level::Warn, format!("cancel: {}", error_text(e))).await;
                }
            });
        }
        Action::Answer { approval_id, decision, indices } => {
            tokio::spawn(async move {
                let indices = (decision == ApprovalDecision::ApproveSelected).then_some(indices);
                if let Err(e) = c
                    .approval_answer(AnswerParams {
                        session: s,
                        decision,
                        approval_id: Some(approval_id),
                        indices,
                        ..Default::default()
                    })
                    .await
                {
                    say(tx, Level::Warn, format!("approval: {}", error_text(e))).await;
                }
            });
        }
        Action::Recover { resume } => {
            tokio::spawn(async move {
                let action = if resume { RecoverAction::Resume } else { RecoverAction::Discard };
                if let Err(e) = c.session_recover(RecoverParams { session: s, action }).await {
                    say(tx, Level::Warn, format!("recover: {}", error_text(e))).await;
                }
            });
        }
        Action::ToolResult { call_id, output, is_error } => {
            tokio::spawn(async move {
                match c.session_tool_result(ToolResultParams { session: s, call_id, output, is_error }).await {
                    Ok(r) if r.remaining.is_empty() => {
                        say(tx, Level::Info, "all tool results in; the model continues".into()).await
                    }
                    Ok(r) => say(tx, Level::Info, format!("{} tool result(s) still wanted", r.remaining.len())).await,
                    Err(e) => say(tx, Level::Warn, format!("tool result: {}", error_text(e))).await,
                }
            });
        }
        Action::Journal => {
            tokio::spawn(async move {
                let text = match c.journal_status(()).await {
                    Ok(j) => format!(
                        "journal: {:?}{}; {} transactions, {} rows, largest group {}, last commit {} us; {} open streams",
                        j.health,
                        j.reason.map(|r| format!(" ({r})")).unwrap_or_default(),
                        j.transactions,
                        j.rows,
                        j.largest_group,
                        j.last_commit_us,
                        j.open_streams
                    ),
                    Err(e) => format!("journal: {}", error_text(e)),
                };
                say(tx, Level::Info, text).await;
            });
        }
        Action::Configure(params) => {
            tokio::spawn(async move {
                if let Err(e) = c.session_configure(ConfigureParams { session: s, ..params }).await {
                    say(tx, Level::Warn, format!("model: {}", error_text(e))).await;
                }
            });
        }
        Action::Clear => {
            tokio::spawn(async move {
                if let Err(e) = c.session_clear(s).await {
                    say(tx, Level::Warn, format!("clear: {}", error_text(e))).await;
                }
            });
        }
        Action::ContextFiles(params) => {
            tokio::spawn(async move {
                match c.session_context_files(forge_proto::params::ContextFilesParams { session: s, ..params }).await {
                    Ok(r) => {
                        for f in r.refused {
                            say(tx.clone(), Level::Warn, format!("not added: {}: {}", f.path, f.reason)).await;
                        }
                    }
                    Err(e) => say(tx, Level::Warn, format!("context: {}", error_text(e))).await,
                }
            });
        }
        Action::Context => {
            tokio::spawn(async move {
                let text = match c.session_context(ContextParams { session: s, ..Default::default() }).await {
                    Ok(ctx) => format!("context: {}", forge_client::context_line(&ctx)),
                    Err(e) => format!("context: {}", error_text(e)),
                };
                say(tx, Level::Info, text).await;
            });
        }
        Action::Tools => {
            tokio::spawn(async move {
                let text = match c.tools_list(()).await {
                    Ok(tools) => {
                        let w = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
                        let lines: Vec<String> = tools
                            .iter()
                            .map(|t| {
                                format!(
                                    "{:w$}  {:6}  {:4}  {}",
                                    t.name,
                                    t.risk,
                                    t.approval,
                                    t.description.lines().next().unwrap_or("")
                                )
                            })
                            .collect();
                        format!("tools (name, risk, approval):\n{}", lines.join("\n"))
                    }
                    Err(e) => format!("tools: {}", error_text(e)),
                };
                say(tx, Level::Info, text).await;
            });
        }
        Action::Tree => spawn_tree_read(client, session, &tx, TreeOpen::View),
        Action::RewindPick => spawn_tree_read(client, session, &tx, TreeOpen::Rewind),
        Action::RefreshTree => spawn_tree_read(client, session, &tx, TreeOpen::Nothing),
        Action::Edit { node, text } => {
            tokio::spawn(async move {
                match c.session_edit(EditParams { session: s, node, text: text.clone() }).await {
                    Ok(r) if r.in_place => say(tx, Level::Info, "edited in place".to_string()).await,
                    Ok(_) => {
                        say(tx, Level::Info, "edited as a new branch ([ and ] switch between the versions)".to_string())
                            .await
                    }
                    Err(e) => {
                        let _ = tx.send(Msg::SendFailed(text, error_text(e))).await;
                    }
                }
            });
        }
        Action::Rewind { node, partial } => {
            tokio::spawn(async move {
                let text =
                    match c.session_rewind(RewindParams { session: s, node, partial, ..Default::default() }).await {
                        Ok(r) => {
                            let (put, kept): (Vec<_>, Vec<_>) = r.files.iter().partition(|f| f.action != "kept");
                            let list = |v: &[&forge_proto::RestoredFile]| {
                                v.iter().map(|f| format!("{} {}", f.action, f.path)).collect::<Vec<_>>().join(", ")
                            };
                            format!(
                                "rewound to {}: {} file(s) put back{}{}",
                                r.node.as_deref().unwrap_or("the start"),
                                put.len(),
                                if put.is_empty() { String::new() } else { format!(" ({})", list(&put)) },
                                if kept.is_empty() {
                                    String::new()
                                } else {
                                    format!("; left as they were (not recorded): {}", list(&kept))
                                }
                            )
                        }
                        Err(e) => format!(
                            "rewind: {} (forgectl rewind --dry-run shows the diff; --force overwrites)",
                            error_text(e)
                        ),
                    };
                say(tx, Level::Info, text).await;
            });
        }
        Action::Checkout { node } => {
            tokio::spawn(async move {
                if let Err(e) = c.session_checkout(CheckoutParams { session: s, node }).await {
                    say(tx, Level::Warn, format!("checkout: {}", error_text(e))).await;
                }
            });
        }
        Action::Fork { node } => {
            tokio::spawn(async move {
                let text = match c.session_fork(ForkParams { session: s, node, ..Default::default() }).await {
                    Ok(info) => format!(
                        "forked: session {} ({} messages shared); open it with `forge {}`",
                        info.id, info.message_count, info.id
                    ),
                    Err(e) => format!("fork: {}", error_text(e)),
                };
                say(tx, Level::Info, text).await;
            });
        }
        Action::Summarize => {
            tokio::spawn(async move {
                if let Err(e) = c.session_summarize(s).await {
                    say(tx, Level::Warn, format!("summarize: {}", error_text(e))).await;
                }
            });
        }
    }
}

/// A daemon error as a user reads it: the message of an RPC error, else
/// what went wrong with the call.
pub fn error_text(e: forge_client::jsonrpsee::core::ClientError) -> String {
    match e {
        forge_client::jsonrpsee::core::ClientError::Call(obj) => obj.message().to_string(),
        other => other.to_string(),
    }
}

/// Model and tool text never drives the terminal: ratatui drops control
/// characters already; what reorders or hides text (bidirectional
/// overrides) is shown as `?`.
fn terminal_safe(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        if cell.symbol().chars().any(forge_client::terminal::unsafe_char) {
            cell.set_symbol("?");
        }
    }
}
