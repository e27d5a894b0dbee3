//! The conversation tree drawn as text, for `forgectl tree` and the TUI.

use std::collections::HashMap;

use forge_proto::{Role, TreeInfo, TreeNode};

pub fn role_letter(role: Role) -> &'static str {
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
    rows(t).into_iter().map(|(_, line)| line).collect()
}

/// [`draw`]'s lines with the node each one is.
pub fn rows(t: &TreeInfo) -> Vec<(String, String)> {
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
        if let Some(p) = n.system_prompt.as_deref().filter(|_| n.parent_id.is_none()) {
            s.push_str(&format!(" (system prompt {})", p.get(..8).unwrap_or(p)));
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
            out.push((cur.id.clone(), format!("{lead}{}", label(cur))));
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

/// The node's siblings (replies to the same parent, summaries aside),
/// oldest first, and where it is among them.
pub fn siblings<'a>(t: &'a TreeInfo, id: &str) -> Option<(Vec<&'a TreeNode>, usize)> {
    let node = t.nodes.iter().find(|n| n.id == id)?;
    let all: Vec<&TreeNode> =
        t.nodes.iter().filter(|n| n.parent_id == node.parent_id && n.role != Role::Summary).collect();
    let at = all.iter().position(|n| n.id == id)?;
    Some((all, at))
}

/// Where the branch from `id` ends: the newest leaf under it (itself if
/// nothing replies), so switching to a sibling shows its whole branch.
pub fn newest_leaf(t: &TreeInfo, id: &str) -> String {
    let mut cur = id.to_string();
    loop {
        let newest = t
            .nodes
            .iter()
            .filter(|n| n.parent_id.as_deref() == Some(cur.as_str()) && n.role != Role::Summary)
            .max_by_key(|n| (n.created_ms, n.id.clone()));
        match newest {
            Some(n) => cur = n.id.clone(),
            None => return cur,
        }
    }
}
