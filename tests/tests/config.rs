//! `forgectl config check` and `config path` as a user runs them: nothing
//! needs to be running, errors name file, line and key, keys never show.

use forge_tests::harness::Forge;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_prints_what_is_in_force_and_names_the_line_of_an_error() {
    let mut forge = Forge::bare();
    forge.set_env("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwx");
    let path = forge.data_dir().join("config.toml");

    let where_ = forge.ok(&["config", "path"]).await.stdout;
    assert!(where_.contains(&path.display().to_string()) && where_.contains("does not exist"), "{where_}");

    forge.write_config("[app]\nmax_retries = 2\n[openai]\nbase_url = \"http://127.0.0.1:9/v1\"\n");
    let ok = forge.ok(&["config", "check"]).await.stdout;
    assert!(ok.contains("(valid)"), "{ok}");
    assert!(ok.contains("max_retries = 2"), "what the file says: {ok}");
    assert!(ok.contains("max_output_tokens = 8192"), "the defaults: {ok}");
    assert!(ok.contains("provider = \"openai\""), "the only key picks the provider: {ok}");
    assert!(ok.contains("wire_api = \"chat\""), "a local server speaks Chat: {ok}");
    assert!(ok.contains("openai = \"<set>\"") && !ok.contains("abcdefghijklmnop"), "the key is masked: {ok}");
    let json = forge.ok(&["--json", "config", "check"]).await.json_lines();
    assert_eq!(json[0]["app"]["max_retries"], 2);

    forge.write_config("[app]\nmax_retries = 2\n[anthropic]\nthinking_budget_tokens = 12\n");
    let bad = forge.ctl(&["config", "check"]).await;
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains(&path.display().to_string())
            && bad.stderr.contains("line 4")
            && bad.stderr.contains("thinking_budget_tokens"),
        "{}",
        bad.stderr
    );
    // The daemon refuses to start on it, saying the same.
    let out = forge.spawn_daemon().wait_with_output().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("thinking_budget_tokens"));
}
