//! Commands of one's own: `/review src/` from a project's
//! `.claude/commands/review.md` (in a trusted folder) or the user's
//! `~/.config/forge/commands/` becomes its prompt in the daemon, for
//! forgectl and editors alike.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::Value;

const REVIEW: &str = "---\ndescription: Review the code under a path\nargument-hint: <path>\n---\nReview every file under $ARGUMENTS for bugs; list them by severity.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_command_expands_in_the_daemon_once_the_folder_is_trusted() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let config = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(config.path().join("forge/commands")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(config.path().join("forge/commands/hello.md"), "Say hello to $1 and $2.")
        .unwrap_or_else(|e| panic!("{e}"));
    forge.set_env("XDG_CONFIG_HOME", &config.path().display().to_string());
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = project.path().display().to_string();
    std::fs::create_dir_all(project.path().join(".claude/commands")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.path().join(".claude/commands/review.md"), REVIEW).unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &dir]).await;

    // The user's own command works anywhere.
    forge.ok(&["send", "-s", &id, "/hello Ann Bob"]).await;
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("Say hello to Ann and Bob."), "{asked}");

    // A project's only in a trusted folder: before, sent as typed.
    let listed = forge.ok(&["commands", &id]).await.stdout;
    assert!(listed.contains("/hello") && !listed.contains("/review"), "{listed}");
    forge.ok(&["send", "-s", &id, "/review src/"]).await;
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(!asked.contains("Review every file"), "an untrusted project's command is not used");

    forge.ok(&["trust", &dir]).await;
    let listed = forge.ok(&["--json", "commands", &id]).await.json_lines();
    let review = listed.iter().find(|c| c["name"] == "review").unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(review["description"], "Review the code under a path");
    assert_eq!(review["argument_hint"], "<path>");
    assert_eq!(review["source"], "project");
    forge.ok(&["send", "-s", &id, "/review src/"]).await;
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("Review every file under src/ for bugs"), "{asked}");
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let last_user: Vec<&Value> = history.iter().filter(|m| m["role"] == "user").collect();
    assert!(
        last_user.last().is_some_and(|m| m["text"].as_str().unwrap_or("").starts_with("Review every file")),
        "history shows what was sent"
    );
    // A path is not a command.
    forge.ok(&["send", "-s", &id, "/etc/hosts looks wrong"]).await;
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("/etc/hosts looks wrong"), "{asked}");
}

/// A git session works in its own worktree: trusting the repository
/// covers it (its files, from the branch, are the ones honoured).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_session_has_its_trusted_repositorys_commands() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = repo.path();
    let git = forge_tests::harness::git;
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["config", "user.email", "user@example.com"]);
    git(p, &["config", "user.name", "User"]);
    std::fs::create_dir_all(p.join(".claude/commands")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p.join(".claude/commands/review.md"), REVIEW).unwrap_or_else(|e| panic!("{e}"));
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "commands"]);
    let dir = p.display().to_string();
    forge.ok(&["trust", &dir]).await;
    let id = forge.new_session(&["--git", "--cwd", &dir]).await;
    let listed = forge.ok(&["commands", &id]).await.stdout;
    assert!(listed.contains("/review <path>"), "{listed}");
    forge.ok(&["send", "-s", &id, "/review lib/"]).await;
    let asked = mock.last_turn_request();
    assert!(asked.contains("Review every file under lib/"), "{asked}");
}

/// A command's `model` answers its turn and its `allowed-tools` run
/// without asking in it; neither outlives the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commands_model_and_allowed_tools_hold_for_its_turn_only() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[tools.approval]\nmode = \"prompt\"\n");
    let config = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let commands = config.path().join("forge/commands");
    std::fs::create_dir_all(&commands).unwrap_or_else(|e| panic!("{e}"));
    let call = forge_tests::mock::tool_call("run_command", &serde_json::json!({"command": "echo granted yes"}));
    std::fs::write(
        commands.join("stage.md"),
        format!("---\nallowed-tools: Bash(echo granted:*), Read\nmodel: claude-haiku-4-5\n---\nStage it. {call}\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(commands.join("other.md"), "---\nmodel: gpt-5.4\n---\nHello.\n").unwrap_or_else(|e| panic!("{e}"));
    forge.set_env("XDG_CONFIG_HOME", &config.path().display().to_string());
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--cwd", &project.path().display().to_string()]).await;

    let events = forge.ok(&["--json", "send", "-s", &id, "/stage"]).await.json_lines();
    assert!(!events.iter().any(|e| e["kind"] == "approval_requested"), "the grant covers the call: {events:?}");
    let result = events.iter().find(|e| e["kind"] == "tool_result").unwrap_or_else(|| panic!("{events:?}"));
    assert!(result["output"].as_str().unwrap_or("").contains("granted yes"), "{result}");
    let started = events.iter().find(|e| e["kind"] == "turn_started").unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(started["model"], "claude-haiku-4-5");
    let models: Vec<Value> = mock.requests().iter().map(|r| r.body["model"].clone()).collect();
    assert_eq!(models, ["claude-haiku-4-5", "claude-haiku-4-5"], "both requests of the turn");

    // The next message: the session's model again, and the same call asks.
    forge.ok(&["send", "-s", &id, "hello"]).await;
    let model = mock.requests().last().map(|r| r.body["model"].clone()).unwrap_or_default();
    assert_ne!(model, "claude-haiku-4-5");
    forge.ok(&["send", "--no-wait", "-s", &id, &format!("{call} again")]).await;
    let mut pending = String::new();
    for _ in 0..400 {
        pending = forge.ok(&["--json", "approvals"]).await.stdout;
        if pending.contains("run_command") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(pending.contains("run_command"), "without the command the call asks: {pending}");
    forge.ok(&["cancel", &id]).await;

    // A model of another provider is refused, saying what to do.
    let r = forge.ctl(&["send", "-s", &id, "/other"]).await;
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("asks for model gpt-5.4 of provider openai"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_names_what_it_gates_an_ignored_command_is_said_and_trusting_offers_the_agents() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let project = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = project.path();
    let dir = p.canonicalize().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    for d in [".claude/commands", ".claude/agents", ".forge/commands"] {
        std::fs::create_dir_all(p.join(d)).unwrap_or_else(|e| panic!("{e}"));
    }
    let review = "---\ndescription: Review\nallowed-tools: Bash(git diff:*), Read\n---\nReview $ARGUMENTS closely.\n";
    std::fs::write(p.join(".claude/commands/review.md"), review).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p.join(".forge/commands/ship.md"), "Ship it.").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        p.join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews diffs for bugs\n---\nReview the diff.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));

    let shown = forge.ok(&["trust", "--show", &dir]).await.stdout;
    for what in
        ["not trusted", "command /review (allowed-tools: Bash(git diff:*), Read)", "command /ship", "agent reviewer"]
    {
        assert!(shown.contains(what), "{what}: {shown}");
    }
    let new = forge.ok(&["session", "new", "--cwd", &dir]).await;
    assert!(new.stderr.contains("command /review"), "a new session says what is ignored: {}", new.stderr);
    let id = new.stdout.trim().to_string();

    // Untrusted, `/review x` goes as text, and the user is told once.
    let sent = forge.ok(&["send", "-s", &id, "/review x"]).await;
    assert!(
        sent.stderr.contains("/review is a command of") && sent.stderr.contains(&format!("forgectl trust {dir}")),
        "{}",
        sent.stderr
    );
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("/review x") && !asked.contains("closely"), "{asked}");
    let task = |body: &Value| {
        body["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "task").cloned()).unwrap_or_default()
    };
    let before = mock.requests().last().map(|r| task(&r.body)).unwrap_or_default();
    assert!(!before["description"].to_string().contains("reviewer"), "no project agent yet: {before}");
    let again = forge.ok(&["send", "-s", &id, "/review y"]).await;
    assert!(!again.stderr.contains("/review is a command of"), "said once: {}", again.stderr);

    // Trusted mid-session: the next message offers the project's agents.
    forge.ok(&["trust", &dir]).await;
    forge.ok(&["send", "-s", &id, "hello"]).await;
    let after = mock.requests().last().map(|r| task(&r.body)).unwrap_or_default();
    assert!(after["description"].to_string().contains("reviewer: Reviews diffs"), "{after}");
    forge.ok(&["send", "-s", &id, "/review z"]).await;
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("Review z closely"), "{asked}");
}
