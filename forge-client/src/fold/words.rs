//! Events in words, the same in every client. Conversation (messages,
//! answers, tool calls and their output) is drawn by each client; what is
//! worded here is everything said about the session around it.

use forge_proto::{EventKind, RecoveryCall};

use super::{Level, Notice};

/// The event as a notice, when it is one. `who` is the client that caused
/// it.
pub(super) fn notice(kind: &EventKind, who: Option<&str>) -> Option<Notice> {
    // The stream itself is conversation: nothing to word, nothing to make.
    if matches!(
        kind,
        EventKind::TextDelta { .. }
            | EventKind::ThinkingDelta { .. }
            | EventKind::ToolCallArgs { .. }
            | EventKind::ToolOutput { .. }
    ) {
        return None;
    }
    let by = who.map(|w| format!(" by {w}")).unwrap_or_default();
    let info = |text: String| Some(Notice { level: Level::Info, text, routine: false });
    match kind {
        EventKind::SessionRenamed { name } => {
            info(format!("renamed to {}{by}", name.as_deref().unwrap_or("(no name)")))
        }
        EventKind::SessionConfigured { provider, model, sampling } => {
            let set = who.map(|w| format!(" (set by {w})")).unwrap_or_default();
            let sampling = crate::sampling_words(sampling).map(|s| format!(", {s}")).unwrap_or_default();
            info(format!("now using {provider}/{model}{sampling}{set}"))
        }
        EventKind::SamplingAdjusted { model, parameter, asked, sent, reason } => Some(Notice {
            level: Level::Warn,
            text: match sent {
                Some(sent) => format!("{parameter} {asked} is sent to {model} as {sent}: {reason}"),
                None => format!("{parameter} {asked} is not sent to {model}: {reason}"),
            },
            routine: false,
        }),
        EventKind::ModelFallback { model, fallback, reason, .. } => Some(Notice {
            level: Level::Warn,
            text: match reason.as_str() {
                "deprecated" => format!(
                    "{model} is deprecated: {fallback} answers in its place (`forgectl model SESSION {fallback}` makes it the session's)"
                ),
                _ => format!(
                    "the provider does not know {model}: {fallback}, its configured fallback, answers in its place"
                ),
            },
            routine: false,
        }),
        EventKind::ActiveFilesChanged { too_large, .. } if !too_large.is_empty() => Some(Notice {
            level: Level::Warn,
            text: format!(
                "{} grew past the room active files have in the model's window: out of the active files",
                too_large.join(", ")
            ),
            routine: false,
        }),
        EventKind::ActiveFilesChanged { gone, .. } if !gone.is_empty() => Some(Notice {
            level: Level::Warn,
            text: format!(
                "{} no longer exist{}: out of the active files",
                gone.join(", "),
                if gone.len() == 1 { "s" } else { "" }
            ),
            routine: false,
        }),
        EventKind::ActiveFilesChanged { files, added, removed, .. } => {
            let mut said = Vec::new();
            if !added.is_empty() {
                said.push(format!("added {}", added.join(", ")));
            }
            if !removed.is_empty() {
                said.push(format!("removed {}", removed.join(", ")));
            }
            let now = match files.is_empty() {
                true => "none now".to_string(),
                false => format!("now {}", files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>().join(", ")),
            };
            info(format!("active files: {}{by}; {now}", said.join("; ")))
        }
        EventKind::ModelDeprecated { model } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "{model} is deprecated and no fallback is known: move to another model (`forgectl models` lists them), \
                 or name one with `fallback` in its [[models]] entry"
            ),
            routine: false,
        }),
        EventKind::HistoryCleared {} => info(format!("conversation cleared{by}; earlier messages stay in the store")),
        EventKind::HeadMoved { head, .. } => info(format!(
            "moved to {}{by} in the conversation tree (`forgectl tree` draws it)",
            head.as_deref().unwrap_or("an empty conversation")
        )),
        EventKind::NodeEdited { node_id, new_node_id, in_place: true } if node_id == new_node_id => {
            info(format!("{node_id} edited in place{by}"))
        }
        EventKind::NodeEdited { node_id, new_node_id, .. } => {
            info(format!("{node_id} edited as a new branch {new_node_id}{by}"))
        }
        EventKind::NodesDeleted { node_ids, .. } => info(format!("{} message(s) deleted{by}", node_ids.len())),
        EventKind::NodeSplit { node_id, new_node_id, .. } => {
            info(format!("{node_id} split{by}; the rest is {new_node_id}"))
        }
        EventKind::BookmarkSet { name, node_id: Some(n) } => info(format!("bookmark {name} -> {n}{by}")),
        EventKind::BookmarkSet { name, node_id: None } => info(format!("bookmark {name} deleted{by}")),
        EventKind::SessionForked { from, node } => info(format!("forked from {from} at {node}")),
        EventKind::RewindStarted { node, files, .. } => info(format!(
            "putting {} file(s) back as they were at {}{by}",
            files.len(),
            node.as_deref().unwrap_or("the start")
        )),
        EventKind::FilesRestored { node, files, recovered } => info(format!(
            "{} file(s) put back as they were at {}{}",
            files.len(),
            node.as_deref().unwrap_or("the start"),
            if *recovered { " (finished on restart: forged had stopped during the rewind)".to_string() } else { by }
        )),
        EventKind::TurnStarted { continued: true, .. } => info(format!("continuing from here{by}, no new message")),
        EventKind::ApprovalRulesChanged { mode, always_allow } => {
            let mut parts = Vec::new();
            if let Some(mode) = mode {
                parts.push(format!("approval mode {mode}"));
            }
            if !always_allow.is_empty() {
                parts.push(format!("always allowed: {}", always_allow.join(", ")));
            }
            if parts.is_empty() {
                info(format!("approval rules reset to the configured ones{by}"))
            } else {
                info(format!("{}{by}", parts.join("; ")))
            }
        }
        EventKind::HookRan { event, command, tool, decision, reason, .. } => {
            let tool = tool.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
            let reason = reason.as_deref().map(|r| format!(": {}", first_line(r, 160))).unwrap_or_default();
            Some(Notice {
                level: if decision == "error" { Level::Warn } else { Level::Info },
                text: format!("{event} hook{tool} `{}` {decision}{reason}", first_line(command, 80)),
                // Allows are routine; blocks and errors are worth a line.
                routine: decision == "allow",
            })
        }
        EventKind::ApprovalResolved { approved, denied, .. } => info(match (approved.len(), denied.len()) {
            (_, 0) => format!("tool calls approved{by}"),
            (0, _) => format!("tool calls denied{by}"),
            (a, d) => format!("{a} tool call(s) approved, {d} denied{by}"),
        }),
        EventKind::Retrying { attempt, max_attempts, delay_ms, reason, .. } => Some(Notice {
            level: Level::Warn,
            text: crate::retrying_line(*attempt, *max_attempts, *delay_ms, reason),
            routine: false,
        }),
        EventKind::HelperStarted { helper, description, agent, .. } => info(format!(
            "helper agent started: {description} ({agent}, session {helper}; `forgectl attach {helper}` follows it)"
        )),
        EventKind::HelperFinished { helper, status, cost_usd, .. } => Some(Notice {
            level: if *status == forge_proto::MessageStatus::Complete { Level::Info } else { Level::Warn },
            text: format!(
                "helper agent {helper} {}: ${cost_usd:.4}",
                match status {
                    forge_proto::MessageStatus::Complete => "answered",
                    forge_proto::MessageStatus::Cancelled => "was cancelled",
                    forge_proto::MessageStatus::Interrupted => "was interrupted",
                    _ => "failed",
                }
            ),
            routine: false,
        }),
        EventKind::ApprovalRequested { helper: Some(helper), calls, .. } => Some(Notice {
            level: Level::Warn,
            text: format!("helper agent {helper} asks to run {} tool call(s); an answer here goes to it", calls.len()),
            routine: false,
        }),
        EventKind::GitSessionStarted { branch, base, .. } => {
            info(format!("git session on branch {branch} (from {}); each turn becomes a commit there", short_id(base)))
        }
        EventKind::GitCommitted { commit, branch, files, .. } => Some(Notice {
            level: Level::Info,
            text: format!(
                "turn committed: {} on {branch} ({})",
                short_id(commit),
                match files.len() {
                    0 => "no file changed".to_string(),
                    1 => "1 file".to_string(),
                    n => format!("{n} files"),
                }
            ),
            routine: true,
        }),
        EventKind::GitCheckpoint { commit, branch, reason, .. } => Some(Notice {
            level: Level::Info,
            text: format!(
                "{} {} on {branch}",
                match reason.as_str() {
                    "awaiting_approval" => "the work so far committed before the approval:",
                    "approved" => "your approval committed:",
                    _ => "your refusal committed:",
                },
                short_id(commit)
            ),
            routine: true,
        }),
        EventKind::GitBranchMoved { branch, commit, kept, .. } => {
            info(format!("{branch} moved to {} with its files; the tip it left is kept as {kept}", short_id(commit)))
        }
        EventKind::GitCommitFailed { error, .. } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "the turn could not be committed: {error}; its changes stay in the worktree for the next commit"
            ),
            routine: false,
        }),
        EventKind::CommandIgnored { name, dir } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "/{name} is a command of {dir}, which you have not trusted: the message went to the model as text \
                 (`forgectl trust {dir}` honours the project's commands)"
            ),
            routine: false,
        }),
        EventKind::GitSettingsUndone { undone, .. } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "the command left git settings or hooks that would run programs outside the sandbox when you run git \
                 there; undone: {}",
                undone.iter().map(|u| format!("{}: {}", u.path, u.what)).collect::<Vec<_>>().join("; ")
            ),
            routine: false,
        }),
        EventKind::McpWaiting { servers, timeout_seconds } => info(format!(
            "waiting for MCP server{} {} to start (up to {timeout_seconds} s) so the model gets its tools",
            if servers.len() == 1 { "" } else { "s" },
            servers.join(", ")
        )),
        EventKind::McpWaited { waited_ms, not_started } if not_started.is_empty() => Some(Notice {
            level: Level::Info,
            text: format!("MCP servers ready after {:.1} s", *waited_ms as f64 / 1000.0),
            routine: true,
        }),
        EventKind::McpWaited { waited_ms, not_started } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "MCP server{} {} still starting after {:.1} s: this turn goes on without {} tools (`forgectl mcp` says why)",
                if not_started.len() == 1 { "" } else { "s" },
                not_started.join(", "),
                *waited_ms as f64 / 1000.0,
                if not_started.len() == 1 { "its" } else { "their" },
            ),
            routine: false,
        }),
        EventKind::CancelRequested {} => info(format!("cancel requested{by}")),
        EventKind::SummarizationStarted { messages, tokens_before, .. } => info(format!(
            "summarizing the {messages} oldest messages (about {tokens_before} tokens) to make room; the originals stay in history"
        )),
        EventKind::SummarizationRetry { attempt, max_attempts, delay_ms, error } => Some(Notice {
            level: Level::Warn,
            text: format!(
                "summary failed ({error}); attempt {attempt}/{max_attempts} in {:.1}s",
                *delay_ms as f64 / 1000.0
            ),
            routine: false,
        }),
        EventKind::SummarizationDone { summary_id, span } => info(format!(
            "summarized {} messages as {summary_id}, about {} tokens down to {}",
            span.messages, span.tokens_before, span.tokens_after
        )),
        EventKind::ContextRestored { messages_restored, .. } => {
            info(format!("the larger window takes {messages_restored} summarized messages back as they were"))
        }
        EventKind::SummarizationFailed { error } => {
            Some(Notice { level: Level::Error, text: format!("summarization failed: {error}"), routine: false })
        }
        EventKind::QueueCleared { dropped } => info(format!("{dropped} queued message(s) dropped{by}")),
        EventKind::PlanUpdated { steps, .. } => {
            let done = steps.iter().filter(|s| s.status == "completed").count();
            let now = steps.iter().find(|s| s.status == "in_progress").map(|s| format!(": now {}", s.step));
            info(format!("plan: {done} of {} step(s) done{}", steps.len(), now.unwrap_or_default()))
        }
        EventKind::SteerQueued { .. } => {
            info(format!("steer{by} waits for the turn's next step (or runs next if the turn ends first)"))
        }
        EventKind::SteerApplied { .. } => info("the steer joined the turn: the next request carries it".into()),
        EventKind::Usage { usage, cost_usd, session, .. } => Some(Notice {
            level: Level::Info,
            text: format!(
                "usage: {} in, {} out tokens, {}; session {}",
                usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
                usage.output_tokens,
                cost_usd.map(crate::usd).unwrap_or_else(|| "cost unknown".into()),
                crate::cost_words(session)
            ),
            routine: true,
        }),
        _ => None,
    }
}

/// A call left unfinished by a stop, in words: `run_command `make`
/// (was running; its processes were stopped with forged)`.
pub fn recovery_line(c: &RecoveryCall) -> String {
    let how = match (c.interrupted, c.name.as_str()) {
        (true, "run_command") => "was running; its processes were stopped with forged",
        (true, _) => "was running",
        (false, _) => "had not started",
    };
    let what = match c.name.as_str() {
        "run_command" => serde_json::from_str::<serde_json::Value>(&c.arguments)
            .ok()
            .and_then(|a| a["command"].as_str().map(|cmd| format!(" `{cmd}`")))
            .unwrap_or_default(),
        _ => String::new(),
    };
    format!("{}{what} ({how})", c.name)
}

/// The first line of `s`, at most `max` characters, marked when cut.
pub fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let cut = line.chars().count() > max || s.lines().nth(1).is_some();
    let mut out: String = line.chars().take(max).collect();
    if cut {
        out.push_str(" ...");
    }
    out
}

/// A commit id as git shows it short.
fn short_id(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}
