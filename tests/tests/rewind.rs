//! Rewind: files follow the conversation. Undo, rewind, checkout with
//! `--restore-files`, conflicts with files changed by hand, dry runs.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn call(name: &str, args: Value) -> String {
    forge_tests::mock::tool_call(name, &args)
}

async fn history(forge: &Forge, session: &str) -> Vec<Value> {
    forge.ok(&["--json", "history", session]).await.json_lines()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_rewind_and_checkout_move_the_files_with_the_conversation() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let id = forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "r"]).await;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();

    let turns = [
        call("write_file", json!({"path": "a.txt", "content": "one\n"})),
        call("apply_patch", json!({"patch": "LP1\nF a.txt\nR\none\n.\ntwo\n.\nEND\n"})),
        call("write_file", json!({"path": "sub/b.txt", "content": "bee\n"})),
    ];
    for t in &turns {
        forge.ok(&["send", "--auto-approve", "-s", "r", &format!("{t} go")]).await;
    }
    let h = history(&forge, &id).await;
    assert_eq!((read("a.txt").as_deref(), read("sub/b.txt").as_deref()), (Some("two\n"), Some("bee\n")), "{h:#?}");
    let end = history(&forge, &id).await.last().map(|m| m["id"].clone()).unwrap_or_default();
    let end = end.as_str().unwrap_or_default().to_string();

    // The dry run shows the diff and changes nothing.
    let dry = forge.ok(&["undo", "r", "--dry-run"]).await.stdout;
    assert!(dry.contains("--- a/") && dry.contains("+++ /dev/null") && dry.contains("-bee"), "{dry}");
    assert_eq!(read("sub/b.txt").as_deref(), Some("bee\n"));

    let undo = forge.ok(&["undo", "r"]).await.stdout;
    assert!(undo.contains("delete") && undo.contains("b.txt"), "{undo}");
    assert_eq!(read("sub/b.txt"), None, "the file the last turn created is gone");
    forge.ok(&["undo", "r"]).await;
    assert_eq!(read("a.txt").as_deref(), Some("one\n"), "the patch is undone");
    assert_eq!(history(&forge, &id).await.len(), 4, "the conversation went back two turns");

    // Back to the end of the first branch, files included.
    forge.ok(&["checkout", "r", &end, "--restore-files"]).await;
    assert_eq!((read("a.txt").as_deref(), read("sub/b.txt").as_deref()), (Some("two\n"), Some("bee\n")));

    // A file changed by hand since is not overwritten.
    std::fs::write(dir.join("a.txt"), "edited by hand\n").unwrap_or_else(|e| panic!("{e}"));
    // Undoing the last turn touches only what it changed.
    forge.ok(&["undo", "r"]).await;
    assert_eq!(read("sub/b.txt"), None);
    assert_eq!(read("a.txt").as_deref(), Some("edited by hand\n"));
    // Going back past the turns that changed a.txt is refused.
    let refused = forge.ctl(&["rewind", "r", history(&forge, &id).await[1]["id"].as_str().unwrap_or_default()]).await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("changed outside Forge") && refused.stderr.contains("a.txt"), "{}", refused.stderr);
    assert_eq!(read("a.txt").as_deref(), Some("edited by hand\n"), "left untouched");
    assert_eq!(history(&forge, &id).await.len(), 8, "nor did the conversation move");
    // --force overwrites it, keeping what it held.
    let first_answer = history(&forge, &id).await[1]["id"].as_str().unwrap_or_default().to_string();
    let forced = forge.ok(&["--json", "rewind", "r", &first_answer, "--force"]).await.json_lines();
    let files = forced[0]["files"].as_array().cloned().unwrap_or_default();
    let a =
        files.iter().find(|f| f["path"].as_str().is_some_and(|p| p.ends_with("a.txt"))).cloned().unwrap_or_default();
    assert_eq!(a["conflict"], true, "{forced:?}");
    assert!(a["overwritten"].is_string(), "{a}");
    assert_eq!(read("a.txt"), None, "before the first turn's tool ran, a.txt did not exist");
    assert_eq!(read("sub/b.txt"), None);
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    assert!(events.iter().any(|e| e["kind"] == "files_restored"));

    // The rewind itself is rewound: back at the end, the hand edit it
    // overwrote comes back with the rest.
    forge.ok(&["checkout", "r", &end, "--restore-files"]).await;
    assert_eq!((read("a.txt").as_deref(), read("sub/b.txt").as_deref()), (Some("edited by hand\n"), Some("bee\n")));

    // Edited by hand again, overwritten again from the same place: going
    // back brings the newest edit.
    std::fs::write(dir.join("a.txt"), "edited twice\n").unwrap_or_else(|e| panic!("{e}"));
    forge.ok(&["undo", "r"]).await;
    forge.ok(&["rewind", "r", &first_answer, "--force"]).await;
    assert_eq!(read("a.txt"), None);
    forge.ok(&["checkout", "r", &end, "--restore-files"]).await;
    assert_eq!(read("a.txt").as_deref(), Some("edited twice\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_creates_edits_and_deletes_files_is_undone_byte_for_byte() {
    use std::os::unix::fs::PermissionsExt;
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    std::fs::write(dir.join("keep.sh"), "#!/bin/sh\necho hi\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(dir.join("keep.sh"), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("old.txt"), "old\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("edit.bin"), [0u8, 159, 146, 150]).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &dir.display().to_string()]).await;
    let command =
        "printf new > made.txt; chmod 600 made.txt; rm old.txt; printf '\\377' >> edit.bin; chmod 700 keep.sh";
    forge
        .ok(&["send", "--auto-approve", "-s", &id, &format!("{} go", call("run_command", json!({"command": command})))])
        .await;
    assert!(dir.join("made.txt").exists() && !dir.join("old.txt").exists());

    forge.ok(&["undo", &id]).await;
    assert!(!dir.join("made.txt").exists(), "created by the command: removed");
    assert_eq!(std::fs::read(dir.join("old.txt")).ok(), Some(b"old\n".to_vec()), "deleted by it: back");
    assert_eq!(std::fs::read(dir.join("edit.bin")).ok(), Some(vec![0u8, 159, 146, 150]), "byte for byte");
    let mode = std::fs::metadata(dir.join("keep.sh")).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode, 0o755, "its mode too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_with_restore_files_starts_from_that_nodes_files() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let id = forge.new_session(&["--cwd", &dir.display().to_string()]).await;
    for (name, content) in [("a.txt", "a\n"), ("b.txt", "b\n")] {
        let t = call("write_file", json!({"path": name, "content": content}));
        forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{t} go")]).await;
    }
    // The end of the first turn: after a.txt, before b.txt.
    let h = history(&forge, &id).await;
    let first_end = h[3]["id"].as_str().unwrap_or_default().to_string();
    let fork = forge.ok(&["--json", "fork", &id, &first_end, "--restore-files"]).await.json_lines();
    assert_eq!(fork[0]["message_count"], 4, "{fork:?}");
    assert!(dir.join("a.txt").exists() && !dir.join("b.txt").exists());
    let fork_id = fork[0]["id"].as_str().unwrap_or_default().to_string();
    let events = forge.ok(&["--json", "attach", &fork_id, "--until-idle"]).await.json_lines();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["session_created", "session_forked", "files_restored"]);
    // The origin's history is untouched.
    assert_eq!(history(&forge, &id).await.len(), 8);

    // Removing the origin keeps what the shared turn's call changed: the
    // fork still undoes it.
    forge.ok(&["session", "rm", &id]).await;
    let undo = forge.ok(&["undo", &fork_id]).await.stdout;
    assert!(undo.contains("a.txt"), "{undo}");
    assert!(!dir.join("a.txt").exists(), "the shared turn's file is undone in the fork");
}

/// The daemon dies (SIGKILL) after write_file and apply_patch changed
/// their files and before their results were recorded: after the restart
/// the calls are answered as interrupted, and the records made before they
/// ran take the files back exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_a_change_and_its_result_leaves_a_record_that_rewind_uses() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let id = forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "c"]).await;
    let first = call("write_file", json!({"path": "a.txt", "content": "kept\n"}));
    forge.ok(&["send", "--auto-approve", "-s", "c", &format!("{first} go")]).await;

    for (tool, turn, expected) in [
        ("write_file", call("write_file", json!({"path": "new.txt", "content": "lost\n"})), "new.txt"),
        ("apply_patch", call("apply_patch", json!({"patch": "LP1\nF a.txt\nR\nkept\n.\nchanged\n.\nEND\n"})), "a.txt"),
    ] {
        forge.terminate().await;
        forge.set_env("FORGE_CRASH_AFTER_TOOL", tool);
        forge.start().await;
        let r = forge.ctl(&["send", "--auto-approve", "-s", "c", &format!("{turn} go")]).await;
        assert_ne!(r.code, 0, "the daemon died mid-turn: {}", r.stdout);
        forge.kill9().await;
        assert!(dir.join(expected).exists(), "{tool} did its work before the crash");

        forge.set_env("FORGE_CRASH_AFTER_TOOL", "");
        forge.start().await;
        let recovery = forge.ok(&["--json", "recover", "c", "--resume"]).await.json_lines();
        assert!(recovery[0]["not_rerun"].as_array().is_some_and(|c| c.len() == 1), "not run again: {recovery:?}");
        forge.ok(&["attach", "c", "--from", "live", "--until-idle"]).await;
        let undo = forge.ok(&["--json", "undo", "c"]).await.json_lines();
        let files = undo[0]["files"].as_array().cloned().unwrap_or_default();
        assert!(files.iter().any(|f| f["path"].as_str().is_some_and(|p| p.ends_with(expected))), "{undo:?}");
    }
    assert!(!dir.join("new.txt").exists(), "the file the crashed call created is gone");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).ok().as_deref(), Some("kept\n"), "the patched file is back");
    assert_eq!(history(&forge, &id).await.len(), 4, "the two crashed turns are undone");
}

/// The daemon dies (SIGKILL) in the middle of an undo, 15 of 40 files
/// put back: on restart it finishes the undo from its journaled intent,
/// says so, and the conversation moves as the undo asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_cut_by_a_crash_is_finished_on_restart() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().to_path_buf();
    let id = forge.new_session(&["--cwd", &dir.display().to_string(), "--name", "u"]).await;
    let command = "for i in $(seq 10 49); do echo $i > f$i.txt; done";
    forge
        .ok(&["send", "--auto-approve", "-s", "u", &format!("{} go", call("run_command", json!({"command": command})))])
        .await;
    let count = || (10..50).filter(|i| dir.join(format!("f{i}.txt")).exists()).count();
    assert_eq!(count(), 40);

    forge.terminate().await;
    forge.set_env("FORGE_CRASH_AFTER_RESTORED", "15");
    forge.start().await;
    let cut = forge.ctl(&["undo", "u"]).await;
    assert_ne!(cut.code, 0, "the daemon died mid-undo: {} {}", cut.stdout, cut.stderr);
    forge.kill9().await;
    assert_eq!(count(), 25, "15 files were put back before the crash");

    forge.set_env("FORGE_CRASH_AFTER_RESTORED", "");
    forge.start().await;
    let events = forge.ok(&["--json", "attach", "u", "--from", "1", "--until-idle"]).await.json_lines();
    assert_eq!(count(), 0, "the undo was finished on restart");
    let finished = events.iter().find(|e| e["kind"] == "files_restored").cloned().unwrap_or_default();
    assert_eq!(finished["recovered"], true, "{events:?}");
    assert_eq!(finished["files"].as_array().map(Vec::len), Some(40));
    assert!(events.iter().any(|e| e["kind"] == "history_cleared"), "the conversation moved as asked");
    assert!(history(&forge, &id).await.is_empty());
    let shown = forge.ok(&["attach", "u", "--from", "1", "--until-idle"]).await.stdout;
    assert!(shown.contains("on restart"), "{shown}");
}
