//! The store's sizes and bound: `forgectl store` shows what rewind and
//! images weigh per session, `store gc` collects what no record needs and
//! evicts the oldest rewind content past `[store] max_blob_mb`, and undo
//! then names the file it can no longer restore.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn command(text: &str) -> String {
    format!("{} go", forge_tests::mock::tool_call("run_command", &json!({ "command": text })))
}

async fn status(forge: &Forge) -> Value {
    forge.ok(&["--json", "store"]).await.json_lines().into_iter().next().unwrap_or_default()
}

fn session_bytes(status: &Value, name: &str) -> Option<u64> {
    status["sessions"].as_array()?.iter().find(|s| s["name"] == name)?["rewind_bytes"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_shows_sizes_gc_frees_a_removed_session_and_the_bound_evicts_the_oldest() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[store]\nmax_blob_mb = 1\n");
    forge.start().await;
    let a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    forge.new_session(&["--cwd", &a.path().display().to_string(), "--name", "a"]).await;
    forge.new_session(&["--cwd", &b.path().display().to_string(), "--name", "b"]).await;

    // Two versions of a 600 KB file in a, one 300 KB file in b.
    forge.ok(&["send", "--auto-approve", "-s", "a", &command("yes one | head -c 600000 > f.txt")]).await;
    forge.ok(&["send", "--auto-approve", "-s", "a", &command("yes two | head -c 600000 > f.txt")]).await;
    forge.ok(&["send", "--auto-approve", "-s", "b", &command("yes bee | head -c 300000 > g.txt")]).await;
    let s = status(&forge).await;
    assert!(s["blob_bytes"].as_u64() >= Some(1_500_000), "{s}");
    assert_eq!(s["max_blob_bytes"], 1024 * 1024);
    assert!(session_bytes(&s, "a") >= Some(1_200_000), "{s}");
    assert!(session_bytes(&s, "b") >= Some(300_000), "{s}");
    let text = forge.ok(&["store"]).await.stdout;
    for needle in ["database:", "blobs:", "rewind:", "images:", "SESSION", "a ("] {
        assert!(text.contains(needle), "{needle}: {text}");
    }

    // Removing b frees its content at the next collection.
    forge.ok(&["session", "rm", "b"]).await;
    let gc = forge.ok(&["--json", "store", "gc"]).await.json_lines().into_iter().next().unwrap_or_default();
    assert!(gc["collected_bytes"].as_u64() >= Some(300_000), "{gc}");
    assert_eq!(session_bytes(&gc["status"], "b"), None, "{gc}");
    // And a's two versions are past the bound: the oldest went.
    assert!(gc["evicted_blobs"].as_u64() >= Some(1), "{gc}");
    assert!(gc["status"]["blob_bytes"].as_u64() <= Some(1024 * 1024), "{gc}");
    assert!(gc["status"]["evicted"].as_u64() >= Some(1), "{gc}");

    // Undo of the second command cannot bring back the first version.
    let undo = forge.ctl(&["undo", "a", "--yes"]).await;
    let all = format!("{}{}", undo.stdout, undo.stderr);
    assert!(all.contains("f.txt") && all.contains("max_blob_mb"), "{all}");
    let f = std::fs::read_to_string(a.path().join("f.txt")).unwrap_or_default();
    assert!(f.starts_with("two"), "the file is left as it is, not half-restored");
}

/// In a git repository the content of unchanged tracked files is git's,
/// kept by a ref of Forge's; the ref goes with the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repositorys_ref_for_rewind_goes_with_the_session() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@localhost")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@localhost")
            .output()
            .unwrap_or_else(|e| panic!("git: {e}"));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    std::fs::write(repo.path().join("tracked.txt"), "committed\n").unwrap_or_else(|e| panic!("{e}"));
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    forge.new_session(&["--cwd", &repo.path().display().to_string(), "--name", "g"]).await;
    forge.ok(&["send", "--auto-approve", "-s", "g", &command("printf edited > tracked.txt")]).await;
    assert!(git(&["for-each-ref", "refs/forge/rewind/"]).contains("refs/forge/rewind/"));
    forge.ok(&["undo", "g"]).await;
    assert_eq!(std::fs::read_to_string(repo.path().join("tracked.txt")).ok().as_deref(), Some("committed\n"));
    forge.ok(&["session", "rm", "g"]).await;
    assert_eq!(git(&["for-each-ref", "refs/forge/rewind/"]), "", "the ref went with the session");
}
