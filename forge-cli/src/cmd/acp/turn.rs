//! One `session/prompt`: the message goes to the daemon session, and its
//! turn is followed to the end as `session/update`s. A pending approval
//! becomes `session/request_permission` for each call; if another client
//! answers first, the editor's requests are withdrawn (`$/cancel_request`).

use forge_proto::params::{
    AnswerParams, ApprovalRulesParams, ContextFilesParams, RewindParams, SendParams, SteerParams, UsageParams,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, CurrentModeUpdate, Diff, PermissionOption, PermissionOptionKind, PromptRequest, PromptResponse,
    RequestPermissionOutcome, RequestPermissionRequest, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use forge_client::fold::{Fold, Seen};
use forge_client::{ForgeClient, Resume, Resumed};
use forge_proto::{ApprovalCall, ApprovalDecision, EventKind, JournalHealth, SubscriptionItem};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::{Bridge, Result, from_client, map, rpc_error};

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject_once";

/// A call of the turn, as far as it is known.
struct Call {
    name: String,
    args: String,
    /// The files a file tool may change, as they were before it ran.
    before: Vec<(PathBuf, Option<String>)>,
}

struct Turn<'a> {
    cx: &'a ConnectionTo<Client>,
    session: String,
    cwd: PathBuf,
    /// The session's events as every client reads them (which call a
    /// streamed fragment belongs to, when an answer's calls are whole).
    fold: Fold,
    calls: HashMap<String, Call>,
    /// The editor being asked about each pending approval (helper agents
    /// may ask at the same time).
    asking: Vec<(String, JoinHandle<()>)>,
    /// The sources the answer cites (url, title): said after it.
    sources: Vec<(String, String)>,
    /// The session's files are on this machine (not through --remote), so
    /// an edit's diff can be read from them.
    files_here: bool,
}

/// The largest prompt handed to the daemon (its messages hold 8 MiB; the
/// rest is room for the request around the text).
const MAX_PROMPT_BYTES: usize = forge_proto::MAX_MESSAGE_BYTES as usize - 64 * 1024;

/// One prompt: handed to the daemon (then `sending` is dropped), then
/// followed to its end.
/// Where a prompt's message went: its session, node and first event.
struct Sent {
    session_id: String,
    message_id: String,
    seq: u64,
}

pub(super) async fn prompt(
    b: &Arc<Bridge>,
    req: PromptRequest,
    cx: &ConnectionTo<Client>,
    sending: super::Sending,
) -> Result<PromptResponse> {
    let session = req.session_id.to_string();
    let text = map::prompt_text(&req.prompt);
    if text.len() > MAX_PROMPT_BYTES {
        return Err(rpc_error(
            -32602,
            format!(
                "the prompt is {:.1} MiB; Forge takes at most {} MiB in one message. Point the agent at large files by path instead of pasting them",
                text.len() as f64 / (1024.0 * 1024.0),
                MAX_PROMPT_BYTES / (1024 * 1024)
            ),
        ));
    }
    let d = &*b.daemon().await?;
    if let Some(reply) = command(b, &session, text.trim()).await? {
        say(cx, &session, &reply)?;
        return Ok(PromptResponse::new(StopReason::EndTurn));
    }
    // A prompt while a turn runs steers it (it joins at the turn's next
    // step); otherwise it starts a turn, as a message. One with images is
    // a message (queued behind a running turn).
    let images = map::prompt_images(&req.prompt);
    let sent = if images.is_empty() {
        let s = d.client.session_steer(SteerParams { session: session.clone(), text }).await.map_err(from_client)?;
        Sent { session_id: s.session_id, message_id: s.message_id, seq: s.seq }
    } else {
        let attached = forge_client::images::put_all(&d.client, images).await.map_err(from_client)?;
        let params = SendParams { session: session.clone(), text: Some(text), images: attached, ..Default::default() };
        let s = d.client.session_send(params).await.map_err(from_client)?;
        Sent { session_id: s.session_id, message_id: s.message_id, seq: s.seq }
    };
    drop(sending);
    let mut follow =
        Resume::start(&d.endpoint, &d.info, sent.session_id.clone(), Some(sent.seq)).await.map_err(from_client)?;
    let cwd = match b.cwd(&session) {
        Some(cwd) => cwd,
        None => PathBuf::from(d.client.session_show(session.clone()).await.map_err(from_client)?.cwd),
    };
    let mut turn = Turn {
        cx,
        session: sent.session_id.clone(),
        cwd,
        fold: Fold::default(),
        calls: HashMap::new(),
        asking: Vec::new(),
        sources: Vec::new(),
        files_here: b.global.remote().is_none(),
    };
    let mut in_turn = false;
    // Steered into a running turn: this prompt ends with that turn, whose
    // updates the prompt that started it sends.
    let mut joined = false;
    let result = loop {
        let item = match follow.next().await {
            Some(Ok(Resumed::Item(item))) => Some(Ok(item)),
            // ACP has no notice: a dropped link is said as a thought.
            Some(Ok(Resumed::Lost { why, retry_in })) => {
                let words = format!("{why}; reconnecting in {:.1} s\n", retry_in.as_secs_f64());
                turn.send(SessionUpdate::AgentThoughtChunk(map::text(&words)))?;
                continue;
            }
            Some(Ok(Resumed::Back)) => {
                turn.send(SessionUpdate::AgentThoughtChunk(map::text("reconnected; the turn goes on\n")))?;
                continue;
            }
            Some(Err(e)) => Some(Err(e)),
            None => None,
        };
        let ev = match item {
            Some(Ok(SubscriptionItem::Event(ev))) => ev,
            Some(Ok(SubscriptionItem::Closed { reason })) => {
                break Err(rpc_error(-32603, format!("the session closed: {reason}")));
            }
            Some(Ok(SubscriptionItem::Journal { health: JournalHealth::Blocked, reason })) => {
                break Err(rpc_error(
                    -32603,
                    format!("the turn stopped: {}", reason.unwrap_or_else(|| "the store cannot be written".into())),
                ));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => break Err(rpc_error(-32603, e.to_string())),
            None => break Err(rpc_error(-32603, "forged closed the stream before the turn ended")),
        };
        let Some(seen) = turn.fold.apply(&ev) else { continue };
        match ev.kind {
            EventKind::TurnStarted { message_id, .. } if message_id == sent.message_id => in_turn = true,
            EventKind::SteerApplied { message_id, .. } if message_id == sent.message_id => joined = true,
            EventKind::TurnFinished { message_id, status, stop_reason, error, error_kind, .. }
                if message_id == sent.message_id || joined =>
            {
                if !turn.sources.is_empty() {
                    let list: Vec<String> = turn
                        .sources
                        .iter()
                        .enumerate()
                        .map(|(i, (url, title))| {
                            format!(
                                "[{}] {}",
                                i + 1,
                                if title.is_empty() { url.clone() } else { format!("{title} {url}") }
                            )
                        })
                        .collect();
                    turn.send(SessionUpdate::AgentMessageChunk(map::text(&format!(
                        "\n\nSources:\n{}",
                        list.join("\n")
                    ))))?;
                }
                break map::stop_reason(status, stop_reason.as_deref(), error_kind.as_deref(), error.as_deref())
                    .map(PromptResponse::new)
                    .map_err(|e| rpc_error(-32603, e));
            }
            kind if in_turn => turn.on_event(b, kind, seen).await?,
            _ => {}
        }
    };
    turn.stop_asking(None);
    result
}

impl Turn<'_> {
    fn send(&self, update: SessionUpdate) -> Result<()> {
        self.cx.send_notification(SessionNotification::new(self.session.clone(), update))
    }

    async fn on_event(&mut self, b: &Arc<Bridge>, kind: EventKind, seen: Seen) -> Result<()> {
        match kind {
            EventKind::TextDelta { text } => self.send(SessionUpdate::AgentMessageChunk(map::text(&text)))?,
            EventKind::PlanUpdated { steps, .. } => self.send(SessionUpdate::Plan(map::plan(&steps)))?,
            EventKind::ThinkingDelta { text } => self.send(SessionUpdate::AgentThoughtChunk(map::text(&text)))?,
            EventKind::WebSearch { query } => {
                self.send(SessionUpdate::AgentThoughtChunk(map::text(&format!("searching the web: {query}\n"))))?
            }
            EventKind::Citation { url, title, .. } if !self.sources.iter().any(|(u, _)| *u == url) => {
                self.sources.push((url, title));
            }
            // ACP has no notice: the wait for MCP servers is said as a
            // thought, so the editor shows why nothing comes yet.
            EventKind::McpWaiting { .. }
            | EventKind::McpWaited { .. }
            | EventKind::CommandIgnored { .. }
            | EventKind::GitSettingsUndone { .. }
            | EventKind::SamplingAdjusted { .. }
            | EventKind::ModelFallback { .. }
            | EventKind::ModelDeprecated { .. }
            | EventKind::ActiveFilesChanged { .. } => {
                if let Some(notice) = seen.notice.filter(|n| !n.routine) {
                    self.send(SessionUpdate::AgentThoughtChunk(map::text(&format!("{}\n", notice.text))))?;
                }
            }
            EventKind::ToolCallStarted { call_id, name, .. } => {
                let call = map::tool_call(&call_id, &name, &Value::Null, &self.cwd, ToolCallStatus::Pending);
                self.calls.insert(call_id, Call { name, args: String::new(), before: Vec::new() });
                self.send(SessionUpdate::ToolCall(call))?;
            }
            // The answer is whole: its calls' arguments are known.
            EventKind::AssistantNode { .. } => {
                for whole in seen.calls {
                    if let Some(call) = self.calls.get_mut(&whole.call_id) {
                        call.args = whole.args;
                        self.describe(&whole.call_id)?;
                    }
                }
            }
            EventKind::ApprovalRequested { approval_id, calls, .. } => {
                self.stop_asking(Some(&approval_id));
                let asker =
                    tokio::spawn(ask(b.clone(), self.cx.clone(), self.session.clone(), approval_id.clone(), calls));
                self.asking.push((approval_id, asker));
            }
            // Answered here or elsewhere: a question still open is withdrawn.
            EventKind::ApprovalResolved { approval_id, .. } => self.stop_asking(Some(&approval_id)),
            EventKind::ToolRunning { call_id, .. } => {
                let fields = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
                self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id, fields)))?;
            }
            EventKind::ToolResult { call_id, is_error, output, .. } => {
                let diffs = if is_error { Vec::new() } else { self.diffs(&call_id) };
                self.send(SessionUpdate::ToolCallUpdate(map::tool_done(&call_id, is_error, &output, diffs)))?;
            }
            EventKind::ApprovalRulesChanged { mode, .. } => {
                let mode = match mode.as_deref() {
                    Some("auto" | "permissive") => "permissive",
                    Some("deny" | "strict") => "strict",
                    _ => "default",
                };
                self.send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.to_string())))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Tells the editor a call's arguments (title, files, input), and
    /// keeps the files an edit may change as they are now, for its diff.
    fn describe(&mut self, id: &str) -> Result<()> {
        let Some(call) = self.calls.get_mut(id) else { return Ok(()) };
        let args: Value = serde_json::from_str(&call.args).unwrap_or(Value::Null);
        if self.files_here && matches!(call.name.as_str(), "write_file" | "edit" | "delete_file" | "apply_patch") {
            call.before = map::locations(&call.name, &args, &self.cwd)
                .into_iter()
                .map(|l| {
                    let text = std::fs::read_to_string(&l.path).ok();
                    (l.path, text)
                })
                .collect();
        }
        let full = map::tool_call(id, &call.name, &args, &self.cwd, ToolCallStatus::Pending);
        let mut fields = ToolCallUpdateFields::new()
            .title(full.title)
            .kind(full.kind)
            .locations(full.locations)
            .raw_input(args.clone());
        if call.name == "write_file"
            && let (Some(path), Some(content)) =
                (args.get("path").and_then(Value::as_str), args.get("content").and_then(Value::as_str))
        {
            // What it will write, before it runs (the approval's preview).
            fields = fields.content(vec![ToolCallContent::Diff(Diff::new(self.cwd.join(path), content))]);
        }
        self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields)))
    }

    /// An edit's changes, from the files before it to the files now.
    fn diffs(&self, id: &str) -> Vec<Diff> {
        let Some(call) = self.calls.get(id) else { return Vec::new() };
        call.before
            .iter()
            .filter_map(|(path, old)| {
                let new = std::fs::read_to_string(path).ok()?;
                (old.as_deref() != Some(new.as_str())).then(|| Diff::new(path.clone(), new).old_text(old.clone()))
            })
            .collect()
    }

    /// Withdraws the question about `approval_id` (every one: `None`).
    fn stop_asking(&mut self, approval_id: Option<&str>) {
        self.asking.retain(|(id, asker)| {
            let stop = approval_id.is_none_or(|a| a == id);
            if stop {
                // Dropping the question sends `$/cancel_request` for it.
                asker.abort();
            }
            !stop
        });
    }
}

/// Asks the editor about each call of an approval, then answers it with
/// what was chosen ("allow always" also allows the tool in the session).
async fn ask(b: Arc<Bridge>, cx: ConnectionTo<Client>, session: String, approval_id: String, calls: Vec<ApprovalCall>) {
    let Ok(d) = b.daemon().await else { return };
    let options = vec![
        PermissionOption::new(ALLOW_ONCE.to_string(), "Allow", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS.to_string(),
            "Allow always (this session)",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT.to_string(), "Reject", PermissionOptionKind::RejectOnce),
    ];
    let (mut approved, mut always) = (Vec::new(), Vec::new());
    for call in &calls {
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let summary = ToolCallContent::from(ContentBlock::Text(TextContent::new(format!(
            "{} (risk: {})",
            call.summary, call.risk
        ))));
        let fields = ToolCallUpdateFields::new()
            .title(map::tool_title(&call.name, &args))
            .kind(map::tool_kind(&call.name))
            .status(ToolCallStatus::Pending)
            .raw_input(args)
            .content(vec![summary]);
        let request = RequestPermissionRequest::new(
            session.clone(),
            ToolCallUpdate::new(call.call_id.clone(), fields),
            options.clone(),
        );
        let Ok(answer) = cx.send_request(request).block_task().await else { return };
        match answer.outcome {
            RequestPermissionOutcome::Selected(s) => {
                let chosen = s.option_id.to_string();
                if chosen == ALLOW_ONCE || chosen == ALLOW_ALWAYS {
                    approved.push(call.call_id.clone());
                }
                if chosen == ALLOW_ALWAYS && !always.contains(&call.name) {
                    always.push(call.name.clone());
                }
            }
            // The turn was cancelled: nothing to answer.
            _ => return,
        }
    }
    if !always.is_empty() {
        let _ = d
            .client
            .session_approval_rules(ApprovalRulesParams {
                session: session.clone(),
                allow: always,
                ..Default::default()
            })
            .await;
    }
    let decision = if approved.len() == calls.len() {
        ApprovalDecision::ApproveAll
    } else if approved.is_empty() {
        ApprovalDecision::DenyAll
    } else {
        ApprovalDecision::ApproveSelected
    };
    let ids = (decision == ApprovalDecision::ApproveSelected).then_some(approved);
    // Another client may have answered meanwhile: the first answer wins.
    let _ = d
        .client
        .approval_answer(AnswerParams {
            session,
            decision,
            approval_id: Some(approval_id),
            call_ids: ids,
            ..Default::default()
        })
        .await;
}

/// A prompt that is one of Forge's commands (`/undo`, `/summarize`,
/// `/usage`): what it did, in words.
async fn command(b: &Bridge, session: &str, text: &str) -> Result<Option<String>> {
    let Some(name) = text.strip_prefix('/') else { return Ok(None) };
    let d = &*b.daemon().await?;
    let reply = match name.trim() {
        undo @ ("undo" | "undo --yes") => {
            let partial = undo.ends_with("--yes");
            let r = d
                .client
                .session_rewind(RewindParams { session: session.to_string(), partial, ..Default::default() })
                .await
                .map_err(from_client)?;
            let files: Vec<String> = r
                .files
                .iter()
                .map(|f| match &f.note {
                    Some(why) if f.action == "kept" => format!("{} left as it was ({why})", f.path),
                    _ => format!("{} {}", f.action, f.path),
                })
                .collect();
            if files.is_empty() {
                "Took back the last turn (no files had changed).".to_string()
            } else {
                format!("Took back the last turn and its files: {}.", files.join(", "))
            }
        }
        "summarize" => {
            let r = d.client.session_summarize(session.to_string()).await.map_err(from_client)?;
            format!("Summarizing {} messages ({} tokens) in the background.", r.messages, r.tokens_before)
        }
        "usage" => {
            let r = d
                .client
                .usage_report(UsageParams { session: Some(session.to_string()), ..Default::default() })
                .await
                .map_err(from_client)?;
            let t = &r.total;
            format!(
                "{} responses, {} input and {} output tokens, about ${:.4}.",
                t.responses, t.tokens.input_tokens, t.tokens.output_tokens, t.cost_usd
            )
        }
        files if files.starts_with("context ") => {
            let words: Vec<&str> = files.split_whitespace().skip(1).collect();
            let (add, paths) = match words.as_slice() {
                ["add", paths @ ..] if !paths.is_empty() => (true, paths),
                ["remove" | "rm", paths @ ..] if !paths.is_empty() => (false, paths),
                _ => return Ok(Some("Use /context add PATH... or /context remove PATH...".into())),
            };
            let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
            let (add, remove) = if add { (paths, Vec::new()) } else { (Vec::new(), paths) };
            let params = ContextFilesParams { session: session.to_string(), add, remove };
            let r = d.client.session_context_files(params).await.map_err(from_client)?;
            let mut said: Vec<String> =
                r.refused.iter().map(|f| format!("Not added: {} ({}).", f.path, f.reason)).collect();
            let now: Vec<&str> = r.files.iter().map(|f| f.path.as_str()).collect();
            said.push(match now.is_empty() {
                true => "No file is active.".to_string(),
                false => format!("Active files (their whole text in every request): {}.", now.join(", ")),
            });
            said.join("\n")
        }
        _ => return Ok(None),
    };
    Ok(Some(reply))
}

fn say(cx: &ConnectionTo<Client>, session: &str, text: &str) -> Result<()> {
    cx.send_notification(SessionNotification::new(
        session.to_string(),
        SessionUpdate::AgentMessageChunk(map::text(text)),
    ))
}
