//! A command stopped before its end (a cancel, a shutdown) has ended all
//! the same: what it changed is read once it has stopped, written against
//! its node, and what it left that git would run said; a shutdown waits
//! for that.

use forge_proto::methods::SessionRequest;
use forge_proto::{EventKind, GitUndone, MessageStatus};
use tokio::sync::oneshot;

use super::*;

#[test]
fn a_cancelled_command_is_recorded_once_stopped_and_a_shutdown_waits_for_it() {
    let mut h = Harness::new();
    h.answer_calling("run_command", r#"{"command":"plant && sleep 100"}"#);
    h.settle();
    h.approve_all();
    assert_eq!(h.tool_runs, ["run_command"]);
    let cancel = h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default()));
    h.settle();
    assert!(answered(cancel).is_ok_and(|r| r.cancelled));
    assert_eq!(finished(&h).0, MessageStatus::Cancelled, "the turn ends at once");
    let record = h.stopped_records.pop().unwrap_or_else(|| panic!("what it changed is read once it has stopped"));
    assert!(record.stopped && record.before.scanned);
    // Asked to stop meanwhile: not before the record is written.
    let (reply, _stopped) = oneshot::channel();
    h.feed(Event::Command(SessionCmd::Shutdown { reply }));
    h.settle();
    assert!(!h.s.is_done(), "the stopped command's records come first");
    let undone = vec![GitUndone { path: "sub/.git/config".into(), what: "took out core.fsmonitor".into() }];
    let changes = vec![FileAfter { path: "/p/notes.txt".into(), after: Some(("h1".into(), 0o644)), data: None }];
    let outcome = call::JobOutcome::RecordedAfter { ops: Vec::new(), changes, undone, unrecorded: Vec::new() };
    h.feed(Event::JobDone { job: record.job, outcome });
    h.settle();
    let said =
        h.published.iter().any(|e| matches!(&e.kind, EventKind::GitSettingsUndone { call_id, .. } if call_id == "c1"));
    assert!(said, "every client hears what was undone");
    let ended = h.durable.iter().flat_map(|b| &b.ops).any(
        |op| matches!(op, StoreOp::EndChange { node_id, path, .. } if path == "/p/notes.txt" && !node_id.is_empty()),
    );
    assert!(ended, "the change is written against the call's node");
    assert!(h.s.is_done(), "then the session stops");
}

#[test]
fn a_stopped_command_whose_changes_could_not_be_read_is_marked_for_undo_to_name() {
    let mut h = Harness::new();
    h.answer_calling("run_command", r#"{"command":"sleep 100"}"#);
    h.settle();
    h.approve_all();
    drop(h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default())));
    h.settle();
    let record = h.stopped_records.pop().unwrap_or_else(|| panic!("a record is asked for"));
    let unrecorded = vec![("/p".to_string(), crate::rewind::Unrecorded::NotRead)];
    let outcome =
        call::JobOutcome::RecordedAfter { ops: Vec::new(), changes: Vec::new(), undone: Vec::new(), unrecorded };
    h.feed(Event::JobDone { job: record.job, outcome });
    h.settle();
    let marked = h.durable.iter().flat_map(|b| &b.ops).any(|op| {
        matches!(op, StoreOp::RecordChange { path, before: Some((hash, _)), .. } if path == "/p" && hash == "!not-read")
    });
    assert!(marked, "an undo past the call names the root as not recorded");
    assert!(crate::rewind::Unrecorded::of("!not-read").is_some_and(|u| u.why().contains("could not be read")));
}
