//! A git session's commands write files that run something later (a hook
//! in the project's hooks directory, `.gitattributes`, `.envrc`, a link
//! out of the repository in their place): the turn's commit holds them
//! until a user has seen their diff. Denied, they are put back as the
//! branch had them and never reach it; approved, they are committed.

use std::path::Path;

use forge_tests::harness::{Forge, git};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::json;

async fn started() -> (MockServer, Forge) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    (mock, forge)
}

/// The paths of the session branch's tip.
fn tip_files(repo: &Path, id: &str) -> String {
    git(repo, &["ls-tree", "-r", "--name-only", &format!("forge/session/{id}")])
}

/// Sends `command` as the model's one call (run confined without
/// asking) and waits for the turn's commit to ask about held files: their
/// approval, as listed.
async fn command_then_held(forge: &Forge, id: &str, command: &str) -> serde_json::Value {
    let c = tool_call("run_command", &json!({"command": command}));
    forge.ok(&["send", "--no-wait", "-s", id, &format!("{c} set it up")]).await;
    for _ in 0..400 {
        let list = forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(a) = list.into_iter().find(|a| a["session_id"] == id) {
            assert_eq!(a["calls"][0]["name"], "commit_run_later", "{a}");
            return a;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the turn's commit never asked about the files that run later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_a_command_wrote_that_run_later_reach_the_branch_only_on_a_users_word() {
    let (_mock, forge) = started().await;
    let repo = forge_tests::harness::git_repository(&[("a.txt", "a\n")]);
    let dir = repo.path();
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let secret = home.path().join("id_ed25519");
    std::fs::write(&secret, "canary\n").unwrap_or_else(|e| panic!("{e}"));
    let command = format!(
        "mkdir -p .githooks && printf '#!/bin/sh\\ncat ~/.ssh/id_ed25519\\n' > .githooks/pre-commit \
         && echo 'use nix' > .envrc && ln -s {} .gitattributes && echo plain > plain.txt",
        secret.display()
    );
    let asked = command_then_held(&forge, &id, &command).await;
    let calls = asked["calls"].as_array().cloned().unwrap_or_default();
    let paths: Vec<&str> = calls.iter().filter_map(|c| c["call_id"].as_str()).collect();
    assert_eq!(paths, ["run_later:.envrc", "run_later:.gitattributes", "run_later:.githooks/pre-commit"]);
    assert!(calls[2]["summary"].as_str().is_some_and(|s| s.contains("+cat ~/.ssh/id_ed25519")), "{asked}");
    // Nothing is on the branch while it waits.
    assert!(!tip_files(dir, &id).contains("plain.txt"));
    let shown = forge.ok(&["approvals"]).await.stdout;
    assert!(shown.contains(".githooks/pre-commit"), "{shown}");

    // Denied: put back (removed, as the branch never had them), the
    // rest committed, and the secret untouched.
    forge.ok(&["deny", &id]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let files = tip_files(dir, &id);
    assert!(files.contains("plain.txt"), "{files}");
    for held in [".githooks/pre-commit", ".envrc", ".gitattributes"] {
        assert!(!files.contains(held), "{held} reached the branch: {files}");
    }
    let info = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    let worktree = Path::new(info[0]["cwd"].as_str().unwrap_or_default()).to_path_buf();
    assert!(!worktree.join(".githooks/pre-commit").exists() && !worktree.join(".envrc").exists());
    assert!(std::fs::symlink_metadata(worktree.join(".gitattributes")).is_err());
    assert_eq!(std::fs::read_to_string(&secret).unwrap_or_default(), "canary\n");
    let merged = forge.ok(&["--json", "git", "merge", &id]).await.json_lines();
    assert_eq!(merged[0]["marked"].as_array().map_or(0, Vec::len), 0, "nothing to mark, nothing asked: {}", merged[0]);
    assert!(dir.join("plain.txt").exists() && !dir.join(".envrc").exists());

    // Approved (the first only): committed; the other put back.
    let asked = command_then_held(&forge, &id, "echo 'use flake' > .envrc && echo x > .mcp.json").await;
    assert_eq!(asked["calls"].as_array().map(Vec::len), Some(2), "{asked}");
    forge.ok(&["approve", &id, "1"]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let files = tip_files(dir, &id);
    assert!(files.contains(".envrc") && !files.contains(".mcp.json"), "{files}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_tools_ask_before_writing_the_repositorys_own_hooks_directory() {
    let (_mock, forge) = started().await;
    let repo = forge_tests::harness::git_repository(&[("a.txt", "a\n")]);
    let dir = repo.path();
    git(dir, &["config", "core.hooksPath", "./scripts/hooks"]);
    let id = forge.new_session(&["--git", "--cwd", &dir.display().to_string()]).await;
    // An edit elsewhere in the worktree runs without asking…
    let c = tool_call("write_file", &json!({"path": "scripts/build.sh", "content": "make\n"}));
    forge.ok(&["send", "-s", &id, &format!("{c} write it")]).await;
    // …one in the hooks directory the repository names asks first.
    let c = tool_call("write_file", &json!({"path": "scripts/hooks/pre-commit", "content": "#!/bin/sh\n"}));
    forge.ok(&["send", "--no-wait", "-s", &id, &format!("{c} write the hook")]).await;
    let waiting = forge.wait_for_session(&id, "asking", |s| s["state"] == "awaiting_approval").await;
    assert_eq!(waiting["state"], "awaiting_approval");
    let list = forge.ok(&["--json", "approvals"]).await.json_lines();
    let asked = list.iter().find(|a| a["session_id"] == id).cloned().unwrap_or_default();
    assert_eq!(asked["calls"][0]["name"], "write_file", "{asked}");
    forge.ok(&["deny", &id]).await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    assert!(!tip_files(dir, &id).contains("scripts/hooks/pre-commit"));
    assert!(tip_files(dir, &id).contains("scripts/build.sh"));

    // A hook that lands there by any other way (a helper agent's command,
    // a program of the user's) waits for a word at the next commit too.
    let info = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    let worktree = Path::new(info[0]["cwd"].as_str().unwrap_or_default()).to_path_buf();
    std::fs::create_dir_all(worktree.join("scripts/hooks")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(worktree.join("scripts/hooks/pre-push"), "#!/bin/sh\nexit 0\n").unwrap_or_else(|e| panic!("{e}"));
    forge.ok(&["send", "--no-wait", "-s", &id, "nothing to do"]).await;
    for _ in 0..400 {
        let list = forge.ok(&["--json", "approvals"]).await.json_lines();
        if let Some(a) = list.iter().find(|a| a["session_id"] == id) {
            assert_eq!(a["calls"][0]["call_id"], "run_later:scripts/hooks/pre-push", "{a}");
            forge.ok(&["deny", &id]).await;
            forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
            assert!(!worktree.join("scripts/hooks/pre-push").exists(), "put back: the branch never had it");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the commit never asked about the hook");
}
