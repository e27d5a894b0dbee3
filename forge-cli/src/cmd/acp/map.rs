//! Forge's words in ACP's: tool kinds and titles, prompts as message
//! text, how a turn ended, a stored conversation replayed as updates.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, EmbeddedResourceResource, ImageContent, SessionUpdate, StopReason, TextContent,
    ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use forge_proto::{HistoryMessage, MessageStatus, Role};
use serde_json::Value;

/// The most of a tool's output an editor is sent (it has the whole in
/// the session).
const MAX_SHOWN_OUTPUT: usize = 16 * 1024;

pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "git_status" | "git_diff" | "git_log" | "git_show" | "git_blame" | "recall" => ToolKind::Read,
        "glob" | "search" | "rg" | "ripgrep" | "grep" => ToolKind::Search,
        "write_file" | "edit" | "apply_patch" | "git_add" | "git_commit" | "git_stash" | "git_checkout"
        | "git_branch" => ToolKind::Edit,
        "git_restore" | "delete_file" => ToolKind::Delete,
        "run_command" => ToolKind::Execute,
        "web_fetch" => ToolKind::Fetch,
        "current_date" | "introspect" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// What a call does, in a line: `read_file src/main.rs`, `run_command
/// cargo test`, or the tool's name.
pub fn tool_title(name: &str, args: &Value) -> String {
    let s = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
    let detail = match name {
        "run_command" => s("command"),
        "search" | "rg" | "ripgrep" | "grep" => s("pattern").or_else(|| s("query")),
        "glob" => s("pattern"),
        "web_fetch" => s("url"),
        "apply_patch" => {
            let files = patch_files(args);
            (!files.is_empty()).then(|| files.join(", "))
        }
        _ => s("path"),
    };
    match detail {
        Some(d) if !d.is_empty() => {
            let d: String = d.lines().next().unwrap_or("").chars().take(120).collect();
            format!("{name} {d}")
        }
        _ => name.to_string(),
    }
}

/// The files an LP1 patch names (`F path` lines).
pub fn patch_files(args: &Value) -> Vec<String> {
    let patch = args.get("patch").and_then(Value::as_str).unwrap_or("");
    patch.lines().filter_map(|l| l.strip_prefix("F ")).map(|p| p.trim().to_string()).collect()
}

/// The files a call reads or changes, for the editor to follow.
pub fn locations(name: &str, args: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
    let paths: Vec<String> = match name {
        "apply_patch" => patch_files(args),
        _ => args.get("path").and_then(Value::as_str).map(|p| vec![p.to_string()]).unwrap_or_default(),
    };
    paths.into_iter().map(|p| ToolCallLocation::new(cwd.join(p))).collect()
}

/// The first update about a call the model made (its arguments known).
pub fn tool_call(id: &str, name: &str, args: &Value, cwd: &Path, status: ToolCallStatus) -> ToolCall {
    ToolCall::new(id.to_string(), tool_title(name, args))
        .kind(tool_kind(name))
        .status(status)
        .locations(locations(name, args, cwd))
        .raw_input(args.clone())
}

/// A call's result as an update: the output as text, and, for a file
/// change, the change as a diff.
pub fn tool_done(id: &str, is_error: bool, output: &str, diffs: Vec<Diff>) -> ToolCallUpdate {
    let mut content: Vec<ToolCallContent> = diffs.into_iter().map(ToolCallContent::Diff).collect();
    content.push(ToolCallContent::from(ContentBlock::Text(TextContent::new(shown(output)))));
    let status = if is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
    ToolCallUpdate::new(id.to_string(), ToolCallUpdateFields::new().status(status).content(content))
}

fn shown(output: &str) -> String {
    if output.len() <= MAX_SHOWN_OUTPUT {
        return output.to_string();
    }
    let mut end = MAX_SHOWN_OUTPUT;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes]", &output[..end], output.len() - end)
}

pub fn text(t: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(t)))
}

/// An editor's prompt as the text of one Forge message: text as it is,
/// files the user attached inline (their text in a fenced block), links
/// as references; what Forge cannot send the model is named.
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => parts.push(format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    parts.push(format!("Attached {}:\n```\n{}\n```", t.uri, t.text.trim_end()))
                }
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    parts.push(format!("[attached {} (binary, not shown to the model)]", b.uri))
                }
                _ => parts.push("[an attachment Forge cannot read]".into()),
            },
            // Sent with the message as images (see `prompt_images`).
            ContentBlock::Image(_) => {}
            ContentBlock::Audio(_) => parts.push("[an audio clip was attached; this agent cannot use it]".into()),
            _ => parts.push("[content this agent cannot read]".into()),
        }
    }
    parts.join("\n\n")
}

/// The prompt's images: (base64, MIME type, a name from their URI).
pub fn prompt_images(blocks: &[ContentBlock]) -> Vec<forge_client::images::Attachment> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Image(i) => {
                let name = i.uri.as_deref().and_then(|u| u.rsplit('/').next()).map(str::to_string);
                Some(forge_client::images::Attachment {
                    name,
                    // Base64 is four bytes for three.
                    bytes: i.data.len() as u64 / 4 * 3,
                    data: i.data.clone(),
                    mime_type: Some(i.mime_type.clone()),
                })
            }
            _ => None,
        })
        .collect()
}

/// How a turn ended, in ACP's words; `Err` is a turn that failed.
pub fn stop_reason(
    status: MessageStatus,
    stop_reason: Option<&str>,
    error_kind: Option<&str>,
    error: Option<&str>,
) -> Result<StopReason, String> {
    match status {
        MessageStatus::Cancelled => Ok(StopReason::Cancelled),
        MessageStatus::Complete => Ok(match stop_reason {
            Some("max_tokens" | "length" | "MAX_TOKENS" | "max_output_tokens") => StopReason::MaxTokens,
            Some("refusal" | "content_filter" | "SAFETY") => StopReason::Refusal,
            _ => StopReason::EndTurn,
        }),
        _ if error_kind == Some("tool_iteration_limit_exceeded") => Ok(StopReason::MaxTurnRequests),
        _ => Err(error.unwrap_or("the turn failed").to_string()),
    }
}

/// The session's conversation as the updates that would have shown it;
/// a message's images from `images` (hash to base64), as the editor sent
/// them.
pub fn replay(
    messages: &[HistoryMessage],
    cwd: &Path,
    images: &std::collections::HashMap<String, String>,
) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for m in messages {
        if m.role == Role::User {
            for i in &m.meta.images {
                if let Some(data) = images.get(&i.hash) {
                    let image = ContentBlock::Image(ImageContent::new(data.clone(), i.mime_type.clone()));
                    updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(image)));
                }
            }
        }
        match m.role {
            Role::User if !m.text.is_empty() => updates.push(SessionUpdate::UserMessageChunk(text(&m.text))),
            Role::Assistant => {
                if !m.text.is_empty() {
                    updates.push(SessionUpdate::AgentMessageChunk(text(&m.text)));
                }
                for c in &m.meta.tool_calls {
                    let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                    // Pending until its result comes, which says how it went.
                    updates.push(SessionUpdate::ToolCall(tool_call(
                        &c.id,
                        &c.name,
                        &args,
                        cwd,
                        ToolCallStatus::Pending,
                    )));
                }
            }
            Role::Tool => {
                if let Some(r) = &m.meta.tool_result {
                    updates.push(SessionUpdate::ToolCallUpdate(tool_done(&r.call_id, r.is_error, &m.text, Vec::new())));
                }
            }
            _ => {}
        }
    }
    updates
}

/// The model's plan as ACP's: every step of medium priority (Forge's plan
/// has none).
pub(super) fn plan(steps: &[forge_proto::PlanStep]) -> agent_client_protocol::v1::schema::Plan {
    use agent_client_protocol::v1::schema::{Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus};
    let entries = steps
        .iter()
        .map(|s| {
            let status = match s.status.as_str() {
                "completed" => PlanEntryStatus::Completed,
                "in_progress" => PlanEntryStatus::InProgress,
                _ => PlanEntryStatus::Pending,
            };
            PlanEntry::new(s.step.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    Plan::new(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_get_kinds_titles_and_locations() {
        assert_eq!(tool_kind("write_file"), ToolKind::Edit);
        assert_eq!(tool_kind("run_command"), ToolKind::Execute);
        assert_eq!(tool_kind("files__read"), ToolKind::Other);
        assert_eq!(tool_title("run_command", &json!({"command": "cargo test\nmore"})), "run_command cargo test");
        let patch = json!({"patch": "LP1\nF src/a.rs\nT\nx\n.\nF b.txt\nT\ny\n.\nEND\n"});
        assert_eq!(tool_title("apply_patch", &patch), "apply_patch src/a.rs, b.txt");
        let loc = locations("apply_patch", &patch, Path::new("/p"));
        assert_eq!(loc.iter().map(|l| l.path.display().to_string()).collect::<Vec<_>>(), ["/p/src/a.rs", "/p/b.txt"]);
    }

    #[test]
    fn prompts_keep_text_and_name_what_cannot_be_sent() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "Fix this"},
            {"type": "resource", "resource": {"uri": "file:///p/a.rs", "text": "fn main() {}\n"}},
            {"type": "resource_link", "name": "b.rs", "uri": "file:///p/b.rs"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]))
        .unwrap_or_default();
        let t = prompt_text(&blocks);
        assert!(t.starts_with("Fix this\n\nAttached file:///p/a.rs:\n```\nfn main() {}\n```"), "{t}");
        assert!(t.contains("[b.rs](file:///p/b.rs)") && !t.contains("image"), "{t}");
        let sent: Vec<(String, Option<String>, Option<String>)> =
            prompt_images(&blocks).into_iter().map(|a| (a.data, a.mime_type, a.name)).collect();
        assert_eq!(sent, [("AAAA".to_string(), Some("image/png".to_string()), None)], "sent as an image");
    }

    #[test]
    fn turn_ends_map_to_stop_reasons() {
        assert_eq!(stop_reason(MessageStatus::Complete, Some("end_turn"), None, None), Ok(StopReason::EndTurn));
        assert_eq!(stop_reason(MessageStatus::Complete, Some("max_tokens"), None, None), Ok(StopReason::MaxTokens));
        assert_eq!(stop_reason(MessageStatus::Cancelled, None, None, None), Ok(StopReason::Cancelled));
        assert_eq!(
            stop_reason(MessageStatus::Error, None, Some("tool_iteration_limit_exceeded"), None),
            Ok(StopReason::MaxTurnRequests)
        );
        assert_eq!(
            stop_reason(MessageStatus::Error, None, Some("provider_auth"), Some("no key")),
            Err("no key".into())
        );
    }
}
