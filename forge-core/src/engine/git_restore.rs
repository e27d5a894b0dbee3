//! A git session's conversation rebuilt from its commits alone, for
//! `--from COMMIT` when this daemon does not have the session that made the
//! commit (removed, or made on another machine and fetched): each turn's
//! `.forge/sessions/<id>.json` holds its messages, and the commit's first
//! parents hold the turns before it.

use forge_proto::{MessageStatus, Role, ToolCallRecord, ToolResultInfo};
use serde::Deserialize;

use crate::journal::StoreOp;
use crate::store::rows::NodeMeta;

/// The most turns read back from one branch.
pub(super) const MAX_TURNS: usize = 10_000;

/// One turn's state file, as far as the conversation needs it.
#[derive(Deserialize)]
struct State {
    #[serde(default)]
    status: Option<MessageStatus>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    node: Option<String>,
    role: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ToolCallRecord>,
    #[serde(default)]
    tool_result: Option<ResultRef>,
}

#[derive(Deserialize)]
struct ResultRef {
    call_id: String,
    #[serde(default)]
    is_error: bool,
}

/// The nodes of the conversation the states hold (oldest turn first), as
/// session `session`'s, one chain; and its last node. `id` names each node:
/// given the id the state kept (if any), it gives the id to use.
pub(super) fn rebuild(
    states: &[String],
    session: &str,
    created_ms: i64,
    mut id: impl FnMut(Option<&str>) -> String,
) -> Result<(Vec<StoreOp>, Option<String>), String> {
    let mut ops = Vec::new();
    let mut parent: Option<String> = None;
    let mut names = std::collections::HashMap::new();
    for (turn, text) in states.iter().enumerate() {
        let state: State = serde_json::from_str(text)
            .map_err(|e| format!("turn {} has a session state Forge cannot read: {e}", turn + 1))?;
        let last_answer = state.messages.iter().rposition(|m| m.role == "assistant");
        for (i, m) in state.messages.iter().enumerate() {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                _ => continue,
            };
            let mut meta = NodeMeta::default();
            let mut status = MessageStatus::Complete;
            if role == Role::Assistant {
                meta.message.provider = state.provider.clone();
                meta.message.model = state.model.clone();
                meta.message.tool_calls = m.tool_calls.clone();
                for c in &m.tool_calls {
                    names.insert(c.id.clone(), c.name.clone());
                }
                if Some(i) == last_answer {
                    status = state.status.unwrap_or(MessageStatus::Complete);
                }
            }
            if let Some(r) = &m.tool_result {
                let name = names.get(&r.call_id).cloned().unwrap_or_default();
                meta.message.tool_result =
                    Some(ToolResultInfo { call_id: r.call_id.clone(), name, is_error: r.is_error });
            }
            let node = id(m.node.as_deref());
            ops.push(StoreOp::InsertNode {
                id: node.clone(),
                session_id: session.to_string(),
                parent_id: parent.replace(node),
                role,
                text: m.text.clone(),
                status,
                created_ms: created_ms + ops.len() as i64,
                meta,
            });
        }
    }
    Ok((ops, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_become_one_chain_with_their_calls_results_and_status() {
        let one = r#"{"session":"a","status":"complete","provider":"claude","model":"m","messages":[
            {"node":"u1","role":"user","text":"make f"},
            {"node":"a1","role":"assistant","text":"","tool_calls":[{"id":"c1","name":"write_file","arguments":"{}"}]},
            {"node":"t1","role":"tool","text":"ok","tool_result":{"call_id":"c1","is_error":false}},
            {"node":"a2","role":"assistant","text":"done"}]}"#;
        let two = r#"{"session":"a","status":"cancelled","messages":[
            {"node":"u2","role":"user","text":"more"},{"node":"a3","role":"assistant","text":"par"}]}"#;
        let (ops, head) = rebuild(&[one.into(), two.into()], "s", 100, |kept| kept.unwrap_or("x").to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(head.as_deref(), Some("a3"));
        let chain: Vec<(String, Option<String>, MessageStatus)> = ops
            .iter()
            .filter_map(|op| match op {
                StoreOp::InsertNode { id, parent_id, status, .. } => Some((id.clone(), parent_id.clone(), *status)),
                _ => None,
            })
            .collect();
        assert_eq!(chain.len(), 6);
        assert_eq!(chain[0], ("u1".into(), None, MessageStatus::Complete));
        assert_eq!(chain[4].1.as_deref(), Some("a2"), "the second turn follows the first");
        assert_eq!(chain[5].2, MessageStatus::Cancelled);
        let Some(StoreOp::InsertNode { meta, .. }) = ops.get(2) else { panic!("the tool result") };
        assert_eq!(meta.message.tool_result.as_ref().map(|r| r.name.as_str()), Some("write_file"));
        assert!(rebuild(&["not json".into()], "s", 0, |_| "x".into()).is_err());
    }
}
