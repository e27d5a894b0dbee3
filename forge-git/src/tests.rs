use std::path::Path;

use super::*;

/// A repository with one commit and uncommitted work of the user's own
/// (a staged change and an untracked file).
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let repo = git2::Repository::init(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("src/a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
    let mut index = repo.index().unwrap_or_else(|e| panic!("{e}"));
    index.add_path(Path::new("src/a.txt")).unwrap_or_else(|e| panic!("{e}"));
    index.write().unwrap_or_else(|e| panic!("{e}"));
    let tree = repo.find_tree(index.write_tree().unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"));
    let sig = git2::Signature::now("U", "u@example.com").unwrap_or_else(|e| panic!("{e}"));
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[]).unwrap_or_else(|e| panic!("{e}"));
    // The user's own work in progress.
    std::fs::write(dir.path().join("src/a.txt"), "one, edited by the user\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("notes.txt"), "mine\n").unwrap_or_else(|e| panic!("{e}"));
    dir
}

fn turn(session: &str, turn: &str, subject: &str) -> TurnCommit {
    TurnCommit {
        session: session.into(),
        turn: turn.into(),
        subject: subject.into(),
        body: None,
        state: format!("{{\"turn\":\"{turn}\"}}").into_bytes(),
        leave_out: Vec::new(),
        put_back: Vec::new(),
    }
}

fn snapshot(dir: &Path) -> (Vec<u8>, Vec<u8>, String, String) {
    let read = |p: &str| std::fs::read(dir.join(p)).unwrap_or_default();
    (
        read(".git/index"),
        read(".git/HEAD"),
        String::from_utf8_lossy(&read("src/a.txt")).into_owned(),
        String::from_utf8_lossy(&read("notes.txt")).into_owned(),
    )
}

#[test]
fn turns_become_commits_on_the_session_branch_and_the_user_sees_nothing_move() {
    let dir = repo();
    let before = snapshot(dir.path());
    let s = start(&dir.path().join("src"), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.branch, "forge/session/s1");
    assert!(s.cwd.ends_with("src") && s.cwd.starts_with(&s.worktree), "{s:?}");
    // The worktree holds the commit, not the user's uncommitted work.
    assert_eq!(std::fs::read_to_string(s.cwd.join("a.txt")).unwrap_or_default(), "one\n");
    assert!(!s.worktree.join("notes.txt").exists());

    std::fs::write(s.cwd.join("a.txt"), "two\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(s.cwd.join("b.txt"), "bee\n").unwrap_or_else(|e| panic!("{e}"));
    let c1 =
        commit_turn(&s.worktree, &s.branch, &turn("s1", "m1", "Edit a and add b")).unwrap_or_else(|e| panic!("{e}"));
    assert!(c1.made);
    assert_eq!(c1.files, vec!["src/a.txt".to_string(), "src/b.txt".to_string()]);

    std::fs::remove_file(s.cwd.join("b.txt")).unwrap_or_else(|e| panic!("{e}"));
    let c2 = commit_turn(&s.worktree, &s.branch, &turn("s1", "m2", "Remove b")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c2.files, vec!["src/b.txt".to_string()]);
    // The same turn again (a crash before it was journaled): found, not made twice.
    let again = commit_turn(&s.worktree, &s.branch, &turn("s1", "m2", "Remove b")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((again.commit.as_str(), again.made), (c2.commit.as_str(), false));
    // A turn that changed no file still commits its state.
    let c3 = commit_turn(&s.worktree, &s.branch, &turn("s1", "m3", "Just talk")).unwrap_or_else(|e| panic!("{e}"));
    assert!(c3.files.is_empty() && c3.made);

    let turns = log(dir.path(), &s.branch, 100).unwrap_or_else(|e| panic!("{e}"));
    let summaries: Vec<&str> = turns.iter().map(|t| t.summary.as_str()).collect();
    assert_eq!(summaries, vec!["Just talk", "Remove b", "Edit a and add b"]);
    assert_eq!(turns[2].turn.as_deref(), Some("m1"));
    let shown = show(dir.path(), &c1.commit).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(shown.state.as_deref(), Some("{\"turn\":\"m1\"}"));
    assert!(
        shown.diff.contains("+two") && shown.diff.contains("+bee") && !shown.diff.contains("sessions"),
        "{}",
        shown.diff
    );
    let (brings, brought) = diff_branch(dir.path(), &s.branch).unwrap_or_else(|e| panic!("{e}"));
    assert!(brought.iter().any(|b| b.path.ends_with("a.txt") && b.link.is_none() && !b.binary), "{brought:?}");
    assert!(brings.contains("+two") && !brings.contains("bee"), "{brings}");

    assert_eq!(snapshot(dir.path()), before, "the user's index, HEAD and files are untouched");
}

#[test]
fn two_sessions_never_see_each_others_changes() {
    let dir = repo();
    let a = start(dir.path(), "sa", None).unwrap_or_else(|e| panic!("{e}"));
    let b = start(dir.path(), "sb", None).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(a.cwd.join("only-a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
    commit_turn(&a.worktree, &a.branch, &turn("sa", "m1", "a")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!b.cwd.join("only-a.txt").exists());
    std::fs::write(b.cwd.join("only-b.txt"), "b\n").unwrap_or_else(|e| panic!("{e}"));
    let cb = commit_turn(&b.worktree, &b.branch, &turn("sb", "m1", "b")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cb.files, vec!["only-b.txt".to_string()]);
}

#[test]
fn a_branch_moved_outside_forge_is_not_overwritten() {
    let dir = repo();
    let s = start(dir.path(), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    commit_turn(&s.worktree, &s.branch, &turn("s1", "m1", "one")).unwrap_or_else(|e| panic!("{e}"));
    // Someone points the branch back at the base.
    let repo = git2::Repository::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let base = git2::Oid::from_str(&s.base).unwrap_or_else(|e| panic!("{e}"));
    repo.reference(&format!("refs/heads/{}", s.branch), base, true, "moved").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(s.cwd.join("x.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    let r = commit_turn(&s.worktree, &s.branch, &turn("s1", "m2", "two"));
    assert!(r.is_ok(), "the worktree follows its branch's tip: {r:?}");
}

#[test]
fn refusals_say_what_to_do() {
    let plain = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let e = start(plain.path(), "s", None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("not inside a git repository"), "{e}");
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    git2::Repository::init(empty.path()).unwrap_or_else(|e| panic!("{e}"));
    let e = start(empty.path(), "s", None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("no commit yet"), "{e}");
    let dir = repo();
    let e = start(dir.path(), "s", Some("nope")).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("`nope` names no commit"), "{e}");
    start(dir.path(), "s", None).unwrap_or_else(|e| panic!("{e}"));
    let e = start(dir.path(), "s", None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("already exists"), "{e}");
}

#[test]
fn a_checkout_moves_the_branch_and_keeps_the_tip_it_leaves() {
    let dir = repo();
    let s = start(dir.path(), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    let state = |turn: &str, head: &str| format!("{{\"turn\":\"{turn}\",\"head\":\"{head}\"}}").into_bytes();
    std::fs::write(s.cwd.join("one.txt"), "1\n").unwrap_or_else(|e| panic!("{e}"));
    let t1 = TurnCommit { state: state("u1", "a1"), ..turn("s1", "u1", "one") };
    let c1 = commit_turn(&s.worktree, &s.branch, &t1).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(s.cwd.join("two.txt"), "2\n").unwrap_or_else(|e| panic!("{e}"));
    let t2 = TurnCommit { state: state("u2", "a2"), ..turn("s1", "u2", "two") };
    let c2 = commit_turn(&s.worktree, &s.branch, &t2).unwrap_or_else(|e| panic!("{e}"));

    let find = |node: &str| commit_for_node(&s.worktree, &s.branch, "s1", node).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(find("a1"), Some(c1.commit.clone()), "the end of turn 1");
    assert_eq!(find("u2"), Some(c1.commit.clone()), "turn 2's message: the code before it");
    assert_eq!(find("u1"), Some(s.base.clone()));
    assert_eq!(find("nowhere"), None);

    let moved = move_branch(&s.worktree, &s.branch, "s1", &c1.commit).unwrap_or_else(|e| panic!("{e}"));
    let moved = moved.unwrap_or_else(|| panic!("moved"));
    assert_eq!((moved.from.as_str(), moved.kept.as_str()), (c2.commit.as_str(), "refs/forge/session/s1/prev-1"));
    assert!(!s.cwd.join("two.txt").exists() && s.cwd.join("one.txt").exists(), "the files follow");
    // The tip left is still found, and the branch can go back to it.
    assert_eq!(find("a2"), Some(c2.commit.clone()));
    std::fs::write(s.cwd.join("stray.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    let e = move_branch(&s.worktree, &s.branch, "s1", &c2.commit).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("holds changes no commit has"), "{e}");
    std::fs::remove_file(s.cwd.join("stray.txt")).unwrap_or_else(|e| panic!("{e}"));
    let back = move_branch(&s.worktree, &s.branch, "s1", &c2.commit).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.map(|m| m.kept), Some("refs/forge/session/s1/prev-2".to_string()));
    assert!(s.cwd.join("two.txt").exists());
    // Both tips left are listed, newest first, for the history's drawing.
    let kept = crate::kept_tips(&s.worktree, "s1").unwrap_or_else(|e| panic!("{e}"));
    let kept: Vec<(String, String)> = kept.into_iter().map(|(n, c)| (n, c.id)).collect();
    assert_eq!(kept, [("prev-2".to_string(), c1.commit.clone()), ("prev-1".to_string(), c2.commit.clone())]);
}

fn paths(v: &[&str]) -> Vec<std::path::PathBuf> {
    v.iter().map(std::path::PathBuf::from).collect()
}

fn runs_later(p: &Path) -> bool {
    p.to_string_lossy().starts_with(".git")
}

#[test]
fn files_that_run_later_are_held_left_out_of_a_checkpoint_and_put_back_on_denial() {
    let dir = repo();
    let s = start(dir.path(), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    let w = &s.worktree;
    std::fs::create_dir_all(w.join(".githooks")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(w.join(".githooks/pre-commit"), "#!/bin/sh\ncat ~/.ssh/id_ed25519\n")
        .unwrap_or_else(|e| panic!("{e}"));
    // A literal name that is also a glob pattern, and a `-diff` attribute
    // meant to hide the hook's text.
    std::fs::write(w.join(".github[1].yml"), "on: push\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(w.join(".gitattributes"), "* -diff\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(w.join("src/a.txt"), "two\n").unwrap_or_else(|e| panic!("{e}"));
    let held = held_changes(w, &s.branch, &runs_later).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = held.iter().map(|h| h.path.clone()).collect();
    assert_eq!(names, paths(&[".gitattributes", ".githooks/pre-commit", ".github[1].yml"]));
    assert!(held[1].diff.contains("+cat ~/.ssh/id_ed25519"), "{}", held[1].diff);

    // A checkpoint commits the rest and leaves them in the worktree.
    let c1 = commit_turn(w, &s.branch, &TurnCommit { leave_out: names.clone(), ..turn("s1", "m1~a", "checkpoint") })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c1.files, vec!["src/a.txt".to_string()]);
    assert!(w.join(".githooks/pre-commit").exists());
    let still = held_changes(w, &s.branch, &runs_later).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(still.len(), 3, "{still:?}");

    // Denied: the tip's version (none) is put back, a link in place too.
    std::fs::remove_file(w.join(".gitattributes")).unwrap_or_else(|e| panic!("{e}"));
    let canary = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(canary.path().join("key"), w.join(".gitattributes")).unwrap_or_else(|e| panic!("{e}"));
    let c2 = commit_turn(w, &s.branch, &TurnCommit { put_back: names, ..turn("s1", "m1", "turn") })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(c2.files.is_empty(), "{:?}", c2.files);
    assert!(!w.join(".githooks/pre-commit").exists() && !w.join(".github[1].yml").exists());
    assert!(std::fs::symlink_metadata(w.join(".gitattributes")).is_err());
    assert!(held_changes(w, &s.branch, &runs_later).unwrap_or_else(|e| panic!("{e}")).is_empty());
}

#[test]
fn a_denied_change_to_a_tracked_file_gets_the_tips_bytes_back() {
    let dir = repo();
    let s = start(dir.path(), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    let w = &s.worktree;
    // The link points at a canary of the user's, which must not be written.
    let canary = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let key = canary.path().join("key");
    std::fs::write(&key, "secret\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(w.join("src/a.txt")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&key, w.join("src/a.txt")).unwrap_or_else(|e| panic!("{e}"));
    let c = commit_turn(w, &s.branch, &TurnCommit { put_back: paths(&["src/a.txt"]), ..turn("s1", "m1", "turn") })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(c.files.is_empty(), "{:?}", c.files);
    let meta = std::fs::symlink_metadata(w.join("src/a.txt")).unwrap_or_else(|e| panic!("{e}"));
    assert!(meta.file_type().is_file());
    assert_eq!(std::fs::read_to_string(w.join("src/a.txt")).unwrap_or_default(), "one\n");
    assert_eq!(std::fs::read_to_string(&key).unwrap_or_default(), "secret\n");

    // A directory replaced by a link out: left out of a checkpoint, the
    // tip's files stay in the commit; put back, the link goes.
    std::fs::rename(w.join("src"), w.join("src.old")).unwrap_or_else(|e| panic!("{e}"));
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.path().join("a.txt"), "outside\n").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(out.path(), w.join("src")).unwrap_or_else(|e| panic!("{e}"));
    let held = held_changes(w, &s.branch, &|p| p.starts_with("src")).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = held.iter().map(|h| h.path.clone()).collect();
    assert!(names.contains(&"src".into()), "{names:?}");
    let kept = commit_turn(w, &s.branch, &TurnCommit { leave_out: names.clone(), ..turn("s1", "m2~a", "checkpoint") })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!kept.files.iter().any(|f| f.starts_with("src/")), "{:?}", kept.files);
    commit_turn(w, &s.branch, &TurnCommit { put_back: names, ..turn("s1", "m2", "turn") })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(std::fs::symlink_metadata(w.join("src")).map(|m| m.is_dir()).unwrap_or(false));
    assert_eq!(std::fs::read_to_string(w.join("src/a.txt")).unwrap_or_default(), "one\n");
    assert_eq!(std::fs::read_to_string(out.path().join("a.txt")).unwrap_or_default(), "outside\n");
}

#[test]
fn the_state_file_is_never_written_through_a_link_a_command_left() {
    let dir = repo();
    let s = start(dir.path(), "s1", None).unwrap_or_else(|e| panic!("{e}"));
    let w = &s.worktree;
    let canary = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let keys = canary.path().join("authorized_keys");
    std::fs::write(&keys, "ssh-ed25519 mine\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(w.join(".forge/sessions")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&keys, w.join(".forge/sessions/s1.json")).unwrap_or_else(|e| panic!("{e}"));
    commit_turn(w, &s.branch, &turn("s1", "m1", "one")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(std::fs::read_to_string(&keys).unwrap_or_default(), "ssh-ed25519 mine\n");
    // And a linked `.forge` directory.
    std::fs::remove_dir_all(w.join(".forge")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(canary.path().join("sessions")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(canary.path(), w.join(".forge")).unwrap_or_else(|e| panic!("{e}"));
    commit_turn(w, &s.branch, &turn("s1", "m2", "two")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!canary.path().join("sessions/s1.json").exists());
    assert!(std::fs::symlink_metadata(w.join(".forge")).map(|m| m.is_dir()).unwrap_or(false));
}

#[test]
fn the_hooks_directory_is_named_however_the_setting_spells_it() {
    let dir = repo();
    let set = |v: &str| {
        let repo = git2::Repository::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        repo.config().and_then(|mut c| c.set_str("core.hooksPath", v)).unwrap_or_else(|e| panic!("{e}"));
    };
    for (value, named) in [("./hooks", Some("hooks")), (".husky/_", Some(".husky/_")), ("../out", None), (".", None)] {
        set(value);
        assert_eq!(hooks_path(dir.path()).as_deref(), named, "{value}");
    }
}
