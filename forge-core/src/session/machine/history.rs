//! The conversation as history nodes hold it and as requests send it: a
//! stored node made a message again, answers that did not finish marked
//! for the model, neighbouring answers merged.

use forge_proto::{MessageStatus, Role};

use crate::provider::{ChatMessage, ChatRole};
use crate::store::NodeRow;

/// What the model is told after an answer that did not finish, so it can
/// continue honestly instead of believing it said everything.
pub(super) fn interruption_note(status: MessageStatus) -> Option<&'static str> {
    match status {
        MessageStatus::Interrupted => {
            Some("[This answer was interrupted: Forge stopped streaming it before it finished, and the rest was lost.]")
        }
        MessageStatus::Cancelled => Some("[This answer was cut short: the user cancelled it.]"),
        MessageStatus::Error => Some("[This answer was cut short by an error from the provider.]"),
        _ => None,
    }
}

/// An answer's text as the model is shown it next time: with a note if it
/// did not finish (the note alone if nothing came before it).
pub(super) fn answer_text(text: &str, status: MessageStatus) -> String {
    match interruption_note(status) {
        Some(note) if text.is_empty() => note.to_string(),
        Some(note) => format!("{text}\n\n{note}"),
        None => text.to_string(),
    }
}

/// What the model is told between two user messages when the first got no
/// answer at all (its turn failed or was cancelled before any output).
const NO_ANSWER_NOTE: &str = "[No answer was given to the message above: its turn ended before the model replied.]";

/// Plain text, nothing else: what may be merged with a neighbour.
fn text_only(m: &ChatMessage) -> bool {
    matches!(m.role, ChatRole::User | ChatRole::Assistant)
        && m.tool_calls.is_empty()
        && m.tool_result.is_none()
        && m.reasoning.is_empty()
        && m.images.is_empty()
}

/// The conversation as sent (providers want the roles to alternate). A
/// user message directly after another gets a note between them, so the
/// model knows the first went unanswered (merging them would make it
/// answer both as one request). Other adjacent text-only messages of the
/// same role are coalesced into one: an answer continued by another
/// (`continue`). Nothing is merged across tool calls, tool results or
/// signed reasoning.
pub(super) fn request_messages(path: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(path.len());
    for m in path {
        if m.role == ChatRole::User && out.last().is_some_and(|prev| prev.role == ChatRole::User) {
            out.push(ChatMessage::assistant(NO_ANSWER_NOTE, Vec::new()));
        }
        if let Some(prev) = out.last_mut()
            && prev.role == m.role
            && text_only(prev)
            && text_only(m)
        {
            prev.text.push_str("\n\n");
            prev.text.push_str(&m.text);
            continue;
        }
        // Node ids stay in the session; the request needs none.
        out.push(ChatMessage { node: None, ..m.clone() });
    }
    out
}

/// A history node as a message for the provider. Empty text is skipped
/// (providers reject empty messages); unfinished answers carry a note.
/// A user message as the model gets it: what the user typed, then what
/// hooks added and what an output schema asks, each marked as what it is.
pub(crate) fn user_message(text: &str, context: Option<&str>) -> ChatMessage {
    let meta = forge_proto::MessageMeta { context: context.map(str::to_string), ..Default::default() };
    let mut out = text.to_string();
    let (hooks, schema) = meta.context_parts();
    if let Some(hooks) = hooks {
        out.push_str(&format!("\n\n<hook-context>\n{hooks}\n</hook-context>"));
    }
    if let Some(schema) = schema {
        let (open, close) = (forge_proto::OUTPUT_SCHEMA_OPEN, forge_proto::OUTPUT_SCHEMA_CLOSE);
        out.push_str(&format!("\n\n{open}\n{schema}\n{close}"));
    }
    ChatMessage::user(out)
}

pub(crate) fn chat_message(n: &NodeRow) -> Option<ChatMessage> {
    let has_note = n.role == Role::Assistant && interruption_note(n.status).is_some();
    if n.text.is_empty()
        && n.meta.message.tool_calls.is_empty()
        && n.meta.message.images.is_empty()
        && n.role != Role::Tool
        && !has_note
    {
        return None;
    }
    let message = match n.role {
        Role::User => {
            Some(user_message(&n.text, n.meta.message.context.as_deref()).with_images(n.meta.message.images.clone()))
        }
        Role::Assistant => Some(
            ChatMessage::assistant(answer_text(&n.text, n.status), n.meta.message.tool_calls.clone())
                .with_reasoning(n.meta.reasoning.clone()),
        ),
        Role::Tool => {
            let r = n.meta.message.tool_result.as_ref()?;
            Some(ChatMessage::tool_result(r.call_id.clone(), n.text.clone(), r.is_error))
        }
        Role::Summary | Role::Other => None,
    };
    message.map(|m| m.with_node(n.id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> forge_proto::ToolCallRecord {
        forge_proto::ToolCallRecord { id: id.into(), name: "read_file".into(), arguments: "{}".into() }
    }

    #[test]
    fn adjacent_answers_are_coalesced_and_an_unanswered_message_is_noted() {
        let path = vec![
            ChatMessage::user("first"),
            ChatMessage::user("second"),
            ChatMessage::assistant("part one", Vec::new()),
            ChatMessage::assistant("part two", Vec::new()),
        ];
        let sent = request_messages(&path);
        let roles: Vec<ChatRole> = sent.iter().map(|m| m.role).collect();
        assert_eq!(roles, [ChatRole::User, ChatRole::Assistant, ChatRole::User, ChatRole::Assistant]);
        assert!(sent[1].text.starts_with("[No answer was given"));
        assert_eq!(sent[3].text, "part one\n\npart two");
    }

    #[test]
    fn nothing_is_coalesced_across_tool_calls_or_results() {
        let path = vec![
            ChatMessage::user("look"),
            ChatMessage::assistant("reading", vec![call("c1")]),
            ChatMessage::tool_result("c1", "content", false),
            ChatMessage::assistant("it says", Vec::new()),
            ChatMessage::assistant("more", vec![call("c2")]),
        ];
        let sent = request_messages(&path);
        assert_eq!(sent.len(), 5, "tool use and results stay as they are");
        assert_eq!(sent[3].text, "it says");
    }
}
