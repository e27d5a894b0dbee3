//! The sandbox escape suite, through the real daemon: the mock model asks
//! the tools to reach a file outside the session's directory every way we
//! know (`..`, absolute paths, a symbolic link in the middle of a path and
//! as its last component, a link swapped in while the tool runs, a hard
//! link, `/proc/self`). Every attempt must be refused, the secret must not
//! appear in anything the model or a client sees, and nothing outside the
//! directory may change.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

const SECRET: &str = "TOPSECRET-4471";

struct Suite {
    _mock: MockServer,
    forge: Forge,
    project: tempfile::TempDir,
    outside: tempfile::TempDir,
    session: String,
}

impl Suite {
    async fn new() -> Suite {
        let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
        let mut forge = Forge::new(&mock);
        // Everything may run without asking: only the sandbox stands in the way.
        forge.write_config("[tools.approval]\nenabled = false\n");
        forge.start().await;
        let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = project.path();
        let o = outside.path();
        let write = |path: PathBuf, text: &str| std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        write(o.join("secret.txt"), &format!("{SECRET}\n"));
        write(p.join("ok.txt"), "inside\n");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, p.join(name)).unwrap_or_else(|e| panic!("{e}"))
        };
        link(o, "link_dir");
        link(&o.join("secret.txt"), "link_file");
        link(Path::new("/proc/self"), "proc");
        std::fs::hard_link(o.join("secret.txt"), p.join("hard.txt")).unwrap_or_else(|e| panic!("{e}"));
        let cwd = p.display().to_string();
        let session = forge.new_session(&["--cwd", &cwd, "--name", "escape"]).await;
        Suite { _mock: mock, forge, project, outside, session }
    }

    /// One turn in which the model makes `calls` (name, arguments); returns
    /// the tool results it was given.
    async fn turn(&self, calls: &[(&str, Value)]) -> Vec<Value> {
        let mut msg = String::new();
        for (name, args) in calls {
            // The mock reads whitespace-separated words: spaces (only ever
            // inside JSON strings here) travel as `\u0020`.
            let args = args.to_string().replace(' ', "\\u0020");
            msg.push_str(&format!("mock:tool={name}:{args} "));
        }
        msg.push_str("go");
        let before = self.forge.ok(&["--json", "history", &self.session]).await.json_lines().len();
        let out = self.forge.ok(&["send", "-s", &self.session, &msg]).await;
        assert!(!out.stdout.contains(SECRET), "the secret reached the client: {}", out.stdout);
        let history = self.forge.ok(&["--json", "history", &self.session]).await.json_lines();
        let results: Vec<Value> = history[before..].iter().filter(|m| m["role"] == "tool").cloned().collect();
        assert_eq!(results.len(), calls.len(), "one result per call: {results:?}");
        results
    }

    fn outside_untouched(&self) {
        let names: Vec<String> = std::fs::read_dir(self.outside.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert_eq!(names, vec!["secret.txt".to_string()], "nothing new outside the project");
        let text = std::fs::read_to_string(self.outside.path().join("secret.txt")).unwrap_or_default();
        assert_eq!(text, format!("{SECRET}\n"), "the outside file is unchanged");
    }
}

/// Every result is a refusal that says why, and none carries the secret.
fn all_denied(results: &[Value]) {
    for r in results {
        let text = r["text"].as_str().unwrap_or_default();
        assert_eq!(r["tool_result"]["is_error"], true, "should have been refused: {r}");
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
        let says_why = ["denied", "outside", "symbolic link", "hard link", "`..`", "absolute"]
            .iter()
            .any(|w| text.to_lowercase().contains(&w.to_lowercase()));
        assert!(says_why, "a refusal should name its rule: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_reads_or_writes_outside_the_session_directory() {
    let s = Suite::new().await;
    let o = s.outside.path().display().to_string();
    let oname = s.outside.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();

    // Reads.
    let reads = s
        .turn(&[
            ("read_file", json!({"path": format!("../{oname}/secret.txt")})),
            ("read_file", json!({"path": format!("{o}/secret.txt")})),
            ("read_file", json!({"path": "link_dir/secret.txt"})),
            ("read_file", json!({"path": "link_file"})),
            ("read_file", json!({"path": "hard.txt"})),
            ("read_file", json!({"path": format!("/proc/self/root{o}/secret.txt")})),
            ("read_file", json!({"path": format!("proc/root{o}/secret.txt")})),
            ("read_file", json!({"path": "proc/cwd/ok.txt"})),
        ])
        .await;
    all_denied(&reads);

    // Searches and listings do not follow links out or read hard links.
    let found = s
        .turn(&[
            ("search", json!({"pattern": SECRET})),
            ("search", json!({"pattern": SECRET, "path": "link_dir"})),
            ("glob", json!({"pattern": "**/secret.txt"})),
        ])
        .await;
    assert!(!found[0]["text"].as_str().unwrap_or_default().contains(SECRET), "{}", found[0]);
    all_denied(&found[1..2]);
    assert!(!found[2]["text"].as_str().unwrap_or_default().contains("secret.txt"), "{}", found[2]);

    // Writes and patches.
    let patch = |file: &str| json!({"patch": format!("LP1\nF {file}\nR\n{SECRET}\n.\npwned\n.\nEND\n")});
    let writes = s
        .turn(&[
            ("write_file", json!({"path": "link_dir/new.txt", "content": "x"})),
            ("write_file", json!({"path": format!("../{oname}/new.txt"), "content": "x"})),
            ("write_file", json!({"path": format!("{o}/new.txt"), "content": "x"})),
            ("write_file", json!({"path": "link_file", "content": "x"})),
            ("apply_patch", patch("link_file")),
            ("apply_patch", patch("hard.txt")),
            ("apply_patch", patch("link_dir/secret.txt")),
        ])
        .await;
    all_denied(&writes);
    s.outside_untouched();

    // The control: an honest read inside works.
    let ok = s.turn(&[("read_file", json!({"path": "ok.txt"}))]).await;
    assert_eq!(ok[0]["tool_result"]["is_error"], false, "{}", ok[0]);
    assert_eq!(ok[0]["text"], "inside\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_swapped_in_while_tools_run_never_leads_outside() {
    let s = Suite::new().await;
    let flip = s.project.path().join("flip");
    let decoy = s.project.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(decoy.join("secret.txt"), "harmless\n").unwrap_or_else(|e| panic!("{e}"));
    // `flip` keeps changing between a real directory and a link outside.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, flip, outside) = (stop.clone(), flip.clone(), s.outside.path().to_path_buf());
        let staging = s.project.path().join(".flip-staging");
        std::thread::spawn(move || {
            let mut as_link = false;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&staging).or_else(|_| std::fs::remove_dir_all(&staging));
                let made = if as_link {
                    std::os::unix::fs::symlink(&outside, &staging)
                } else {
                    std::fs::create_dir(&staging)
                        .and_then(|()| std::fs::write(staging.join("secret.txt"), "harmless\n"))
                };
                if made.is_ok() {
                    // rename() swaps atomically, but not a directory over a
                    // link or back: clear the old one first.
                    let _ = std::fs::remove_file(&flip).or_else(|_| std::fs::remove_dir_all(&flip));
                    let _ = std::fs::rename(&staging, &flip);
                }
                as_link = !as_link;
            }
        })
    };
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        let calls: Vec<(&str, Value)> = (0..4)
            .map(|_| ("read_file", json!({"path": "flip/secret.txt"})))
            // Appends to whatever file it reaches: through a link, that
            // would change the outside file, which is checked below.
            .chain([("apply_patch", json!({"patch": "LP1\nF flip/secret.txt\nT\npwned\n.\nEND\n"}))])
            .collect();
        for r in s.turn(&calls).await {
            let text = r["text"].as_str().unwrap_or_default().to_string();
            assert!(!text.contains(SECRET), "the secret leaked through a swapped link: {text}");
            outcomes.push(text);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = flipper.join();
    s.outside_untouched();
    assert!(!outcomes.is_empty());
}
