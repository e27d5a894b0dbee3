//! Git mode: each finished turn is one commit, journaled before the
//! session goes on; a restart commits a turn whose commit is not
//! journaled.

use super::*;
use crate::session::machine::call::JobOutcome;
use crate::session::machine::git_commit::Hold;

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

/// A git session whose turn ran one command (approved), which wrote the
/// files `wrote` (relative to the worktree), then answered "done".
fn after_a_command(wrote: &[&str]) -> Harness {
    use forge_proto::params::AnswerParams;
    let mut h = git_session(Unfinished::Nothing, Vec::new());
    h.answer_calling("run_command", r#"{"command":"./setup.sh"}"#);
    h.settle();
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("an approval waits"));
    // Its checkpoint (the work so far) is written first.
    committed(&mut h, "c1");
    let params = AnswerParams {
        decision: forge_proto::ApprovalDecision::ApproveAll,
        approval_id: Some(pending.approval_id),
        ..Default::default()
    };
    drop(h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
    h.settle();
    committed(&mut h, "c2");
    h.next_changes = wrote
        .iter()
        .map(|p| FileAfter {
            path: format!("/r/.git/forge/worktrees/s1/{p}"),
            after: Some(("h".into(), 0o755)),
            data: None,
        })
        .collect();
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("ok".into())) });
    h.settle();
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    h
}

#[test]
fn files_a_command_wrote_that_run_later_wait_for_a_user_at_the_turns_commit() {
    let mut h = after_a_command(&[".githooks/pre-commit", "src/lib.rs", ".forge/sessions/s1.json"]);
    assert_eq!(h.commits.len(), 1);
    let held = match &h.commits[0].hold {
        Hold::Paths(p) => p.clone(),
        _ => panic!("the commit holds what the command wrote"),
    };
    assert_eq!(held, [".githooks/pre-commit"], "only files that run later, not Forge's own state");
    // The shell finds it changed: nothing is committed, a user is asked.
    let job = h.commits.remove(0);
    let files = vec![forge_git::HeldFile { path: held[0].clone(), diff: "+cat ~/.ssh/id_ed25519\n".into() }];
    let outcome = JobOutcome::Held { commit: Box::new(job.commit), files, usage: None };
    h.feed(Event::JobDone { job: job.job, outcome });
    h.settle();
    assert_eq!(h.state(), OperationStateKind::AwaitingApproval);
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("the held file is shown as an approval"));
    assert_eq!(pending.calls[0].call_id, "run_later:.githooks/pre-commit");
    assert!(pending.calls[0].summary.contains("+cat ~/.ssh/id_ed25519"), "{}", pending.calls[0].summary);
    assert_eq!(
        forge_proto::approval_subject(&pending.calls),
        "committing 1 file(s) a command wrote that run something later"
    );
    assert!(!h.names().contains(&"git_committed"));

    // Denied (a cancel says the same): put back, and the turn committed.
    drop(h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default())));
    h.settle();
    assert_eq!(h.commits.len(), 1);
    assert_eq!(h.commits[0].commit.put_back, [".githooks/pre-commit"]);
    assert!(matches!(h.commits[0].hold, Hold::Nothing), "asked once");
    assert!(h.names().contains(&"approval_resolved"));
    committed(&mut h, "c3");
    assert!(h.names().contains(&"git_committed"));
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn approved_held_files_are_committed_and_checkpoints_leave_them_for_the_turns_commit() {
    use forge_proto::params::AnswerParams;
    let mut h = after_a_command(&[".envrc"]);
    let job = h.commits.remove(0);
    let files = vec![forge_git::HeldFile { path: ".envrc".into(), diff: "+use nix\n".into() }];
    let outcome = JobOutcome::Held { commit: Box::new(job.commit), files, usage: None };
    h.feed(Event::JobDone { job: job.job, outcome });
    h.settle();
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("asked"));
    let params = AnswerParams {
        decision: forge_proto::ApprovalDecision::ApproveSelected,
        indices: Some(vec![1]),
        approval_id: Some(pending.approval_id),
        ..Default::default()
    };
    let answer = h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params));
    h.settle();
    assert!(answered(answer).is_ok_and(|r| r.approved == ["run_later:.envrc"]));
    assert!(h.commits[0].commit.put_back.is_empty(), "approved: committed as written");
    committed(&mut h, "c3");
    assert_eq!(h.state(), OperationStateKind::Idle);

    // The next turn: a command writes a hook, then a call asks; the
    // checkpoint leaves the hook in the worktree for the turn's commit.
    h.next_changes = vec![FileAfter {
        path: "/r/.git/forge/worktrees/s1/.husky/pre-push".into(),
        after: Some(("h".into(), 0o755)),
        data: None,
    }];
    h.answer_calling("run_command", r#"{"command":"npx husky add"}"#);
    h.settle();
    committed(&mut h, "c4");
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("an approval waits"));
    let params = AnswerParams {
        decision: forge_proto::ApprovalDecision::ApproveAll,
        approval_id: Some(pending.approval_id),
        ..Default::default()
    };
    drop(h.request::<forge_proto::ApprovalResult>(SessionRequest::Answer(params)));
    h.settle();
    committed(&mut h, "c5");
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("ok".into())) });
    h.settle();
    let mut again = tool_call(0, "c2", "run_command", r#"{"command":"git push"}"#);
    again.push(ProviderEvent::Done);
    h.provider(again);
    h.settle();
    assert_eq!(h.commits.len(), 1, "the checkpoint before the second approval");
    assert_eq!(h.commits[0].commit.leave_out, [".husky/pre-push"]);
    assert!(matches!(h.commits[0].hold, Hold::Nothing), "a checkpoint asks nothing");
}
