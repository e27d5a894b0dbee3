//! The conversation tree: `forgectl tree`, `branches`, `checkout`, `edit`,
//! `fork` and `bookmark`.

use forge_client::ForgeClient;
use forge_client::tree::{draw, role_letter};
use forge_proto::params::{BookmarkParams, CheckoutParams, EditParams, ForkParams, RewindParams};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

pub async fn tree(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let t = conn.client.session_tree(session.to_string()).await?;
    if g.json {
        json_line(&t);
        return Ok(());
    }
    match &t.forked_from {
        Some(from) => outln!("session {} (forked from {from}); * marks the path to the head", t.session_id),
        None => outln!("session {}; * marks the path to the head", t.session_id),
    }
    if t.nodes.is_empty() {
        outln!("(no messages yet)");
        return Ok(());
    }
    for line in draw(&t) {
        outln!("{line}");
    }
    Ok(())
}

pub async fn branches(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let list = conn.client.session_branches(session.to_string()).await?;
    if g.json {
        for b in &list {
            json_line(b);
        }
        return Ok(());
    }
    for b in &list {
        let mut line = format!(
            "{} {} {} {:>3} messages  {}",
            if b.head { "*" } else { " " },
            b.leaf,
            role_letter(b.role),
            b.messages,
            b.preview
        );
        for m in &b.bookmarks {
            line.push_str(&format!(" [{m}]"));
        }
        if let Some(at) = &b.diverges_at {
            line.push_str(&format!("  (leaves the head's path at {at})"));
        }
        outln!("{line}");
    }
    Ok(())
}

pub async fn clear(g: &Global, session: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let info = conn.client.session_clear(session.to_string()).await?;
    if g.json {
        json_line(&info);
    } else {
        outln!("{}: the conversation starts afresh (the earlier messages stay in its tree)", info.id);
    }
    Ok(())
}

pub async fn checkout(g: &Global, session: &str, node: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let info =
        conn.client.session_checkout(CheckoutParams { session: session.to_string(), node: node.to_string() }).await?;
    if g.json {
        json_line(&info);
    } else {
        outln!(
            "{} is at {} ({} messages on its path)",
            info.id,
            info.head.as_deref().unwrap_or("(empty)"),
            info.message_count
        );
    }
    Ok(())
}

/// How a rewind goes: `dry_run`, `force` (overwrite files changed outside
/// Forge), `yes` (go on when some files cannot be restored).
#[derive(Clone, Copy, Default)]
pub struct RewindFlags {
    pub dry_run: bool,
    pub force: bool,
    pub yes: bool,
}

/// `rewind`, `undo` and `checkout --restore-files`; `what` is (files,
/// conversation).
pub async fn rewind(
    g: &Global,
    session: &str,
    node: Option<String>,
    what: (bool, bool),
    flags: RewindFlags,
) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let params = |partial: bool| RewindParams {
        session: session.to_string(),
        node: node.clone(),
        files_only: !what.1,
        conversation_only: !what.0,
        dry_run: flags.dry_run,
        force: flags.force,
        partial,
    };
    let r = match conn.client.session_rewind(params(flags.yes)).await.map_err(Failure::from) {
        // Some files cannot be restored: named, then the user's word.
        Err(f) if f.kind == "rewind_incomplete" && !g.json && crate::output::interactive() => {
            eprintln!("forgectl: {}", crate::output::shown(&f.message));
            if !crate::output::ask("Restore the rest anyway? [y/N] ") {
                return Err(Failure::silent(f.code));
            }
            conn.client.session_rewind(params(true)).await?
        }
        other => other?,
    };
    if g.json {
        json_line(&r);
        return Ok(());
    }
    for f in r.files.iter().filter(|f| f.action == "kept") {
        let why = f.note.as_deref().unwrap_or("its content was not recorded");
        eprintln!("forgectl: cannot restore {}: {why}", crate::output::shown(&f.path));
    }
    if let Some(diff) = &r.diff {
        if diff.is_empty() {
            outln!("no file would change");
        } else {
            out!("{diff}");
        }
        return Ok(());
    }
    for f in r.files.iter().filter(|f| f.action != "kept") {
        let kept = f
            .overwritten
            .as_deref()
            .map(|h| format!(" (it had changed outside Forge; what it held is kept as blob {h})"))
            .or_else(|| f.note.as_deref().map(|n| format!(" (left as it is: {n})")))
            .unwrap_or_default();
        outln!("{:<8} {}{kept}", f.action, f.path);
    }
    if r.files_omitted > 0 {
        outln!("... and {} more file(s) (not listed)", r.files_omitted);
    }
    for u in &r.unknown {
        eprintln!("forgectl: left as it is: {u} (a tool call there was interrupted before its result was recorded)");
    }
    let at = r.node.as_deref().unwrap_or("the start (empty conversation)");
    let changed = r.files.iter().filter(|f| f.action != "kept").count() + r.files_omitted as usize;
    match (changed, r.conversation) {
        (0, true) => outln!("{} is at {at}; no file needed restoring", r.session_id),
        (n, true) => outln!("{} is at {at}; {n} file(s) restored", r.session_id),
        (n, false) => outln!("{n} file(s) restored as they were at {at}; the conversation stays where it was"),
    }
    Ok(())
}

pub async fn edit(g: &Global, session: &str, node: &str, text: String, no_wait: bool) -> Result<(), Failure> {
    let text = crate::cmd::send::read_message(&[text])?;
    if text.trim().is_empty() {
        return Err(Failure::new(2, "invalid_params", "the new text is empty"));
    }
    let conn = daemon(g).await?;
    // Events from here on carry the answer, if there is one.
    let shown = conn.client.session_show(session.to_string()).await?;
    let (from, git) = (shown.last_seq + 1, shown.git.is_some());
    let r = conn.client.session_edit(EditParams { session: session.to_string(), node: node.to_string(), text }).await?;
    if g.json {
        json_line(&serde_json::json!({"type": "edited", "result": r}));
    } else if r.in_place {
        eprintln!("forgectl: edited {} in place (nothing replied to it)", r.node_id);
    } else {
        eprintln!("forgectl: edited {} as a new branch: {} (the original stays)", r.node_id, r.new_node_id);
    }
    if !r.answering || no_wait {
        return Ok(());
    }
    let turn = crate::cmd::send::Turn {
        session_id: &r.session_id,
        message_id: &r.new_node_id,
        commits: git,
        structured: false,
    };
    let sub = forge_client::Resume::start(&conn.endpoint, &conn.info, r.session_id.clone(), Some(from)).await?;
    crate::cmd::send::follow_turn(g, sub, turn, false, false).await
}

pub async fn fork(
    g: &Global,
    session: &str,
    node: Option<String>,
    name: Option<String>,
    files: (bool, bool, bool),
) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let info = conn
        .client
        .session_fork(ForkParams {
            session: session.to_string(),
            node,
            name,
            restore_files: files.0,
            force: files.1,
            partial: files.2,
        })
        .await?;
    if g.json {
        json_line(&info);
    } else {
        outln!(
            "{}{} forked from {} at {} ({} messages shared, nothing copied)",
            info.id,
            info.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default(),
            session,
            info.head.as_deref().unwrap_or("?"),
            info.message_count
        );
    }
    Ok(())
}

pub async fn bookmark(
    g: &Global,
    session: &str,
    name: String,
    node: Option<String>,
    delete: bool,
) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn.client.session_bookmark(BookmarkParams { session: session.to_string(), name, node, delete }).await?;
    if g.json {
        json_line(&r);
    } else {
        match &r.node_id {
            Some(n) => outln!("{} -> {n}", r.name),
            None => outln!("deleted bookmark {}", r.name),
        }
    }
    Ok(())
}
