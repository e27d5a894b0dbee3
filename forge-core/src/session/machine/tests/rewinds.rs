//! Rewind driven by events alone: its intent is durable before a file
//! moves, nothing else runs meanwhile, and a rewind cut by a crash is
//! finished on restart and said to be.

use super::*;
use crate::session::machine::call::JobOutcome;
use crate::session::machine::rewind::RewindIntent;
use crate::session::machine::rewind_plan::{FileFacts, Stored};
use forge_proto::{RestoredFile, RewindResult, RewindStep};

fn restored(path: &str) -> RestoredFile {
    RestoredFile { path: path.into(), action: "restore".into(), conflict: false, overwritten: None, note: None }
}

fn step(path: &str) -> RewindStep {
    RewindStep { path: path.into(), hash: Some("ab".repeat(32)), mode: 0o644 }
}

/// What the shell finds of `files`, each written by Forge, to go back to
/// older content; those in `conflicts` were changed by hand since.
fn plan(files: &[&str], conflicts: &[&str]) -> Vec<FileFacts> {
    let state = |data: &[u8]| Some((crate::rewind::hash(data), 0o644));
    files
        .iter()
        .map(|f| FileFacts {
            step: crate::rewind::Step {
                path: f.to_string(),
                expected: Some(state(b"forge")),
                target: Some(state(b"old")),
            },
            now: Ok(Some((if conflicts.contains(f) { b"by hand".to_vec() } else { b"forge".to_vec() }, 0o644))),
            stored: Stored::Present(None),
        })
        .collect()
}

impl Harness {
    /// Two turns, then `forgectl undo`.
    fn undo(&mut self, force: bool) -> oneshot::Receiver<Result<RewindResult, EngineError>> {
        for text_ in ["one", "two"] {
            self.say(text_);
            self.settle();
            self.provider(vec![text("ok"), ProviderEvent::Done]);
            self.settle();
        }
        let params = forge_proto::params::RewindParams { force, ..Default::default() };
        self.request::<RewindResult>(SessionRequest::Rewind(params))
    }

    fn planned(&mut self, facts: Vec<FileFacts>) {
        let job = self.plans.remove(0).job;
        self.feed(Event::JobDone { job, outcome: JobOutcome::RewindPlanned(Ok(facts)) });
    }

    fn restored(&mut self, done: usize, error: Option<&str>) {
        let job = self.restores.remove(0).job;
        let error = error.map(str::to_string);
        self.feed(Event::JobDone { job, outcome: JobOutcome::FilesRestored { done, error } });
    }
}

#[test]
fn files_move_only_once_the_intent_is_durable_and_a_message_sent_meanwhile_waits() {
    let mut h = Harness::new();
    let reply = h.undo(false);
    assert_eq!(h.plans.len(), 1);
    assert_eq!(h.state(), OperationStateKind::Rewinding);
    h.planned(plan(&["/p/a.txt", "/p/b.txt"], &[]));
    assert!(h.restores.is_empty(), "no file moves before rewind_started is durable");
    h.say("while rewinding");
    h.settle();
    assert_eq!(h.restores.len(), 1, "the intent is durable: the files move");
    assert_eq!(h.restores[0].steps.len(), 2);
    assert_eq!(h.requests.len(), 2, "the message waits for the rewind");
    assert!(h.names().contains(&"message_queued"));
    h.restored(2, None);
    h.settle();
    let result = answered(reply).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.files.len(), 2);
    let names = h.names();
    let order: Vec<&str> =
        names.iter().copied().filter(|n| ["rewind_started", "head_moved", "files_restored"].contains(n)).collect();
    assert_eq!(order, ["rewind_started", "head_moved", "files_restored"]);
    assert_eq!(h.requests.len(), 3, "then the queued message runs, on the rewound conversation");
    assert_eq!(h.requests[2].messages.iter().filter(|m| m.text == "two").count(), 0);
}

#[test]
fn a_conflict_without_force_moves_nothing_and_says_which_files() {
    let mut h = Harness::new();
    let reply = h.undo(false);
    h.planned(plan(&["/p/a.txt"], &["/p/a.txt"]));
    h.settle();
    let Err(e) = answered(reply) else { panic!("a conflict must refuse") };
    assert_eq!(e.kind, ErrorKind::RewindConflict);
    assert!(e.message.contains("/p/a.txt") && e.message.contains("--force"), "{}", e.message);
    assert!(h.restores.is_empty());
    assert!(!h.names().contains(&"rewind_started"));
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_rewind_cut_by_a_crash_is_finished_on_restart_and_says_so() {
    let intent = RewindIntent {
        node: None,
        fork: None,
        files: vec![restored("/p/a.txt"), restored("/p/b.txt")],
        steps: vec![step("/p/a.txt"), step("/p/b.txt")],
        path: Some(Vec::new()),
    };
    let history = vec![ChatMessage::user("one"), ChatMessage::assistant("ok", Vec::new())];
    let mut h = Harness::restarted(config(), Unfinished::Nothing, history, Some(intent));
    assert_eq!(h.state(), OperationStateKind::Rewinding);
    assert_eq!(h.restores.len(), 1, "the files are written again at once");
    assert_eq!(h.restores[0].steps.len(), 2);
    h.restored(2, None);
    h.settle();
    let recovered = h.published.iter().find_map(|e| match &e.kind {
        EventKind::FilesRestored { files, recovered, .. } => Some((files.len(), *recovered)),
        _ => None,
    });
    assert_eq!(recovered, Some((2, true)));
    assert!(h.names().contains(&"history_cleared"), "the conversation moves as the intent said");
    assert_eq!(h.state(), OperationStateKind::Idle);
    h.say("after");
    assert_eq!(h.requests[0].messages, vec![ChatMessage::user("after")]);
}

#[test]
fn a_file_that_cannot_be_written_stops_the_rewind_and_names_what_moved() {
    let mut h = Harness::new();
    let reply = h.undo(false);
    h.planned(plan(&["/p/a.txt", "/p/b.txt"], &[]));
    h.settle();
    h.restored(1, Some("cannot restore /p/b.txt: read-only file system"));
    h.settle();
    let Err(e) = answered(reply) else { panic!("a failed write must say so") };
    assert!(e.message.contains("/p/b.txt") && e.message.contains("1 file(s) were restored"), "{}", e.message);
    let files = h.published.iter().find_map(|e| match &e.kind {
        EventKind::FilesRestored { files, .. } => Some(files.iter().map(|f| f.path.clone()).collect::<Vec<_>>()),
        _ => None,
    });
    assert_eq!(files, Some(vec!["/p/a.txt".to_string()]));
    assert!(!h.names().contains(&"head_moved"), "the conversation stays where it was");
    assert_eq!(h.state(), OperationStateKind::Idle);
}

#[test]
fn a_rewind_whose_end_the_store_cannot_write_says_it_finishes_once_writable() {
    let mut h = Harness::new();
    let reply = h.undo(false);
    h.planned(plan(&["/p/a.txt"], &[]));
    h.settle();
    h.restored(1, None);
    // The disk fills as the rewind's end is written.
    h.fail_write();
    let Err(e) = answered(reply) else { panic!("the rewind's end was not written") };
    assert_eq!(e.kind, ErrorKind::PersistenceBlocked);
    assert!(
        e.message.contains("the files are restored") && e.message.contains("when the store is writable again"),
        "{}",
        e.message
    );
    assert!(e.message.contains("journal reset"), "{}", e.message);
}

/// The sessions the durable batches made, each with the batch it is in.
fn made_sessions(h: &Harness) -> Vec<(String, usize)> {
    h.durable
        .iter()
        .enumerate()
        .flat_map(|(i, b)| {
            b.ops.iter().filter_map(move |op| match op {
                StoreOp::CreateSession { id, .. } => Some((id.clone(), i)),
                _ => None,
            })
        })
        .collect()
}

fn fork(h: &mut Harness, restore_files: bool) -> oneshot::Receiver<Result<String, EngineError>> {
    for text_ in ["one", "two"] {
        h.say(text_);
        h.settle();
        h.provider(vec![text("ok"), ProviderEvent::Done]);
        h.settle();
    }
    let first = h.forest().nodes().next().map(|n| n.id.clone());
    let params = forge_proto::params::ForkParams { node: first, restore_files, ..Default::default() };
    h.command(|reply| SessionCmd::Fork { params, client: client(), reply })
}

/// A fork is one step of its origin: its rows and first events ride in
/// the origin's batch, and it is answered once that is durable.
#[test]
fn a_fork_is_made_in_its_origins_batch() {
    let mut h = Harness::new();
    let reply = fork(&mut h, false);
    h.settle();
    let id = answered(reply).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(made_sessions(&h).into_iter().map(|(s, _)| s).collect::<Vec<_>>(), std::slice::from_ref(&id));
    let forked =
        h.durable.iter().flat_map(|b| &b.ops).any(|op| matches!(op, StoreOp::ForkSession { id: f, .. } if *f == id));
    assert!(forked, "the fork shares the origin's path");
}

/// With `restore_files`, the fork is made with the rewind's end, in the
/// batch that says the files moved; a conflict makes no fork at all.
#[test]
fn a_fork_that_restores_files_exists_only_if_they_moved() {
    let mut h = Harness::new();
    let reply = fork(&mut h, true);
    h.planned(plan(&["/p/a.txt"], &["/p/a.txt"]));
    h.settle();
    let Err(e) = answered(reply) else { panic!("a conflict must refuse the fork") };
    assert_eq!(e.kind, ErrorKind::RewindConflict);
    assert!(made_sessions(&h).is_empty(), "no fork without its files");

    let mut h = Harness::new();
    let reply = fork(&mut h, true);
    h.planned(plan(&["/p/a.txt"], &[]));
    h.settle();
    assert!(made_sessions(&h).is_empty(), "not before the files move");
    h.restored(1, None);
    h.settle();
    let id = answered(reply).unwrap_or_else(|e| panic!("{e}"));
    let made = made_sessions(&h);
    assert_eq!(made.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>(), std::slice::from_ref(&id));
    let with_files = h.durable[made[0].1].ops.iter().any(
        |op| matches!(op, StoreOp::AppendEvent { session_id, kind, .. } if *kind == "files_restored" && *session_id == id),
    );
    assert!(with_files, "the fork and the files' move are one batch");
}

/// A fork's rewind the daemon stopped during is finished on restart with
/// its fork (without the name, which may be taken by now).
#[test]
fn a_forks_rewind_cut_by_a_crash_makes_its_fork_on_restart() {
    let intent = RewindIntent {
        node: None,
        fork: Some(("s-fork".into(), Some("mine".into()))),
        files: vec![restored("/p/a.txt")],
        steps: vec![step("/p/a.txt")],
        path: None,
    };
    let mut h = Harness::restarted(config(), Unfinished::Nothing, Vec::new(), Some(intent));
    h.restored(1, None);
    h.settle();
    let made: Vec<(String, Option<String>)> = h
        .durable
        .iter()
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            StoreOp::CreateSession { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(made, [("s-fork".to_string(), None)]);
}
