//! Undo gives back exactly what was there, or says first what it cannot:
//! fast turns that fall in one timestamp tick, and changes whose content
//! Forge never recorded (ignored by .gitignore, over 16 MiB, symlinks).

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn call(name: &str, args: Value) -> String {
    forge_tests::mock::tool_call(name, &args)
}

/// A command records the files before it from the scan of the command
/// before, for the files whose size and times did not change: a file a
/// file tool rewrote at the same size in the same timestamp tick must
/// not be taken from that scan (it would be restored to the older
/// content). Three quick turns (no delay in the mock), then undo three
/// times, each with exact contents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_turns_are_undone_to_exact_contents() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "f"]).await;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    // Turns this fast may fall in one timestamp tick; the second makes
    // sure of it: it rewrites a.txt in place at the same size and gives it
    // back the time the first left it with.
    let turns = [
        vec![call("run_command", json!({"command": "printf v1 > a.txt; touch -r a.txt .stamp"}))],
        vec![call("run_command", json!({"command": "printf v2 > a.txt; touch -r .stamp a.txt; echo bee > b.txt"}))],
        vec![
            call("apply_patch", json!({"patch": "LP1\nF b.txt\nR\nbee\n.\nbe!\n.\nEND\n"})),
            call("run_command", json!({"command": "printf v3 > a.txt; rm b.txt; printf c > c.txt"})),
        ],
    ];
    for calls in &turns {
        forge.ok(&["send", "--auto-approve", "-s", "f", &format!("{} go", calls.join(" "))]).await;
    }
    let state = || (read("a.txt"), read("b.txt"), read("c.txt"));
    let s = |v: &str| Some(v.to_string());
    assert_eq!(state(), (s("v3"), None, s("c")));
    forge.ok(&["undo", "f"]).await;
    assert_eq!(state(), (s("v2"), s("bee\n"), None), "the first undo gives back turn 2's files exactly");
    forge.ok(&["undo", "f"]).await;
    assert_eq!(state(), (s("v1"), None, None));
    forge.ok(&["undo", "f"]).await;
    assert_eq!(state(), (None, None, None));
}

/// What a command changed but Forge did not keep the content of: a build
/// directory `.gitignore` keeps out, a file over 16 MiB. Undo names each
/// with the reason and changes nothing until told to go on; a retargeted
/// symlink is restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_names_what_it_cannot_restore_before_it_runs() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let write = |name: &str, data: &[u8]| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, data).unwrap_or_else(|e| panic!("{e}"));
    };
    // A git work tree (for .gitignore), without running git.
    std::fs::create_dir_all(dir.join(".git")).unwrap_or_else(|e| panic!("{e}"));
    write(".gitignore", b"build/\n");
    write("build/out.o", b"object code");
    write("big.bin", &vec![7u8; 17 * 1024 * 1024]);
    write("src.txt", b"source");
    std::os::unix::fs::symlink("one", dir.join("link")).unwrap_or_else(|e| panic!("{e}"));
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "u"]).await;
    let command = "rm -rf build; printf more >> big.bin; ln -sfn two link; printf changed > src.txt";
    forge
        .ok(&["send", "--auto-approve", "-s", "u", &format!("{} go", call("run_command", json!({"command": command})))])
        .await;
    let link = || std::fs::read_link(dir.join("link")).ok().map(|p| p.display().to_string());
    assert_eq!(link().as_deref(), Some("two"));

    // The dry run names them too.
    let dry = forge.ok(&["undo", "u", "--dry-run"]).await;
    assert!(dry.stderr.contains("build/out.o") && dry.stderr.contains(".gitignore"), "{}", dry.stderr);
    assert!(dry.stderr.contains("big.bin") && dry.stderr.contains("16 MiB"), "{}", dry.stderr);

    // Without --yes (and no terminal to ask), nothing moves.
    let refused = forge.ctl(&["undo", "u"]).await;
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    for needle in ["build/out.o", "ignored by .gitignore", "big.bin", "over 16 MiB", "Nothing was changed", "--yes"] {
        assert!(refused.stderr.contains(needle), "{needle}: {}", refused.stderr);
    }
    assert_eq!(link().as_deref(), Some("two"), "nothing was restored");
    assert_eq!(std::fs::read_to_string(dir.join("src.txt")).ok().as_deref(), Some("changed"));
    let json = forge.ctl(&["--json", "undo", "u"]).await.json_lines();
    assert!(json.iter().any(|l| l["error"]["kind"] == "rewind_incomplete"), "{json:?}");

    let done = forge.ok(&["undo", "u", "--yes"]).await;
    assert_eq!(link().as_deref(), Some("one"), "the symlink points where it did");
    assert_eq!(std::fs::read_to_string(dir.join("src.txt")).ok().as_deref(), Some("source"));
    assert!(!dir.join("build").exists(), "the ignored build directory could not come back");
    assert!(done.stderr.contains("cannot restore") && done.stderr.contains("build/out.o"), "{}", done.stderr);
    assert!(done.stdout.contains("2 file(s) restored"), "{}", done.stdout);
}

/// A small random number source for the kill points: seeded from the
/// clock (or `FORGE_TEST_SEED`), printed, so a failure can be replayed.
struct Points(u64);

impl Points {
    fn new() -> Points {
        let seed = std::env::var("FORGE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        eprintln!("kill points seeded with FORGE_TEST_SEED={seed}");
        Points(seed | 1)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

const FILES: usize = 3000;

/// `kill -9` at random points of an undo over 3,000 files, again and
/// again: after each restart the files are all as the undo wanted (and
/// the journal says so: `files_restored`, `recovered` when the restart
/// finished it) or all as they were (the undo had not started: nothing
/// about it is in the journal), never a mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_of_3000_files_killed_at_random_points_is_all_or_nothing() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    for i in 0..FILES {
        std::fs::write(dir.join(format!("f{i}")), "before\n").unwrap_or_else(|e| panic!("{e}"));
    }
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "k"]).await;
    // (before, after) counts of the files.
    let counts = || {
        let read = |i: usize| std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap_or_default();
        let all: Vec<String> = (0..FILES).map(read).collect();
        (all.iter().filter(|t| *t == "before\n").count(), all.iter().filter(|t| *t == "after\n").count())
    };
    let command = format!("for i in $(seq 0 {}); do echo after > f$i; done", FILES - 1);
    let turn = format!("{} go", call("run_command", json!({"command": command})));
    let mut points = Points::new();
    // How long a whole undo takes here, to kill within it.
    let mut whole = std::time::Duration::from_millis(500);
    let mut outcomes = Vec::new();
    for round in 0..6 {
        forge.ok(&["send", "--auto-approve", "-s", "k", &turn]).await;
        assert_eq!(counts(), (0, FILES), "round {round}: the turn changed every file");
        let last_seq =
            forge.ok(&["--json", "session", "show", "k"]).await.json_lines()[0]["last_seq"].as_u64().unwrap_or(0);
        let point = match round {
            // A whole undo first, to time one.
            0 => {
                let started = std::time::Instant::now();
                forge.ok(&["undo", "k"]).await;
                whole = started.elapsed();
                "none".to_string()
            }
            // Inside the restore, at a file chosen at random.
            1 | 2 => {
                let n = 1 + points.below(FILES as u64 - 1);
                forge.terminate().await;
                forge.set_env("FORGE_CRASH_AFTER_RESTORED", &n.to_string());
                forge.start().await;
                let cut = forge.ctl(&["undo", "k"]).await;
                assert_ne!(cut.code, 0, "round {round}: the daemon died after {n} files");
                forge.kill9().await;
                forge.set_env("FORGE_CRASH_AFTER_RESTORED", "");
                format!("after {n} files")
            }
            // From outside, at any moment of the undo.
            _ => {
                let wait = std::time::Duration::from_micros(points.below(whole.as_micros() as u64 * 3 / 2));
                let undo = forge.ctl_cmd(&["undo", "k"]).spawn().unwrap_or_else(|e| panic!("{e}"));
                tokio::time::sleep(wait).await;
                forge.kill9().await;
                let _ = undo.wait_with_output().await;
                format!("at {} ms", wait.as_millis())
            }
        };
        if forge.pid().is_none() {
            forge.start().await;
        }
        let events = forge
            .ok(&["--json", "attach", "k", "--from", &(last_seq + 1).to_string(), "--until-idle"])
            .await
            .json_lines();
        let restored = events.iter().find(|e| e["kind"] == "files_restored");
        let started = events.iter().any(|e| e["kind"] == "rewind_started");
        match counts() {
            (before, 0) if before == FILES => {
                let restored =
                    restored.unwrap_or_else(|| panic!("round {round} ({point}): no files_restored: {events:?}"));
                assert_eq!(restored["files"].as_array().map(Vec::len), Some(FILES));
                outcomes.push(if restored["recovered"] == true {
                    "finished on restart"
                } else {
                    "done before the kill"
                });
            }
            (0, after) if after == FILES => {
                assert!(!started, "round {round} ({point}): an undo that started was not finished: {events:?}");
                outcomes.push("not started");
                // Undo this turn for the next round.
                forge.ok(&["undo", "k"]).await;
            }
            mixed => panic!("round {round} ({point}): a half-restored tree: {mixed:?}"),
        }
        assert_eq!(counts(), (FILES, 0));
    }
    eprintln!("outcomes: {outcomes:?}");
    assert!(outcomes.iter().filter(|o| **o == "finished on restart").count() >= 2, "{outcomes:?}");
}

/// `edit` and `delete_file` are recorded like every file tool: each turn
/// undone gives back the exact bytes, and a file edited elsewhere since
/// the model read it is not edited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_and_delete_file_are_undone_exactly() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    std::fs::write(dir.join("a.rs"), "fn old() {}\nfn keep() {}\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("gone.txt"), "bye\n").unwrap_or_else(|e| panic!("{e}"));
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "e"]).await;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let edit = call("edit", json!({"path": "a.rs", "old_string": "fn old()", "new_string": "fn new()"}));
    let out = forge.ok(&["send", "--auto-approve", "-s", "e", &format!("{edit} rename")]).await;
    assert!(out.stderr.contains("tool edit done"), "{}", out.stderr);
    assert_eq!(read("a.rs").as_deref(), Some("fn new() {}\nfn keep() {}\n"));
    let delete = call("delete_file", json!({"path": "gone.txt"}));
    forge.ok(&["send", "--auto-approve", "-s", "e", &format!("{delete} clean up")]).await;
    assert_eq!(read("gone.txt"), None);

    forge.ok(&["undo", "e"]).await;
    assert_eq!(read("gone.txt").as_deref(), Some("bye\n"));
    forge.ok(&["undo", "e"]).await;
    assert_eq!(read("a.rs").as_deref(), Some("fn old() {}\nfn keep() {}\n"));
}

/// A file written by a file tool in one turn and by a command in the
/// next, at the same size within one timestamp tick: undo gives back what
/// the file tool wrote, not what was there before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_after_file_tools_is_undone_to_what_they_wrote() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "x"]).await;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let turns = [
        vec![call("write_file", json!({"path": "a.txt", "content": "v1"}))],
        vec![
            call("edit", json!({"path": "a.txt", "old_string": "v1", "new_string": "v2"})),
            call("write_file", json!({"path": "b.txt", "content": "b2"})),
        ],
        vec![call("run_command", json!({"command": "printf v3 > a.txt; rm b.txt; printf c > c.txt"}))],
    ];
    for calls in &turns {
        forge.ok(&["send", "--auto-approve", "-s", "x", &format!("{} go", calls.join(" "))]).await;
    }
    let state = || (read("a.txt"), read("b.txt"), read("c.txt"));
    let s = |v: &str| Some(v.to_string());
    assert_eq!(state(), (s("v3"), None, s("c")));
    forge.ok(&["undo", "x"]).await;
    assert_eq!(state(), (s("v2"), s("b2"), None), "undo gives back what turn 2's file tools wrote");
    forge.ok(&["undo", "x"]).await;
    assert_eq!(state(), (s("v1"), None, None));
}

/// The project's files: name → (content, permission bits).
fn files_of(dir: &std::path::Path) -> std::collections::BTreeMap<String, (String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    forge_tests::harness::walk(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let rel = p.strip_prefix(dir).ok()?.display().to_string();
            let meta = std::fs::metadata(&p).ok()?;
            Some((rel, (std::fs::read_to_string(&p).ok()?, meta.permissions().mode() & 0o777)))
        })
        .collect()
}

/// Random turns of file tools and commands over a few files, contents of
/// one size (so that sizes never tell versions apart), as fast as the
/// mock answers; then undo after undo gives back each earlier state byte
/// for byte. Seeded, so a failure can be replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_turns_of_file_tools_and_commands_are_undone_state_by_state() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    for (scan, seeds) in [("0", [7u64, 1234, 99_991]), ("1", [5, 4321, 77_777])] {
        let mut forge = Forge::new(&mock);
        // Recorded from the kernel's notes, then by scans.
        forge.set_env("FORGE_REWIND_SCAN", scan);
        forge.start().await;
        random_turns(&forge, &seeds).await;
    }
}

async fn random_turns(forge: &Forge, seeds: &[u64]) {
    for &seed in seeds {
        let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = project.path().to_path_buf();
        let name = format!("r{seed}");
        forge.new_session(&["--cwd", &dir.display().to_string(), "--name", &name]).await;
        let mut rng = seed;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let names = ["a.txt", "b.txt", "sub/c.txt", "sub/deep/d.txt"];
        let mut states = vec![files_of(&dir)];
        for _ in 0..12 {
            // What the files will hold as the turn's calls run, so that a
            // later call in the turn edits what an earlier one left.
            let mut planned: std::collections::BTreeMap<String, String> =
                states.last().cloned().unwrap_or_default().into_iter().map(|(k, (c, _))| (k, c)).collect();
            let mut calls = Vec::new();
            for _ in 0..=next(3) {
                let file = names[next(names.len() as u64) as usize];
                let content = format!("v{}", next(10));
                let call = match (next(2), planned.get(file).cloned()) {
                    (0, None) => {
                        planned.insert(file.into(), content.clone());
                        call("write_file", json!({"path": file, "content": content}))
                    }
                    (0, Some(old)) if next(2) == 0 && old != content => {
                        planned.insert(file.into(), content.clone());
                        call("edit", json!({"path": file, "old_string": old, "new_string": content}))
                    }
                    (0, Some(_)) => {
                        planned.remove(file);
                        call("delete_file", json!({"path": file}))
                    }
                    _ => {
                        let shell = match next(4) {
                            0 => {
                                planned.remove(file);
                                format!("rm -f {file}")
                            }
                            1 => format!("chmod +x {file} 2>/dev/null; true"),
                            2 => {
                                planned.retain(|k, _| !k.starts_with("sub/"));
                                "rm -rf sub".to_string()
                            }
                            _ => {
                                planned.insert(file.into(), content.clone());
                                format!("mkdir -p $(dirname {file}) && printf {content} > {file}")
                            }
                        };
                        call("run_command", json!({"command": shell}))
                    }
                };
                calls.push(call);
            }
            forge.ok(&["send", "--auto-approve", "-s", &name, &format!("{} go", calls.join(" "))]).await;
            states.push(files_of(&dir));
        }
        let moved = states.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(moved >= 6, "seed {seed}: only {moved} turns changed files");
        states.pop();
        while let Some(expected) = states.pop() {
            forge.ok(&["undo", &name]).await;
            let h = forge.ok(&["history", &name]).await.stdout;
            assert_eq!(files_of(&dir), expected, "seed {seed}, {} undo(s) to go\n{h}", states.len());
        }
    }
}

/// A turn whose command made 60,000 files (a dry run's diff and list of
/// them pass the protocol's 8 MiB message): undo removes them all and its
/// answer stays within the message size (the first files listed, the rest
/// counted). 200,000 files behave alike; they take minutes to make in the
/// sandbox on a slow disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_of_60000_files_answers_within_the_message_size() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "many"]).await;
    let make =
        call("run_command", json!({"command": "mkdir -p gen && cd gen && seq 1 60000 | xargs touch && echo made"}));
    forge.ok(&["send", "--auto-approve", "-s", "many", &format!("{make} go")]).await;
    let count = || std::fs::read_dir(dir.join("gen")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(count(), 60_000);
    let dry = forge.ok(&["--json", "undo", "many", "--dry-run"]).await.json_lines();
    assert!(dry[0]["files_omitted"].as_u64().unwrap_or(0) > 0, "a dry run answers too");
    assert_eq!(count(), 60_000, "and changes nothing");
    let undo = forge.ok(&["--json", "undo", "many"]).await.json_lines();
    let listed = undo[0]["files"].as_array().map(Vec::len).unwrap_or(0);
    let omitted = undo[0]["files_omitted"].as_u64().unwrap_or(0);
    assert_eq!(listed as u64 + omitted, 60_000, "every file counted: {listed} listed, {omitted} more");
    assert_eq!(count(), 0, "every file it made is gone");
    assert!(!dir.join("gen").exists(), "and the directory it made, left empty");
}

/// File names that are not UTF-8 are kept as their bytes: undo deletes
/// the one a command made and gives the one it overwrote its content back,
/// under its own name (never a look-alike with U+FFFD).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_are_not_utf8_are_undone_under_their_own_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let latin1 = |name: &[u8]| dir.join(std::ffi::OsStr::from_bytes(name));
    std::fs::write(latin1(b"caf\xe9.txt"), "mine\n").unwrap_or_else(|e| panic!("{e}"));
    forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "n"]).await;
    forge
        .ok(&[
            "send",
            "--auto-approve",
            "-s",
            "n",
            &format!("{} warm", call("run_command", json!({"command": "true"}))),
        ])
        .await;
    let command = "printf theirs > \"$(printf 'caf\\351.txt')\"; printf new > \"$(printf 'na\\357ve.txt')\"";
    forge
        .ok(&["send", "--auto-approve", "-s", "n", &format!("{} go", call("run_command", json!({"command": command})))])
        .await;
    assert_eq!(std::fs::read_to_string(latin1(b"caf\xe9.txt")).unwrap_or_default(), "theirs");
    assert!(latin1(b"na\xefve.txt").exists());
    let dry = forge.ok(&["undo", "n", "--dry-run"]).await.stdout;
    assert!(dry.contains("caf\u{fffd}.txt") && dry.contains("na\u{fffd}ve.txt"), "shown readably: {dry}");
    forge.ok(&["undo", "n"]).await;
    assert_eq!(std::fs::read_to_string(latin1(b"caf\xe9.txt")).unwrap_or_default(), "mine\n");
    assert!(!latin1(b"na\xefve.txt").exists(), "the file the command made is gone");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains('\u{fffd}') || n == "caf\u{fffd}.txt"), "{names:?}");
    assert_eq!(names.len(), 1, "nothing else was written: {names:?}");
}
