//! A turn's first request waits for MCP servers still starting: the wait
//! is said, bounded, cancellable, and taken up again after a restart.

use super::*;
use crate::session::machine::call::JobOutcome;

fn waited(h: &Harness) -> Option<Vec<String>> {
    h.published.iter().find_map(|e| match &e.kind {
        EventKind::McpWaited { not_started, .. } => Some(not_started.clone()),
        _ => None,
    })
}

#[test]
fn the_first_request_waits_for_servers_still_starting() {
    let mut h = Harness::new();
    h.mcp_starting = vec!["slow".into()];
    let reply = h.send("use the slow tool");
    h.settle();
    assert!(answered(reply).is_ok(), "the message is taken at once");
    assert!(h.requests.is_empty(), "the model is not asked while the server starts");
    assert_eq!(h.names(), ["turn_started", "mcp_waiting"]);
    let waiting = h.published.iter().find_map(|e| match &e.kind {
        EventKind::McpWaiting { servers, timeout_seconds } => Some((servers.clone(), *timeout_seconds)),
        _ => None,
    });
    assert_eq!(waiting, Some((vec!["slow".to_string()], 10)), "[mcp] startup_timeout_seconds defaults to 10");
    assert_eq!(h.tool_waits.len(), 1);

    let job = h.tool_waits[0];
    h.feed(Event::JobDone { job, outcome: JobOutcome::ToolsStarted { tools: None, not_started: Vec::new() } });
    assert_eq!(h.requests.len(), 1, "the request goes out once the servers are up");
    h.settle();
    assert_eq!(waited(&h), Some(Vec::new()));
    // A second message does not wait (the refresh found nothing starting).
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    h.say("again");
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.tool_waits.len(), 1);
}

#[test]
fn a_server_that_never_starts_is_named_and_the_turn_goes_on() {
    let mut h = Harness::new();
    h.mcp_starting = vec!["stuck".into()];
    h.say("go");
    h.settle();
    let job = h.tool_waits[0];
    let outcome = JobOutcome::ToolsStarted { tools: None, not_started: vec!["stuck".into()] };
    h.feed(Event::JobDone { job, outcome });
    h.settle();
    assert_eq!(h.requests.len(), 1);
    assert_eq!(waited(&h), Some(vec!["stuck".to_string()]));
}

#[test]
fn a_cancel_ends_the_wait_and_a_late_wake_asks_nothing() {
    let mut h = Harness::new();
    h.mcp_starting = vec!["slow".into()];
    h.say("go");
    h.settle();
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert!(answered(cancel).is_ok_and(|r| r.cancelled));
    assert_eq!(finished(&h).0, MessageStatus::Cancelled);
    assert_eq!(h.state(), OperationStateKind::Idle);
    let job = h.tool_waits[0];
    h.feed(Event::JobDone { job, outcome: JobOutcome::ToolsStarted { tools: None, not_started: Vec::new() } });
    assert!(h.requests.is_empty());
}

#[test]
fn a_wait_cut_by_a_restart_waits_again_then_asks() {
    let mut h = Harness::loaded(Unfinished::AwaitingTools { message_id: "m1".into() }, vec![ChatMessage::user("q")]);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::Streaming);
    assert_eq!(h.tool_waits.len(), 1);
    assert!(h.requests.is_empty());
    let job = h.tool_waits[0];
    h.feed(Event::JobDone { job, outcome: JobOutcome::ToolsStarted { tools: None, not_started: Vec::new() } });
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.requests[0].messages, vec![ChatMessage::user("q")]);
}
