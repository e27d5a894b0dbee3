//! Context Infinity: before a turn asks the model, if its request would not
//! fit the window (or passes `[context] summarize_at` of it), the oldest
//! span that must leave is summarized by the model. The summary is a node
//! beside the path (hanging off the span's last message), and requests send
//! it in place of the span; the original messages stay in the store and in
//! `forgectl history`. A message sent meanwhile waits in the queue.

use std::time::Duration;

use forge_proto::{ClientRef, EventKind, MessageStatus, Role, SummarySpan};

use super::state::{OperationState, SummaryJob};
use super::{Effect, Session, Timer};
use crate::context::{self, Plan, Summary};
use crate::journal::StoreOp;
use crate::provider::{ChatMessage, ChatRequest, ChatRole, ProviderEvent};
use crate::store::rows::NodeMeta;

/// Seed 000's summarization retries: 500 ms doubling to at most 8 s, plus
/// 0-200 ms of jitter, 5 attempts in all.
const RETRY_BASE: Duration = Duration::from_millis(500);
const RETRY_CAP: Duration = Duration::from_secs(8);
const MAX_ATTEMPTS: u32 = 5;
/// Most of one message the summarizer is shown.
const MAX_MESSAGE_CHARS: usize = 6000;

const INSTRUCTIONS: &str = "You summarize the first part of a conversation between a user and Forge, a coding agent, \
so that the conversation can go on without it. Keep what the rest of the work needs: the user's goals and \
requests, decisions made and why, files read or changed (with paths), commands run and their outcome, errors \
met and how they were solved, open questions and what remains to do. Be factual and compact; use short \
paragraphs or lists; write nothing but the summary.";

/// What the next request sends, and its size.
pub(super) struct SizedView {
    pub view: Vec<ChatMessage>,
    pub summary_id: Option<String>,
    pub bytes: usize,
    pub tokens: u64,
}

impl Session {
    /// The session's model's room: its window, less what is kept for the
    /// answer.
    pub(super) fn context_budget(&self) -> Option<context::ContextBudget> {
        self.model_info().map(|m| context::ContextBudget::for_model(&m, self.requested_output()))
    }

    /// The bytes every request carries besides the conversation (the
    /// system prompt, the tool definitions).
    pub(super) fn fixed_bytes(&self) -> usize {
        self.system_prompt.len() + self.tools_bytes + self.active_bytes()
    }

    /// What requests send now: the view (the summary in force, then the
    /// rest of the path), the summary's id, its bytes with the fixed part,
    /// and its tokens (from the provider's last count when it extends that
    /// request).
    pub(super) fn sized_view(&self) -> SizedView {
        let in_force = self.in_force_summary();
        let summary_id = in_force.map(|(_, s)| s.id.clone());
        let view = context::view_with(&self.path, in_force);
        let bytes = context::request_bytes(self.fixed_bytes(), &view);
        let tokens = self.estimator.request(self.anchor.as_ref(), summary_id.as_deref(), &view, bytes);
        SizedView { view, summary_id, bytes, tokens }
    }

    /// The summary requests use now, and where its span ends on the path.
    pub(super) fn in_force_summary(&self) -> Option<(usize, &Summary)> {
        context::applied(&self.path, &self.summaries, self.in_force.as_ref().map(|o| o.as_deref()))
    }

    /// After a switch of model: on a larger window, put summarized spans
    /// back (the most recent first) while the request still fits, and say
    /// how many messages came back.
    pub(super) fn adapt_to_window(&mut self, old_window: u64) {
        let Some(budget) = self.context_budget() else { return };
        if budget.window <= old_window || self.summaries.is_empty() {
            return;
        }
        let threshold = budget.threshold(self.summarize_at());
        let fixed = self.fixed_bytes();
        let estimator = self.estimator;
        let before = self.in_force_summary().map(|(end, _)| end).unwrap_or(0);
        let chosen = context::restore(&self.path, &self.summaries, |m| {
            estimator.tokens(fixed + m.iter().map(context::message_bytes).sum::<usize>()) <= threshold
        })
        .map(|(end, s)| (end, s.id.clone()));
        let after = chosen.as_ref().map(|(end, _)| *end).unwrap_or(0);
        self.in_force = Some(chosen.map(|(_, id)| id));
        if after < before {
            let summary_id = self.in_force.clone().flatten();
            self.pipeline
                .event(None, EventKind::ContextRestored { summary_id, messages_restored: (before - after) as u64 });
        }
    }

    fn summarize_at(&self) -> f64 {
        self.config.context.summarize_at.unwrap_or(context::DEFAULT_SUMMARIZE_AT)
    }

    /// The turn's user message is recorded: summarize first if the request
    /// needs it, else ask the model. The stream follows the outbox event at
    /// `marker` (one is made if there is none).
    pub(super) fn proceed_turn(&mut self, message_id: String, marker: Option<usize>, iteration: u32) {
        // Between tool batches too, the budget is checked before the model
        // is asked again (the first request's check is in `begin_turn`).
        if iteration > 0 && self.wait_for_budget(&message_id, iteration) {
            return;
        }
        // The first request is offered the tools of MCP servers still
        // starting, once they are up.
        if iteration == 0 && self.wait_for_tools(&message_id) {
            return;
        }
        if context::infinity(&self.config)
            && let Some(budget) = self.context_budget()
        {
            let fixed = self.fixed_bytes();
            let tokens = self.sized_view().tokens;
            match context::plan(
                &budget,
                &self.estimator,
                fixed,
                self.summarize_at(),
                &self.path,
                self.in_force_summary(),
                tokens,
            ) {
                Plan::Send => {}
                Plan::Summarize { from, to, tokens_before } => {
                    return self.start_summary(Some(message_id), iteration, from, to, tokens_before, &budget);
                }
                Plan::RecentMessagesTooLarge { tokens, limit } => {
                    let message = format!(
                        "the newest messages alone are about {tokens} tokens, more than {}/{} takes ({limit}); summarizing older ones cannot make room. \
                         Send a shorter message, or switch to a model with a larger window (`forgectl model`)",
                        self.row.provider, self.row.model
                    );
                    return self.finish_tool_turn(
                        message_id,
                        MessageStatus::Error,
                        Some(("context_too_long".into(), message)),
                    );
                }
            }
        }
        let marker = marker.unwrap_or_else(|| self.pipeline.event(None, EventKind::StreamResumed { iteration }));
        self.start_stream(message_id, marker, iteration);
    }

    /// Starts summarizing everything before `path[to]` (what the summary in
    /// force says of `path[..from]`, then `path[from..to]`).
    fn start_summary(
        &mut self,
        message_id: Option<String>,
        iteration: u32,
        from: usize,
        to: usize,
        tokens_before: u64,
        budget: &context::ContextBudget,
    ) {
        let (Some(first), Some(last)) =
            (self.path.first().and_then(|m| m.node.clone()), self.path.get(to - 1).and_then(|m| m.node.clone()))
        else {
            // Messages without nodes cannot be pointed at: ask as it is.
            return self.resume_after_summary(message_id, None, iteration);
        };
        // `[context] summarizer_model` goes to its own provider (a Gemini
        // summarizer for a Claude session is asked at Gemini); a model of
        // no known provider is the session's provider's.
        let summarizer = self.config.context.summarizer_model.clone();
        let own = summarizer.as_deref().and_then(|m| crate::catalog::provider_of(&self.config, m));
        let settings = match own {
            Some(kind) => Ok(crate::provider::ProviderSettings::resolve(kind, &self.config)),
            None => self.provider_settings(),
        };
        let settings = match settings {
            // A summary's prompt is used once: caching it would only cost
            // (an Anthropic cache write, a Gemini cache per summary).
            Ok(mut s) => {
                s.options.anthropic_cache = false;
                s.options.gemini_cache_ttl = None;
                s
            }
            Err(e) => {
                if let Some(id) = message_id {
                    self.finish_tool_turn(id, MessageStatus::Error, Some((e.kind.as_str().into(), e.message)));
                }
                return;
            }
        };
        let earlier = self.in_force_summary().map(|(_, s)| s.text.clone());
        let allowance = context::summary_allowance(budget, self.estimator.tokens(self.fixed_bytes()));
        let room = budget.input_limit().saturating_sub(allowance + 500);
        let transcript = transcript(earlier.as_deref(), &self.path[from..to], room, &self.estimator);
        let request = ChatRequest {
            model: summarizer.unwrap_or_else(|| self.answering(self.row.model.clone())),
            system: Some(format!("{INSTRUCTIONS}\n\n<conversation>\n{transcript}\n</conversation>")),
            messages: vec![ChatMessage::user("Write the summary of the conversation above now.")],
            max_output_tokens: allowance as u32,
            tools: Vec::new(),
            output_schema: None,
            web_search: None,
            sampling: Default::default(),
            active_files: None,
        };
        let span = SummarySpan { first, last, messages: to as u64, tokens_before, tokens_after: 0 };
        tracing::info!(session = %self.row.id, messages = to, tokens_before, "summarizing the start of the conversation");
        self.pipeline.event(
            None,
            EventKind::SummarizationStarted {
                message_id: message_id.clone(),
                first: span.first.clone(),
                last: span.last.clone(),
                messages: span.messages,
                tokens_before,
            },
        );
        let request = Box::new((settings, request));
        self.out.push(Effect::StartRequest(request.clone()));
        self.state = OperationState::Summarizing(SummaryJob {
            message_id,
            span,
            from,
            iteration,
            text: String::new(),
            usage: None,
            attempt: 1,
            waiting: false,
            request,
            window: budget.window,
        });
    }

    /// The summary request's events (its text is not shown as the answer).
    pub(super) fn on_summary_event(&mut self, ev: ProviderEvent) {
        let OperationState::Summarizing(job) = &mut self.state else { return };
        if job.waiting {
            return;
        }
        match ev {
            ProviderEvent::TextDelta(t) => job.text.push_str(&t),
            ProviderEvent::Usage(u) => job.usage = Some(u),
            ProviderEvent::Done if !job.text.trim().is_empty() => self.finish_summary(),
            ProviderEvent::Done => self.summary_failed("the model wrote an empty summary".into()),
            ProviderEvent::Error(e) => self.summary_failed(e.message),
            _ => {}
        }
    }

    /// A failed attempt: try again after the seed's backoff, or give up.
    fn summary_failed(&mut self, error: String) {
        let OperationState::Summarizing(job) = &mut self.state else { return };
        self.out.push(Effect::StopRequest);
        if job.attempt < MAX_ATTEMPTS {
            let backoff = RETRY_BASE.saturating_mul(1 << (job.attempt - 1)).min(RETRY_CAP);
            // Jitter from the span: sessions spread, tests replay.
            let seed = job.span.first.bytes().fold(u64::from(job.attempt), |h, b| h.wrapping_mul(31) ^ u64::from(b));
            let delay = backoff + Duration::from_millis(seed % 201);
            job.attempt += 1;
            job.waiting = true;
            job.text.clear();
            let event = EventKind::SummarizationRetry {
                attempt: job.attempt,
                max_attempts: MAX_ATTEMPTS,
                delay_ms: delay.as_millis() as u64,
                error,
            };
            self.pipeline.event(None, event);
            self.out.push(Effect::Arm(Timer::SummaryRetry, delay));
            return;
        }
        let Some(job) = self.take_summary() else { return };
        tracing::warn!(session = %self.row.id, %error, "summarization failed");
        self.pipeline.event(None, EventKind::SummarizationFailed { error: error.clone() });
        // The turn's message is not lost: it stays in history, and goes
        // to the model if it fits without the summary.
        let Some(message_id) = job.message_id else {
            self.state = OperationState::Idle;
            return self.start_next_queued();
        };
        let fits = self
            .context_budget()
            .is_some_and(|budget| matches!(context::fit(&budget, self.sized_view().tokens), context::Fit::Fits { .. }));
        if fits {
            self.resume_after_summary(Some(message_id), None, job.iteration);
        } else {
            self.finish_tool_turn(
                message_id,
                MessageStatus::Error,
                Some((
                    "summarization_failed".into(),
                    format!(
                        "the conversation no longer fits the model's window and summarizing it failed {MAX_ATTEMPTS} times ({error}); \
                         your message is kept: send it again to retry, /clear to start afresh, or switch to a model with a larger window"
                    ),
                )),
            );
        }
    }

    /// `Timer::SummaryRetry`: the next attempt.
    pub(super) fn retry_summary(&mut self) {
        let OperationState::Summarizing(job) = &mut self.state else { return };
        if !job.waiting {
            return;
        }
        job.waiting = false;
        self.out.push(Effect::StartRequest(job.request.clone()));
    }

    fn take_summary(&mut self) -> Option<SummaryJob> {
        match std::mem::replace(&mut self.state, OperationState::Idle) {
            OperationState::Summarizing(job) => Some(job),
            other => {
                self.state = other;
                None
            }
        }
    }

    /// The summary is complete: it becomes a node beside the path, and the
    /// turn goes on with it in place of the span.
    fn finish_summary(&mut self) {
        let Some(mut job) = self.take_summary() else { return };
        self.out.push(Effect::StopRequest);
        let mut text = job.text.trim().to_string();
        // The plan stays in view after the calls that made it leave.
        let summarized = self.path.get(..job.span.messages as usize).unwrap_or_default();
        if let Some(plan) = super::call::plan_in_words(summarized) {
            text.push_str(&format!("\n\n{plan}"));
        }
        job.span.tokens_after = self.estimator.tokens(text.len());
        let id = self.clock.new_id("m");
        self.pipeline.op(StoreOp::InsertNode {
            id: id.clone(),
            session_id: self.row.id.clone(),
            parent_id: Some(job.span.last.clone()),
            role: Role::Summary,
            text: text.clone(),
            status: MessageStatus::Complete,
            created_ms: self.clock.now_ms(),
            meta: NodeMeta {
                message: forge_proto::MessageMeta {
                    provider: Some(self.row.provider.clone()),
                    model: Some(job.request.1.model.clone()),
                    usage: job.usage.clone(),
                    ..Default::default()
                },
                summary_of: Some(job.span.clone()),
                ..Default::default()
            },
        });
        // The span's facts, written with the summary node (one batch, one
        // transaction): a summary never exists without them.
        // Messages an earlier summary covered are indexed already (a
        // summary after a restore starts from the beginning again).
        let indexed = self
            .summaries
            .iter()
            .filter_map(|s| self.path.iter().position(|m| m.node.as_deref() == Some(s.last.as_str())))
            .map(|i| i + 1)
            .max()
            .unwrap_or(0);
        let span = self.path.get(job.from.max(indexed)..job.span.messages as usize).unwrap_or_default();
        let facts = crate::librarian::extract(span, &id, &text);
        if !facts.is_empty() {
            self.pipeline.op(StoreOp::InsertFacts { session_id: self.row.id.clone(), summary_id: id.clone(), facts });
        }
        // A summary costs tokens too: counted like an answer.
        if let Some(usage) = job.usage.clone() {
            let model = job.request.1.model.clone();
            let price = self.provider_kind().ok().and_then(|p| crate::catalog::lookup(&self.config, p, &model).price);
            self.spent.add(&usage, price.as_ref());
            self.report_spend();
            self.pipeline.event(
                None,
                EventKind::Usage {
                    message_id: job.message_id.clone().unwrap_or_else(|| job.span.last.clone()),
                    provider: self.row.provider.clone(),
                    model,
                    cost_usd: price.map(|p| p.cost(&usage)),
                    usage,
                    session: self.spent.clone(),
                },
            );
        }
        // The newest summary is the one in force again (a restore chose
        // the originals before the conversation outgrew the window anew).
        self.in_force = None;
        self.summaries.push(Summary {
            id: id.clone(),
            first: job.span.first.clone(),
            last: job.span.last.clone(),
            text,
        });
        tracing::info!(session = %self.row.id, before = job.span.tokens_before, after = job.span.tokens_after, "summarized");
        let marker = self.pipeline.event(None, EventKind::SummarizationDone { summary_id: id, span: job.span });
        // The model was switched to a larger window meanwhile: what fits
        // there goes back as it was, as the switch itself would have done.
        self.adapt_to_window(job.window);
        self.resume_after_summary(job.message_id, Some(marker), job.iteration);
    }

    /// After a summary (or instead of one): the waiting turn asks the model
    /// (its stream follows `marker`, or a `stream_resumed` made now); with
    /// no turn waiting, the session is idle and the queue goes on.
    fn resume_after_summary(&mut self, message_id: Option<String>, marker: Option<usize>, iteration: u32) {
        match message_id {
            Some(id) => {
                let marker =
                    marker.unwrap_or_else(|| self.pipeline.event(None, EventKind::StreamResumed { iteration }));
                self.start_stream(id, marker, iteration);
            }
            None => {
                self.state = OperationState::Idle;
                self.start_next_queued();
            }
        }
    }

    /// `session.summarize`: a summary of everything before the newest
    /// exchange, now.
    pub(super) fn summarize_now(&mut self) -> Result<forge_proto::SummarizeResult, crate::error::EngineError> {
        use crate::error::EngineError;
        use forge_proto::ErrorKind;
        if !matches!(self.state, OperationState::Idle) {
            return Err(self.busy("wait for the turn to end (or cancel it), then summarize"));
        }
        let budget = self.context_budget().ok_or_else(|| EngineError::new(ErrorKind::Config, "unknown provider"))?;
        let start = self.in_force_summary().map(|(end, _)| end).unwrap_or(0);
        let to = self.path.iter().rposition(|m| m.role == ChatRole::User).filter(|&k| k > start).ok_or_else(|| {
            EngineError::new(
                ErrorKind::InvalidParams,
                "nothing to summarize: the conversation since the last summary is a single exchange",
            )
        })?;
        let earlier = self.in_force_summary().map(|(_, s)| s.text.len() + 200).unwrap_or(0);
        let bytes: usize = self.path[start..to].iter().map(context::message_bytes).sum();
        let tokens_before = self.estimator.tokens(earlier + bytes);
        self.start_summary(None, 0, start, to, tokens_before, &budget);
        Ok(forge_proto::SummarizeResult { session_id: self.row.id.clone(), messages: to as u64, tokens_before })
    }

    /// `session.cancel` while summarizing: the turn ends, cancelled.
    pub(super) fn cancel_summary(&mut self, client: ClientRef) -> bool {
        let Some(job) = self.take_summary() else { return false };
        self.out.push(Effect::StopRequest);
        self.pipeline.event(Some(client), EventKind::CancelRequested {});
        // Settled: a restart does not write it again.
        self.pipeline.event(None, EventKind::SummarizationFailed { error: "cancelled".into() });
        match job.message_id {
            Some(id) => self.finish_tool_turn(id, MessageStatus::Cancelled, None),
            None => self.start_next_queued(),
        }
        true
    }
}

/// The span as the summarizer reads it: what the summary in force says of
/// what came before, then each message, long ones cut so that every
/// message has a share of `room` tokens (the oldest go first only if even
/// that is too long).
fn transcript(earlier: Option<&str>, span: &[ChatMessage], room: u64, estimator: &context::TokenEstimator) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(e) = earlier {
        lines.push(format!("[Summary of what came before]\n{}", e.trim()));
    }
    // Bytes per token as the estimator sees them, so a share is in bytes.
    let room_bytes = (room as f64 * 3.5 / estimator.ratio().max(0.25)) as usize;
    let used = lines.first().map(String::len).unwrap_or(0);
    let share = (room_bytes.saturating_sub(used) / span.len().max(1)).clamp(200, MAX_MESSAGE_CHARS);
    for m in span {
        let who = match m.role {
            ChatRole::User => "User",
            ChatRole::Assistant => "Assistant",
            ChatRole::Tool => "Tool result",
        };
        let mut text = cut(&m.text, share);
        for c in &m.tool_calls {
            text.push_str(&format!("\n[calls {} with {}]", c.name, cut(&c.arguments, 500)));
        }
        lines.push(format!("{who}: {text}"));
    }
    let mut joined = lines.join("\n\n");
    while estimator.tokens(joined.len()) > room && lines.len() > 1 {
        // Keep the summary of what came before; drop the oldest message.
        let drop = usize::from(earlier.is_some()).min(lines.len() - 1);
        lines.remove(drop);
        joined = lines.join("\n\n");
    }
    joined
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head} [...]")
}
