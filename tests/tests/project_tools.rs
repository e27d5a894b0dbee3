//! A project's own tools (`.forge/tools/*.toml`) through the real daemon:
//! not offered until the user approves the file as it is, then run in the
//! sandbox without asking, arguments quoted so they cannot add commands,
//! and withdrawn when the file changes.

use std::path::Path;

use forge_tests::harness::{Forge, skipped};
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

const TOOL: &str = r#"name = "greet"
description = "Write a greeting for someone into greeting.txt"
command = "printf 'hello %s\n' {who} > greeting.txt"
[parameters]
type = "object"
required = ["who"]
properties.who = { type = "string", description = "who to greet" }
"#;

fn write_tool(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join(".forge/tools")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(".forge/tools/greet.toml"), text).unwrap_or_else(|e| panic!("{e}"));
}

async fn offered(forge: &Forge, id: &str) -> Vec<String> {
    let c: Value = serde_json::from_str(forge.ok(&["--json", "context", id]).await.stdout.trim()).unwrap_or_default();
    c["tools_offered"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_tool_runs_once_approved_and_is_withdrawn_when_its_file_changes() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path();
    let d = dir.display().to_string();
    write_tool(dir, TOOL);

    let new = forge.ok(&["session", "new", "--cwd", &d]).await;
    assert!(new.stderr.contains("greet (.forge/tools/greet.toml)"), "a new session says what waits: {}", new.stderr);
    let id = new.stdout.trim().to_string();
    assert!(!offered(&forge, &id).await.contains(&"greet".to_string()), "not offered before approval");
    let list = forge.ok(&["tools", "list", "--dir", &d]).await;
    assert!(list.stdout.contains("greet  (.forge/tools/greet.toml)  not approved"), "{}", list.stdout);

    // Without a terminal, approving needs --yes.
    let refused = forge.ctl(&["tools", "approve", "--dir", &d]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("runs: printf"), "the command is shown before anything: {}", refused.stderr);
    forge.ok(&["tools", "approve", "--dir", &d, "--yes"]).await;

    let rules: Value = serde_json::from_str(forge.ok(&["--json", "tools", "list", "--dir", &d]).await.stdout.trim())
        .unwrap_or_default();
    let command_rule = rules["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "run_command").cloned());
    if command_rule.as_ref().map(|r| r["approval"].clone()) != Some(json!("run")) {
        skipped(
            "a_project_tool_runs_once_approved_and_is_withdrawn_when_its_file_changes",
            "the kernel sandbox does not confine commands here, so approved project tools still ask",
        );
        return;
    }

    // The argument tries to add a command of its own: it is one word.
    let attack = "x; touch pwned";
    let call = forge_tests::mock::tool_call("greet", &json!({"who": attack}));
    forge.ok(&["send", "-s", &id, &format!("greet {call}")]).await;
    assert!(offered(&forge, &id).await.contains(&"greet".to_string()));
    assert_eq!(std::fs::read_to_string(dir.join("greeting.txt")).ok().as_deref(), Some("hello x; touch pwned\n"));
    assert!(!dir.join("pwned").exists(), "an argument never becomes a command");

    // A changed file (here the user's; the model's or a command's alike)
    // is withdrawn until approved again.
    write_tool(dir, &TOOL.replace("hello", "bye"));
    forge.ok(&["send", "-s", &id, "hello again"]).await;
    assert!(!offered(&forge, &id).await.contains(&"greet".to_string()), "a changed file is not offered");
    let list = forge.ok(&["tools", "list", "--dir", &d]).await;
    assert!(list.stdout.contains("CHANGED since approved"), "{}", list.stdout);
    forge.ok(&["tools", "approve", "greet", "--dir", &d, "--yes"]).await;
    forge.ok(&["send", "-s", &id, &format!("again {call}")]).await;
    assert_eq!(std::fs::read_to_string(dir.join("greeting.txt")).ok().as_deref(), Some("bye x; touch pwned\n"));

    forge.ok(&["tools", "revoke", "--dir", &d]).await;
    forge.ok(&["send", "-s", &id, "and now"]).await;
    assert!(!offered(&forge, &id).await.contains(&"greet".to_string()), "revoked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_script_behind_an_approved_tool_asks_again() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path();
    let d = dir.display().to_string();
    std::fs::create_dir_all(dir.join("scripts")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("scripts/t.sh"), "echo tested \"$1\" > result.txt\n").unwrap_or_else(|e| panic!("{e}"));
    let tool = r#"name = "t"
description = "Run the tests"
command = "sh scripts/t.sh {x}"
[parameters]
type = "object"
properties.x = { type = "string" }
"#;
    std::fs::create_dir_all(dir.join(".forge/tools")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(".forge/tools/t.toml"), tool).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.ok(&["session", "new", "--cwd", &d]).await.stdout.trim().to_string();
    let shown = forge.ctl(&["tools", "approve", "--dir", &d]).await;
    assert!(shown.stderr.contains("scripts/t.sh"), "the approval names the script: {}", shown.stderr);
    forge.ok(&["tools", "approve", "--dir", &d, "--yes"]).await;
    let list = forge.ok(&["tools", "list", "--dir", &d]).await;
    assert!(list.stdout.contains("its approval covers scripts/t.sh"), "{}", list.stdout);
    forge.ok(&["send", "-s", &id, "hello"]).await;
    assert!(offered(&forge, &id).await.contains(&"t".to_string()), "approved: offered");

    // A command rewrites the script in the same turn that then calls the
    // tool: it is not run.
    let both = format!(
        "{} {}",
        forge_tests::mock::tool_call(
            "run_command",
            &json!({"command": "echo 'echo early > early.txt' > scripts/t.sh"})
        ),
        forge_tests::mock::tool_call("t", &json!({"x": "1"}))
    );
    forge.ok(&["send", "--auto-approve", "-s", &id, &both]).await;
    assert!(!dir.join("early.txt").exists(), "the script changed mid-turn did not run");
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let said = h.iter().filter(|m| m["role"] == "tool").any(|m| {
        m["text"].as_str().is_some_and(|t| t.contains("scripts/t.sh changed since the user approved this tool"))
    });
    assert!(said, "the model is told why: {h:?}");
    std::fs::write(dir.join("scripts/t.sh"), "echo tested \"$1\" > result.txt\n").unwrap_or_else(|e| panic!("{e}"));

    // A command rewrites the script: the tool is withdrawn, and says why.
    let rewrite = forge_tests::mock::tool_call(
        "run_command",
        &json!({"command": "echo 'echo changed > pwned.txt' > scripts/t.sh"}),
    );
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{rewrite} go")]).await;
    forge.ok(&["send", "-s", &id, "hello again"]).await;
    assert!(!offered(&forge, &id).await.contains(&"t".to_string()), "the changed script is not run unasked");
    let call = forge_tests::mock::tool_call("t", &json!({"x": "1"}));
    forge.ok(&["send", "-s", &id, &format!("{call} run it")]).await;
    assert!(!dir.join("pwned.txt").exists(), "the new script did not run");
    let list = forge.ok(&["tools", "list", "--dir", &d]).await;
    assert!(
        list.stdout.contains("CHANGED since approved")
            && list.stdout.contains("scripts/t.sh changed since you approved"),
        "{}",
        list.stdout
    );
}
