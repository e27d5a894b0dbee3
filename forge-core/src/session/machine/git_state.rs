//! Git mode: what a commit of a turn holds: its subject (the user's first
//! line, marked when the turn did not complete or stopped for the user)
//! and `.forge/sessions/<id>.json`, the session state the turn leaves.

use forge_proto::MessageStatus;
use serde_json::json;

use super::Session;
use crate::provider::ChatRole;

/// A commit subject's most characters (git's own advice is 50–72).
const SUBJECT_CHARS: usize = 72;

impl Session {
    /// The commit of the turn started by user message `turn`.
    pub(super) fn turn_commit(&self, turn: &str, status: MessageStatus) -> forge_git::TurnCommit {
        let mark = match status {
            MessageStatus::Complete => None,
            MessageStatus::Cancelled => Some("[cancelled]"),
            MessageStatus::Interrupted => Some("[interrupted]"),
            _ => Some("[failed]"),
        };
        self.commit_of(turn, turn, json!(status), mark, None)
    }

    /// A commit of the turn so far, under `key` (its own trailer, so the
    /// turn's commit is not taken for it), subject marked `mark`, and
    /// `extra` (a key and value) in its state.
    pub(super) fn commit_of(
        &self,
        turn: &str,
        key: &str,
        status: serde_json::Value,
        mark: Option<&str>,
        extra: Option<(&str, serde_json::Value)>,
    ) -> forge_git::TurnCommit {
        let at = self.path.iter().rposition(|m| m.node.as_deref() == Some(turn));
        let messages = at.map(|i| &self.path[i..]).unwrap_or_default();
        let asked = messages.first().map(|m| m.text.as_str()).unwrap_or_default();
        let first = asked.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("A turn with no message");
        let mut subject: String = first.chars().take(SUBJECT_CHARS).collect();
        if first.chars().count() > SUBJECT_CHARS {
            subject.push('…');
        }
        if let Some(mark) = mark {
            subject = format!("{mark} {subject}");
        }
        let body = (asked.trim() != first).then(|| asked.trim().to_string());
        let messages: Vec<serde_json::Value> = messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                    ChatRole::Tool => "tool",
                };
                let mut v = json!({"node": m.node, "role": role, "text": m.text});
                if !m.tool_calls.is_empty() {
                    v["tool_calls"] = json!(m.tool_calls);
                }
                if let Some((call_id, is_error)) = &m.tool_result {
                    v["tool_result"] = json!({"call_id": call_id, "is_error": is_error});
                }
                v
            })
            .collect();
        let mut state = json!({
            "version": 1,
            "session": self.row.id,
            "turn": key,
            "head": self.row.head_id,
            "status": status,
            "provider": self.row.provider,
            "model": self.row.model,
            "usage": self.spent,
            "active_files": self.row.active_files,
            "messages": messages,
        });
        if let Some((k, v)) = extra {
            state[k] = v;
        }
        let mut bytes = serde_json::to_vec_pretty(&state).unwrap_or_default();
        bytes.push(b'\n');
        forge_git::TurnCommit {
            session: self.row.id.clone(),
            turn: key.to_string(),
            subject,
            body,
            state: bytes,
            leave_out: Vec::new(),
            put_back: Vec::new(),
        }
    }
}
