//! Secrets never leave a tool or a provider: a provider error that quotes
//! the key, and a command that prints keys and tokens, arrive redacted in
//! events, history, exports and logs; commands do not get secret-named
//! variables; and nothing under `$FORGE_HOME` holds a secret afterwards.

use forge_tests::harness::{Forge, walk};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::json;

/// Shaped like Anthropic's keys, so both the known value and the shape
/// are covered.
const KEY: &str = "sk-ant-api03-Zq8vLk2RtYp4WmXn6HcJd0FbGsA1eUoI";
const DEPLOY: &str = "deploy-token-4f9c2b7e1d3a5c8e";
const GITHUB: &str = "ghp_R2d2C3po0123456789abcdefghijKLMNOP";
const AWS: &str = "AKIAQWERTYUIOPASDFGH";
/// The shapes added after the red team's tries (the secret part of each).
const MORE: &[(&str, &str)] = &[
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2Rl==;", "cXV4MTIzNDU2"),
    ("Authorization: Bearer q8Zk2PvB7xLm4NwR9tYc", "q8Zk2PvB7xLm"),
    ("Authorization: token 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", "9f8e7d6c5b4a"),
    ("glpat-Q7wErTy8UiOp9AsDf0Gh", "Q7wErTy8UiOp9AsDf0Gh"),
    ("npm_Q7wErTy8UiOp9AsDf0GhJkLzXcVbNm123456", "Q7wErTy8UiOp9AsDf0GhJk"),
    ("hf_Z7wErTy8UiOp9AsDf0GhJkLzXcVbNm1234", "Z7wErTy8UiOp9AsDf0GhJk"),
    ("https://hooks.slack.com/services/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", "x8Zk2PvB7xLm"),
    ("password=Tr0ub4dor9x", "Tr0ub4dor9x"),
    ("api_key=\"k8Zk2PvB7xLm4NwR9tYc\"", "k8Zk2PvB7xLm"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tokens_arrive_redacted_everywhere() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.set_env("ANTHROPIC_API_KEY", KEY);
    forge.set_env("DEPLOY_TOKEN", DEPLOY);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let creds = format!(
        "anthropic={KEY}\ngithub={GITHUB}\naws={AWS}\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAsecretbits\n-----END RSA PRIVATE KEY-----\n"
    );
    let creds = format!("{creds}{}\n", MORE.iter().map(|(line, _)| *line).collect::<Vec<_>>().join("\n"));
    std::fs::write(project.path().join("creds.txt"), &creds).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--provider", "claude", "--cwd", &project.path().display().to_string()]).await;

    // A command that prints them, and one that looks for the variable.
    let cmd = tool_call("run_command", &json!({"command": "cat creds.txt; echo \"deploy=${DEPLOY_TOKEN:-unset}\""}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{cmd} go")]).await;
    let h = forge.ok(&["--json", "history", &id]).await.json_lines();
    let result = h.iter().find(|m| m["role"] == "tool").map(|m| m["text"].to_string()).unwrap_or_default();
    assert!(result.contains("deploy=unset"), "secret-named variables are not passed on: {result}");
    assert!(result.contains("github=ghp_***") && result.contains("[REDACTED]"), "{result}");

    // A provider error that quotes the key.
    let failed = forge.ctl(&["send", "-s", &id, "mock:echo-key hello"]).await;
    assert_ne!(failed.code, 0);
    assert!(failed.stderr.contains("Incorrect API key provided"), "{}", failed.stderr);

    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.stdout;
    let export = forge.ok(&["export", &id]).await.stdout;
    for (place, text) in [("the send's error", &failed.stderr), ("events", &events), ("the export", &export)] {
        for secret in [KEY, DEPLOY, GITHUB, AWS, "MIIEowIBAAKCAQEAsecretbits"] {
            assert!(!text.contains(secret), "{secret} in {place}: {text}");
        }
    }
    for (_, secret) in MORE {
        assert!(!result.contains(secret), "{secret} reached the model: {result}");
        assert!(!events.contains(secret) && !export.contains(secret), "{secret} in the events or the export");
    }
    // A command changes the file that holds secrets: its old content was
    // never stored, so undo leaves it as it is and says why.
    let append = tool_call("run_command", &json!({"command": "echo more >> creds.txt"}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{append} go")]).await;
    // Named before anything moves, then left as it is when told to go on.
    let asked = forge.ctl(&["undo", &id]).await;
    assert!(asked.code != 0 && asked.stderr.contains("held a secret"), "{}", asked.stderr);
    let undo = forge.ok(&["undo", &id, "--yes"]).await;
    assert!(undo.stderr.contains("cannot restore") && undo.stderr.contains("held a secret"), "{}", undo.stderr);
    let now = std::fs::read_to_string(project.path().join("creds.txt")).unwrap_or_default();
    assert!(now.ends_with("more\n"), "the file was not rolled back to something else: {now}");

    forge.ok(&["shutdown"]).await;
    // Everything the daemon wrote: the store, its WAL and logs.
    for file in walk(&forge.data_dir()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for secret in [KEY, DEPLOY, GITHUB, AWS, "MIIEowIBAAKCAQEAsecretbits"].iter().chain(MORE.iter().map(|(_, s)| s))
        {
            if let Some(i) = text.find(secret) {
                panic!(
                    "{secret} found in {}: {:?}",
                    file.display(),
                    &text[i.saturating_sub(300)..(i + 100).min(text.len())]
                );
            }
        }
    }
}
