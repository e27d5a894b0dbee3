//! Bringing a git session's work back to the user's branch: `forgectl git
//! merge` (fast-forward, merge commit, squash, without the state files)
//! and `forgectl git rebase`, refused on a dirty tree or a running turn,
//! and stopping at a conflict with the files named and nothing changed.

use std::path::{Path, PathBuf};

use forge_tests::harness::{Forge, git};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::json;

async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

/// A repository with one commit, and the user's own uncommitted edit.
fn repository() -> tempfile::TempDir {
    let dir = forge_tests::harness::git_repository(&[("a.txt", "a\n"), ("shared.txt", "one\n")]);
    std::fs::write(dir.path().join("a.txt"), "a, edited by the user\n").unwrap_or_else(|e| panic!("{e}"));
    dir
}

async fn git_session(forge: &Forge, dir: &Path) -> (String, PathBuf) {
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let info = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    (id, PathBuf::from(info[0]["cwd"].as_str().unwrap_or_default()))
}

async fn turn_writing(forge: &Forge, id: &str, path: &str, content: &str) {
    let c = tool_call("write_file", &json!({"path": path, "content": content}));
    forge.ok(&["send", "-s", id, &format!("{c} write {path}")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_brings_the_work_only_onto_a_clean_tree_and_fast_forwards() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let (id, _) = git_session(&forge, dir).await;
    turn_writing(&forge, &id, "new.txt", "from the session\n").await;

    // The user's uncommitted edit: refused, nothing touched.
    let refused = forge.ctl(&["git", "merge", &id]).await;
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("not committed (a.txt)"), "{}", refused.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap_or_default(), "a, edited by the user\n");
    assert!(!dir.join("new.txt").exists());

    git(dir, &["commit", "-qam", "the user's edit"]);
    let merged = forge.ok(&["--json", "git", "merge", &id]).await.json_lines();
    assert_eq!(merged[0]["how"], "merge", "the user's commit is not on the session's branch: {}", merged[0]);
    assert_eq!(std::fs::read_to_string(dir.join("new.txt")).unwrap_or_default(), "from the session\n");
    assert!(dir.join(format!(".forge/sessions/{id}.json")).exists(), "the state comes along");
    assert_eq!(git(dir, &["status", "--porcelain"]).trim(), "", "index and files agree");
    assert_eq!(git(dir, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "main");

    // Once merged, the next turn fast-forwards after a rebase.
    forge.ok(&["git", "rebase", &id]).await;
    turn_writing(&forge, &id, "more.txt", "more\n").await;
    let ff = forge.ok(&["--json", "git", "merge", &id]).await.json_lines();
    assert_eq!(ff[0]["how"], "fast_forward", "{}", ff[0]);
    assert_eq!(
        git(dir, &["rev-parse", "main"]).trim(),
        git(dir, &["rev-parse", &format!("forge/session/{id}")]).trim()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squash_without_state_is_one_commit_of_the_code_alone() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    git(dir, &["commit", "-qam", "the user's edit"]);
    let (id, _) = git_session(&forge, dir).await;
    turn_writing(&forge, &id, "one.txt", "1\n").await;
    turn_writing(&forge, &id, "two.txt", "2\n").await;
    let before = git(dir, &["rev-parse", "HEAD"]).trim().to_string();
    let out = forge.ok(&["git", "merge", &id, "--squash", "--without-state"]).await.stdout;
    assert!(out.contains("squash of session"), "{out}");
    assert_eq!(git(dir, &["rev-parse", "HEAD~1"]).trim(), before, "one commit on top, one parent");
    let files = git(dir, &["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.contains("one.txt") && files.contains("two.txt") && !files.contains(".forge"), "{files}");
    assert!(!dir.join(".forge").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_stops_merge_and_rebase_with_the_files_named_and_nothing_changed() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    git(dir, &["commit", "-qam", "the user's edit"]);
    let (id, worktree) = git_session(&forge, dir).await;
    let edit = tool_call("edit", &json!({"path": "shared.txt", "old_string": "one", "new_string": "session's"}));
    forge.ok(&["send", "-s", &id, &format!("{edit} change shared")]).await;
    std::fs::write(dir.join("shared.txt"), "user's\n").unwrap_or_else(|e| panic!("{e}"));
    git(dir, &["commit", "-qam", "the user's shared"]);
    let (head, tip) = (git(dir, &["rev-parse", "HEAD"]), git(dir, &["rev-parse", &format!("forge/session/{id}")]));

    let merge = forge.ctl(&["--json", "git", "merge", &id]).await;
    assert_eq!(merge.code, 1);
    assert!(
        merge.stderr.contains("conflict in shared.txt") && merge.stderr.contains("nothing was changed"),
        "{}",
        merge.stderr
    );
    assert!(merge.stdout.contains("git_conflict"), "{}", merge.stdout);
    let rebase = forge.ctl(&["git", "rebase", &id]).await;
    assert_eq!(rebase.code, 1);
    assert!(rebase.stderr.contains("conflict in shared.txt"), "{}", rebase.stderr);
    assert_eq!(git(dir, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(dir, &["rev-parse", &format!("forge/session/{id}")]), tip);
    assert_eq!(std::fs::read_to_string(dir.join("shared.txt")).unwrap_or_default(), "user's\n");
    assert_eq!(std::fs::read_to_string(worktree.join("shared.txt")).unwrap_or_default(), "session's\n");
    assert_eq!(git(dir, &["status", "--porcelain"]).trim(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_and_rebase_wait_for_the_turn_to_end() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    git(dir, &["commit", "-qam", "the user's edit"]);
    let (id, _) = git_session(&forge, dir).await;
    forge.ok(&["send", "-s", &id, "--no-wait", "mock:tokens=200 mock:delay=20 long"]).await;
    forge.wait_for_session(&id, "streaming", |s| s["state"] == "streaming").await;
    for cmd in ["merge", "rebase"] {
        let r = forge.ctl(&["--json", "git", cmd, &id]).await;
        assert_eq!(r.code, 1, "{cmd}");
        assert!(r.stdout.contains("session_busy"), "{cmd}: {}", r.stdout);
    }
    forge.ok(&["cancel", &id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_turns_diff_shows_before_its_commit_and_the_last_message_can_be_edited() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    let (id, worktree) = git_session(&forge, dir).await;
    let r = tool_call("run_command", &json!({"command": "echo draft > draft.txt; sleep 30"}));
    let _sending = forge.ctl_cmd(&["send", "--auto-approve", "-s", &id, &format!("{r} draft it")]).spawn();
    forge.wait_for_session(&id, "running its command", |_| worktree.join("draft.txt").exists()).await;
    let diff = forge.ok(&["git", "diff", &id, "--turn"]).await.stdout;
    assert!(diff.contains("draft.txt") && diff.contains("+draft"), "{diff}");
    forge.ok(&["cancel", &id]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;

    let branch = format!("forge/session/{id}");
    let tip = git(dir, &["rev-parse", &branch]).trim().to_string();
    forge.ok(&["git", "reword", &id, "Draft the notes\n\nWritten while testing."]).await;
    let message = git(dir, &["log", "-1", "--format=%B", &branch]);
    assert!(message.starts_with("Draft the notes\n\nWritten while testing."), "{message}");
    assert!(message.contains(&format!("Forge-Session: {id}")) && message.contains("Forge-Turn: "), "{message}");
    assert_eq!(git(dir, &["rev-parse", &format!("refs/forge/session/{id}/prev-1")]).trim(), tip);
    assert_eq!(
        git(dir, &["rev-parse", &format!("{branch}^{{tree}}")]),
        git(dir, &["rev-parse", &format!("{tip}^{{tree}}")])
    );
    let log = forge.ok(&["git", "log", &id]).await.stdout;
    assert!(log.contains("Draft the notes"), "{log}");
    // The tip the reword replaced is listed, kept.
    let short: String = tip.chars().take(10).collect();
    assert!(log.contains("kept tips") && log.contains(&format!("  prev-1 {short}")), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_that_brings_files_that_run_later_names_them_and_takes_them_only_on_the_users_word() {
    let (_mock, forge) = started().await;
    let repo = repository();
    let dir = repo.path();
    git(dir, &["commit", "-qam", "the user's edit"]);
    let (id, _) = git_session(&forge, dir).await;
    // A confined command writes them freely in the session's worktree.
    let command = "mkdir -p .githooks && printf '#!/bin/sh\\ntouch /tmp/ran\\n' > .githooks/pre-commit \
                   && chmod +x .githooks/pre-commit && echo '* filter=evil' > .gitattributes \
                   && ln -s /home/someone/.ssh/id_ed25519 keylink && head -c 2097152 /dev/zero > blob.bin \
                   && echo plain > plain.txt";
    let c = tool_call("run_command", &json!({"command": command}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{c} go")]).await;
    let head = git(dir, &["rev-parse", "HEAD"]);

    // Without a terminal: refused, each named, nothing changed.
    let refused = forge.ctl(&["git", "merge", &id]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    for named in [".githooks/pre-commit", ".gitattributes", "keylink", "/home/someone/.ssh/id_ed25519", "blob.bin"] {
        assert!(refused.stderr.contains(named), "{named} is named: {}", refused.stderr);
    }
    assert!(!refused.stderr.contains("plain.txt"), "{}", refused.stderr);
    assert_eq!(git(dir, &["rev-parse", "HEAD"]), head, "the user's branch did not move");
    assert!(!dir.join(".githooks").exists() && !dir.join("plain.txt").exists());
    // The protocol refuses it too, for a client that does not ask.
    let rpc = forge.rpc("git.merge", json!({"session": id})).await;
    assert_eq!(rpc["error"]["data"]["kind"], "git_marked", "{rpc}");
    // The diff marks them.
    let diff = forge.ok(&["git", "diff", &id]).await;
    assert!(diff.stderr.contains("! .githooks/pre-commit") && diff.stderr.contains("! blob.bin"), "{}", diff.stderr);
    let json = forge.ok(&["--json", "git", "diff", &id]).await.json_lines();
    assert_eq!(json[0]["marked"].as_array().map(Vec::len), Some(4), "{}", json[0]);
    // On the user's word, taken.
    let merged = forge.ok(&["--json", "git", "merge", &id, "--yes"]).await.json_lines();
    assert_eq!(merged[0]["marked"].as_array().map(Vec::len), Some(4), "{}", merged[0]);
    assert!(dir.join(".githooks/pre-commit").exists() && dir.join("plain.txt").exists());
}
