//! Hooks driven by events alone: the machine asks for them to run, and
//! what their runs decide is what a client sees.

use super::*;
use crate::hooks::{HookConfig, HookDecision, HookEvent, HookRun, HookSet, HooksConfig};

fn set(hooks: &[(HookEvent, &str)]) -> HookSet {
    let config = HooksConfig {
        import_claude: false,
        hooks: hooks
            .iter()
            .map(|(event, command)| HookConfig {
                event: *event,
                matcher: None,
                command: command.to_string(),
                timeout: None,
                sandbox: None,
                write_roots: None,
                fail_closed: None,
            })
            .collect(),
    };
    HookSet::for_session(&config, std::path::Path::new("/nonexistent"), false, None).0
}

impl Harness {
    /// Answers the oldest hook job: each of its hooks ran and decided
    /// `decision` (with `reason`, adding `context`).
    fn hooks_ran(
        &mut self,
        decision: HookDecision,
        reason: Option<&str>,
        context: Option<&str>,
    ) -> crate::session::machine::hooks::HookJob {
        assert!(!self.hook_jobs.is_empty(), "no hooks asked for; published: {:?}", self.names());
        let job = self.hook_jobs.remove(0);
        let runs = job
            .hooks
            .iter()
            .map(|h| HookRun {
                event: h.event,
                command: h.command.clone(),
                tool: job.tool.clone(),
                decision,
                reason: reason.map(str::to_string),
                context: context.map(str::to_string),
                exit_code: Some(if decision == HookDecision::Block { 2 } else { 0 }),
                duration_ms: 1,
                halt: false,
            })
            .collect();
        self.feed(Event::JobDone { job: job.job, outcome: call::JobOutcome::Hooks(runs) });
        job
    }

    fn hook_events(&self) -> Vec<(String, String)> {
        self.published
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::HookRan { event, decision, .. } => Some((event.clone(), decision.clone())),
                _ => None,
            })
            .collect()
    }
}

fn tool_result(h: &Harness) -> Option<(bool, String)> {
    h.published.iter().find_map(|e| match &e.kind {
        EventKind::ToolResult { is_error, output, .. } => Some((*is_error, output.clone())),
        _ => None,
    })
}

#[test]
fn a_pre_tool_hook_that_blocks_keeps_the_call_from_running_and_the_model_hears_why() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::PreToolUse, "./guard.sh")]);
    h.answer_calling("read_file", r#"{"path":".env"}"#);
    h.settle();
    assert_eq!(h.hook_jobs.len(), 1, "the hook runs once tool_running is durable");
    assert_eq!(h.hook_jobs[0].input["tool_name"], "read_file");
    assert_eq!(h.hook_jobs[0].input["tool_input"]["path"], ".env");
    assert!(h.tool_runs.is_empty(), "nothing runs while the hook decides");
    assert_eq!(h.state(), OperationStateKind::ExecutingTools);
    h.hooks_ran(HookDecision::Block, Some("no secrets"), None);
    h.settle();
    assert!(h.tool_runs.is_empty(), "a blocked call never runs");
    assert_eq!(h.hook_events(), [("PreToolUse".to_string(), "block".to_string())]);
    let names = h.names();
    let ran = names.iter().position(|n| *n == "hook_ran");
    let result = names.iter().position(|n| *n == "tool_result");
    assert!(ran < result, "the hook's run is journaled before the result: {names:?}");
    assert_eq!(
        tool_result(&h),
        Some((true, "error: read_file failed: not run: PreToolUse hook `./guard.sh` blocked: no secrets".into()))
    );
    assert_eq!(h.requests.len(), 2, "the turn goes on with the refusal");
}

#[test]
fn a_hook_that_fails_is_shown_and_passed_over_as_claude_code_does() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::PreToolUse, "~/.claude/hooks/log.sh"), (HookEvent::PostToolUse, "./fmt.sh")]);
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.settle();
    h.hooks_ran(HookDecision::Error, Some("exit status 126: Permission denied"), None);
    h.settle();
    assert_eq!(h.tool_runs, ["read_file"], "a hook's error does not block the call");
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("fn main() {}".into())) });
    h.hooks_ran(HookDecision::Error, Some("exit status 1"), None);
    h.settle();
    assert_eq!(tool_result(&h), Some((false, "fn main() {}".into())), "the model does not hear of a hook's error");
    assert_eq!(
        h.hook_events(),
        [("PreToolUse".to_string(), "error".to_string()), ("PostToolUse".to_string(), "error".to_string())],
        "the user sees both"
    );
}

#[test]
fn an_allowing_pre_hook_lets_the_call_run_and_post_hooks_add_to_its_result() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::PreToolUse, "./check.sh"), (HookEvent::PostToolUse, "./fmt.sh")]);
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.settle();
    h.hooks_ran(HookDecision::Allow, None, Some("the build is green"));
    h.settle();
    assert_eq!(h.tool_runs, ["read_file"]);
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("fn main() {}".into())) });
    let post = h.hook_jobs.first().map(|j| j.input.clone()).unwrap_or_default();
    assert_eq!(post["tool_response"]["output"], "fn main() {}");
    assert!(tool_result(&h).is_none(), "the result waits for the post hooks");
    h.hooks_ran(HookDecision::Block, Some("formatting is off"), None);
    h.settle();
    let (is_error, output) = tool_result(&h).unwrap_or_default();
    assert!(!is_error);
    assert_eq!(
        output,
        "fn main() {}\n--- hooks ---\nthe build is green\nPostToolUse hook `./fmt.sh` blocked: formatting is off"
    );
}

#[test]
fn a_stop_hook_that_blocks_sends_the_model_on_and_is_told_it_is_a_continuation() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::Stop, "./tests-green.sh")]);
    h.say("fix the tests");
    h.settle();
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(finished(&h).0, MessageStatus::Complete);
    assert_eq!(h.state(), OperationStateKind::Streaming, "not idle while its Stop hooks run");
    let job = h.hooks_ran(HookDecision::Block, Some("2 tests still fail"), None);
    assert_eq!(job.input["stop_hook_active"], false);
    h.settle();
    assert_eq!(h.requests.len(), 2, "the model is sent on");
    let last = h.requests[1].messages.last().map(|m| m.text.clone());
    assert_eq!(last.as_deref(), Some("[Stop hook] 2 tests still fail"));
    h.provider(vec![text("fixed"), ProviderEvent::Done]);
    h.settle();
    let job = h.hooks_ran(HookDecision::Allow, None, None);
    assert_eq!(job.input["stop_hook_active"], true, "the hook knows it is one of those");
    h.settle();
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.hook_events().len(), 2, "both runs are journaled");
}

#[test]
fn stop_hooks_send_the_model_on_a_few_times_at_most() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::Stop, "./never-happy.sh")]);
    h.say("go");
    h.settle();
    for _ in 0..=crate::session::machine::hooks::MAX_STOP_CONTINUATIONS {
        h.provider(vec![text("again"), ProviderEvent::Done]);
        h.settle();
        h.hooks_ran(HookDecision::Block, Some("not yet"), None);
        h.settle();
    }
    assert_eq!(h.requests.len() as u32, 1 + crate::session::machine::hooks::MAX_STOP_CONTINUATIONS);
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_message_waits_for_its_prompt_hooks_in_order_and_a_block_refuses_only_it() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::UserPromptSubmit, "./policy.sh")]);
    let first = h.send("delete prod");
    let second = h.send("list files");
    assert!(h.requests.is_empty(), "nothing is asked before the hooks decide");
    assert_eq!(h.hook_jobs.len(), 1, "the second message waits behind the first");
    assert_eq!(h.hook_jobs[0].input["prompt"], "delete prod");
    h.hooks_ran(HookDecision::Block, Some("not on prod"), None);
    h.settle();
    let Err(refused) = answered(first) else { panic!("the blocked message was sent") };
    assert_eq!(refused.kind, ErrorKind::HookBlocked);
    assert!(refused.message.contains("not on prod"), "{}", refused.message);
    assert_eq!(h.hook_jobs.len(), 1);
    assert_eq!(h.hook_jobs[0].input["prompt"], "list files");
    h.hooks_ran(HookDecision::Allow, None, Some("cwd is /srv"));
    h.settle();
    assert!(answered(second).is_ok());
    assert_eq!(h.requests.len(), 1);
    assert_eq!(
        h.requests[0].messages.last().map(|m| m.text.as_str()),
        Some("list files\n\n<hook-context>\ncwd is /srv\n</hook-context>")
    );
    // What the hook added is its own item: the message stays as typed.
    let typed = h.published.iter().find_map(|e| match &e.kind {
        EventKind::TurnStarted { text, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(typed.as_deref(), Some("list files"));
    let node = h.durable_ops().find_map(|op| match op {
        StoreOp::InsertNode { text, meta, .. } => Some((text.clone(), meta.message.context.clone())),
        _ => None,
    });
    assert_eq!(node, Some(("list files".into(), Some("cwd is /srv".into()))));
    assert_eq!(
        h.hook_events(),
        [("UserPromptSubmit".into(), "block".into()), ("UserPromptSubmit".into(), "allow".into())]
    );
}

#[test]
fn session_start_hooks_add_to_the_first_message_only() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::SessionStart, "./welcome.sh")]);
    // The shell reads the hooks at start; here the refresh brings them.
    h.s.set_hooks(h.hooks.clone());
    let started = h.command(|reply| SessionCmd::Start { reply });
    assert!(started.is_empty(), "answered once the hooks ran");
    h.hooks_ran(HookDecision::Allow, None, Some("branch main is protected"));
    h.settle();
    assert!(answered(started).is_ok());
    h.say("hello");
    h.settle();
    assert_eq!(
        h.requests[0].messages.last().map(|m| m.text.as_str()),
        Some("hello\n\n<hook-context>\nbranch main is protected\n</hook-context>")
    );
    h.provider(vec![text("hi"), ProviderEvent::Done]);
    h.settle();
    h.say("again");
    assert_eq!(h.requests[1].messages.last().map(|m| m.text.as_str()), Some("again"));
}

#[test]
fn a_hook_job_that_comes_back_after_a_cancel_changes_nothing() {
    let mut h = Harness::new();
    h.hooks = set(&[(HookEvent::PreToolUse, "./slow.sh")]);
    h.answer_calling("read_file", r#"{"path":"a.rs"}"#);
    h.settle();
    assert_eq!(h.hook_jobs.len(), 1);
    drop(h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default())));
    h.settle();
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
    let before = h.published.len();
    h.hooks_ran(HookDecision::Allow, None, None);
    h.settle();
    assert_eq!(h.published.len(), before, "the late hook run is dropped");
    assert!(h.tool_runs.is_empty());
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_queued_message_keeps_what_its_hooks_added_apart_until_it_runs() {
    let mut h = Harness::new();
    h.streaming();
    h.hooks = set(&[(HookEvent::UserPromptSubmit, "./date.sh")]);
    h.s.set_hooks(h.hooks.clone());
    h.say("next");
    h.hooks_ran(HookDecision::Allow, None, Some("today is Tuesday"));
    h.settle();
    let queued = h.durable_ops().find_map(|op| match op {
        StoreOp::QueuePush { text, context, .. } => Some((text.clone(), context.clone())),
        _ => None,
    });
    assert_eq!(queued, Some(("next".into(), Some("today is Tuesday".into()))));
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(h.requests.len(), 2);
    assert_eq!(
        h.requests[1].messages.last().map(|m| m.text.as_str()),
        Some("next\n\n<hook-context>\ntoday is Tuesday\n</hook-context>")
    );
}

#[test]
fn a_helper_with_stop_hooks_reports_to_its_parent_once_they_let_it_stop() {
    let mut h = Harness::restarted_as(config(), Unfinished::Nothing, Vec::new(), None, super::helpers::helper_row());
    h.hooks = set(&[(HookEvent::Stop, "./notify.sh")]);
    h.say("look");
    h.settle();
    h.provider(vec![text("found"), ProviderEvent::Done]);
    h.settle();
    let reported = |h: &Harness| {
        h.helpers
            .iter()
            .any(|o| matches!(o, crate::session::machine::HelperOut::Done { parent, .. } if parent == "s-parent"))
    };
    assert!(!reported(&h), "not before its Stop hooks ran");
    h.hooks_ran(HookDecision::Allow, None, None);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert!(reported(&h), "the parent gets the answer");
}
