//! Git mode: each finished turn is one commit, journaled before the
//! session goes on; a restart commits a turn whose commit is not
//! journaled.

use super::*;
use crate::session::machine::call::JobOutcome;
use crate::session::machine::git_commit::Hold;

fn git_row() -> SessionRow {
    git_row_at("/r/.git/forge/worktrees/s1")
}

fn git_row_at(worktree: &str) -> SessionRow {
    SessionRow {
        git: Some(forge_proto::GitSession {
            repo: "/r".into(),
            branch: "forge/session/s1".into(),
            base: "b".repeat(40),
            worktree: worktree.into(),
        }),
        cwd: worktree.into(),
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

/// A git session whose turn ran one call of `tool` (approved), whose
/// record says it wrote `wrote` (relative to the worktree), then answered
/// "done".
fn after_a_call(tool: &str, args: &str, wrote: &[&str]) -> Harness {
    // A worktree that exists: the file tools' paths resolve in it.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let top = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let mut h = Harness::restarted_as(config(), Unfinished::Nothing, Vec::new(), None, git_row_at(&top));
    h.answer_calling(tool, args);
    h.settle();
    // Its checkpoint (the work so far) is written first.
    committed(&mut h, "c1");
    h.approve_all();
    committed(&mut h, "c2");
    h.next_changes = wrote
        .iter()
        .map(|p| FileAfter { path: format!("{top}/{p}"), after: Some(("h1".into(), 0o755)), data: None })
        .collect();
    h.feed(Event::ToolDone { rest: Vec::new(), images: Vec::new(), end: ToolEnd::Finished(Ok("ok".into())) });
    h.settle();
    h.provider(vec![text("done"), ProviderEvent::Done]);
    h.settle();
    h
}

fn held_files(paths: &[&str]) -> Vec<forge_git::HeldFile> {
    paths.iter().map(|p| forge_git::HeldFile { path: p.into(), diff: "+cat ~/.ssh/id_ed25519\n".into() }).collect()
}

#[test]
fn files_that_run_later_wait_for_a_user_at_the_turns_commit() {
    let mut h = after_a_call("run_command", r#"{"command":"./setup.sh"}"#, &[".githooks/pre-commit", "src/lib.rs"]);
    assert_eq!(h.commits.len(), 1);
    match &h.commits[0].hold {
        Hold::RunLater { exempt, ask: true } => assert!(exempt.is_empty(), "a command's writes are never exempt"),
        _ => panic!("the turn's commit asks about what runs later"),
    }
    // The shell finds one changed: nothing is committed, a user is asked.
    let job = h.commits.remove(0);
    let outcome =
        JobOutcome::Held { commit: Box::new(job.commit), files: held_files(&[".githooks/pre-commit"]), usage: None };
    h.feed(Event::JobDone { job: job.job, outcome });
    h.settle();
    assert_eq!(h.state(), OperationStateKind::AwaitingApproval);
    let pending = h.s.snapshot().approval.unwrap_or_else(|| panic!("the held file is shown as an approval"));
    assert_eq!(pending.calls[0].call_id, "run_later:.githooks/pre-commit");
    assert!(pending.calls[0].summary.contains("+cat ~/.ssh/id_ed25519"), "{}", pending.calls[0].summary);
    assert_eq!(forge_proto::approval_subject(&pending.calls), "committing 1 changed file(s) that run something later");
    assert!(!h.names().contains(&"git_committed"));

    // Denied (a cancel says the same): put back, and the turn committed.
    drop(h.request::<forge_proto::CancelResult>(SessionRequest::Cancel(Default::default())));
    h.settle();
    assert_eq!(h.commits.len(), 1);
    assert_eq!(h.commits[0].commit.put_back, [std::path::PathBuf::from(".githooks/pre-commit")]);
    assert!(matches!(h.commits[0].hold, Hold::Nothing), "asked once");
    assert!(h.names().contains(&"approval_resolved"));
    committed(&mut h, "c3");
    assert!(h.names().contains(&"git_committed"));
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_file_tools_approved_write_is_exempt_and_checkpoints_leave_held_files_for_the_turns_commit() {
    use forge_proto::params::AnswerParams;
    let mut h = after_a_call("write_file", r#"{"path":".mcp.json","content":"{}"}"#, &[".mcp.json"]);
    match &h.commits[0].hold {
        Hold::RunLater { exempt, ask: true } => {
            assert_eq!(exempt, &[(std::path::PathBuf::from(".mcp.json"), Some("h1".to_string()))]);
        }
        _ => panic!("asked at the turn's commit"),
    }
    // Something else changed a file that runs later: asked, approved in part.
    let job = h.commits.remove(0);
    let outcome = JobOutcome::Held {
        commit: Box::new(job.commit),
        files: held_files(&[".gitattributes", ".mcp.json"]),
        usage: None,
    };
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
    assert!(answered(answer).is_ok_and(|r| r.approved == ["run_later:.gitattributes"]));
    assert_eq!(h.commits[0].commit.put_back, [std::path::PathBuf::from(".mcp.json")]);
    committed(&mut h, "c3");
    assert_eq!(h.state(), OperationStateKind::Idle);

    // The next turn: a call asks; its checkpoint leaves what runs later
    // for the turn's commit (the shell works out which).
    h.answer_calling("run_command", r#"{"command":"npx husky add"}"#);
    h.settle();
    assert_eq!(h.commits.len(), 1, "the checkpoint before the approval");
    assert!(matches!(h.commits[0].hold, Hold::RunLater { ask: false, .. }), "a checkpoint asks nothing");
}

#[test]
fn after_a_restart_mid_turn_nothing_is_exempt() {
    let path = vec![ChatMessage::user("make it").with_node("m1"), ChatMessage::assistant("made", Vec::new())];
    let unfinished = Unfinished::Commit { message_id: "m1".into(), status: MessageStatus::Complete };
    let h = git_session(unfinished, path);
    assert!(matches!(&h.commits[0].hold, Hold::RunLater { exempt, ask: true } if exempt.is_empty()));
}
