//! Client commands: one arm each in [`Session::on_command`], which admits
//! the command (a blocked journal or an unreadable history refuses it) and
//! hands it to its handler. A handler answers through a [`Responder`] kept
//! with the batch its effects go into, or at once with an error.

use forge_proto::params::ConfigureParams;
use forge_proto::{CancelResult, ClientRef, ErrorKind, EventKind, SendResult, SessionInfo};
use tokio::sync::oneshot;

use super::state::OperationState;
use super::{Effect, Exit, NameClaim, OnDurable, ReadyReply, Responder, Session};
use crate::catalog::Source;
use crate::error::EngineError;
use crate::journal::StoreOp;
use crate::provider_kind::ProviderKind;
use crate::session::{Reply, SessionCmd};
use crate::store::QueuedRow;

/// At most this many answers to one message at once (`n`).
const MAX_COMPLETIONS: u32 = 10;

/// `session.send`, as asked.
pub(super) struct SendArgs {
    pub text: String,
    pub client: ClientRef,
    pub same: Vec<crate::session::SameMessage>,
    pub n: u32,
    pub continued: bool,
    /// The final answer must be JSON valid against this schema.
    pub output_schema: Option<serde_json::Value>,
    /// What the command it came from grants its turn.
    pub grants: super::TurnGrants,
    pub images: Vec<forge_proto::ImageInfo>,
}

/// Longest session name.
const MAX_SESSION_NAME: usize = 64;

/// Whether `name` may name a session (taken or not).
pub(crate) fn check_session_name(name: &str) -> Result<(), crate::error::EngineError> {
    if crate::ids::is_valid_name(name, MAX_SESSION_NAME) {
        return Ok(());
    }
    Err(crate::error::EngineError::new(
        forge_proto::ErrorKind::InvalidName,
        format!(
            "\"{name}\" is not a valid session name: use up to {MAX_SESSION_NAME} letters, digits, '-', '_' or '.', not starting with '-'"
        ),
    ))
}

/// What a command needs of the session to be done.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// It only reads (answered even while the journal is blocked).
    Read,
    /// It writes to the journal.
    Write,
}

impl Session {
    pub(super) fn on_command(&mut self, cmd: SessionCmd) {
        match cmd {
            SessionCmd::Request { request, client, reply } => self.on_request(request, client, reply),
            SessionCmd::Start { reply } => {
                if let Some(reply) = self.admit(reply, Access::Write) {
                    self.on_start(reply);
                }
            }
            SessionCmd::Remove { reply } => {
                if let Some(reply) = self.admit(reply, Access::Write) {
                    self.on_remove(reply);
                }
            }
            SessionCmd::Shutdown { reply } => self.begin_shutdown(Some(reply)),
            SessionCmd::Helper(report) => self.on_helper(report),
            // With the tree it branches from (`tree.rs`, `fork.rs`).
            cmd @ SessionCmd::Fork { .. } => self.out.push(Effect::ReadTree { then: cmd }),
        }
    }

    /// The reply, if the command may be done now; otherwise it is answered
    /// with why not.
    pub(super) fn admit<T: Send + Sync + 'static>(&mut self, reply: Reply<T>, access: Access) -> Option<Reply<T>> {
        let refusal = match (&self.state, &self.unreadable) {
            (_, Some(e)) => e.clone(),
            (OperationState::PersistenceBlocked { reason }, None) if access == Access::Write => {
                EngineError::blocked(reason)
            }
            _ => return Some(reply),
        };
        self.out.push(Effect::Reply(ReadyReply::now(reply, Err(refusal))));
        None
    }

    /// Answers `reply` with `result`: a success once the batch carrying the
    /// command's effects is durable, an error at once.
    pub(super) fn reply_when_durable<T: Send + Sync + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T, EngineError>,
    ) {
        match result {
            Ok(value) => self.pipeline.effect(OnDurable::Reply(Responder::with(reply, value))),
            Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
        }
    }

    pub(super) fn busy(&self, what: &str) -> EngineError {
        EngineError::new(ErrorKind::SessionBusy, format!("session {} is running a turn; {what}", self.row.id))
    }

    /// Why a send cannot be done as asked, if it cannot.
    fn check_send(&self, args: &SendArgs) -> Result<(), EngineError> {
        let invalid = |m: String| Err(EngineError::new(ErrorKind::InvalidParams, m));
        if args.continued && !args.text.trim().is_empty() {
            return invalid(
                "continue takes no text: it answers what the session holds now (send the text as a message instead)"
                    .into(),
            );
        }
        if !args.continued && args.text.trim().is_empty() && args.images.is_empty() {
            return invalid("the message is empty".into());
        }
        let model = args.grants.model.clone().unwrap_or_else(|| self.row.model.clone());
        self.check_images(&args.images, &model)?;
        if args.n == 0 || args.n > MAX_COMPLETIONS {
            return invalid(format!("n must be between 1 and {MAX_COMPLETIONS}"));
        }
        if args.n > 1 && !self.tool_specs().is_empty() {
            return invalid(
                "several answers at once (n > 1) cannot be asked for while tools are offered: each answer could run tools of its own. \
                 Turn tools off for this with `[tools] mode = \"disabled\"` in config.toml, or ask once and regenerate (send the same message again)"
                    .into(),
            );
        }
        if args.continued && self.row.head_id.is_none() {
            return invalid("nothing to continue: the session has no messages yet".into());
        }
        self.provider_settings().and_then(|s| s.check_ready().map_err(EngineError::from))?;
        self.check_schema(args.output_schema.as_ref(), args.n)?;
        self.check_grants(&args.grants)?;
        args.grants.sampling.check().map_err(|e| EngineError::new(ErrorKind::InvalidParams, e))?;
        if (args.n > 1 || args.continued) && !matches!(self.state, OperationState::Idle) {
            return Err(self.busy(if args.continued {
                "continue once it has ended"
            } else {
                "only a single message can wait behind it; ask for several answers once it has ended"
            }));
        }
        Ok(())
    }

    pub(super) fn on_send(&mut self, args: SendArgs, reply: Reply<SendResult>) {
        if let Err(e) = self.check_send(&args) {
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
        }
        self.submit(args, reply);
    }

    /// A message whose hooks ran (or that waited behind one that had
    /// hooks): checked again, the session having gone on meanwhile.
    pub(super) fn accept_later(&mut self, args: SendArgs, reply: Reply<SendResult>, added: Vec<String>) {
        let Some(reply) = self.admit(reply, Access::Write) else { return };
        if let Err(e) = self.check_send(&args) {
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
        }
        self.accept_send(args, reply, added);
    }

    /// Sends a message its hooks allowed, with what they (and, for the
    /// session's first message, its `SessionStart` hooks) added.
    pub(super) fn accept_send(&mut self, mut args: SendArgs, reply: Reply<SendResult>, mut added: Vec<String>) {
        if !args.continued
            && let Some(start) = self.start_context.take()
        {
            added.insert(0, start);
        }
        // The schema the answer must follow is told with the message.
        if let Some(schema) = &args.output_schema {
            added.push(super::schema::instruction(schema));
        }
        // Kept beside the text (history shows what the user typed).
        let context = (!added.is_empty()).then(|| added.join("\n"));
        if context.is_some() {
            // The message differs from the one the store was asked about.
            args.same.clear();
        }
        if !args.images.is_empty() {
            // The same words with other images are another message.
            args.same.clear();
        }
        let SendArgs { text, client, same, n, continued, output_schema, grants, images } = args;
        let queued_grants = grants.to_json();
        if matches!(self.state, OperationState::Idle) {
            self.schema = output_schema.map(|schema| super::schema::SchemaTurn { schema, fixes_left: 1 });
            self.grants = grants;
        }
        // Only a turn that starts now asks for several answers (a queued
        // message is always n = 1, see `check_send`).
        if matches!(self.state, OperationState::Idle) {
            self.completions = (n > 1).then(|| super::Completions { left: n - 1, answers: Vec::new() });
        }
        if continued {
            let head = self.row.head_id.clone().unwrap_or_default();
            let event_index = self.begin_turn(head.clone(), String::new(), client, true);
            let responder = self.send_reply(reply, head, None, event_index);
            return self.pipeline.effect(OnDurable::Reply(responder));
        }
        let message_id = self.clock.new_id("m");
        if matches!(self.state, OperationState::Idle) {
            // The same message under the same head (a root: sent under the
            // same system prompt): that node, answered again.
            // (The prompt's digest is only needed for a root.)
            let reused = same.into_iter().find(|m| {
                m.under == self.row.head_id
                    && (m.under.is_some() || m.system_prompt.as_deref() == Some(self.system_prompt_digest().as_str()))
            });
            if let Some(crate::session::SameMessage { node, .. }) = reused {
                self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: Some(node.clone()) });
                self.row.head_id = Some(node.clone());
                self.path.push(crate::provider::ChatMessage::user(text.clone()).with_node(node.clone()));
                let event_index = self.begin_turn(node.clone(), text, client, false);
                let responder = self.send_reply(reply, node, None, event_index);
                return self.pipeline.effect(OnDurable::Reply(responder));
            }
            let event_index = self.start_turn(message_id.clone(), text, context, client, images);
            let responder = self.send_reply(reply, message_id, None, event_index);
            return self.pipeline.effect(OnDurable::Reply(responder));
        }
        let position = self.queue.len() as u32 + 1;
        let created_ms = self.clock.now_ms();
        let row = QueuedRow {
            session_id: self.row.id.clone(),
            message_id: message_id.clone(),
            text: text.clone(),
            context,
            client: Some(client.clone()),
            created_ms,
            grants: queued_grants,
            images,
        };
        self.persist_queued(&row, false);
        self.queue.push_back(row);
        let event_index = self
            .pipeline
            .event(Some(client), EventKind::MessageQueued { message_id: message_id.clone(), text, position });
        let responder = self.send_reply(reply, message_id, Some(position), event_index);
        self.pipeline.effect(OnDurable::Reply(responder));
    }

    /// The answer to `session.send`: the seq of the event it reported
    /// (`turn_started` or `message_queued`) is known once the batch is cut.
    fn send_reply(
        &self,
        reply: Reply<SendResult>,
        message_id: String,
        queue_position: Option<u32>,
        event_index: usize,
    ) -> Responder {
        let (session_id, commits) = (self.row.id.clone(), self.row.git.is_some());
        Responder::from_seqs(reply, move |seqs| SendResult {
            session_id,
            message_id,
            seq: seqs.get(event_index).copied().flatten().unwrap_or(0),
            queued: queue_position.is_some(),
            queue_position,
            commits,
        })
    }

    pub(super) fn on_cancel(&mut self, client: ClientRef, drop_queued: bool, reply: Reply<CancelResult>) {
        let mut dropped = 0;
        if drop_queued && !(self.queue.is_empty() && self.steers.is_empty()) {
            dropped = (self.queue.len() + self.steers.len()) as u32;
            self.queue.clear();
            self.steers.clear();
            self.pipeline.op(StoreOp::QueueClear { session_id: self.row.id.clone() });
            self.pipeline.event(Some(client.clone()), EventKind::QueueCleared { dropped });
        }
        // Several answers asked for: none more after this one.
        let more_answers = self.completions.as_mut().is_some_and(|c| std::mem::take(&mut c.left) > 0);
        let stopped = self.cancel_stream(Some(client.clone()), None)
            || self.cancel_tools(Some(client.clone()), None)
            || self.cancel_budget_wait(client.clone())
            || self.cancel_held(client.clone())
            || self.cancel_tools_wait(client.clone())
            || self.cancel_summary(client.clone())
            || self.cancel_stop_hooks()
            || (matches!(self.state, OperationState::ToolRecovery { .. })
                && self.on_recover(forge_proto::RecoverAction::Discard, Some(client)).is_ok());
        let result = CancelResult {
            session_id: self.row.id.clone(),
            cancelled: stopped || more_answers,
            dropped_queued: dropped,
        };
        self.pipeline.effect(OnDurable::Reply(Responder::with(reply, result)));
    }

    /// Renames the session, the name checked free (held until the rename
    /// is durable, so no other session takes it meanwhile).
    pub(super) fn on_rename(&mut self, claim: NameClaim, client: ClientRef, reply: Reply<SessionInfo>) {
        let name = claim.name().map(str::to_string);
        self.row.name = name.clone();
        self.pipeline.op(StoreOp::RenameSession { id: self.row.id.clone(), name: name.clone() });
        self.pipeline.event(Some(client), EventKind::SessionRenamed { name });
        self.pipeline.effect(OnDurable::Info(reply, Some(claim)));
    }

    /// A provider alone takes its default model; a model alone keeps the
    /// session's provider; neither keeps both. Sampling parameters given
    /// replace the session's (after a reset, if asked).
    fn configured(&self, params: ConfigureParams) -> Result<(String, String, forge_proto::Sampling), EngineError> {
        let invalid = |m: String| EngineError::new(ErrorKind::InvalidParams, m);
        params.sampling.check().map_err(invalid)?;
        let kept = if params.reset_sampling { Default::default() } else { self.row.sampling };
        let sampling = params.sampling.or(kept);
        if params.provider.is_none() && params.model.is_none() {
            if params.sampling.is_empty() && !params.reset_sampling {
                return Err(invalid("give a provider, a model, a temperature or top_p, or reset_sampling".into()));
            }
            return Ok((self.row.provider.clone(), self.row.model.clone(), sampling));
        }
        let (provider, model) = self.configured_model(params.provider, params.model)?;
        Ok((provider, model, sampling))
    }

    fn configured_model(
        &self,
        provider: Option<String>,
        model: Option<String>,
    ) -> Result<(String, String), EngineError> {
        let model = model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
        match provider {
            Some(p) => {
                let kind = ProviderKind::parse(&p).ok_or_else(|| {
                    EngineError::new(
                        ErrorKind::InvalidParams,
                        format!("unknown provider \"{p}\"; use claude (or anthropic), openai or gemini"),
                    )
                })?;
                Ok((kind.as_str().to_string(), model.unwrap_or_else(|| kind.default_model().to_string())))
            }
            None => match model {
                Some(m) => Ok((self.row.provider.clone(), m)),
                None => Err(EngineError::new(ErrorKind::InvalidParams, "give a provider, a model or both")),
            },
        }
    }

    pub(super) fn on_configure(&mut self, params: ConfigureParams, client: ClientRef, reply: Reply<SessionInfo>) {
        let (provider, model, sampling) = match self.configured(params) {
            Ok(pms) => pms,
            Err(e) => return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
        };
        // Queued messages go out with the model they were sent for: the
        // configuration is frozen while any waits.
        if !self.queue.is_empty() && (provider != self.row.provider || model != self.row.model) {
            let err = EngineError::new(
                ErrorKind::SessionBusy,
                format!(
                    "{} message(s) wait behind the running turn and will go to {}/{} as they were sent; switch the model once they have run, \
                     or drop them first (`forgectl cancel {} --drop-queued`)",
                    self.queue.len(),
                    self.row.provider,
                    self.row.model,
                    self.row.id
                ),
            );
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
        }
        let old_window = self.model_info().map(|m| m.context_window).unwrap_or(0);
        let switched = provider != self.row.provider || model != self.row.model;
        if sampling != self.row.sampling {
            self.row.sampling = sampling;
            self.pipeline.op(StoreOp::set_sampling(&self.row.id, &sampling));
        }
        if switched {
            self.row.provider = provider.clone();
            self.row.model = model.clone();
            // Another model counts with another tokenizer, and its window may
            // take another set of tools.
            self.anchor = None;
            self.size_tools();
            self.pipeline.op(StoreOp::SetModel {
                session_id: self.row.id.clone(),
                provider: provider.clone(),
                model: model.clone(),
            });
        }
        self.pipeline.event(Some(client), EventKind::SessionConfigured { provider, model, sampling });
        if switched {
            self.adapt_to_window(old_window);
        }
        self.pipeline.effect(OnDurable::Info(reply, None));
    }

    pub(super) fn on_clear(&mut self, client: ClientRef, reply: Reply<SessionInfo>) {
        if !matches!(self.state, OperationState::Idle) {
            let err = self.busy("cancel it first, then clear");
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
        }
        self.clear_history(client);
        self.pipeline.effect(OnDurable::Info(reply, None));
    }

    /// The conversation starts over (the tree keeps every node).
    pub(super) fn clear_history(&mut self, client: ClientRef) {
        self.path.clear();
        self.row.head_id = None;
        self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: None });
        self.pipeline.event(Some(client), EventKind::HistoryCleared {});
    }

    fn on_remove(&mut self, reply: Reply<()>) {
        if !matches!(self.state, OperationState::Idle) {
            let err = self.busy(&format!("cancel it first (`forgectl cancel {}`)", self.row.id));
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(err))));
        }
        self.pipeline.op(StoreOp::RemoveSession { id: self.row.id.clone() });
        self.pipeline.effect(OnDurable::Reply(Responder::with(reply, ())));
        self.pipeline.effect(OnDurable::Removed);
    }

    /// Cancels running work and stops once everything is durable.
    pub(super) fn begin_shutdown(&mut self, reply: Option<oneshot::Sender<()>>) {
        const REASON: &str = "cancelled because forged shut down";
        // A batch waiting for approval runs nothing: it stays pending and is
        // restored when the daemon starts again.
        // A helper's is not: its parent cancels the batch that waits for it.
        let awaiting =
            matches!(&self.state, OperationState::ToolLoop(l) if l.awaiting_approval()) && self.row.helper.is_none();
        if !self.cancel_stream(None, Some(REASON)) && !awaiting {
            self.cancel_tools(None, Some(REASON));
        }
        match &mut self.exit {
            Some(Exit::Shutdown(replies)) => replies.extend(reply),
            _ => self.exit = Some(Exit::Shutdown(reply.into_iter().collect())),
        }
        // Hooks still running decide nothing any more.
        self.drop_submissions("forged is shutting down");
        self.cancel_stop_hooks();
        if let Some(s) = self.starting.take() {
            self.out.push(Effect::Reply(ReadyReply::now(s.reply, Ok(()))));
        }
    }

    /// Starts the next queued message if the session is idle.
    pub(super) fn start_next_queued(&mut self) {
        if !matches!(self.state, OperationState::Idle) || self.exit.is_some() {
            return;
        }
        self.steers_to_queue();
        if let Some(q) = self.queue.pop_front() {
            self.completions = None;
            self.schema = None;
            self.grants = super::TurnGrants::from_json(q.grants.as_deref());
            self.pipeline
                .op(StoreOp::QueueRemove { session_id: self.row.id.clone(), message_id: q.message_id.clone() });
            let client = q.client.unwrap_or_else(ClientRef::daemon);
            self.start_turn(q.message_id, q.text, q.context, client, q.images);
        }
    }

    /// What `session.context` reports: the next request's size (system
    /// prompt, tools and the path, estimated and calibrated) against the
    /// model's window less the answer's room.
    pub(super) fn context_info(&self, system: bool) -> forge_proto::ContextInfo {
        let model = self.model_info();
        let budget = self.context_budget();
        let sized = self.sized_view();
        let tokens = if budget.is_some() { sized.tokens } else { 0 };
        let offered = self.tool_specs();
        let tools_withheld = match self.config.tools.mode.unwrap_or_default() {
            crate::config::ToolMode::Disabled => Vec::new(),
            _ => self
                .tools
                .iter()
                .map(|t| t.name().to_string())
                .filter(|n| !offered.iter().any(|o| &o.name == n))
                .collect(),
        };
        let chars: usize = self
            .path
            .iter()
            .map(|m| {
                m.text.chars().count() + m.tool_calls.iter().map(|c| c.arguments.len() + c.name.len()).sum::<usize>()
            })
            .sum();
        forge_proto::ContextInfo {
            session_id: self.row.id.clone(),
            provider: self.row.provider.clone(),
            model: self.row.model.clone(),
            messages: self.path.len() as u64,
            chars: chars as u64,
            estimated_tokens: tokens,
            context_window: model.filter(|m| m.source != Source::Default).map(|m| m.context_window),
            reserved_tokens: budget.map(|b| b.reserve),
            infinity: crate::context::infinity(&self.config),
            summary_id: self.in_force_summary().map(|(_, s)| s.id.clone()),
            summarized_messages: self.in_force_summary().map(|(end, _)| end as u64).unwrap_or(0),
            summaries: Vec::new(),
            span_messages: None,
            last_input_tokens: self.last_input_tokens,
            system_prompt: system.then(|| self.system_prompt.to_string()),
            instruction_files: self.instruction_files.clone(),
            tools_offered: offered.iter().map(|t| t.name.clone()).collect(),
            tools_withheld,
            repo_map: None,
            active_files: self.row.active_files.clone(),
        }
    }
}
