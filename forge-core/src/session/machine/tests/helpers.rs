//! Helper agents: `task` calls start helpers that run at once, their
//! answers are the calls' results, a cancel reaches them, their approvals
//! are shown here and answered there; and a helper's own session reports
//! back.

use super::*;
use crate::session::machine::{HelperIn, HelperOut};

/// A session whose tools include `task`.
fn with_task() -> Harness {
    let mut h = Harness::new();
    give_task(&mut h);
    h
}

/// Offers `task` (the built-in agent types) to `h`'s session.
fn give_task(h: &mut Harness) {
    let mut tools = ToolRegistry::builtin();
    let agents = crate::agents::load(std::path::Path::new("/nonexistent"), false);
    let _ = tools.register(Arc::new(crate::agents::TaskTool::new(&agents)));
    h.s.set_tools(Arc::new(tools));
    h.s.set_agents(agents.into());
}

fn task(description: &str) -> String {
    serde_json::json!({"description": description, "prompt": format!("do {description}")}).to_string()
}

/// An answer calling `task` twice and `read_file` once, made durable.
fn two_helpers_and_a_read(h: &mut Harness) {
    h.streaming();
    let mut events = tool_call(0, "t1", "task", &task("one"));
    events.extend(tool_call(1, "t2", "task", &task("two")));
    events.extend(tool_call(2, "r1", "read_file", r#"{"path":"a.rs"}"#));
    events.push(ProviderEvent::Done);
    h.provider(events);
    h.settle();
}

fn starts(h: &Harness) -> Vec<(String, String, u32)> {
    h.helpers
        .iter()
        .filter_map(|o| match o {
            HelperOut::Start(s) => {
                Some((s.call_id.clone(), s.prompt.clone(), s.create.as_ref().map_or(0, |c| c.spec.of.depth)))
            }
            _ => None,
        })
        .collect()
}

fn started(h: &mut Harness, call: &str, child: &str) {
    // The mark of this call's start, as the daemon hands it back.
    let nonce = h
        .helpers
        .iter()
        .rev()
        .find_map(|o| match o {
            HelperOut::Start(s) if s.call_id == call => Some(s.nonce.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let report = HelperIn::Started {
        call_id: call.into(),
        nonce,
        child: child.into(),
        agent: "general-purpose".into(),
        description: "x".into(),
    };
    h.feed(Event::Command(SessionCmd::Helper(report)));
    h.settle();
}

fn done(h: &mut Harness, call: &str, child: &str, answer: &str) {
    let report = HelperIn::Done {
        call_id: call.into(),
        child: child.into(),
        status: MessageStatus::Complete,
        answer: Ok(answer.into()),
        cost_usd: 0.25,
        uncounted_usd: 0.25,
    };
    h.feed(Event::Command(SessionCmd::Helper(report)));
    h.settle();
}

#[test]
fn task_calls_start_helpers_at_once_and_the_turn_goes_on_with_every_answer() {
    let mut h = with_task();
    two_helpers_and_a_read(&mut h);
    assert_eq!(
        starts(&h),
        [("t1".into(), "do one".into(), 1), ("t2".into(), "do two".into(), 1)],
        "both helpers are asked for before either answers"
    );
    assert_eq!(h.tool_runs, ["read_file"], "the batch's other call runs beside them");
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("fn a() {}".into())) });
    h.settle();
    assert_eq!(h.requests.len(), 1, "the turn waits for the helpers");
    started(&mut h, "t1", "s-one");
    started(&mut h, "t2", "s-two");
    done(&mut h, "t2", "s-two", "two is done");
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.state(), OperationStateKind::ExecutingTools);
    done(&mut h, "t1", "s-one", "one is done");
    assert_eq!(h.requests.len(), 2, "the model continues with all three results");
    let results: Vec<(String, String)> = h.requests[1]
        .messages
        .iter()
        .filter_map(|m| m.tool_result.as_ref().map(|(id, _)| (id.clone(), m.text.clone())))
        .collect();
    assert_eq!(
        results,
        [
            ("r1".to_string(), "fn a() {}".to_string()),
            ("t2".into(), "two is done".into()),
            ("t1".into(), "one is done".into())
        ]
    );
    let names = h.names();
    assert_eq!(names.iter().filter(|n| **n == "helper_started").count(), 2);
    assert_eq!(names.iter().filter(|n| **n == "helper_finished").count(), 2);
    // Their cost is the session's.
    assert!((h.s.spent.cost_usd - 0.5).abs() < 1e-9);
}

#[test]
fn cancelling_the_batch_cancels_its_helpers() {
    let mut h = with_task();
    two_helpers_and_a_read(&mut h);
    started(&mut h, "t1", "s-one");
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert!(answered(cancel).is_ok());
    let cancelled: Vec<&str> = h
        .helpers
        .iter()
        .filter_map(|o| match o {
            HelperOut::Cancel { child } => Some(child.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, ["s-one"]);
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
    // The second helper starts only now: it is not wanted.
    h.helpers.clear();
    started(&mut h, "t2", "s-two");
    assert!(matches!(h.helpers.as_slice(), [HelperOut::Cancel { child }] if child == "s-two"));
    // A late answer changes nothing.
    done(&mut h, "t1", "s-one", "too late");
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_helpers_approval_is_shown_here_and_the_answer_goes_to_the_helper() {
    let mut h = with_task();
    two_helpers_and_a_read(&mut h);
    started(&mut h, "t1", "s-one");
    let approval = forge_proto::PendingApproval {
        session_id: "s-one".into(),
        session_name: None,
        approval_id: "a-child".into(),
        calls: Vec::new(),
    };
    let asked = HelperIn::Asked { call_id: "t1".into(), child: "s-one".into(), approval };
    h.feed(Event::Command(SessionCmd::Helper(asked)));
    h.settle();
    assert_eq!(h.state(), OperationStateKind::AwaitingApproval);
    assert_eq!(h.s.snapshot().approval.map(|a| a.session_id), Some("s-one".into()));
    let shown = h.published.iter().any(|e| {
        matches!(&e.kind, EventKind::ApprovalRequested { approval_id, helper: Some(child), .. }
            if approval_id == "a-child" && child == "s-one")
    });
    assert!(shown, "{:?}", h.names());
    let params = AnswerParams {
        decision: ApprovalDecision::ApproveAll,
        approval_id: Some("a-child".into()),
        ..Default::default()
    };
    drop(h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
    let forwarded = h.helpers.iter().any(|o| {
        matches!(o, HelperOut::Forward { child, cmd } if child == "s-one"
            && matches!(cmd.as_ref(), SessionCmd::Request { request: SessionRequest::Answer(p), .. } if p.session == "s-one"))
    });
    assert!(forwarded, "the answer is handed to the helper");
    let resolved = HelperIn::Resolved {
        child: "s-one".into(),
        approval_id: "a-child".into(),
        approved: vec!["c".into()],
        denied: Vec::new(),
    };
    h.feed(Event::Command(SessionCmd::Helper(resolved)));
    h.settle();
    assert_eq!(h.state(), OperationStateKind::ExecutingTools);
    assert_eq!(h.names().last(), Some(&"approval_resolved"));
}

/// Session `s-child`, the helper of `s-parent`'s call `t9`.
pub(super) fn helper_row() -> SessionRow {
    SessionRow {
        id: "s-child".into(),
        helper: Some(crate::store::HelperSpec {
            of: forge_proto::HelperOf {
                parent: "s-parent".into(),
                call_id: "t9".into(),
                description: "look".into(),
                agent: "general-purpose".into(),
                depth: 1,
                answer: None,
            },
            tools: None,
            instructions: String::new(),
            read_also: Vec::new(),
        }),
        ..row()
    }
}

#[test]
fn a_helper_session_reports_its_answer_and_its_approvals_to_its_parent() {
    let mut h = Harness::restarted_as(config(), Unfinished::Nothing, Vec::new(), None, helper_row());
    h.answer_calling("write_file", r#"{"path":"a.rs","content":"x"}"#);
    h.settle();
    let asked = h.helpers.iter().any(|o| {
        matches!(o, HelperOut::Approval { parent, report: HelperIn::Asked { call_id, child, .. } }
            if parent == "s-parent" && call_id == "t9" && child == "s-child")
    });
    assert!(asked, "the parent hears of the approval");
    let params = AnswerParams { decision: ApprovalDecision::DenyAll, ..Default::default() };
    drop(h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
    h.settle();
    let resolved = h.helpers.iter().any(|o| {
        matches!(o, HelperOut::Approval { report: HelperIn::Resolved { denied, .. }, .. } if denied == &["c1".to_string()])
    });
    assert!(resolved, "and of its answer");
    h.helpers.clear();
    h.provider(vec![text("found it"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::Idle);
    let report = h.helpers.iter().find_map(|o| match o {
        HelperOut::Done { parent, report: HelperIn::Done { call_id, answer, status, .. } } => {
            Some((parent.clone(), call_id.clone(), *status, answer.clone()))
        }
        _ => None,
    });
    assert_eq!(report, Some(("s-parent".into(), "t9".into(), MessageStatus::Complete, Ok("found it".into()))));
}

#[test]
fn a_helpers_commands_read_what_its_parents_read() {
    let mut row = helper_row();
    if let Some(h) = &mut row.helper {
        h.read_also = vec!["/r/.git".into()];
    }
    let sandbox = super::super::tools::sandbox_for(&row, &config());
    assert!(sandbox.command_settings().read_also.contains(&std::path::PathBuf::from("/r/.git")));
}

#[test]
fn a_helper_cancelled_before_its_task_came_does_not_run_it() {
    let mut h = Harness::restarted_as(config(), Unfinished::Nothing, Vec::new(), None, helper_row());
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    drop(cancel);
    let sent = h.send("do the task");
    h.settle();
    let refused = answered(sent).err().map(|e| e.message).unwrap_or_default();
    assert!(refused.contains("cancelled with its parent's tool batch"), "{refused}");
    assert!(h.requests.is_empty(), "nothing is asked of the model");
}

fn with_budget(budget: f64) -> ForgeConfig {
    let mut c = config();
    c.app.session_budget_usd = Some(budget);
    c
}

fn budget_words(h: &Harness) -> Vec<(String, Result<(), String>)> {
    h.helpers
        .iter()
        .filter_map(|o| match o {
            HelperOut::Report { to, report: HelperIn::Budget { go } } => Some((to.clone(), go.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_helper_asks_its_family_root_before_each_request_and_its_spend_is_counted_above() {
    let mut h = Harness::restarted_as(with_budget(1.0), Unfinished::Nothing, Vec::new(), None, helper_row());
    let _sent = h.send("do the task");
    h.settle();
    assert!(h.requests.is_empty(), "no request before the root's word");
    let asked = h.helpers.iter().any(|o| {
        matches!(o, HelperOut::Report { to, report: HelperIn::BudgetAsk { asker, .. } } if to == "s-parent" && asker == "s-child")
    });
    assert!(asked, "the parent is asked");
    assert_eq!(h.state(), OperationStateKind::AwaitingApproval);
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Budget { go: Ok(()) })));
    h.settle();
    assert_eq!(h.requests.len(), 1, "the root said go");
    // Spent by one of its own helpers: counted here and handed up.
    h.helpers.clear();
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Spent { cost_usd: 0.125 })));
    h.settle();
    assert!((h.s.spent.cost_usd - 0.125).abs() < 1e-9);
    let up = h.helpers.iter().any(|o| {
        matches!(o, HelperOut::Report { to, report: HelperIn::Spent { cost_usd } } if to == "s-parent" && (*cost_usd - 0.125).abs() < 1e-9)
    });
    assert!(up, "handed up to the root");
    // A nested helper's question goes up too.
    h.helpers.clear();
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::BudgetAsk { asker: "s-grandchild".into(), reserve_usd: 0.0 })));
    h.settle();
    assert!(h.helpers.iter().any(|o| matches!(o, HelperOut::Report { to, report: HelperIn::BudgetAsk { asker, .. } }
        if to == "s-parent" && asker == "s-grandchild")));
}

#[test]
fn a_helper_stopped_by_its_root_ends_its_turn_without_asking_the_model() {
    let mut h = Harness::restarted_as(with_budget(1.0), Unfinished::Nothing, Vec::new(), None, helper_row());
    let _sent = h.send("do the task");
    h.settle();
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Budget { go: Err("past the budget".into()) })));
    h.settle();
    assert!(h.requests.is_empty());
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
}

#[test]
fn past_its_budget_the_root_shows_one_approval_for_all_its_helpers() {
    for approve in [true, false] {
        let mut h = Harness::configured(with_budget(0.5), Unfinished::Nothing, Vec::new());
        give_task(&mut h);
        two_helpers_and_a_read(&mut h);
        started(&mut h, "t1", "s-one");
        started(&mut h, "t2", "s-two");
        // Under the budget: go at once.
        h.feed(Event::Command(SessionCmd::Helper(HelperIn::BudgetAsk { asker: "s-one".into(), reserve_usd: 0.0 })));
        h.settle();
        assert_eq!(budget_words(&h), [("s-one".to_string(), Ok(()))]);
        h.helpers.clear();
        // The helpers' spend passes it.
        h.feed(Event::Command(SessionCmd::Helper(HelperIn::Spent { cost_usd: 0.75 })));
        for asker in ["s-one", "s-two"] {
            h.feed(Event::Command(SessionCmd::Helper(HelperIn::BudgetAsk { asker: asker.into(), reserve_usd: 0.0 })));
        }
        h.settle();
        assert!(budget_words(&h).is_empty(), "both wait");
        let asked = h.names().iter().filter(|n| **n == "approval_requested").count();
        assert_eq!(asked, 1, "one approval for the family");
        let shown = h.s.snapshot().approval.unwrap_or_else(|| panic!("an approval is shown"));
        assert_eq!(shown.calls[0].name, "session_budget");
        let decision = if approve { ApprovalDecision::ApproveAll } else { ApprovalDecision::DenyAll };
        let params = AnswerParams { decision, ..Default::default() };
        drop(h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
        h.settle();
        let words = budget_words(&h);
        assert_eq!(words.len(), 2, "{words:?}");
        assert!(words.iter().all(|(_, go)| go.is_ok() == approve), "{words:?}");
        assert!(h.helpers.iter().all(|o| !matches!(o, HelperOut::Forward { .. })), "the answer is the root's own");
        if approve {
            // Confirmed: the family goes on until another budget's worth.
            h.helpers.clear();
            h.feed(Event::Command(SessionCmd::Helper(HelperIn::BudgetAsk { asker: "s-two".into(), reserve_usd: 0.0 })));
            h.settle();
            assert_eq!(budget_words(&h), [("s-two".to_string(), Ok(()))]);
        }
    }
}

/// The parent's machine decides a helper's session: an agent type the
/// folder lacks, or a helper past `[tools.task] max_depth`, is the call's
/// error result, and nothing is asked of the daemon.
#[test]
fn an_unknown_agent_type_or_a_helper_too_deep_is_refused_by_the_parent() {
    let mut h = with_task();
    h.streaming();
    let args = serde_json::json!({"description": "x", "prompt": "do x", "subagent_type": "nope"}).to_string();
    let mut events = tool_call(0, "t1", "task", &args);
    events.push(ProviderEvent::Done);
    h.provider(events);
    h.settle();
    assert!(!h.helpers.iter().any(|o| matches!(o, HelperOut::Start(_))), "nothing to start");
    let result = h.published.iter().find_map(|e| match &e.kind {
        EventKind::ToolResult { output, is_error: true, .. } => Some(output.clone()),
        _ => None,
    });
    let result = result.unwrap_or_else(|| panic!("no error result: {:?}", h.names()));
    assert!(result.contains("there is no agent type \"nope\"; the types are: general-purpose"), "{result}");

    let mut config = config();
    config.tools.task = Some(crate::tools::config::TaskConfig { max_depth: Some(0), ..Default::default() });
    let mut h = Harness::configured(config, Unfinished::Nothing, Vec::new());
    give_task(&mut h);
    h.streaming();
    let mut events = tool_call(0, "t1", "task", &task("deep"));
    events.push(ProviderEvent::Done);
    h.provider(events);
    h.settle();
    assert!(!h.helpers.iter().any(|o| matches!(o, HelperOut::Start(_))), "nothing to start");
    let said = h.published.iter().any(
        |e| matches!(&e.kind, EventKind::ToolResult { output, .. } if output.contains("helpers may be 0 deep at most")),
    );
    assert!(said, "{:?}", h.names());
}

/// Parallel helpers under a budget: a request whose worst case does not
/// fit beside those in flight waits until one ends, and once the spend
/// itself passes the budget the family's one approval is asked.
#[test]
fn parallel_helpers_reserve_their_worst_case_and_overshoot_by_one_request_at_most() {
    let mut h = Harness::configured(with_budget(0.02), Unfinished::Nothing, Vec::new());
    give_task(&mut h);
    two_helpers_and_a_read(&mut h);
    started(&mut h, "t1", "s-one");
    started(&mut h, "t2", "s-two");
    let ask = |h: &mut Harness, asker: &str| {
        let ask = HelperIn::BudgetAsk { asker: asker.into(), reserve_usd: 0.12 };
        h.feed(Event::Command(SessionCmd::Helper(ask)));
        h.settle();
    };
    // Each worst case is bigger than the whole budget: alone, one goes.
    ask(&mut h, "s-one");
    ask(&mut h, "s-two");
    assert_eq!(budget_words(&h), [("s-one".to_string(), Ok(()))], "s-two waits for s-one's request");
    h.helpers.clear();
    // s-one's response cost 0.006 and ended: s-two goes, alone.
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Spent { cost_usd: 0.006 })));
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Settled { asker: "s-one".into() })));
    h.settle();
    assert_eq!(budget_words(&h), [("s-two".to_string(), Ok(()))]);
    h.helpers.clear();
    ask(&mut h, "s-one");
    assert!(budget_words(&h).is_empty(), "s-one waits while s-two's request is in flight");
    // s-two's response passes the budget: the waiting request does not go,
    // the family's one approval is asked.
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Spent { cost_usd: 0.016 })));
    h.feed(Event::Command(SessionCmd::Helper(HelperIn::Settled { asker: "s-two".into() })));
    h.settle();
    assert!(budget_words(&h).is_empty(), "nothing goes past the budget");
    assert_eq!(h.names().iter().filter(|n| **n == "approval_requested").count(), 1, "one approval");
    assert!(h.s.spent.cost_usd <= 0.02 + 0.016 + 1e-9, "over by one request at most");
}
