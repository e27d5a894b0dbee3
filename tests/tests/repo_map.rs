//! Repository maps through the real daemon (`[context] repo_summaries`):
//! each file with a one-line summary the model wrote, built in the
//! background, given to the model in the system prompt, summaries kept by
//! content so only changed files are asked about again, and their cost
//! counted.

use std::path::Path;
use std::time::{Duration, Instant};

use forge_tests::harness::{Forge, git};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::Value;

fn project(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    let write = |p: &str, bytes: &[u8]| {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap_or(dir)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{e}"));
    };
    write("README.md", b"# Demo project\n\nIt greets.\n");
    write("src/main.rs", b"fn main() { println!(\"hello\"); }\n");
    write("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary");
    write(".gitignore", b"target/\n");
    write("target/debug/junk.txt", b"build output\n");
}

/// The map of `id`, once its build is `ready` (asked again as it builds).
async fn ready_map(forge: &Forge, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c: Value = serde_json::from_str(forge.ok(&["--json", "context", id, "--repo"]).await.stdout.trim())
            .unwrap_or_default();
        let map = c["repo_map"].clone();
        if map["state"] == "ready" {
            return map;
        }
        assert!(Instant::now() < deadline, "the map was not ready in 30 s: {map}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn summary_requests(mock: &MockServer) -> Vec<String> {
    mock.requests().iter().map(|r| r.body.to_string()).filter(|b| b.contains("You summarize files for a map")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_gets_a_map_of_the_repository_and_only_changed_files_are_summarized_again() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[context]\nrepo_summaries = true\n");
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    project(repo.path());

    let id = forge.new_session(&["--cwd", &repo.path().display().to_string()]).await;
    let map = ready_map(&forge, &id).await;
    let text = map["text"].as_str().unwrap_or_default().to_string();
    assert!(text.contains("- README.md: starts with \"# Demo project\""), "{text}");
    assert!(text.contains("- src/main.rs: starts with \"fn main()"), "{text}");
    assert!(text.contains("- logo.png: a binary file"), "a binary file is listed, not sent: {text}");
    assert!(!text.contains("junk.txt"), "ignored files stay out: {text}");
    assert_eq!(map["files"], 3, "dot files and ignored ones are left out: {map}");
    let asked = summary_requests(&mock);
    assert_eq!(asked.len(), 1, "one request for the two text files");
    assert!(!asked[0].contains("binary"), "the binary file is not sent");
    assert!(asked[0].contains("claude-haiku-4-5"), "a small model of the session's provider writes them");

    // The next message carries the map in the system prompt.
    forge.ok(&["send", "-s", &id, "what is here?"]).await;
    let last = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(last.contains("# Repository map") && last.contains("README.md: starts with"), "{last}");
    let shown = forge.ok(&["context", &id, "--repo"]).await;
    assert!(shown.stdout.contains("- README.md: starts with"), "{}", shown.stdout);
    assert!(shown.stderr.contains("ready"), "{}", shown.stderr);

    // A copy with one file changed: only that file is asked about.
    let copy = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    project(copy.path());
    std::fs::write(copy.path().join("src/main.rs"), "// changed\nfn main() {}\n").unwrap_or_else(|e| panic!("{e}"));
    let other = forge.new_session(&["--cwd", &copy.path().display().to_string()]).await;
    let map = ready_map(&forge, &other).await;
    assert!(map["text"].as_str().unwrap_or_default().contains("src/main.rs: starts with \"// changed\""), "{map}");
    let asked = summary_requests(&mock);
    assert_eq!(asked.len(), 2, "one more request");
    assert!(asked[1].contains("src/main.rs") && !asked[1].contains("README.md"), "only the changed file: {}", asked[1]);

    // What the summaries cost is counted in the usage report.
    let usage = forge.ok(&["--json", "usage", &id]).await.stdout;
    let usage: Value = serde_json::from_str(usage.trim()).unwrap_or_default();
    let requests = usage["total"]["responses"].as_u64().unwrap_or(0);
    assert_eq!(requests, 2, "the answer and the summaries: {usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_are_off_unless_configured_and_context_says_how_to_turn_them_on() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    project(repo.path());
    let id = forge.new_session(&["--cwd", &repo.path().display().to_string()]).await;
    forge.ok(&["send", "-s", &id, "hi"]).await;
    let shown = forge.ok(&["context", &id, "--repo"]).await;
    assert!(shown.stderr.contains("repo_summaries = true"), "{}", shown.stderr);
    assert!(summary_requests(&mock).is_empty());
    let last = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(!last.contains("# Repository map"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_sessions_map_names_the_repository_not_its_worktree() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[context]\nrepo_summaries = true\n");
    forge.start().await;
    let holder = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let repo = holder.path().join("demo-repo");
    std::fs::create_dir_all(&repo).unwrap_or_else(|e| panic!("{e}"));
    project(&repo);
    git(&repo, &["-c", "user.email=u@example.com", "-c", "user.name=U", "add", "."]);
    git(&repo, &["-c", "user.email=u@example.com", "-c", "user.name=U", "commit", "-q", "-m", "start"]);
    let id = forge.new_session(&["--git", "--cwd", &repo.display().to_string()]).await;
    let map = ready_map(&forge, &id).await;
    let text = map["text"].as_str().unwrap_or_default();
    assert!(text.contains("The files of demo-repo") && !text.contains(&id), "{text}");
}
