//! The session machine driven by events alone: no runtime, socket or
//! SQLite. A small journal here acknowledges (or fails) each batch the
//! session writes; every test asserts what a client would see: the events
//! published, the answers to commands, the state in `forgectl ps`.

use forge_proto::methods::SessionRequest;
use forge_proto::params::{AnswerParams, RecoverParams, RenameParams, SendParams};
use std::sync::Arc;

use forge_proto::{
    ApprovalDecision, ClientRef, ErrorKind, EventKind, JournalHealth, MessageStatus, OperationStateKind, RecoverAction,
    RecoveryBadge, SessionEvent,
};
use tokio::sync::oneshot;

use super::*;
use crate::journal::{PersistError, StoreOp};
use crate::session::Reply;
use crate::store::StreamRow;

/// A session and the world around it, as the shell would be.
struct Harness {
    s: Session,
    /// Effects not yet carried out.
    fx: Vec<Effect>,
    /// Batches written and not yet acknowledged.
    written: Vec<(u64, WriteBatch)>,
    /// Every batch acknowledged as durable, in order.
    durable: Vec<WriteBatch>,
    /// Published events, in order.
    published: Vec<SessionEvent>,
    /// Provider requests started, and whether one is open now.
    requests: Vec<ChatRequest>,
    /// The provider each request went to.
    providers: Vec<crate::provider::ProviderKind>,
    request_open: bool,
    /// Tools started, and whether one runs now.
    tool_runs: Vec<String>,
    tool_running: bool,
    timers: Vec<Timer>,
    /// The hooks in force, as the shell reads them before each message.
    hooks: crate::hooks::HookSet,
    /// Hooks the session asked to run, not yet answered.
    hook_jobs: Vec<crate::session::machine::hooks::HookJob>,
    /// The system prompt the next refresh finds.
    next_prompt: Option<Arc<str>>,
    /// The same messages the store finds under the head for the next one.
    next_same: Vec<crate::session::SameMessage>,
    /// The MCP servers the next refresh finds still starting.
    mcp_starting: Vec<String>,
    /// Waits for MCP servers the session asked for (job ids).
    tool_waits: Vec<u64>,
    /// Rewinds to plan, and files to restore, not yet answered.
    plans: Vec<rewind::PlanRewind>,
    restores: Vec<rewind::RestoreFiles>,
    /// Git mode: turn commits asked for, not yet answered.
    commits: Vec<git_commit::CommitJob>,
    /// Git mode: branch moves asked for, not yet answered.
    branch_moves: Vec<git_commit::MoveJob>,
    /// What the session asked the daemon for helper agents.
    helpers: Vec<HelperOut>,
    /// The records of calls stopped before their end, not yet answered.
    stopped_records: Vec<call::RecordAfter>,
    /// The worktree's `core.hooksPath` the shell reads (git mode).
    git_hooks: Option<String>,
    /// What the next call's record says it changed.
    next_changes: Vec<FileAfter>,
}

fn row() -> SessionRow {
    SessionRow {
        id: "s1".into(),
        name: None,
        cwd: std::env::temp_dir().display().to_string(),
        provider: "claude".into(),
        model: "claude-test".into(),
        sampling: Default::default(),
        active_files: Vec::new(),
        created_ms: 0,
        updated_ms: 0,
        head_id: None,
        last_seq: 0,
        approval: Default::default(),
        git: None,
        helper: None,
    }
}

fn config() -> ForgeConfig {
    let mut config = ForgeConfig::default();
    config.api_keys.anthropic = Some("test-key".into());
    config
}

fn client() -> ClientRef {
    ClientRef::daemon()
}

impl Harness {
    /// A fresh idle session (nothing unfinished).
    fn new() -> Self {
        Self::loaded(Unfinished::Nothing, Vec::new())
    }

    /// A session loaded with `unfinished` and history `path`.
    fn loaded(unfinished: Unfinished, path: Vec<ChatMessage>) -> Self {
        Self::configured(config(), unfinished, path)
    }

    fn configured(config: ForgeConfig, unfinished: Unfinished, path: Vec<ChatMessage>) -> Self {
        Self::restarted(config, unfinished, path, None)
    }

    /// A session started with what the store says, a rewind's intent
    /// without its end among it.
    fn restarted(
        config: ForgeConfig,
        unfinished: Unfinished,
        path: Vec<ChatMessage>,
        rewind: Option<rewind::RewindIntent>,
    ) -> Self {
        Self::restarted_as(config, unfinished, path, rewind, row())
    }

    /// As [`Self::restarted`], for the session `row`.
    fn restarted_as(
        config: ForgeConfig,
        unfinished: Unfinished,
        path: Vec<ChatMessage>,
        rewind: Option<rewind::RewindIntent>,
        row: SessionRow,
    ) -> Self {
        // Scripted time and ids: a run replayed from the same events writes
        // the same records.
        let clock = crate::ids::Clock::scripted(1_795_000_000_000);
        let s =
            Session::new(Arc::new(config), Arc::new(ToolRegistry::builtin()), row.clone(), "Be a test.".into(), clock);
        let mut h = Harness {
            s,
            fx: Vec::new(),
            written: Vec::new(),
            durable: Vec::new(),
            published: Vec::new(),
            requests: Vec::new(),
            providers: Vec::new(),
            request_open: false,
            tool_runs: Vec::new(),
            tool_running: false,
            timers: Vec::new(),
            hooks: Default::default(),
            hook_jobs: Vec::new(),
            next_prompt: None,
            next_same: Vec::new(),
            mcp_starting: Vec::new(),
            tool_waits: Vec::new(),
            plans: Vec::new(),
            restores: Vec::new(),
            commits: Vec::new(),
            branch_moves: Vec::new(),
            helpers: Vec::new(),
            stopped_records: Vec::new(),
            next_changes: Vec::new(),
            git_hooks: None,
        };
        let durable = Durable {
            row,
            queue: Vec::new(),
            path,
            unfinished,
            spent: Default::default(),
            summaries: Vec::new(),
            in_force: None,
            interrupted_changes: Default::default(),
            guarded: None,
            git_hooks: None,
            rewind,
        };
        h.feed(Event::Loaded { durable: Ok(Box::new(durable)), cause: RecoveryCause::Restart });
        h
    }

    /// The tree as the written batches built it (a store in miniature).
    fn forest(&self) -> crate::forest::Forest {
        let mut nodes: Vec<crate::store::NodeRow> = Vec::new();
        for batch in self.durable.iter().chain(self.written.iter().map(|(_, b)| b)) {
            for op in &batch.ops {
                match op {
                    StoreOp::InsertNode { id, session_id, parent_id, role, text, status, created_ms, meta } => nodes
                        .push(crate::store::NodeRow {
                            id: id.clone(),
                            session_id: session_id.clone(),
                            parent_id: parent_id.clone(),
                            role: *role,
                            text: text.clone(),
                            status: *status,
                            created_ms: *created_ms,
                            meta: meta.clone(),
                        }),
                    StoreOp::UpdateNodeText { id, text } => {
                        nodes.iter_mut().filter(|n| &n.id == id).for_each(|n| n.text = text.clone())
                    }
                    StoreOp::ReparentChildren { of, to } => nodes
                        .iter_mut()
                        .filter(|n| n.parent_id.as_ref() == Some(of))
                        .for_each(|n| n.parent_id = to.clone()),
                    StoreOp::DeleteNodes { ids } => nodes.retain(|n| !ids.contains(&n.id)),
                    _ => {}
                }
            }
        }
        crate::forest::Forest::new(nodes)
    }

    /// Hands the session one event and carries out its effects, except
    /// that batches stay written and unacknowledged.
    fn feed(&mut self, event: Event) {
        self.s.handle(event, &mut self.fx);
        for effect in std::mem::take(&mut self.fx) {
            match effect {
                Effect::Write { seq, batch } => self.written.push((seq, batch)),
                Effect::Publish { json, .. } => {
                    let ev = serde_json::from_str(&json).unwrap_or_else(|e| panic!("published JSON: {e}"));
                    self.published.push(ev);
                }
                Effect::StartRequest(request) => {
                    self.providers.push(request.0.kind);
                    self.requests.push(request.1);
                    self.request_open = true;
                }
                Effect::StopRequest => self.request_open = false,
                Effect::RunTool(run) => {
                    self.tool_runs.push(run.tool.name().to_string());
                    self.tool_running = true;
                }
                Effect::StopTool => self.tool_running = false,
                Effect::RunHooks(job) => self.hook_jobs.push(*job),
                Effect::PlanRewind(job) => self.plans.push(*job),
                Effect::RestoreFiles(job) => self.restores.push(*job),
                // Nothing to record: the calls here name no real file.
                Effect::RecordBefore(r) => self.feed(Event::JobDone {
                    job: r.job,
                    outcome: call::JobOutcome::RecordedBefore(Ok((Vec::new(), r.scan))),
                }),
                Effect::RecordAfter(r) if r.stopped => self.stopped_records.push(*r),
                Effect::RecordAfter(r) => {
                    let changes = std::mem::take(&mut self.next_changes);
                    let outcome = call::JobOutcome::RecordedAfter {
                        ops: Vec::new(),
                        changes,
                        undone: Vec::new(),
                        unrecorded: Vec::new(),
                    };
                    self.feed(Event::JobDone { job: r.job, outcome })
                }
                // The message as sent: no command of one's own, no MCP
                // server here.
                Effect::CheckFiles(job) => {
                    let id = job.job;
                    let (checked, then) = job.run();
                    self.feed(Event::JobDone { job: id, outcome: call::JobOutcome::FilesChecked(checked, then) });
                }
                Effect::PrepareInput(job) => {
                    let prompt = self.next_prompt.take().map(|p| (p, Vec::new()));
                    let starting = std::mem::take(&mut self.mcp_starting);
                    let refresh = Refresh {
                        prompt,
                        tools: None,
                        agents: None,
                        hooks: self.hooks.clone(),
                        starting,
                        active: Vec::new(),
                        git_hooks: self.git_hooks.clone(),
                    };
                    let same = std::mem::take(&mut self.next_same);
                    let input = input::Input { text: job.text, same, ..Default::default() };
                    let prepared = input::Prepared { refresh: Some(refresh), input: Ok(input) };
                    let outcome = call::JobOutcome::InputPrepared(Box::new(prepared));
                    self.feed(Event::JobDone { job: job.job, outcome })
                }
                Effect::WaitForTools { job, .. } => self.tool_waits.push(job),
                Effect::CommitTurn(job) => self.commits.push(*job),
                Effect::MoveBranch(job) => self.branch_moves.push(*job),
                Effect::Helper(out) => self.helpers.push(*out),
                Effect::Reply(answer) => answer.send(),
                Effect::Answer(answer) => match *answer {
                    Answer::Info { reply, .. } => {
                        let info =
                            crate::session::answers::info(self.s.row().clone(), Some((&self.s.snapshot(), 0)), 0);
                        reply.send(Ok(info))
                    }
                    Answer::Context { info, reply, .. } => reply.send(Ok(info)),
                },
                // No other session here: every name is free.
                Effect::ClaimName { name, client, reply } => {
                    let claim = Ok(NameClaim::new(name, None));
                    self.feed(Event::NameClaimed { claim, client, reply })
                }
                Effect::Arm(timer, _) => self.timers.push(timer),
                Effect::ReadTree { then } => {
                    let forest = Box::new(self.forest());
                    self.feed(Event::TreeRead { forest: Ok(forest), then })
                }
                Effect::ReadHistory { then, .. } => {
                    self.feed(Event::HistoryRead { history: Ok(vec![ChatMessage::user("from the store")]), then })
                }
                Effect::Reload { row, cause } => {
                    let durable = Durable {
                        row: *row,
                        queue: Vec::new(),
                        path: Vec::new(),
                        unfinished: Unfinished::Nothing,
                        spent: Default::default(),
                        summaries: Vec::new(),
                        in_force: None,
                        interrupted_changes: Default::default(),
                        rewind: None,
                        guarded: None,
                        git_hooks: None,
                    };
                    self.feed(Event::Loaded { durable: Ok(Box::new(durable)), cause });
                }
            }
        }
    }

    /// Acknowledges the batch in flight as durable and applies it.
    fn ack(&mut self) {
        let (seq, batch) = self.written.remove(0);
        self.durable.push(batch);
        self.feed(Event::Ack(JournalAck { seq, result: Ok(PersistedProof::for_tests(seq)) }));
        while self.s.has_work_to_apply() {
            self.feed(Event::Apply);
        }
    }

    /// Acknowledges every write until the session has nothing in flight.
    fn settle(&mut self) {
        while !self.written.is_empty() {
            self.ack();
        }
    }

    fn fail_write(&mut self) {
        let (seq, _) = self.written.remove(0);
        let result = Err(PersistError::Blocked("disk full".into()));
        self.feed(Event::Ack(JournalAck { seq, result }));
    }

    fn command<T: Send + 'static>(
        &mut self,
        make: impl FnOnce(Reply<T>) -> SessionCmd,
    ) -> oneshot::Receiver<Result<T, EngineError>> {
        let (reply, rx) = oneshot::channel();
        self.feed(Event::Command(make(reply.into())));
        rx
    }

    /// A command of the table's `machine` block, its JSON answer read
    /// back as the method's result.
    fn request<T: serde::de::DeserializeOwned + Send + 'static>(
        &mut self,
        request: SessionRequest,
    ) -> oneshot::Receiver<Result<T, EngineError>> {
        let (tx, rx) = oneshot::channel();
        let reply = Reply(Box::new(move |json: Result<serde_json::Value, EngineError>| {
            let typed = json.and_then(|v| serde_json::from_value(v).map_err(|e| EngineError::internal(e.to_string())));
            drop(tx.send(typed));
        }));
        self.feed(Event::Command(SessionCmd::Request { request, client: client(), reply }));
        rx
    }

    fn send(&mut self, text: &str) -> oneshot::Receiver<Result<forge_proto::SendResult, EngineError>> {
        let params = SendParams { text: Some(text.into()), ..Default::default() };
        self.request(SessionRequest::Send(params))
    }

    /// Sends a message whose answer the test does not look at.
    fn say(&mut self, text: &str) {
        drop(self.send(text));
    }

    /// Approves every call of the pending approval, as a client would.
    fn approve_all(&mut self) {
        let pending = self.s.snapshot().approval.unwrap_or_else(|| panic!("an approval waits"));
        let params = forge_proto::params::AnswerParams {
            decision: forge_proto::ApprovalDecision::ApproveAll,
            approval_id: Some(pending.approval_id),
            ..Default::default()
        };
        drop(self.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
        self.settle();
    }

    /// A turn whose stream is open and durable.
    fn streaming(&mut self) {
        self.say("go");
        self.settle();
    }

    /// A turn whose answer asks for one tool call (not yet durable).
    fn answer_calling(&mut self, name: &str, args: &str) {
        self.streaming();
        let mut events = tool_call(0, "c1", name, args);
        events.push(ProviderEvent::Done);
        self.provider(events);
    }

    fn provider(&mut self, events: Vec<ProviderEvent>) {
        self.feed(Event::Provider(events));
    }

    fn names(&self) -> Vec<&'static str> {
        self.published.iter().map(|e| e.kind.name()).collect()
    }

    fn state(&self) -> OperationStateKind {
        self.s.snapshot().state
    }

    /// The store ops of every durable batch, flattened.
    fn durable_ops(&self) -> impl Iterator<Item = &StoreOp> {
        self.durable.iter().flat_map(|b| b.ops.iter())
    }
}

/// The answer a command got, which must have come.
fn answered<T>(mut rx: oneshot::Receiver<Result<T, EngineError>>) -> Result<T, EngineError> {
    rx.try_recv().unwrap_or_else(|e| panic!("no answer yet: {e}"))
}

fn text(t: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(t.into())
}

fn tool_call(index: usize, id: &str, name: &str, args: &str) -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::ToolCallStart { index, id: id.into(), name: name.into() },
        ProviderEvent::ToolCallArgs { index, fragment: args.into() },
    ]
}

fn finished(h: &Harness) -> (MessageStatus, Option<String>) {
    h.published
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::TurnFinished { status, error_kind, .. } => Some((*status, error_kind.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn_finished in {:?}", h.names()))
}

#[test]
fn a_turn_streams_into_an_answer_and_the_session_goes_idle() {
    let mut h = Harness::new();
    let reply = h.send("hello");
    assert_eq!(h.requests.len(), 1, "the request starts at once, before the write");
    assert_eq!(h.requests[0].messages, vec![ChatMessage::user("hello")]);
    h.settle();
    let sent = answered(reply).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((sent.seq, sent.queued), (1, false));
    assert_eq!(h.state(), OperationStateKind::Streaming);

    h.provider(vec![text("Hi "), text("there"), ProviderEvent::Done]);
    assert!(!h.request_open, "the request is dropped once the stream ends");
    h.settle();
    // The seed's generation events: each provider call is provider_request
    // → provider_response → assistant_node, then done with the nodes.
    assert_eq!(
        h.names(),
        [
            "turn_started",
            "provider_request",
            "text_delta",
            "provider_response",
            "usage",
            "assistant_node",
            "done",
            "turn_finished"
        ]
    );
    assert_eq!(finished(&h), (MessageStatus::Complete, None));
    assert_eq!(h.state(), OperationStateKind::Idle);
    // The answer is history: the next request carries it.
    h.say("again");
    assert_eq!(h.requests[1].messages[1], ChatMessage::assistant("Hi there", Vec::new()));
}

/// Time and ids come from the clock the session is given, never from the
/// machine's surroundings: the same events give the same journal, ids and
/// timestamps included, so a session can be replayed exactly.
#[test]
fn the_same_events_write_the_same_journal_byte_for_byte() {
    let run = || {
        let mut h = Harness::new();
        h.answer_calling("read_file", "{\"path\":\"x\"}");
        h.settle();
        h.provider(vec![text("done"), ProviderEvent::Done]);
        h.settle();
        let batches: Vec<String> = h.durable.iter().map(|b| format!("{:?}", b.ops)).collect();
        let events: Vec<String> = h.published.iter().map(|e| format!("{e:?}")).collect();
        (batches, events)
    };
    let (first, second) = (run(), run());
    assert!(first.1.iter().any(|e| e.contains("assistant_node") || e.contains("AssistantNode")), "{:?}", first.1);
    assert_eq!(first, second);
    assert!(first.1.iter().all(|e| e.contains("ts_ms: 1795000000000")), "{:?}", first.1);
}

/// Seed 004: no event reaches apply (or a client) without the writer's proof.
#[test]
fn nothing_is_published_before_its_batch_is_durable() {
    let mut h = Harness::new();
    let reply = h.send("hello");
    assert!(h.published.is_empty(), "turn_started waits for its ack");
    assert!(reply.is_empty(), "so does the answer to send");
    h.ack();
    h.provider(vec![text("partial")]);
    assert_eq!(h.names(), ["turn_started", "provider_request"], "the delta is written, not shown");
    assert_eq!(h.written.len(), 1);
    h.ack();
    assert_eq!(h.names(), ["turn_started", "provider_request", "text_delta"]);
}

/// Seed 004: a cancel is taken at once under a flood of deltas, and is the
/// very next thing written after them.
#[test]
fn cancel_is_answered_promptly_under_a_delta_flood() {
    let mut h = Harness::new();
    h.say("flood me");
    h.settle();
    h.provider(vec![text("first ")]);
    assert_eq!(h.written.len(), 1, "one write in flight");
    for _ in 0..1000 {
        h.provider((0..MAX_INCOMING_EVENTS_PER_TICK).map(|_| text("x")).collect());
    }
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    assert!(!h.request_open, "the request stops at once");
    let mut writes = 0;
    while !h.written.is_empty() {
        h.ack();
        writes += 1;
    }
    assert!(writes <= 3, "256,000 deltas and the cancel took {writes} writes");
    let result = answered(cancel).unwrap_or_else(|e| panic!("{e}"));
    assert!(result.cancelled);
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
    let streamed: usize = h
        .published
        .iter()
        .map(|e| match &e.kind {
            EventKind::TextDelta { text } => text.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(streamed, "first ".len() + 256_000, "every delta taken in before the cancel is kept");
    assert_eq!(h.state(), OperationStateKind::Idle);
}

/// Seed 004: a failed write blocks the session, stops its work, tells every
/// waiter, and refuses new work until the journal is healthy again.
#[test]
fn a_failed_write_blocks_the_session_until_the_journal_recovers() {
    let mut h = Harness::new();
    h.say("hello");
    h.settle();
    h.provider(vec![text("part")]);
    let rename = h.request::<forge_proto::SessionInfo>(SessionRequest::Rename(RenameParams {
        name: Some("n".into()),
        ..Default::default()
    }));
    h.fail_write();
    assert_eq!(h.state(), OperationStateKind::PersistenceBlocked);
    assert!(!h.request_open, "the stream stops");
    assert!(h.written.is_empty(), "nothing more is written");
    assert_eq!(h.names(), ["turn_started", "provider_request"], "nothing of the failed batch is shown");
    let err = h.request::<forge_proto::SessionInfo>(SessionRequest::Rename(Default::default()));
    assert_eq!(answered(err).err().map(|e| e.kind), Some(ErrorKind::PersistenceBlocked));
    // The rename was in the batch after the failed one: told as well.
    assert_eq!(answered(rename).err().map(|e| e.kind), Some(ErrorKind::PersistenceBlocked));
    let send = h.send("more");
    assert_eq!(answered(send).err().map(|e| e.kind), Some(ErrorKind::PersistenceBlocked));
    let context = h.request::<forge_proto::ContextInfo>(SessionRequest::Context(Default::default()));
    assert!(answered(context).is_ok(), "a read is still answered");

    let healthy = HealthState { health: JournalHealth::Healthy, reason: None, since_ms: 0 };
    h.feed(Event::Health(healthy));
    assert_eq!(h.state(), OperationStateKind::Idle, "reloaded from the store");
    let send = h.send("after the reset");
    h.settle();
    assert!(answered(send).is_ok());
}

/// Seed 004: acks must come back in order; anything else blocks.
#[test]
fn an_unexpected_ack_blocks_rather_than_guesses() {
    let mut h = Harness::new();
    h.say("hello");
    h.feed(Event::Ack(JournalAck { seq: 99, result: Ok(PersistedProof::for_tests(99)) }));
    assert_eq!(h.state(), OperationStateKind::PersistenceBlocked);
    assert!(h.published.is_empty());
}

#[test]
fn a_message_sent_during_a_turn_waits_and_starts_when_it_ends() {
    let mut h = Harness::new();
    h.say("first");
    h.settle();
    let queued = h.send("second");
    h.settle();
    let queued = answered(queued).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(queued.queue_position, Some(1));
    assert_eq!(h.s.snapshot().queued, 1);
    h.provider(vec![text("one"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(h.requests.len(), 2, "the queued message went out");
    assert_eq!(h.requests[1].messages.last(), Some(&ChatMessage::user("second")));
    assert_eq!(
        h.names(),
        [
            "turn_started",
            "provider_request",
            "message_queued",
            "text_delta",
            "provider_response",
            "usage",
            "assistant_node",
            "done",
            "turn_finished",
            "turn_started",
            "provider_request"
        ]
    );
}

#[test]
fn a_tool_runs_only_after_its_announcement_is_durable_and_the_turn_continues_with_its_result() {
    let mut h = Harness::new();
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.ack();
    assert!(h.tool_runs.is_empty(), "the answer is durable; tool_running is not yet");
    h.settle();
    assert_eq!(h.tool_runs, ["read_file"]);
    assert_eq!(h.state(), OperationStateKind::ExecutingTools);
    h.feed(Event::ToolOutput(ToolOutput { stream: "stdout", text: "reading".into() }));
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("fn main() {}".into())) });
    h.settle();
    assert_eq!(
        h.names(),
        [
            "turn_started",
            "provider_request",
            "tool_call_started",
            "tool_call_args",
            "provider_response",
            "usage",
            "assistant_node",
            "tool_running",
            "tool_output",
            "tool_result",
            "tool_result_node",
            "stream_resumed",
            "provider_request"
        ]
    );
    assert_eq!(h.requests.len(), 2, "the model continues with the result");
    assert_eq!(h.requests[1].messages.last(), Some(&ChatMessage::tool_result("c1", "fn main() {}", false)));
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(finished(&h).0, MessageStatus::Complete);
    // `done` lists every node the generation appended: the answer that
    // called the tool, its result, and the final answer.
    let nodes = h
        .published
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Done { nodes, .. } => Some(nodes.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let appended: Vec<String> = h
        .published
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AssistantNode { node_id, .. } | EventKind::ToolResultNode { node_id, .. } => {
                Some(node_id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes, appended);
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_panicking_tool_is_an_error_result_not_a_dead_session() {
    let mut h = Harness::new();
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.settle();
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Panicked });
    h.settle();
    let result = h.published.iter().find_map(|e| match &e.kind {
        EventKind::ToolResult { is_error, output, .. } => Some((*is_error, output.clone())),
        _ => None,
    });
    assert_eq!(result, Some((true, "error: read_file failed: the tool panicked".into())));
    assert_eq!(h.requests.len(), 2);
}

#[test]
fn a_side_effecting_call_waits_for_approval_and_a_denial_is_a_result_the_model_sees() {
    let mut h = Harness::new();
    h.answer_calling("write_file", r#"{"path":"a.rs","content":"x"}"#);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::AwaitingApproval);
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("an approval waits"));
    assert_eq!(pending.calls[0].call_id, "c1");
    assert!(h.tool_runs.is_empty());

    let params = AnswerParams {
        decision: ApprovalDecision::ApproveAll,
        approval_id: Some("not-it".into()),
        ..Default::default()
    };
    let wrong = h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params));
    assert_eq!(answered(wrong).err().map(|e| e.kind), Some(ErrorKind::ApprovalNotPending));
    let params = AnswerParams {
        decision: ApprovalDecision::DenyAll,
        approval_id: Some(pending.approval_id.clone()),
        ..Default::default()
    };
    let deny = h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params));
    h.settle();
    assert_eq!(answered(deny).map(|r| r.denied).ok(), Some(vec!["c1".to_string()]));
    assert!(h.tool_runs.is_empty(), "a denied call never runs");
    let last = h.requests.last().and_then(|r| r.messages.last().cloned());
    assert_eq!(last, Some(ChatMessage::tool_result("c1", "error: write_file failed: denied by the user", true)));
}

/// Seed 004: a tool call followed by a stream error runs nothing.
#[test]
fn a_stream_error_after_a_tool_call_runs_no_tool() {
    let mut h = Harness::new();
    h.streaming();
    let mut events = tool_call(0, "c1", "read_file", r#"{"path":"a.rs"}"#);
    events.push(ProviderEvent::Error(crate::provider::ProviderError::internal("overloaded")));
    h.provider(events);
    h.settle();
    assert!(h.tool_runs.is_empty());
    assert_eq!(finished(&h).0, MessageStatus::Error);
    assert_eq!(h.state(), OperationStateKind::Idle);
}

fn open_stream(text: &str) -> RecoveredStream {
    RecoveredStream {
        row: StreamRow {
            stream_id: "t1".into(),
            session_id: "s1".into(),
            message_id: "m1".into(),
            provider: "claude".into(),
            model: "claude-test".into(),
            first_seq: 1,
            state: "open".into(),
            outcome: None,
            error: None,
            error_kind: None,
            stop_reason: None,
            usage: None,
            reasoning: None,
        },
        text: text.into(),
        tool_calls: Vec::new(),
    }
}

/// Seed 004: recovery turns an interrupted stream into one answer, the
/// node and the journal commit in one batch.
#[test]
fn an_interrupted_stream_is_recovered_once_in_one_batch() {
    let mut h = Harness::loaded(Unfinished::Streams(vec![open_stream("half an ans")]), vec![ChatMessage::user("q")]);
    assert_eq!(h.written.len(), 1);
    let ops = &h.written[0].1.ops;
    let node = ops.iter().position(|op| matches!(op, StoreOp::InsertNode { text, .. } if text == "half an ans"));
    let commit = ops.iter().position(|op| matches!(op, StoreOp::StreamCommit { .. }));
    assert!(node.is_some() && commit.is_some(), "the answer and the commit are one batch");
    h.settle();
    let recovered = h.published.iter().find_map(|e| match &e.kind {
        EventKind::TurnFinished { recovered, status, .. } => Some((*recovered, *status)),
        _ => None,
    });
    assert_eq!(recovered, Some((Some(RecoveryBadge::Incomplete), MessageStatus::Interrupted)));
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert_eq!(h.durable_ops().filter(|op| matches!(op, StoreOp::StreamCommit { .. })).count(), 1);
}

/// Seed 004: a second restart does not announce a tool recovery again, and
/// nothing runs until a client decides.
#[test]
fn tool_recovery_is_announced_once_and_waits_for_a_decision() {
    let path = vec![
        ChatMessage::user("q"),
        ChatMessage::assistant(
            "",
            vec![forge_proto::ToolCallRecord {
                id: "c1".into(),
                name: "write_file".into(),
                arguments: r#"{"path":"a","content":"b"}"#.into(),
            }],
        ),
    ];
    let unfinished =
        |announced| Unfinished::ToolCalls { message_id: "m1".into(), started: ["c1".to_string()].into(), announced };
    let mut h = Harness::loaded(unfinished(false), path.clone());
    h.settle();
    assert_eq!(h.names(), ["tool_recovery"]);
    assert_eq!(h.state(), OperationStateKind::ToolRecovery);
    assert!(h.tool_runs.is_empty());

    let mut again = Harness::loaded(unfinished(true), path);
    again.settle();
    assert!(again.names().is_empty(), "already announced");
    let params = RecoverParams { action: RecoverAction::Resume, ..Default::default() };
    let decision = again.request::<forge_proto::RecoverResult>(SessionRequest::Recover(params));
    again.settle();
    let result = answered(decision).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.not_rerun, ["c1"], "a side-effecting call that had started is not run again");
    assert!(again.tool_runs.is_empty());
}

#[test]
fn a_quiet_session_lets_go_of_its_history_and_reads_it_back_for_the_next_command() {
    let mut h = Harness::new();
    assert_eq!(h.timers, [Timer::ReleaseHistory]);
    h.feed(Event::Timer(Timer::ReleaseHistory));
    let context = h.request::<forge_proto::ContextInfo>(SessionRequest::Context(Default::default()));
    assert_eq!(answered(context).map(|c| c.messages).ok(), Some(1), "read back from the store");
}

#[test]
fn shutdown_cancels_the_stream_and_stops_once_it_is_durable() {
    let mut h = Harness::new();
    h.say("long task");
    h.settle();
    h.provider(vec![text("some")]);
    let (reply, mut stopped) = oneshot::channel();
    h.feed(Event::Command(SessionCmd::Shutdown { reply }));
    assert!(!h.request_open);
    assert!(!h.s.is_done(), "not before the cancel is durable");
    h.settle();
    assert!(h.s.is_done());
    assert_eq!(finished(&h).1.as_deref(), Some("shutting_down"));
    let replies = h.s.into_shutdown_replies();
    assert_eq!(replies.len(), 1);
    assert!(stopped.try_recv().is_err(), "the shell answers once the task ends");
}

#[test]
fn a_call_cancelled_before_it_runs_still_gets_its_result_and_never_runs() {
    let mut h = Harness::new();
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.ack(); // the stream's end: the answer with the call is written
    h.ack(); // the answer is durable: tool_running is written
    assert!(h.names().contains(&"tool_call_args") && !h.names().contains(&"tool_running"));
    assert_eq!(h.written.len(), 1, "tool_running in flight");
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert!(answered(cancel).is_ok_and(|r| r.cancelled));
    assert!(h.tool_runs.is_empty(), "cancelled before it ran: it never runs");
    let results: Vec<_> = h
        .published
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { call_id, is_error, .. } => Some((call_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [("c1".to_string(), true)], "the announced call is answered");
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
}

#[test]
fn an_approval_is_shown_only_once_its_request_is_durable() {
    let mut h = Harness::new();
    h.answer_calling("write_file", r#"{"path":"a.rs","content":"x"}"#);
    h.ack(); // the stream's end: the answer and approval_requested are written
    assert_eq!(h.written.len(), 1);
    assert!(h.s.snapshot().approval.is_none(), "not shown while its request could still be lost");
    h.settle();
    assert!(h.names().contains(&"approval_requested"));
    assert!(h.s.snapshot().approval.is_some());
}

#[test]
fn removing_a_session_while_shutting_down_still_answers_the_shutdown() {
    let mut h = Harness::new();
    let remove = h.command(|reply| SessionCmd::Remove { reply });
    let (reply, _stopped) = oneshot::channel();
    h.feed(Event::Command(SessionCmd::Shutdown { reply }));
    h.settle();
    assert!(answered(remove).is_ok());
    assert!(h.s.is_done());
    assert_eq!(h.s.into_shutdown_replies().len(), 1);
}

fn transient(after: Option<std::time::Duration>) -> ProviderEvent {
    ProviderEvent::Error(crate::provider::ProviderError {
        kind: ErrorKind::ProviderUnavailable,
        message: "Claude is unavailable (HTTP 529): overloaded_error: Overloaded. Try again shortly.".into(),
        retry: Some(crate::provider::RetryHint { reason: "overloaded".into(), after }),
        model_not_found: false,
    })
}

fn retries(h: &Harness) -> Vec<(u32, u32, u64)> {
    h.published
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Retrying { attempt, max_attempts, delay_ms, .. } => Some((*attempt, *max_attempts, *delay_ms)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_transient_failure_before_any_output_is_retried_after_a_backoff() {
    let mut h = Harness::new();
    h.streaming();
    h.provider(vec![transient(None)]);
    assert!(!h.request_open);
    h.settle();
    let r = retries(&h);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1), (2, 5), "attempt 2 of 1 + 4 retries");
    assert!((2000..=2500).contains(&r[0].2), "2 s and up to a quarter of jitter: {}", r[0].2);
    assert_eq!(h.timers.last(), Some(&Timer::Retry));
    assert_eq!(h.state(), OperationStateKind::Streaming);
    h.feed(Event::Timer(Timer::Retry));
    assert_eq!(h.requests.len(), 2, "the same request again");
    assert_eq!(h.requests[0].messages, h.requests[1].messages);
    h.provider(vec![text("fine"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(finished(&h).0, MessageStatus::Complete);
}

#[test]
fn retry_after_is_honoured_and_the_backoff_doubles_until_the_last_attempt() {
    let mut h = Harness::new();
    h.streaming();
    h.provider(vec![transient(Some(std::time::Duration::from_secs(7)))]);
    h.feed(Event::Timer(Timer::Retry));
    for _ in 0..4 {
        h.provider(vec![transient(None)]);
        h.feed(Event::Timer(Timer::Retry));
    }
    h.settle();
    let delays: Vec<u64> = retries(&h).iter().map(|r| r.2).collect();
    assert_eq!(delays.len(), 4, "four retries, then the error stands: {delays:?}");
    assert_eq!(delays[0], 7000, "retry-after");
    for (d, base) in delays[1..].iter().zip([4000, 8000, 16000]) {
        assert!((base..=base * 5 / 4).contains(d), "{delays:?}");
    }
    assert_eq!(h.requests.len(), 5);
    let error = h.published.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnFinished { error, .. } => error.clone(),
        _ => None,
    });
    assert!(error.unwrap_or_default().ends_with("(gave up after 5 attempts)"));
}

#[test]
fn a_failure_after_output_is_not_retried_and_keeps_the_partial_answer() {
    let mut h = Harness::new();
    h.streaming();
    h.provider(vec![text("half"), transient(None)]);
    h.settle();
    assert!(retries(&h).is_empty());
    assert_eq!(finished(&h).0, MessageStatus::Error);
    assert_eq!(h.requests.len(), 1);
}

#[test]
fn a_cancel_while_waiting_to_retry_ends_the_turn_and_nothing_is_sent_again() {
    let mut h = Harness::new();
    h.streaming();
    h.provider(vec![transient(None)]);
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert!(answered(cancel).is_ok_and(|r| r.cancelled));
    h.feed(Event::Timer(Timer::Retry));
    assert_eq!(h.requests.len(), 1);
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
}

/// A 4,000-token model, no tools, Context Infinity on.
fn small_window() -> ForgeConfig {
    let mut c = config();
    c.tools.mode = Some(crate::config::ToolMode::Disabled);
    c.context.infinity = Some(true);
    c.models.push(crate::config::ModelConfig {
        name: "claude-test".into(),
        provider: "claude".into(),
        context_window: Some(4000),
        max_output_tokens: Some(500),
        ..Default::default()
    });
    c
}

fn summary_retries(h: &Harness) -> Vec<(u32, u64)> {
    h.published
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SummarizationRetry { attempt, delay_ms, .. } => Some((*attempt, *delay_ms)),
            _ => None,
        })
        .collect()
}

/// Seed 000's summarization: the request that would not fit waits for a
/// summary, retried after 500 ms then 1 s (plus up to 200 ms) on failure,
/// and goes out with the summary in place of the span.
#[test]
fn a_turn_that_would_not_fit_waits_for_a_summary_retried_with_the_seeds_backoff() {
    let mut h = Harness::configured(small_window(), Unfinished::Nothing, Vec::new());
    for i in 0..6 {
        h.send(&format!("question {i}"));
        h.provider(vec![text(&"word ".repeat(400)), ProviderEvent::Done]);
        h.settle();
    }
    assert!(!h.names().contains(&"summarization_started"), "six answers fit");
    let answers = h.requests.len();
    let queued = h.send("the next question");
    h.settle();
    assert!(h.names().contains(&"summarization_started"), "{:?}", h.names());
    assert_eq!(h.state(), OperationStateKind::Summarizing);
    let summary = h.requests.last().cloned().unwrap_or_else(|| panic!("no summary request"));
    assert_eq!(h.requests.len(), answers + 1);
    assert!(summary.system.as_deref().is_some_and(|s| s.contains("<conversation>") && s.contains("question 0")));
    assert!(summary.tools.is_empty());

    // A message sent meanwhile waits.
    let waiting = h.send("sent while summarizing");
    h.settle();
    assert_eq!(answered(waiting).map(|r| r.queued).ok(), Some(true));

    assert_eq!(h.state(), OperationStateKind::SummarizingWithQueued);
    h.provider(vec![transient(None)]);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::SummarizationRetryWithQueued);
    assert_eq!(h.timers.last(), Some(&Timer::SummaryRetry));
    h.feed(Event::Timer(Timer::SummaryRetry));
    h.provider(vec![transient(None)]);
    h.settle();
    let r = summary_retries(&h);
    assert_eq!(r.len(), 2);
    assert!((2, 500) <= r[0] && r[0] <= (2, 700), "500 ms + jitter: {r:?}");
    assert!((3, 1000) <= r[1] && r[1] <= (3, 1200), "doubled: {r:?}");
    h.feed(Event::Timer(Timer::SummaryRetry));
    assert_eq!(h.requests.last().map(|r| &r.system), Some(&summary.system), "the same summary request again");

    h.provider(vec![text("The user asked six questions."), ProviderEvent::Done]);
    h.settle();
    assert!(h.names().contains(&"summarization_done"));
    let turn = h.requests.last().cloned().unwrap_or_else(|| panic!("no request"));
    assert!(turn.messages[0].text.contains("The user asked six questions."), "{:?}", turn.messages[0]);
    assert_eq!(turn.messages.last().map(|m| m.text.as_str()), Some("the next question"));
    assert!(!turn.messages.iter().any(|m| m.text == "question 0"), "the span is not sent");
    h.provider(vec![text("answer"), ProviderEvent::Done]);
    h.settle();
    assert!(answered(queued).is_ok());
    // The queued message went next, with the summary in force.
    let next = h.requests.last().cloned().unwrap_or_else(|| panic!("no request"));
    assert_eq!(next.messages.last().map(|m| m.text.as_str()), Some("sent while summarizing"));
    assert!(next.messages[0].text.contains("The user asked six questions."));
}

/// `[context] summarizer_model` of another provider than the session's
/// is asked at its own provider, not sent to the session's endpoint under
/// a name it does not know.
#[test]
fn a_summarizer_of_another_provider_is_asked_at_that_provider() {
    let mut config = small_window();
    config.context.summarizer_model = Some("gemini-2.5-flash".into());
    let mut h = Harness::configured(config, Unfinished::Nothing, Vec::new());
    for i in 0..7 {
        h.send(&format!("question {i}"));
        if h.state() == OperationStateKind::Summarizing {
            break;
        }
        h.provider(vec![text(&"word ".repeat(400)), ProviderEvent::Done]);
        h.settle();
    }
    assert_eq!(h.state(), OperationStateKind::Summarizing, "{:?}", h.names());
    let summary = h.requests.last().cloned().unwrap_or_else(|| panic!("no summary request"));
    assert_eq!(summary.model, "gemini-2.5-flash");
    assert_eq!(h.providers.last(), Some(&crate::provider::ProviderKind::Gemini));
    assert_eq!(h.providers.first(), Some(&crate::provider::ProviderKind::Claude), "the turns stay the session's");
}

/// A switch to a larger model while a summary is written: once it is
/// done, the larger window takes the messages back as they were, and the
/// turn (and the next) sends them, not the summary.
#[test]
fn a_summary_finished_after_a_switch_to_a_larger_window_is_not_forced_on_it() {
    let mut config = small_window();
    config.models.push(crate::config::ModelConfig {
        name: "claude-big".into(),
        provider: "claude".into(),
        context_window: Some(200_000),
        max_output_tokens: Some(500),
        ..Default::default()
    });
    let mut h = Harness::configured(config, Unfinished::Nothing, Vec::new());
    for i in 0..7 {
        h.send(&format!("question {i}"));
        if h.state() == OperationStateKind::Summarizing {
            break;
        }
        h.provider(vec![text(&"word ".repeat(400)), ProviderEvent::Done]);
        h.settle();
    }
    assert_eq!(h.state(), OperationStateKind::Summarizing, "{:?}", h.names());
    let params = forge_proto::params::ConfigureParams { model: Some("claude-big".into()), ..Default::default() };
    let switched = h.request::<forge_proto::SessionInfo>(SessionRequest::Configure(params));
    h.settle();
    assert!(answered(switched).is_ok());
    h.provider(vec![text("The user asked questions."), ProviderEvent::Done]);
    h.settle();
    let names = h.names();
    let done = names.iter().position(|n| *n == "summarization_done");
    let restored = names.iter().position(|n| *n == "context_restored");
    assert!(done.is_some() && restored > done, "{names:?}");
    let turn = h.requests.last().cloned().unwrap_or_else(|| panic!("no request"));
    assert_eq!(turn.model, "claude-big");
    assert_eq!(turn.messages[0].text, "question 0", "the originals, not the summary");
    h.provider(vec![text("answer"), ProviderEvent::Done]);
    h.settle();
    h.say("and now?");
    let next = h.requests.last().cloned().unwrap_or_else(|| panic!("no request"));
    assert_eq!(next.messages[0].text, "question 0", "it stays so for the next turn");
}

/// Between two tool batches of a turn, a request that would not fit waits
/// for a summary of the turns before, then the turn goes on.
#[test]
fn a_tool_loop_that_outgrows_the_window_is_summarized_between_batches() {
    let mut c = small_window();
    c.tools.mode = None;
    c.models[0].context_window = Some(20_000);
    let mut h = Harness::configured(c, Unfinished::Nothing, Vec::new());
    for i in 0..5 {
        h.send(&format!("question {i}"));
        h.provider(vec![text(&"word ".repeat(1600)), ProviderEvent::Done]);
        h.settle();
    }
    h.send("read the big file");
    let mut events = tool_call(0, "c1", "read_file", r#"{"path":"big.rs"}"#);
    events.push(ProviderEvent::Done);
    h.provider(events);
    h.settle();
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("line\n".repeat(2600))) });
    h.settle();
    assert!(h.names().contains(&"summarization_started"), "{:?}", h.names());
    h.provider(vec![text("Five questions were answered at length."), ProviderEvent::Done]);
    h.settle();
    let resumed = h.requests.last().cloned().unwrap_or_else(|| panic!("no request"));
    assert!(resumed.messages[0].text.contains("Five questions were answered"));
    assert_eq!(
        resumed.messages.last().map(|m| m.tool_result.is_some()),
        Some(true),
        "the turn goes on with its result"
    );
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(finished(&h).0, MessageStatus::Complete);
}

fn send_with(h: &mut Harness, text: &str, n: u32, continued: bool) -> Result<forge_proto::SendResult, EngineError> {
    let params = SendParams { text: Some(text.into()), n: Some(n), continued, ..Default::default() };
    let rx = h.request(SessionRequest::Send(params));
    h.settle();
    answered(rx)
}

fn without_tools() -> ForgeConfig {
    let mut config = config();
    config.tools.mode = Some(forge_tools::config::ToolMode::Disabled);
    config
}

/// Seed 003: n > 1 asks the provider once per answer, with the same
/// context, and each answer is a sibling under the message.
#[test]
fn several_answers_are_siblings_under_the_message() {
    let mut h = Harness::configured(without_tools(), Unfinished::Nothing, Vec::new());
    let sent = send_with(&mut h, "name a colour", 3, false).unwrap_or_else(|e| panic!("{e}"));
    for answer in ["red", "green", "blue"] {
        h.provider(vec![text(answer), ProviderEvent::Done]);
        h.settle();
    }
    assert_eq!(h.requests.len(), 3);
    assert!(h.requests.iter().all(|r| r.messages == vec![ChatMessage::user("name a colour")]), "the same context");
    let forest = h.forest();
    let answers: Vec<String> = forest.replies(Some(&sent.message_id)).iter().map(|n| n.text.clone()).collect();
    assert_eq!(answers, ["red", "green", "blue"]);
    let done = h.published.iter().find_map(|e| match &e.kind {
        EventKind::Done { nodes, .. } => Some(nodes.len()),
        _ => None,
    });
    assert_eq!(done, Some(3), "done lists the three answers");
    assert_eq!(h.names().iter().filter(|n| **n == "assistant_node").count(), 3);
    assert_eq!(h.names().iter().filter(|n| **n == "turn_finished").count(), 1);
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn several_answers_are_refused_while_tools_are_offered() {
    let mut h = Harness::new();
    let err = send_with(&mut h, "hi", 3, false).err().map(|e| (e.kind, e.message));
    let (kind, message) = err.unwrap_or_else(|| panic!("n=3 with tools was accepted"));
    assert_eq!(kind, ErrorKind::InvalidParams);
    assert!(message.contains("tools"), "{message}");
    assert!(h.requests.is_empty(), "nothing was asked");
}

/// Seed 003: generation with no user text answers the current path and
/// adds no empty user node.
#[test]
fn continue_answers_the_path_without_a_user_node() {
    let mut h = Harness::new();
    h.say("write a poem");
    h.settle();
    h.provider(vec![text("Roses are red,"), ProviderEvent::Done]);
    h.settle();
    let sent = send_with(&mut h, "", 1, true).unwrap_or_else(|e| panic!("{e}"));
    h.provider(vec![text("violets are blue."), ProviderEvent::Done]);
    h.settle();
    let request = &h.requests[1];
    assert_eq!(request.messages.len(), 2, "no empty user message: {:?}", request.messages);
    assert_eq!(request.messages[1].text, "Roses are red,");
    let forest = h.forest();
    let continued = forest.replies(Some(&sent.message_id));
    assert_eq!(continued.len(), 1);
    assert_eq!(continued[0].text, "violets are blue.");
    assert!(forest.nodes().all(|n| !(n.role == forge_proto::Role::User && n.text.is_empty())));
    assert_eq!(finished(&h).0, MessageStatus::Complete);
}

#[test]
fn continue_is_refused_on_an_empty_session_and_with_text() {
    let mut h = Harness::new();
    let empty = send_with(&mut h, "", 1, true).err().map(|e| e.kind);
    assert_eq!(empty, Some(ErrorKind::InvalidParams));
    h.say("hi");
    h.settle();
    h.provider(vec![text("hello"), ProviderEvent::Done]);
    h.settle();
    let with_text = send_with(&mut h, "more", 1, true).err().map(|e| e.kind);
    assert_eq!(with_text, Some(ErrorKind::InvalidParams));
}

/// Seed 003: an abort is a single error event, kind generation_aborted.
#[test]
fn a_cancel_ends_the_generation_with_one_generation_aborted_error() {
    let mut h = Harness::new();
    h.streaming();
    h.provider(vec![text("partial")]);
    let rx = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    drop(answered(rx));
    let errors: Vec<(String, usize)> = h
        .published
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Error { error_kind, nodes, .. } => Some((error_kind.clone(), nodes.len())),
            _ => None,
        })
        .collect();
    assert_eq!(errors, [("generation_aborted".to_string(), 1)], "one error; the partial answer is its node");
    assert!(!h.names().contains(&"done"));
    assert!(!h.names().contains(&"provider_response"), "the provider did not finish");
}

#[test]
fn a_message_sent_while_several_answers_stream_waits_for_all_of_them() {
    let mut h = Harness::configured(without_tools(), Unfinished::Nothing, Vec::new());
    send_with(&mut h, "pick", 3, false).unwrap_or_else(|e| panic!("{e}"));
    h.provider(vec![text("one"), ProviderEvent::Done]);
    h.settle();
    let queued = h.send("later");
    h.settle();
    assert_eq!(answered(queued).ok().and_then(|r| r.queue_position), Some(1));
    for answer in ["two", "three"] {
        h.provider(vec![text(answer), ProviderEvent::Done]);
        h.settle();
    }
    let done = h.published.iter().find_map(|e| match &e.kind {
        EventKind::Done { nodes, .. } => Some(nodes.len()),
        _ => None,
    });
    assert_eq!(done, Some(3), "all three answers were given");
    assert_eq!(h.requests.len(), 4, "then the queued message went out");
    assert_eq!(h.requests[3].messages.last(), Some(&ChatMessage::user("later")));
}

#[test]
fn a_cancel_between_two_answers_asks_for_no_more() {
    let mut h = Harness::configured(without_tools(), Unfinished::Nothing, Vec::new());
    send_with(&mut h, "pick", 3, false).unwrap_or_else(|e| panic!("{e}"));
    h.provider(vec![text("one"), ProviderEvent::Done]);
    // The answer is sealed, not yet history: no stream runs to cancel.
    let rx = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert_eq!(answered(rx).ok().map(|r| r.cancelled), Some(true));
    assert_eq!(h.requests.len(), 1, "no second answer was asked for");
    assert_eq!(h.state(), OperationStateKind::Idle);
}

/// Seed 003: roots are found by their system prompt. The same first
/// message again at the start is that root only under the same prompt.
#[test]
fn a_root_is_found_again_only_under_the_same_system_prompt() {
    let mut h = Harness::new();
    let first = answered({
        let rx = h.send("hello");
        h.settle();
        rx
    })
    .unwrap_or_else(|e| panic!("{e}"));
    h.provider(vec![text("hi"), ProviderEvent::Done]);
    h.settle();
    let digest = |h: &Harness| h.s.system_prompt_digest();
    let recorded = h.forest().get(&first.message_id).ok().and_then(|n| n.meta.system_prompt.clone());
    assert_eq!(recorded, Some(digest(&h)), "the root records its prompt");
    let again = |h: &mut Harness, prompt: Option<String>| {
        drop(h.request::<forge_proto::SessionInfo>(SessionRequest::Clear(Default::default())));
        h.settle();
        let same =
            vec![crate::session::SameMessage { node: first.message_id.clone(), under: None, system_prompt: prompt }];
        let params = SendParams { text: Some("hello".into()), ..Default::default() };
        h.next_same = same;
        let rx = h.request(SessionRequest::Send(params));
        h.settle();
        h.provider(vec![text("hi"), ProviderEvent::Done]);
        h.settle();
        answered(rx).map(|r: forge_proto::SendResult| r.message_id).unwrap_or_default()
    };
    let prompt = Some(digest(&h));
    assert_eq!(again(&mut h, prompt.clone()), first.message_id, "the same prompt: that root");
    h.next_prompt = Some("Be another test.".into());
    let other = again(&mut h, prompt);
    assert_ne!(other, first.message_id, "another prompt: a new root");
    assert_eq!(h.forest().replies(None).len(), 2);
}

mod git_turns;
mod helpers;
mod mcp_waits;
mod models;
mod rewinds;
mod settles;
mod with_hooks;
