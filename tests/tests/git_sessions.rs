//! Git-backed sessions through the real daemon: a branch per session,
//! one commit per turn holding the code and the session state, the
//! user's working tree, index and HEAD never touched, a commit resumed as
//! a new session, sessions side by side, and kill -9 at the worst moments.

use std::path::{Path, PathBuf};

use forge_tests::harness::{Forge, git};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn call(name: &str, args: Value) -> String {
    forge_tests::mock::tool_call(name, &args)
}

/// A repository with one commit (a.txt, b.txt) and work of the user's
/// own: a staged change, an unstaged one and an untracked file.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["config", "user.email", "user@example.com"]);
    git(p, &["config", "user.name", "User"]);
    std::fs::write(p.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p.join("b.txt"), "b\n").unwrap_or_else(|e| panic!("{e}"));
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "start"]);
    std::fs::write(p.join("a.txt"), "a, staged by the user\n").unwrap_or_else(|e| panic!("{e}"));
    git(p, &["add", "a.txt"]);
    std::fs::write(p.join("a.txt"), "a, edited again by the user\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p.join("mine.txt"), "untracked\n").unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// Everything of the user's a session must not change: the index, HEAD,
/// the branch, and every file of the working tree.
fn users_side(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = forge_tests::harness::walk(dir)
        .into_iter()
        .filter(|p| !p.strip_prefix(dir).is_ok_and(|r| r.starts_with(".git")))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_default();
            (p, bytes)
        })
        .collect();
    for f in [".git/index", ".git/HEAD", ".git/refs/heads/main"] {
        files.push((dir.join(f), std::fs::read(dir.join(f)).unwrap_or_default()));
    }
    files.sort();
    files
}

fn session_info(forge_json: &str) -> Value {
    serde_json::from_str(forge_json.trim()).unwrap_or_else(|e| panic!("{e}: {forge_json}"))
}

async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tool_turns_are_three_commits_and_the_users_repository_does_not_move() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let before = users_side(dir);
    let info = forge.ok(&["--json", "session", "new", "--git", "--cwd", &dir.display().to_string()]).await;
    let info = session_info(&info.stdout);
    let id = info["id"].as_str().unwrap_or_default().to_string();
    let branch = format!("forge/session/{id}");
    assert_eq!(info["git"]["branch"], branch.as_str());
    let worktree = PathBuf::from(info["cwd"].as_str().unwrap_or_default());
    assert_eq!(
        std::fs::read_to_string(worktree.join("a.txt")).ok().as_deref(),
        Some("a\n"),
        "the commit, not the user's work"
    );

    let turns = [
        call("write_file", json!({"path": "c.txt", "content": "made in turn 1\n"})),
        // The command sees turn 1's file and changes the session's files.
        call(
            "run_command",
            json!({"command": "cat c.txt > seen.txt; printf 'a, by the model\\n' > a.txt; git status --short > status.txt"}),
        ),
        call("run_command", json!({"command": "rm b.txt status.txt"})),
    ];
    for (i, c) in turns.iter().enumerate() {
        forge.ok(&["send", "--auto-approve", "-s", &id, &format!("turn {} {c}", i + 1)]).await;
    }

    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "3", "exactly three commits");
    let show = |rev: &str, path: &str| {
        std::process::Command::new("git")
            .current_dir(dir)
            .args(["show", &format!("{branch}{rev}:{path}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    // Turn 1: c.txt; a.txt and b.txt as committed.
    assert_eq!(show("~2", "c.txt").as_deref(), Some("made in turn 1\n"));
    assert_eq!(show("~2", "a.txt").as_deref(), Some("a\n"));
    // Turn 2: the command saw c.txt, changed a.txt, and git in it saw the
    // worktree's own status.
    assert_eq!(show("~1", "seen.txt").as_deref(), Some("made in turn 1\n"));
    assert_eq!(show("~1", "a.txt").as_deref(), Some("a, by the model\n"));
    let status = show("~1", "status.txt").unwrap_or_default();
    assert!(status.contains("a.txt") && status.contains("seen.txt"), "git status in the command: {status}");
    // Turn 3: b.txt gone.
    assert_eq!(show("", "b.txt"), None);
    assert_eq!(show("", "c.txt").as_deref(), Some("made in turn 1\n"));

    // Each commit holds its turn's conversation.
    let state_path = format!(".forge/sessions/{id}.json");
    for (rev, n) in [("~2", 1), ("~1", 2), ("", 3)] {
        let state: Value = serde_json::from_str(&show(rev, &state_path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("turn {n} state: {e}"));
        assert_eq!(state["session"], id.as_str());
        assert_eq!(state["status"], "complete");
        let first = state["messages"][0]["text"].as_str().unwrap_or_default();
        assert!(first.starts_with(&format!("turn {n} ")), "turn {n}: {first}");
        assert!(state["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool")));
    }
    // forgectl git log shows the same three, newest first.
    let log = forge.ok(&["--json", "git", "log", &id]).await.json_lines();
    let subjects: Vec<&str> = log.iter().filter_map(|c| c["summary"].as_str()).collect();
    assert_eq!(subjects.len(), 3, "{log:?}");
    assert!(subjects[0].starts_with("turn 3") && subjects[2].starts_with("turn 1"), "{subjects:?}");
    let message = log[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Written by Forge's mock provider"), "the message the model wrote: {message}");
    assert_eq!(log[1]["files"], json!(["a.txt", "seen.txt", "status.txt"]));

    assert!(users_side(dir) == before, "the user's index, HEAD, branch and files are byte for byte as they were");
    assert!(git(dir, &["status", "--porcelain"]).contains("mine.txt"));
    // What a merge would bring.
    let diff = forge.ok(&["git", "diff", &id]).await.stdout;
    assert!(diff.contains("+a, by the model") && diff.contains("deleted file mode"), "{diff}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_resumes_as_a_session_with_the_conversation_of_then() {
    let (mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    for n in 1..=3 {
        let c = call("write_file", json!({"path": format!("f{n}.txt"), "content": format!("{n}\n")}));
        forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{c} turn {n}")]).await;
    }
    let second = git(dir, &["rev-parse", &format!("forge/session/{id}~1")]).trim().to_string();
    let shown = forge.ok(&["git", "show", &second[..12], "--cwd", &dir.display().to_string()]).await.stdout;
    assert!(shown.contains("turn 2") && shown.contains("+2"), "{shown}");

    let info =
        forge.ok(&["--json", "session", "new", "--from", &second[..12], "--cwd", &dir.display().to_string()]).await;
    let info = session_info(&info.stdout);
    let resumed = info["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(info["git"]["base"], second.as_str());
    let worktree = PathBuf::from(info["cwd"].as_str().unwrap_or_default());
    assert!(worktree.join("f2.txt").exists() && !worktree.join("f3.txt").exists(), "the files of the second turn");
    let history = forge.ok(&["history", &resumed]).await.stdout;
    assert!(history.contains("turn 2") && !history.contains("turn 3"), "{history}");

    forge.ok(&["send", "-s", &resumed, "and now?"]).await;
    let requests: Vec<String> = mock.requests().iter().map(|r| r.body.to_string()).collect();
    let (messages, turns): (Vec<&String>, Vec<&String>) =
        requests.iter().partition(|b| b.contains("You write git commit messages"));
    assert_eq!(messages.len(), 4, "each turn's commit message is written by the model");
    let asked = turns.last().map(|b| b.to_string()).unwrap_or_default();
    assert!(
        asked.contains("turn 1") && asked.contains("turn 2") && !asked.contains("turn 3"),
        "the model gets the conversation of then"
    );
    let log = forge.ok(&["--json", "git", "log", &resumed]).await.json_lines();
    assert_eq!(log.len(), 3, "its own turn on top of the two it came from: {log:?}");
    assert_eq!(log[0]["session"], resumed.as_str());
    // The original branch did not move.
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..forge/session/{id}")]).trim(), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_git_sessions_on_one_repository_never_see_each_other() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let cwd = repo.path().display().to_string();
    let a = forge.new_session(&["--git", "--cwd", &cwd]).await;
    let b = forge.new_session(&["--git", "--cwd", &cwd]).await;
    let write = |name: &str| call("write_file", json!({"path": name, "content": "x\n"}));
    let (ma, mb) = (format!("{} a", write("only-a.txt")), format!("{} b", write("only-b.txt")));
    let (args_a, args_b) = (["send", "--auto-approve", "-s", &a, &ma], ["send", "--auto-approve", "-s", &b, &mb]);
    tokio::join!(forge.ok(&args_a), forge.ok(&args_b));
    let ls = call("run_command", json!({"command": "ls"}));
    let seen_by_b = forge.ok(&["send", "--auto-approve", "-s", &b, &format!("{ls} look")]).await.stdout;
    assert!(seen_by_b.contains("only-b.txt") && !seen_by_b.contains("only-a.txt"), "{seen_by_b}");
    let files = |s: &str| git(repo.path(), &["ls-tree", "-r", "--name-only", &format!("forge/session/{s}")]);
    assert!(files(&a).contains("only-a.txt") && !files(&a).contains("only-b.txt"));
    assert!(files(&b).contains("only-b.txt") && !files(&b).contains("only-a.txt"));

    // Removing a session removes its worktree; its branch and turns stay.
    let show = forge.ok(&["session", "show", &a]).await.stdout;
    assert!(show.contains(&format!("branch forge/session/{a}")), "{show}");
    let worktree = repo.path().join(".git/forge/worktrees").join(&a);
    assert!(worktree.is_dir());
    forge.ok(&["session", "rm", &a]).await;
    assert!(!worktree.exists(), "the worktree is gone");
    assert!(!git(repo.path(), &["worktree", "list"]).contains(&a));
    assert!(files(&a).contains("only-a.txt"), "the branch and its commits stay");
}

/// A commit of a session the daemon no longer has (removed here, or made
/// on another machine and fetched) resumes from the commits alone: each
/// turn's state file rebuilds its messages, tool calls and results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_a_session_the_daemon_lacks_resumes_from_the_commits_alone() {
    let (mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let cwd = dir.display().to_string();
    let id = forge.new_session(&["--git", "--cwd", &cwd]).await;
    for n in 1..=3 {
        let c = call("write_file", json!({"path": format!("f{n}.txt"), "content": format!("{n}\n")}));
        forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{c} turn {n}")]).await;
    }
    let second = git(dir, &["rev-parse", &format!("forge/session/{id}~1")]).trim().to_string();
    forge.ok(&["session", "rm", &id]).await;

    let info = session_info(&forge.ok(&["--json", "session", "new", "--from", &second, "--cwd", &cwd]).await.stdout);
    let resumed = info["id"].as_str().unwrap_or_default().to_string();
    let history = forge.ok(&["--json", "history", &resumed]).await.json_lines();
    let texts: Vec<String> = history.iter().map(|m| m["text"].as_str().unwrap_or_default().to_string()).collect();
    assert!(texts.iter().any(|t| t.contains("turn 1")) && texts.iter().any(|t| t.contains("turn 2")), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("turn 3")), "{texts:?}");
    assert!(history.iter().any(|m| m["role"] == "tool"), "tool results come back too");

    forge.ok(&["send", "-s", &resumed, "and now?"]).await;
    let asked = mock.last_turn_request();
    assert!(asked.contains("turn 1") && asked.contains("turn 2") && !asked.contains("turn 3"), "{asked}");
    assert!(asked.contains("write_file"), "the calls are part of the conversation sent");
    let log = forge.ok(&["--json", "git", "log", &resumed]).await.json_lines();
    assert_eq!(log.len(), 3, "its own turn on the two it came from: {log:?}");
}

/// kill -9 at the worst moments of a git turn: after its commit is on
/// the branch but before the daemon journaled it (one commit, found
/// again, not two), and in the middle of the answer after a tool changed
/// a file (the turn recovered as interrupted is one commit holding the
/// change, marked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_git_turn_leaves_exactly_one_commit() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.set_env("FORGE_CRASH_AFTER_GIT_COMMIT", "1");
    forge.start().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let c = call("write_file", json!({"path": "one.txt", "content": "1\n"}));
    let _ = forge.ctl(&["send", "--auto-approve", "-s", &id, &format!("{c} first")]).await;
    assert!(forge.wait_exit().await, "the daemon killed itself after the commit");
    forge.set_env("FORGE_CRASH_AFTER_GIT_COMMIT", "0");
    forge.start().await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let branch = format!("forge/session/{id}");
    assert_eq!(
        git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(),
        "1",
        "found again, not made twice"
    );
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let committed: Vec<&Value> = events.iter().filter(|e| e["kind"] == "git_committed").collect();
    assert_eq!(committed.len(), 1, "journaled once, on restart");
    assert_eq!(committed[0]["commit"], git(dir, &["rev-parse", &branch]).trim());

    // Killed while a command runs, after a tool wrote its file: after
    // the restart the user discards the interrupted calls, and the turn is
    // one commit holding what was kept, marked.
    let worktree = PathBuf::from(
        forge.ok(&["--json", "session", "show", &id]).await.json_lines()[0]["cwd"].as_str().unwrap_or_default(),
    );
    let w = call("write_file", json!({"path": "two.txt", "content": "2\n"}));
    let r = call("run_command", json!({"command": "touch running.txt; sleep 60"}));
    let message = format!("second {w} {r}");
    let _sending = forge.ctl_cmd(&["send", "--auto-approve", "-s", &id, &message]).spawn();
    forge.wait_for_session(&id, "running its command", |_| worktree.join("running.txt").exists()).await;
    forge.kill9().await;
    forge.start().await;
    forge.wait_for_session(&id, "waiting for a decision", |s| s["state"] == "tool_recovery").await;
    forge.ok(&["recover", &id, "--discard"]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let count = git(dir, &["rev-list", "--count", &format!("main..{branch}")]);
    assert_eq!(count.trim(), "2", "the interrupted turn is one commit");
    let subject = git(dir, &["log", "-1", "--format=%s", &branch]);
    assert!(subject.starts_with('[') && subject.contains("second"), "marked: {subject}");
    assert_eq!(git(dir, &["show", &format!("{branch}:two.txt")]), "2\n");
}

/// Checking out a node of a git session moves its branch to that turn's
/// commit, its files with it; the tip it leaves is kept on a ref, and the
/// next turn commits on top of the node's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_moves_the_branch_to_the_turn_and_loses_nothing() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let cwd = dir.display().to_string();
    let id = forge.new_session(&["--git", "--cwd", &cwd]).await;
    for n in 1..=2 {
        let c = call("write_file", json!({"path": format!("f{n}.txt"), "content": format!("{n}\n")}));
        forge.ok(&["send", "--auto-approve", "-s", &id, &format!("turn {n} {c}")]).await;
    }
    let branch = format!("forge/session/{id}");
    let (first, second) = (git(dir, &["rev-parse", &format!("{branch}~1")]), git(dir, &["rev-parse", &branch]));
    let shown = forge.ok(&["--json", "git", "show", first.trim(), "--cwd", &cwd]).await.json_lines();
    let node = shown[0]["state"]["head"].as_str().unwrap_or_default().to_string();
    let worktree = dir.join(".git/forge/worktrees").join(&id);

    forge.ok(&["checkout", &id, &node]).await;
    assert_eq!(git(dir, &["rev-parse", &branch]), first, "the branch is at the first turn's commit");
    assert!(worktree.join("f1.txt").exists() && !worktree.join("f2.txt").exists(), "its files with it");
    assert_eq!(git(dir, &["rev-parse", &format!("refs/forge/session/{id}/prev-1")]), second, "the tip it left is kept");
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "git_branch_moved" && e["kept"] == format!("refs/forge/session/{id}/prev-1"))
    );

    let c = call("write_file", json!({"path": "f3.txt", "content": "3\n"}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("turn 3 {c}")]).await;
    assert_eq!(git(dir, &["rev-parse", &format!("{branch}~1")]), first, "the next turn goes on from there");
    let tree = git(dir, &["ls-tree", "-r", "--name-only", &branch]);
    assert!(tree.contains("f3.txt") && !tree.contains("f2.txt"), "{tree}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_sessions_edits_run_without_asking_but_not_where_code_runs_later() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let worktree = PathBuf::from(
        forge.ok(&["--json", "session", "show", &id]).await.json_lines()[0]["cwd"].as_str().unwrap_or_default(),
    );
    // Every edit is part of a commit the user can undo: no approval.
    let write = call("write_file", json!({"path": "new.txt", "content": "made by the model\n"}));
    let edit = call("edit", json!({"path": "b.txt", "old_string": "b", "new_string": "b, edited"}));
    let sent = forge.ok(&["send", "-s", &id, &format!("{write} {edit} make and change")]).await;
    assert!(!sent.stderr.contains("approve"), "{}", sent.stderr);
    assert_eq!(std::fs::read_to_string(worktree.join("new.txt")).unwrap_or_default(), "made by the model\n");
    assert_eq!(std::fs::read_to_string(worktree.join("b.txt")).unwrap_or_default(), "b, edited\n");
    // A file that makes something run later still asks.
    let hook = call("write_file", json!({"path": ".claude/settings.json", "content": "{}"}));
    forge.ok(&["send", "-s", &id, "--no-wait", &format!("{hook} a setting")]).await;
    forge.wait_for_session(&id, "asking", |s| s["state"] == "awaiting_approval").await;
    forge.ok(&["cancel", &id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_for_edits_makes_a_git_session_ask_as_elsewhere() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[git]\nask_for_edits = true\n");
    forge.start().await;
    let repo = repository();
    let id = forge.new_session(&["--git", "--cwd", &repo.path().display().to_string()]).await;
    let write = call("write_file", json!({"path": "new.txt", "content": "x\n"}));
    forge.ok(&["send", "-s", &id, "--no-wait", &format!("{write} make")]).await;
    forge.wait_for_session(&id, "asking", |s| s["state"] == "awaiting_approval").await;
    forge.ok(&["cancel", &id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_moves_the_branch_back_and_keeps_the_tip_it_left() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let worktree = PathBuf::from(
        forge.ok(&["--json", "session", "show", &id]).await.json_lines()[0]["cwd"].as_str().unwrap_or_default(),
    );
    for n in 1..=2 {
        let c = call("write_file", json!({"path": format!("f{n}.txt"), "content": format!("{n}\n")}));
        forge.ok(&["send", "-s", &id, &format!("{c} turn {n}")]).await;
    }
    let branch = format!("forge/session/{id}");
    let tip = git(dir, &["rev-parse", &branch]).trim().to_string();
    let undone = forge.ok(&["undo", &id]).await;
    assert!(undone.stderr.is_empty() || !undone.stderr.contains("error"), "{}", undone.stderr);
    // The branch is on the first turn's commit; the undone one is kept.
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "1");
    assert_eq!(git(dir, &["rev-parse", &format!("refs/forge/session/{id}/prev-1")]).trim(), tip);
    assert!(worktree.join("f1.txt").exists() && !worktree.join("f2.txt").exists(), "the worktree followed");
    let history = forge.ok(&["history", &id]).await.stdout;
    assert!(history.contains("turn 1") && !history.contains("turn 2"), "{history}");
    // The next turn commits on top of the first, not with the undo inside.
    let c = call("write_file", json!({"path": "f3.txt", "content": "3\n"}));
    forge.ok(&["send", "-s", &id, &format!("{c} turn 3")]).await;
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "2");
    let files = git(dir, &["show", "--name-only", "--format=", &branch]);
    assert!(files.contains("f3.txt") && !files.contains("f2.txt"), "{files}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_the_answer_streams_leaves_an_interrupted_commit() {
    let (_mock, mut forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2 first"]).await;
    let before = forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await["last_seq"].as_u64().unwrap_or(0);
    let _sending = forge.ctl_cmd(&["send", "-s", &id, "mock:tokens=400 mock:delay=20 second, cut"]).spawn();
    // Some of the answer is on disk before the kill.
    forge
        .wait_for_session(&id, "streaming", |s| {
            s["state"] == "streaming" && s["last_seq"].as_u64().unwrap_or(0) > before + 10
        })
        .await;
    forge.kill9().await;
    forge.start().await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let branch = format!("forge/session/{id}");
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    assert_eq!(events.iter().filter(|e| e["kind"] == "git_committed").count(), 2, "the cut turn is committed");
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "2");
    let subject = git(dir, &["log", "-1", "--format=%s", &branch]);
    assert!(subject.starts_with("[interrupted]") && subject.contains("second"), "{subject}");
    // Its state file holds its own messages: the cut answer is in it.
    let state = git(dir, &["show", &format!("{branch}:.forge/sessions/{id}.json")]);
    assert!(state.contains("second, cut") && state.contains("w0"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_waiting_on_an_approval_is_committed_first_and_the_answer_is_a_commit() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let branch = format!("forge/session/{id}");
    let c = call("write_file", json!({"path": ".mcp.json", "content": "{}\n"}));
    forge.ok(&["send", "-s", &id, "--no-wait", &format!("{c} add a server")]).await;
    let waiting = forge.wait_for_session(&id, "asking", |s| s["state"] == "awaiting_approval").await;
    let subject = |rev: &str| git(dir, &["log", "-1", "--format=%s", rev]).trim().to_string();
    for _ in 0..400 {
        if subject(&branch).starts_with("[awaiting approval]") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(subject(&branch).starts_with("[awaiting approval] "), "committed before the wait: {}", subject(&branch));
    assert!(waiting["state"] == "awaiting_approval");
    forge.ok(&["approve", &id, "--all"]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let subjects = git(dir, &["log", "--format=%s", &format!("main..{branch}")]);
    let subjects: Vec<&str> = subjects.lines().collect();
    assert_eq!(subjects.len(), 3, "{subjects:?}");
    assert!(subjects[1].starts_with("[approved] ") && subjects[2].starts_with("[awaiting approval] "), "{subjects:?}");
    let answered = git(dir, &["show", &format!("{branch}~1:.forge/sessions/{id}.json")]);
    assert!(answered.contains("\"decision\": \"approved\""), "{answered}");
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    let reasons: Vec<&str> =
        events.iter().filter(|e| e["kind"] == "git_checkpoint").filter_map(|e| e["reason"].as_str()).collect();
    assert_eq!(reasons, ["awaiting_approval", "approved"]);
    // Undo goes back to before the turn, checkpoints and all.
    forge.ok(&["undo", &id]).await;
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_after_a_steer_takes_back_the_whole_turn() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let w = call("write_file", json!({"path": "made.txt", "content": "x\n"}));
    let r = call("run_command", json!({"command": "sleep 2"}));
    let _sending = forge.ctl_cmd(&["send", "--auto-approve", "-s", &id, &format!("{w} {r} work")]).spawn();
    forge.wait_for_session(&id, "running its command", |s| s["state"] == "executing_tools").await;
    forge.ok(&["steer", &id, "and mind the tests"]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle" && s["queued_messages"] == 0).await;
    let branch = format!("forge/session/{id}");
    for _ in 0..400 {
        if git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim() == "1" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "1", "one turn, the steer in it");
    forge.ok(&["undo", &id]).await;
    assert_eq!(git(dir, &["rev-list", "--count", &format!("main..{branch}")]).trim(), "0", "the whole turn");
    let history = forge.ok(&["history", &id]).await.stdout;
    assert!(!history.contains("work") && !history.contains("mind the tests"), "{history}");
}
