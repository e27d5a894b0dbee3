//! The system prompt, as a user of the real forged sees it: every request
//! carries it, the same bytes on every turn, and `forgectl context
//! --system` shows exactly what was sent.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};

async fn mock() -> MockServer {
    MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"))
}

/// Codex CLI's first request is 39.7 KB; Forge's, with every built-in tool
/// and the prompt, is at most a third of it.
const FIRST_REQUEST_BUDGET: usize = 39_700 / 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_the_same_system_prompt_and_context_shows_it() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(project.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.path().join(".git/HEAD"), "ref: refs/heads/trunk\n").unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let id = forge.new_session(&["--cwd", &cwd]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=3 one"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=3 two"]).await;

    let reqs = mock.requests();
    let system = reqs[0].body["system"][0]["text"].as_str().unwrap_or_default().to_string();
    assert!(system.contains("You are Forge, a coding agent"), "{system}");
    assert!(system.contains(&format!("Working directory: {cwd}")), "{system}");
    assert!(system.contains("on branch trunk"), "{system}");
    assert!(system.contains("wait for the user's approval: ") && system.contains("write_file"), "{system}");
    assert_eq!(reqs[1].body["system"], reqs[0].body["system"], "byte-stable across turns, cache mark included");
    assert_eq!(reqs[1].body["tools"], reqs[0].body["tools"], "so are the tool definitions");

    let shown = forge.ok(&["context", &id, "--system"]).await.stdout;
    assert_eq!(shown, system, "forgectl context --system shows what was sent");

    let first = serde_json::to_vec(&reqs[0].body).unwrap_or_default().len();
    assert!(first <= FIRST_REQUEST_BUDGET, "the first request is {first} bytes (budget {FIRST_REQUEST_BUDGET})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_can_be_replaced_or_extended_and_a_missing_file_stops_the_daemon() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    std::fs::write(forge.data_dir().join("team-prompt.md"), "You review code in {{cwd}}.\n")
        .unwrap_or_else(|e| panic!("{e}"));
    forge.write_config("[app]\nsystem_prompt_file = \"team-prompt.md\"\nsystem_prompt_append = \"Answer briefly.\"\n");
    forge.start().await;
    let id = forge.new_session(&["--cwd", "/", "--allow-broad-root"]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2 hi"]).await;
    let system = mock.requests()[0].body["system"][0]["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(system, "You review code in /.\n\nAnswer briefly.\n");
    forge.terminate().await;

    forge.write_config("[app]\nsystem_prompt_file = \"gone.md\"\n");
    let out = forge.spawn_daemon().wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gone.md") && err.contains("system_prompt_file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_instructions_go_in_the_prompt_and_are_read_again_when_they_change() {
    let mock = mock().await;
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(repo.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
    let sub = repo.path().join("app");
    std::fs::create_dir(&sub).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(repo.path().join("AGENTS.md"), "Always run `make check`.\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(sub.join("AGENTS.md"), "In app/, prefer small functions.\n").unwrap_or_else(|e| panic!("{e}"));
    let cwd = sub.display().to_string();
    let id = forge.new_session(&["--cwd", &cwd]).await;
    forge.ok(&["send", "-s", &id, "mock:tokens=2 one"]).await;
    let system = |i: usize| mock.requests()[i].body["system"][0]["text"].as_str().unwrap_or_default().to_string();
    let first = system(0);
    let (root, near) = (first.find("make check"), first.find("small functions"));
    assert!(root.is_some() && near.is_some() && root < near, "both, the nearest last: {first}");

    let ctx = forge.ok(&["context", &id]).await.stdout;
    assert!(ctx.contains(&sub.join("AGENTS.md").display().to_string()), "{ctx}");

    // Unchanged: the same bytes (the cache keeps hitting). Changed: the
    // next turn has the new text.
    forge.ok(&["send", "-s", &id, "mock:tokens=2 two"]).await;
    assert_eq!(system(1), first);
    std::fs::write(sub.join("AGENTS.md"), "In app/, write docs first.\n").unwrap_or_else(|e| panic!("{e}"));
    forge.ok(&["send", "-s", &id, "mock:tokens=2 three"]).await;
    let third = system(2);
    assert!(third.contains("write docs first") && !third.contains("small functions"), "{third}");
}
