//! The conversation tree: `forgectl tree`, `branches`, `checkout`, `edit`,
//! `fork` and `bookmark`.

use std::collections::HashMap;

use forge_client::ForgeApiClient;
use forge_proto::{Role, TreeInfo, TreeNode};

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

fn role_letter(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "asst",
        Role::Tool => "tool",
        Role::Summary => "summ",
        Role::Other => "----",
    }
}

/// The tree as lines: a chain of single replies stays at one indentation;
/// a node with several replies opens a branch per reply. Summaries are
/// shown on the message they hang from, not as branches.
pub fn draw(t: &TreeInfo) -> Vec<String> {
    let by_id: HashMap<&str, &TreeNode> = t.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut replies: HashMap<Option<&str>, Vec<&TreeNode>> = HashMap::new();
    let mut summaries: HashMap<&str, Vec<&TreeNode>> = HashMap::new();
    for n in &t.nodes {
        // A node whose parent is not in the tree is drawn as a root.
        let parent = n.parent_id.as_deref().filter(|p| by_id.contains_key(p));
        match (n.role, parent) {
            (Role::Summary, Some(p)) => summaries.entry(p).or_default().push(n),
            _ => replies.entry(parent).or_default().push(n),
        }
    }
    let label = |n: &TreeNode| {
        let mut s = format!("{} {} {} {}", if n.on_path { "*" } else { " " }, role_letter(n.role), n.id, n.preview);
        for b in &n.bookmarks {
            s.push_str(&format!(" [{b}]"));
        }
        for sum in summaries.get(n.id.as_str()).into_iter().flatten() {
            s.push_str(&format!(" (summarized up to here: {})", sum.id));
        }
        if t.head.as_deref() == Some(n.id.as_str()) {
            s.push_str("  <- head");
        }
        s
    };
    let mut out = Vec::new();
    // (node, lead of its first line, lead of the lines after it)
    let mut stack: Vec<(&TreeNode, String, String)> =
        replies.get(&None).into_iter().flatten().rev().map(|n| (*n, String::new(), String::new())).collect();
    while let Some((node, first, rest)) = stack.pop() {
        let mut cur = node;
        let mut lead = first;
        loop {
            out.push(format!("{lead}{}", label(cur)));
            let kids = replies.get(&Some(cur.id.as_str())).map(Vec::as_slice).unwrap_or(&[]);
            match kids {
                [] => break,
                [only] => {
                    cur = only;
                    lead = rest.clone();
                }
                many => {
                    for (i, k) in many.iter().enumerate().rev() {
                        let last = i == many.len() - 1;
                        let first = format!("{rest}{}", if last { "└─ " } else { "├─ " });
                        let next = format!("{rest}{}", if last { "   " } else { "│  " });
                        stack.push((k, first, next));
                    }
                    break;
                }
            }
        }
    }
    out
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

pub async fn checkout(g: &Global, session: &str, node: &str) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let info = conn.client.session_checkout(session.to_string(), node.to_string()).await?;
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

/// `rewind`, `undo` and `checkout --restore-files`; `what` is (files,
/// conversation).
pub async fn rewind(
    g: &Global,
    session: &str,
    node: Option<String>,
    what: (bool, bool),
    dry_run: bool,
    force: bool,
) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn
        .client
        .session_rewind(session.to_string(), node, Some(!what.1), Some(!what.0), Some(dry_run), Some(force))
        .await?;
    if g.json {
        json_line(&r);
        return Ok(());
    }
    if let Some(diff) = &r.diff {
        if diff.is_empty() {
            outln!("no file would change");
        } else {
            out!("{diff}");
        }
        return Ok(());
    }
    for f in &r.files {
        let kept = f
            .overwritten
            .as_deref()
            .map(|h| format!(" (it had changed outside Forge; what it held is kept as blob {h})"))
            .unwrap_or_default();
        outln!("{:<8} {}{kept}", f.action, f.path);
    }
    for u in &r.unknown {
        eprintln!("forgectl: left as it is: {u} (a tool call there was interrupted before its result was recorded)");
    }
    let at = r.node.as_deref().unwrap_or("the start (empty conversation)");
    match (r.files.len(), r.conversation) {
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
    let from = conn.client.session_show(session.to_string()).await?.last_seq + 1;
    let r = conn.client.session_edit(session.to_string(), node.to_string(), text).await?;
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
    crate::cmd::send::follow_turn(g, &conn, &r.session_id, from, &r.new_node_id, false, false).await
}

pub async fn fork(g: &Global, session: &str, node: Option<String>, name: Option<String>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let info = conn.client.session_fork(session.to_string(), node, name).await?;
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
    let r = conn.client.session_bookmark(session.to_string(), name, node, Some(delete)).await?;
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
