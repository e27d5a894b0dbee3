use super::*;
use serde_json::json;

/// Events as the daemon sends them, seq from 1.
fn feed(fold: &mut Fold, events: &[serde_json::Value]) -> Vec<Seen> {
    events
        .iter()
        .map(|kind| {
            let mut v = json!({"session_id": "s", "seq": fold.last_seq + 1, "ts_ms": 0});
            if let (Some(v), Some(k)) = (v.as_object_mut(), kind.as_object()) {
                v.extend(k.clone());
            }
            let ev: SessionEvent = serde_json::from_value(v).unwrap_or_else(|e| panic!("{kind}: {e}"));
            fold.apply(&ev).unwrap_or_else(|| panic!("{kind} was skipped"))
        })
        .collect()
}

fn started(id: &str) -> serde_json::Value {
    json!({"kind": "turn_started", "message_id": id, "text": "hi", "provider": "claude", "model": "m", "continued": false})
}

fn finished(id: &str) -> serde_json::Value {
    json!({"kind": "turn_finished", "message_id": id, "assistant_id": null, "status": "complete"})
}

fn request(iteration: u32) -> serde_json::Value {
    json!({"kind": "provider_request", "message_id": "m", "iteration": iteration, "attempt": 1, "provider": "claude",
        "model": "m", "messages": 1, "tools": 0, "max_output_tokens": 100})
}

#[test]
fn streamed_arguments_belong_to_their_call_and_are_whole_at_the_answer_node() {
    let mut f = Fold::default();
    let seen = feed(
        &mut f,
        &[
            started("m"),
            request(0),
            json!({"kind": "tool_call_started", "index": 1, "call_id": "c2", "name": "read_file"}),
            json!({"kind": "tool_call_started", "index": 0, "call_id": "c1", "name": "write_file"}),
            json!({"kind": "tool_call_args", "index": 1, "fragment": "{\"path\":"}),
            json!({"kind": "tool_call_args", "index": 0, "fragment": "{}"}),
            json!({"kind": "tool_call_args", "index": 1, "fragment": "\"a\"}"}),
            json!({"kind": "assistant_node", "node_id": "n1", "status": "complete", "tool_calls": 2}),
        ],
    );
    assert_eq!(seen[4].call_id.as_deref(), Some("c2"));
    assert_eq!(seen[5].call_id.as_deref(), Some("c1"));
    let calls: Vec<(&str, &str)> = seen[7].calls.iter().map(|c| (c.call_id.as_str(), c.args.as_str())).collect();
    assert_eq!(calls, [("c1", "{}"), ("c2", "{\"path\":\"a\"}")]);
    assert_eq!(f.state, Some(OperationStateKind::Streaming));
}

#[test]
fn a_first_request_after_an_answer_is_a_sibling_but_the_tool_loop_is_not() {
    let mut f = Fold::default();
    let answer = json!({"kind": "assistant_node", "node_id": "n1", "status": "complete", "tool_calls": 0});
    let seen = feed(&mut f, &[started("m"), request(0), answer.clone(), request(1), request(0)]);
    let siblings: Vec<bool> = seen.iter().map(|s| s.sibling).collect();
    assert_eq!(siblings, [false, false, false, false, true]);
    // A new turn starts afresh.
    let seen = feed(&mut f, &[finished("m"), started("m2"), request(0)]);
    assert!(!seen[2].sibling);
}

#[test]
fn the_session_settles_only_when_its_queue_is_empty() {
    let mut f = Fold::default();
    let queued = json!({"kind": "message_queued", "message_id": "m2", "text": "next", "position": 1});
    let seen = feed(&mut f, &[started("m1"), queued, finished("m1")]);
    assert!(!seen[2].settled, "m2 waits to run");
    let seen = feed(&mut f, &[started("m2"), finished("m2")]);
    assert!(seen[0].was_queued);
    assert!(seen[1].settled);
    // Following from live with one already queued: its turn comes first.
    let mut f = Fold { queued_before: 1, ..Fold::default() };
    let seen = feed(&mut f, &[finished("m0"), started("m1"), finished("m1")]);
    assert!(!seen[0].settled && seen[2].settled);
}

#[test]
fn an_approval_waits_until_answered_or_cancelled() {
    let mut f = Fold::default();
    let call = json!({"call_id": "c", "name": "write_file", "arguments": "{}", "risk": "medium", "summary": "w"});
    feed(&mut f, &[started("m"), json!({"kind": "approval_requested", "approval_id": "a", "calls": [call]})]);
    assert!(f.waiting());
    let seen = feed(&mut f, &[json!({"kind": "cancel_requested", "client": {"id": 3, "name": "forgectl"}})]);
    assert!(!f.waiting(), "a cancel is on its way");
    assert_eq!(seen[0].notice.as_ref().map(|n| n.text.as_str()), Some("cancel requested by forgectl"));
    let seen = feed(&mut f, &[finished("m")]);
    assert!(seen[0].settled && f.approval.is_none());
}

#[test]
fn an_older_event_is_skipped_and_an_allowing_hook_is_routine() {
    let mut f = Fold::default();
    let hook = |decision: &str| json!({"kind": "hook_ran", "event": "PreToolUse", "command": "check", "tool": "run_command", "decision": decision, "duration_ms": 3});
    let seen = feed(&mut f, &[hook("allow"), hook("block")]);
    assert!(seen[0].notice.as_ref().is_some_and(|n| n.routine));
    let block = seen[1].notice.as_ref().map(|n| (n.routine, n.text.as_str()));
    assert_eq!(block, Some((false, "PreToolUse hook (run_command) `check` block")));
    let old = SessionEvent { session_id: "s".into(), seq: 1, ts_ms: 0, client: None, kind: EventKind::Unknown };
    assert!(f.apply(&old).is_none());
}

#[test]
fn a_summary_a_client_asked_for_settles_the_session_when_it_lands() {
    let mut f = Fold::default();
    let started = |id: Option<&str>| json!({"kind": "summarization_started", "message_id": id, "first": "a", "last": "b", "messages": 4, "tokens_before": 100});
    let done = json!({"kind": "summarization_done", "summary_id": "m9",
        "span": {"first": "a", "last": "b", "messages": 4, "tokens_before": 100, "tokens_after": 20}});
    let seen = feed(&mut f, &[started(None)]);
    assert!(!seen[0].settled && !f.idle(), "a summary is running");
    let seen = feed(&mut f, std::slice::from_ref(&done));
    assert!(seen[0].settled && f.idle());
    assert_eq!(f.state, Some(OperationStateKind::Idle));
    // A turn's own summary: the turn goes on after it.
    let seen = feed(&mut f, &[self::started("m"), started(Some("m")), done]);
    assert!(!seen[2].settled);
    assert_eq!(f.state, Some(OperationStateKind::Streaming));
}

#[test]
fn helpers_asking_at_once_are_each_kept_until_their_own_answer() {
    let mut fold = Fold::default();
    let asked = |id: &str, helper: &str| json!({"kind": "approval_requested", "approval_id": id, "calls": [], "helper": helper});
    let resolved = |id: &str| json!({"kind": "approval_resolved", "approval_id": id, "approved": [], "denied": []});
    let seen = feed(&mut fold, &[started("m"), asked("a1", "s-one"), asked("a2", "s-two")]);
    assert!(seen[1].notice.as_ref().is_some_and(|n| n.text.contains("helper agent s-one asks")), "{:?}", seen[1]);
    assert_eq!(fold.approval.as_ref().map(|a| a.approval_id.as_str()), Some("a1"));
    // The second is answered first: the first still waits.
    feed(&mut fold, &[resolved("a2")]);
    assert_eq!(fold.approval.as_ref().map(|a| a.approval_id.as_str()), Some("a1"));
    assert!(fold.waiting());
    feed(&mut fold, &[asked("a3", "s-two"), resolved("a1")]);
    assert_eq!(fold.approval.as_ref().map(|a| a.approval_id.as_str()), Some("a3"), "the next one shows");
    feed(&mut fold, &[resolved("a3")]);
    assert!(fold.approval.is_none() && !fold.waiting());
}
