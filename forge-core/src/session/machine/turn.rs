//! Turns: start one (user message, stream journal entry, provider
//! request), take in the provider's events, seal the stream, and, once the
//! seal is durable, make the answer history and commit the journal entry.

use forge_proto::{ClientRef, ErrorKind, EventKind, MessageStatus, Role};

use super::answer::Answer;
use super::history::request_messages;
use super::pipeline::SealInfo;
use super::schema::Verdict;
use super::state::{ActiveStream, OperationState};
use super::{Effect, OnDurable, Session};
use crate::context;
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::provider::{ChatRequest, ProviderError, ProviderEvent, ProviderKind, ProviderSettings};
use crate::store::rows::NodeMeta;

pub(super) const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

impl Session {
    pub(super) fn provider_kind(&self) -> Result<ProviderKind, EngineError> {
        ProviderKind::parse(&self.row.provider)
            .ok_or_else(|| EngineError::new(ErrorKind::Config, format!("unknown provider \"{}\"", self.row.provider)))
    }

    /// The digest a root records of the system prompt it is sent under.
    pub(super) fn system_prompt_digest(&self) -> String {
        crate::rewind::hash(self.system_prompt.as_bytes())[..16].to_string()
    }

    pub(super) fn provider_settings(&self) -> Result<ProviderSettings, EngineError> {
        Ok(ProviderSettings::resolve(self.provider_kind()?, &self.config))
    }

    /// Records the user message, opens the stream journal entry and starts
    /// the provider request at once (it does not wait for the write).
    /// Returns the outbox index of `turn_started`.
    /// `context`: what hooks added for the model, kept beside the text.
    pub(super) fn start_turn(
        &mut self,
        message_id: String,
        text: String,
        context: Option<String>,
        client: ClientRef,
        images: Vec<forge_proto::ImageInfo>,
    ) -> usize {
        self.add_user_node(&message_id, &text, context, Some(client.clone()), images);
        self.begin_turn(message_id, text, client, false)
    }

    /// A user message becomes the head: its node, and the path's end.
    pub(super) fn add_user_node(
        &mut self,
        id: &str,
        text: &str,
        context: Option<String>,
        client: Option<ClientRef>,
        images: Vec<forge_proto::ImageInfo>,
    ) {
        // A root carries its system prompt: roots are found by it.
        let system_prompt = self.row.head_id.is_none().then(|| self.system_prompt_digest());
        self.pipeline.op(StoreOp::InsertNode {
            id: id.to_string(),
            session_id: self.row.id.clone(),
            parent_id: self.row.head_id.clone(),
            role: Role::User,
            text: text.to_string(),
            status: MessageStatus::Complete,
            created_ms: self.clock.now_ms(),
            meta: NodeMeta {
                message: forge_proto::MessageMeta {
                    client,
                    context: context.clone(),
                    images: images.clone(),
                    ..Default::default()
                },
                system_prompt,
                ..Default::default()
            },
        });
        self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(id.to_string()) });
        self.row.head_id = Some(id.to_string());
        self.path
            .push(super::history::user_message(text, context.as_deref()).with_images(images).with_node(id.to_string()));
    }

    /// Answers the node at the head of the path (recorded already: the
    /// user message, or, `continued`, whatever the answer is to follow):
    /// `turn_started`, then the budget check and the request.
    pub(super) fn begin_turn(&mut self, message_id: String, text: String, client: ClientRef, continued: bool) -> usize {
        // The message answered is the path's end: its images, if any.
        let images = match self.path.last() {
            Some(m) if !continued && m.role == crate::provider::ChatRole::User => {
                m.images.iter().map(|i| i.info.clone()).collect()
            }
            _ => Vec::new(),
        };
        let index = self.pipeline.event(
            Some(client.clone()),
            EventKind::TurnStarted {
                message_id: message_id.clone(),
                text,
                provider: self.row.provider.clone(),
                model: self.turn_model(),
                continued,
                images,
            },
        );
        if !self.wait_for_budget(&message_id, 0) {
            self.proceed_turn(message_id, Some(index), 0);
        }
        index
    }

    /// Opens a stream journal entry and starts the provider request at
    /// once. The stream's deltas follow the outbox event at `marker`
    /// (`turn_started`, or `stream_resumed` after tool results).
    pub(super) fn start_stream(&mut self, message_id: String, marker: usize, iteration: u32) {
        let created_ms = self.clock.now_ms();
        let stream_id = self.clock.new_id("t");
        let first_seq = self.pipeline.seq_of_outbox_index(marker);
        self.pipeline.op(StoreOp::StreamBegin {
            stream_id: stream_id.clone(),
            session_id: self.row.id.clone(),
            message_id: message_id.clone(),
            provider: self.row.provider.clone(),
            model: self.turn_model(),
            first_seq,
            created_ms,
        });
        self.pipeline.begin_stream();
        let started = self.start_request(&message_id, iteration, 1);
        let (estimated_input, sent) = match &started {
            Ok((estimated, anchor)) => (*estimated, Some(anchor.clone())),
            Err(_) => (0, None),
        };
        self.state = OperationState::Streaming(ActiveStream {
            stream_id,
            message_id,
            provider: self.row.provider.clone(),
            model: self.turn_model(),
            text: String::new(),
            tool_calls: Vec::new(),
            usage: None,
            stop_reason: None,
            reasoning: Vec::new(),
            citations: Vec::new(),
            sealed: false,
            iteration,
            output_seen: false,
            attempt: 1,
            waiting_to_retry: false,
            estimated_input,
            sent,
            output_bytes: 0,
        });
        if let Err(e) = started {
            self.on_provider(ProviderEvent::Error(e));
        }
    }

    /// The output tokens a request asks for (`[app] max_output_tokens`).
    pub(super) fn requested_output(&self) -> u32 {
        self.config.app.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
    }

    /// What the catalog knows of the session's model.
    pub(super) fn model_info(&self) -> Option<crate::catalog::ModelInfo> {
        let kind = self.provider_kind().ok()?;
        Some(crate::catalog::lookup(&self.config, kind, &self.turn_model()))
    }

    /// Starts the provider request for the path as it is now. It asks for
    /// `[app] max_output_tokens` (8192 by default), clamped to the model's
    /// limit and to what its window has left after the input.
    /// Returns the request's input tokens as estimated from its bytes (to
    /// calibrate the estimate against the usage the provider reports) and
    /// what it holds (to size the next request from that count). With Context
    /// Infinity off, a request that would not fit the window is refused
    /// before anything is sent.
    pub(super) fn start_request(
        &mut self,
        message_id: &str,
        iteration: u32,
        attempt: u32,
    ) -> Result<(u64, context::Anchor), ProviderError> {
        let settings = self.provider_settings().map_err(|e| ProviderError::new(e.kind, e.message))?;
        let sized = self.sized_view();
        let messages = request_messages(&sized.view);
        let tools = self.tool_specs();
        // Thinking counts inside the output tokens where the API says so:
        // its budget comes on top of what the answer may take.
        let requested = self.requested_output().saturating_add(settings.options.thinking_tokens());
        self.announce_model();
        let model_info = self.model_info();
        let thinking = settings.options.anthropic_thinking_budget.is_some();
        let sampling = match &model_info {
            Some(model) => self.request_sampling(model, thinking),
            None => Default::default(),
        };
        let (max_output_tokens, estimated) = match model_info {
            Some(model) => {
                let budget = context::ContextBudget::for_model(&model, requested);
                let tokens = match context::fit(&budget, sized.tokens) {
                    context::Fit::Fits { tokens } => tokens,
                    context::Fit::TooLong { tokens, limit } if !context::infinity(&self.config) => {
                        return Err(ProviderError::new(
                            ErrorKind::ContextTooLong,
                            format!(
                                "the conversation is now about {tokens} tokens, more than {}/{} takes ({limit} of its {}-token window; the rest is kept for the answer), and Context Infinity is off. \
                                 Summarize the conversation so far with /summarize in forge (`forgectl summarize {}`; the originals stay), start afresh with /clear (nothing is deleted), \
                                 switch to a model with a larger window (`forgectl model`), \
                                 or turn Context Infinity on: `[context] infinity = true` in config.toml (or {}=1 where the file does not set it)",
                                self.row.provider,
                                self.row.model,
                                budget.window,
                                self.row.id,
                                context::INFINITY_ENV,
                            ),
                        ));
                    }
                    context::Fit::TooLong { tokens, .. } => tokens,
                };
                let estimated = self.estimator.tokens(sized.bytes);
                (crate::catalog::effective_max_output(requested, &model, tokens), estimated)
            }
            None => (requested, 0),
        };
        let anchor = context::Anchor::of(sized.summary_id.as_deref(), &sized.view, sized.bytes);
        self.pipeline.event(
            None,
            EventKind::ProviderRequest {
                message_id: message_id.to_string(),
                iteration,
                attempt,
                provider: self.row.provider.clone(),
                model: self.turn_model(),
                messages: messages.len() as u32,
                tools: tools.len() as u32,
                max_output_tokens,
            },
        );
        let request = ChatRequest {
            model: self.turn_model(),
            system: Some(self.system_prompt.to_string()).filter(|s| !s.is_empty()),
            messages,
            max_output_tokens,
            tools,
            output_schema: self.schema.as_ref().map(|s| s.schema.clone()),
            web_search: self.web_search(),
            sampling,
            active_files: self.active_files_read(),
        };
        self.out.push(Effect::StartRequest(Box::new((settings, request))));
        Ok((estimated, anchor))
    }

    /// Ingest: a provider event becomes a journal entry (not yet applied).
    pub(super) fn on_provider(&mut self, ev: ProviderEvent) {
        if matches!(self.state, OperationState::Summarizing(_)) {
            return self.on_summary_event(ev);
        }
        let max_retries = self.max_retries();
        let OperationState::Streaming(stream) = &mut self.state else {
            // A late event from a stream that already ended.
            return;
        };
        if stream.sealed {
            return;
        }
        if matches!(
            ev,
            ProviderEvent::TextDelta(_)
                | ProviderEvent::ThinkingDelta(_)
                | ProviderEvent::ToolCallStart { .. }
                | ProviderEvent::ToolCallArgs { .. }
        ) {
            stream.output_seen = true;
        }
        match ev {
            ProviderEvent::TextDelta(text) => {
                stream.output_bytes += text.len();
                self.pipeline.delta(EventKind::TextDelta { text });
            }
            ProviderEvent::ThinkingDelta(text) => {
                stream.output_bytes += text.len();
                self.pipeline.delta(EventKind::ThinkingDelta { text });
            }
            ProviderEvent::ToolCallStart { index, id, name } => {
                self.pipeline.delta(EventKind::ToolCallStarted { index: index as u32, call_id: id, name });
            }
            ProviderEvent::ToolCallArgs { index, fragment } => {
                stream.output_bytes += fragment.len();
                self.pipeline.delta(EventKind::ToolCallArgs { index: index as u32, fragment });
            }
            ProviderEvent::Reasoning(r) => stream.reasoning.push(r),
            ProviderEvent::WebSearch(query) => {
                self.pipeline.delta(EventKind::WebSearch { query });
            }
            ProviderEvent::Citation(c) => {
                let event = EventKind::Citation {
                    url: c.url.clone(),
                    title: c.title.clone(),
                    cited_text: c.cited_text.clone(),
                };
                if !stream.citations.iter().any(|o| o.url == c.url) {
                    stream.citations.push(c);
                }
                self.pipeline.delta(event);
            }
            ProviderEvent::Usage(u) => stream.usage = Some(u),
            ProviderEvent::StopReason(r) => stream.stop_reason = Some(r),
            ProviderEvent::Done => self.seal(MessageStatus::Complete, None),
            ProviderEvent::Error(e) if !stream.output_seen && e.model_not_found => {
                if self.fall_back(&e) {
                    self.retry_with_fallback();
                } else {
                    self.seal(MessageStatus::Error, Some((e.kind, e.message)));
                }
            }
            ProviderEvent::Error(e) => {
                let attempt = stream.attempt;
                match Self::retry_delay(max_retries, stream, &e) {
                    Some(delay) => self.schedule_retry(e, delay),
                    None if attempt > 1 => {
                        let message = format!("{} (gave up after {attempt} attempts)", e.message);
                        self.seal(MessageStatus::Error, Some((e.kind, message)))
                    }
                    None => self.seal(MessageStatus::Error, Some((e.kind, e.message))),
                }
            }
        }
    }

    /// Cancels the running stream, if any (`cancel_requested` first when a
    /// client asked). Returns whether there was one.
    pub(super) fn cancel_stream(&mut self, client: Option<ClientRef>, reason: Option<&str>) -> bool {
        match &self.state {
            OperationState::Streaming(s) if !s.sealed => {}
            _ => return false,
        }
        if let Some(client) = client {
            self.pipeline.event(Some(client), EventKind::CancelRequested {});
        }
        self.seal(MessageStatus::Cancelled, reason.map(|r| (ErrorKind::ShuttingDown, r.to_string())));
        true
    }

    /// Ends ingest: the provider request stops and the seal is written
    /// after every delta already taken in.
    fn seal(&mut self, outcome: MessageStatus, error: Option<(ErrorKind, String)>) {
        let OperationState::Streaming(stream) = &mut self.state else { return };
        stream.sealed = true;
        // A provider that sends no counts (some local servers): the
        // response is counted with Forge's own estimate, marked as such.
        if outcome == MessageStatus::Complete && stream.usage.is_none() {
            stream.usage = Some(forge_proto::Usage {
                input_tokens: stream.estimated_input,
                output_tokens: crate::catalog::estimate_tokens(stream.output_bytes),
                estimated: true,
                ..Default::default()
            });
        }
        self.out.push(Effect::StopRequest);
        if outcome == MessageStatus::Complete {
            let event = EventKind::ProviderResponse {
                message_id: stream.message_id.clone(),
                iteration: stream.iteration,
                stop_reason: stream.stop_reason.clone(),
                usage: stream.usage.clone(),
            };
            self.pipeline.event(None, event);
        }
        let answering = self.turn_model();
        let OperationState::Streaming(stream) = &mut self.state else { return };
        if let Some(usage) = stream.usage.clone() {
            let counted = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
            // Counted by the provider, by the session's model (not one
            // switched from while this stream ran), and plausibly whole:
            // some local servers count only what they did not have cached.
            let same_model = !usage.estimated && stream.provider == self.row.provider && stream.model == answering;
            let plausible = counted > 0 && counted.saturating_mul(4) >= stream.estimated_input;
            if same_model {
                self.estimator.observe(stream.estimated_input, counted);
            }
            if !usage.estimated {
                self.last_input_tokens = Some(counted);
            }
            self.anchor = stream
                .sent
                .take()
                .filter(|_| same_model && plausible)
                .map(|a| context::Anchor { tokens: counted, ..a });
            // What this response cost, and the session so far: in the
            // same batch as the seal.
            let model =
                ProviderKind::parse(&stream.provider).map(|p| crate::catalog::lookup(&self.config, p, &stream.model));
            let price = model.as_ref().and_then(|m| m.price);
            self.spent.add(&usage, price.as_ref());
            let event = EventKind::Usage {
                message_id: stream.message_id.clone(),
                provider: stream.provider.clone(),
                model: stream.model.clone(),
                cost_usd: price.map(|p| p.cost(&usage)),
                usage,
                session: self.spent.clone(),
            };
            self.pipeline.event(None, event);
            self.report_spend();
        }
        // Its cost is counted above: what it reserved goes.
        self.settle_request();
        let OperationState::Streaming(stream) = &mut self.state else { return };
        self.pipeline.op(StoreOp::StreamSeal {
            stream_id: stream.stream_id.clone(),
            outcome,
            error: error.as_ref().map(|(_, m)| m.clone()),
            error_kind: error.as_ref().map(|(k, _)| k.as_str().to_string()),
            stop_reason: stream.stop_reason.clone(),
            usage: stream.usage.clone(),
            reasoning: stream.reasoning.clone(),
            sealed_ms: self.clock.now_ms(),
        });
        self.pipeline.seal(SealInfo { outcome, error });
    }

    /// Apply of the seal: every delta before it is applied, so the streamed
    /// text is complete. Now the answer becomes history.
    pub(super) fn on_sealed(&mut self, info: SealInfo) {
        let Some(stream) = self.state.take_stream() else { return };
        // The model asked for tools: answer them and go on, within the turn.
        let tools = info.outcome == MessageStatus::Complete && !stream.tool_calls.is_empty();
        // `n` > 1: more answers to ask for, each a sibling of this one.
        let more =
            !tools && info.outcome == MessageStatus::Complete && self.completions.as_ref().is_some_and(|c| c.left > 0);
        let calls = stream.tool_calls.clone();
        let (message_id, iteration) = (stream.message_id.clone(), stream.iteration);
        let (status, stop_reason, usage) = (info.outcome, stream.stop_reason.clone(), stream.usage.clone());
        // An answer on a schema is judged before it ends the turn.
        let verdict = match !tools && !more && info.outcome == MessageStatus::Complete {
            true => self.judge_output(&stream.text),
            false => Verdict::Free,
        };
        let (mut outcome, mut error) = (info.outcome, info.error.map(|(k, m)| (k.as_str().to_string(), m)));
        match &verdict {
            Verdict::Valid(output) => {
                let output = output.clone();
                self.pipeline.event(None, EventKind::StructuredOutput { message_id: message_id.clone(), output });
            }
            Verdict::Invalid(errors) => {
                outcome = MessageStatus::Error;
                error = Some((super::schema::INVALID_KIND.to_string(), errors.clone()));
            }
            Verdict::Free | Verdict::Fix(_) => {}
        }
        let fix = match verdict {
            Verdict::Fix(text) => Some(text),
            _ => None,
        };
        let node = self.commit_answer(Answer {
            stream_id: stream.stream_id,
            message_id: stream.message_id,
            text: stream.text,
            tool_calls: stream.tool_calls,
            status: outcome,
            provider: stream.provider,
            model: stream.model,
            usage: stream.usage,
            stop_reason: stream.stop_reason,
            reasoning: stream.reasoning,
            error_kind: error.as_ref().map(|(k, _)| k.clone()),
            error: error.map(|(_, m)| m),
            recovered: None,
            finishes_turn: !tools && !more && fix.is_none(),
            citations: stream.citations,
        });
        if let Some(text) = fix {
            // Sent back once, in the same turn, with what was wrong.
            let id = self.clock.new_id("m");
            self.add_user_node(&id, &text, None, Some(ClientRef::daemon()), Vec::new());
            let marker = self.pipeline.event(None, EventKind::StreamResumed { iteration: iteration + 1 });
            self.proceed_turn(message_id, Some(marker), iteration + 1);
        } else if tools {
            self.start_tool_loop(message_id, iteration, calls);
            self.checkpoint_awaiting();
        } else if more {
            match node {
                Some((answer, marker)) => self.next_completion(message_id, answer, marker),
                // Nothing was said: no sibling to add, and no more asked for.
                None => {
                    let finished = EventKind::TurnFinished {
                        message_id,
                        assistant_id: None,
                        status,
                        stop_reason,
                        usage,
                        error_kind: None,
                        error: None,
                        recovered: None,
                    };
                    self.finish_turn_event(None, finished);
                    self.pipeline.effect(OnDurable::TurnDone);
                }
            }
        } else {
            self.pipeline.effect(OnDurable::TurnDone);
        }
    }

    /// `n` > 1: the answer just given stays as it is; the head goes back
    /// to the message and the same request is made again, its answer a
    /// sibling. The `assistant_node` at `marker` starts the new stream.
    fn next_completion(&mut self, message_id: String, answer: String, marker: usize) {
        if let Some(c) = self.completions.as_mut() {
            c.left -= 1;
            c.answers.push(answer);
        }
        self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(message_id.clone()) });
        self.row.head_id = Some(message_id.clone());
        if let Some(at) = self.path.iter().rposition(|m| m.node.as_deref() == Some(message_id.as_str())) {
            self.path.truncate(at + 1);
        }
        self.start_stream(message_id, marker, 0);
    }

    /// The nodes this generation appended, for `done` and `error`: the
    /// earlier sibling answers (`n` > 1), then the path after `message_id`.
    fn generated_nodes(&mut self, message_id: &str) -> Vec<String> {
        let mut nodes = self.completions.take().map(|c| c.answers).unwrap_or_default();
        if let Some(at) = self.path.iter().rposition(|m| m.node.as_deref() == Some(message_id)) {
            nodes.extend(self.path[at + 1..].iter().filter_map(|m| m.node.clone()));
        }
        nodes
    }

    /// `turn_finished`, after the generation's own end: `done` when it
    /// completed, else `error` (`generation_aborted` for a cancel).
    pub(super) fn finish_turn_event(&mut self, client: Option<ClientRef>, finished: EventKind) {
        if let EventKind::TurnFinished { message_id, status, error_kind, error, .. } = &finished {
            // A command's grants end with its turn.
            self.grants = Default::default();
            self.finished = Some(*status);
            self.finished_turn = Some(message_id.clone());
            self.as_helper.turn_error = error.clone();
            let nodes = self.generated_nodes(message_id);
            let message_id = message_id.clone();
            let end = match status {
                MessageStatus::Complete => EventKind::Done { message_id, nodes },
                other => {
                    let kind = match (other, error_kind) {
                        (_, Some(kind)) => kind.clone(),
                        (MessageStatus::Cancelled, None) => "generation_aborted".to_string(),
                        (MessageStatus::Interrupted, None) => "interrupted".to_string(),
                        _ => ErrorKind::ProviderError.as_str().to_string(),
                    };
                    let error = error.clone().unwrap_or_else(|| match other {
                        MessageStatus::Cancelled => "the generation was cancelled".to_string(),
                        MessageStatus::Interrupted => "the daemon stopped during the generation".to_string(),
                        _ => "the generation failed".to_string(),
                    });
                    EventKind::Error { message_id, error_kind: kind, error, nodes }
                }
            };
            self.pipeline.event(client.clone(), end);
        }
        self.pipeline.event(client, finished);
    }
}
