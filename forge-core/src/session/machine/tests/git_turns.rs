//! Git mode: each finished turn is one commit, journaled before the
//! session goes on; a restart commits a turn whose commit is not
//! journaled.

use super::*;
use crate::session::machine::call::JobOutcome;

fn git_row() -> SessionRow {
    SessionRow {
        git: Some(forge_proto::GitSession {
            repo: "/r".into(),
            branch: "forge/session/s1".into(),
            base: "b".repeat(40),
            worktree: "/r/.git/forge/worktrees/s1".into(),
        }),
        ..row()
    }
}

fn git_session(unfinished: Unfinished, path: Vec<ChatMessage>) -> Harness {
    Harness::restarted_as(config(), unfinished, path, None, git_row())
}

fn committed(h: &mut Harness, commit: &str) {
    let job = h.commits.remove(0).job;
    let done = forge_git::Committed { commit: commit.into(), files: vec!["a.txt".into()], made: true };
    h.feed(Event::JobDone { job, outcome: JobOutcome::Committed { result: Ok(done), usage: None } });
    h.settle();
}

#[test]
fn a_finished_turn_is_one_commit_before_the_session_is_idle() {
    let mut h = git_session(Unfinished::Nothing, Vec::new());
    h.say("Fix the parser\n\nIt fails on empty input.");
    h.settle();
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(h.commits.len(), 1, "the commit is asked for once the turn is durable");
    assert_ne!(h.state(), OperationStateKind::Idle, "the turn is not over until it is committed");
    // A message sent meanwhile waits for the commit.
    h.say("next");
    h.settle();
    assert_eq!(h.requests.len(), 1);

    let job = &h.commits[0];
    assert_eq!(job.branch, "forge/session/s1");
    assert_eq!(job.commit.subject, "Fix the parser");
    assert_eq!(job.commit.body.as_deref(), Some("Fix the parser\n\nIt fails on empty input."));
    let state: serde_json::Value = serde_json::from_slice(&job.commit.state).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state["session"], "s1");
    assert_eq!(state["status"], "complete");
    assert_eq!(state["turn"], job.commit.turn.as_str());
    let roles: Vec<&str> =
        state["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert_eq!(state["head"], serde_json::json!(h.s.row.head_id));

    committed(&mut h, "c0ffee");
    let event = h.published.iter().find_map(|e| match &e.kind {
        EventKind::GitCommitted { commit, files, status, .. } => Some((commit.clone(), files.clone(), *status)),
        _ => None,
    });
    assert_eq!(event, Some(("c0ffee".to_string(), vec!["a.txt".to_string()], MessageStatus::Complete)));
    assert_eq!(h.requests.len(), 2, "then the queued message runs");
}

#[test]
fn a_cancelled_turn_commits_what_it_kept_marked_as_such() {
    let mut h = git_session(Unfinished::Nothing, Vec::new());
    h.streaming();
    h.provider(vec![text("half an answer")]);
    h.settle();
    drop(h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default())));
    h.settle();
    assert_eq!(h.commits.len(), 1);
    assert_eq!(h.commits[0].commit.subject, "[cancelled] go");
    let job = h.commits.remove(0).job;
    h.feed(Event::JobDone { job, outcome: JobOutcome::Committed { result: Err("disk full".into()), usage: None } });
    h.settle();
    assert!(h.names().contains(&"git_commit_failed"), "{:?}", h.names());
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_turn_whose_commit_was_not_journaled_is_committed_on_restart() {
    let path = vec![ChatMessage::user("make it").with_node("m1"), ChatMessage::assistant("made", Vec::new())];
    let unfinished = Unfinished::Commit { message_id: "m1".into(), status: MessageStatus::Complete };
    let mut h = git_session(unfinished, path);
    assert_eq!(h.commits.len(), 1, "recovery commits the turn again (an existing commit is found, not made twice)");
    assert_eq!(h.commits[0].commit.turn, "m1");
    assert_eq!(h.commits[0].commit.subject, "make it");
    committed(&mut h, "beef");
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert!(h.names().contains(&"git_committed"));
}

#[test]
fn a_session_not_in_git_mode_commits_nothing() {
    let mut h = Harness::new();
    h.say("hello");
    h.settle();
    h.provider(vec![text("hi"), ProviderEvent::Done]);
    h.settle();
    assert!(h.commits.is_empty());
    assert_eq!(h.state(), OperationStateKind::Idle);
}
