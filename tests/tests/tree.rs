//! The conversation tree: `forgectl tree`, `branches`, `checkout`, `edit`,
//! `fork`, `bookmark`, and the RPCs that delete and split nodes.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::Value;

async fn history(forge: &Forge, session: &str) -> Vec<Value> {
    forge.ok(&["--json", "history", session]).await.json_lines()
}

fn texts(h: &[Value]) -> Vec<String> {
    h.iter().map(|m| m["text"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_branches_checkout_returns_and_a_fork_stands_alone() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "t"]).await;
    for q in ["first mock:tokens=3", "second mock:tokens=3", "third mock:tokens=3"] {
        forge.ok(&["send", "-s", &id, q]).await;
    }
    let before = history(&forge, &id).await;
    assert_eq!(before.len(), 6);
    let ids: Vec<String> = before.iter().map(|m| m["id"].as_str().unwrap_or_default().to_string()).collect();

    // Editing the second question, which has replies, makes a branch and
    // answers it there.
    let edited = forge.ok(&["edit", "t", &ids[2], "second, edited mock:tokens=4"]).await;
    assert_eq!(edited.stdout, format!("{}\n", forge_tests::mock::token_text(4)), "the answer streams");
    assert!(edited.stderr.contains("as a new branch"), "{}", edited.stderr);
    let now = history(&forge, &id).await;
    assert_eq!(
        texts(&now)[..3],
        [texts(&before)[0].clone(), texts(&before)[1].clone(), "second, edited mock:tokens=4".into()]
    );
    assert_eq!(now.len(), 4);

    let tree = forge.ok(&["--json", "tree", "t"]).await.json_lines();
    assert_eq!(tree[0]["nodes"].as_array().map(Vec::len), Some(8), "both branches are kept");
    let drawn = forge.ok(&["tree", "t"]).await.stdout;
    assert!(drawn.contains("├─") && drawn.contains("└─") && drawn.contains("<- head"), "{drawn}");
    assert!(drawn.lines().nth(1).is_some_and(|l| l.contains("(system prompt ")), "a root names its prompt: {drawn}");
    let branches = forge.ok(&["--json", "branches", "t"]).await.json_lines();
    assert_eq!(branches.len(), 2);
    assert_eq!(branches.iter().filter(|b| b["head"] == true).count(), 1);

    // A bookmark on the old branch's end, and back there by its name.
    forge.ok(&["bookmark", "t", "old", &ids[5]]).await;
    forge.ok(&["checkout", "t", "old"]).await;
    assert_eq!(texts(&history(&forge, &id).await), texts(&before), "the original path, exactly");
    let several = forge.ctl(&["send", "-s", "t", "-n", "3", "again"]).await;
    assert_ne!(several.code, 0);
    assert!(several.stderr.contains("tools"), "n > 1 is refused while tools are on: {}", several.stderr);
    let bad = forge.ctl(&["checkout", "t", "nowhere"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("forgectl tree"), "{}", bad.stderr);

    // An answer nothing replies to is edited in place.
    let r = forge.ok(&["--json", "edit", "t", &ids[5], "a better third answer"]).await.json_lines();
    assert_eq!(r[0]["result"]["in_place"], true, "{r:?}");
    assert_eq!(texts(&history(&forge, &id).await)[5], "a better third answer");

    // A fork at the first answer shares that prefix and then goes its own way.
    let fork = forge.ok(&["--json", "fork", "t", &ids[1], "--name", "f"]).await.json_lines();
    let fork_id = fork[0]["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(fork[0]["message_count"], 2);
    forge.ok(&["send", "-s", "f", "only in the fork mock:tokens=2"]).await;
    let in_fork = history(&forge, "f").await;
    assert_eq!(in_fork.len(), 4);
    assert_eq!(in_fork[0]["id"], ids[0].as_str(), "the same node, not a copy");
    assert_eq!(history(&forge, &id).await.len(), 6, "the original is untouched");
    // Removing the original keeps what the fork shares.
    forge.ok(&["session", "rm", "t"]).await;
    assert_eq!(texts(&history(&forge, &fork_id).await), texts(&in_fork));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_and_delete_change_the_tree_through_the_journal() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&[]).await;
    forge.ok(&["send", "-s", &id, "one two mock:tokens=2"]).await;
    forge.ok(&["send", "-s", &id, "three mock:tokens=2"]).await;
    let h = history(&forge, &id).await;
    let first = h[0]["id"].as_str().unwrap_or_default().to_string();

    let split = forge.rpc("session.split", serde_json::json!({"session": id, "node": first, "at": 3})).await;
    let new_node = split["result"]["new_node_id"].as_str().unwrap_or_default().to_string();
    assert!(!new_node.is_empty(), "{split}");
    let after = texts(&history(&forge, &id).await);
    assert_eq!(after[..2], ["one".to_string(), " two mock:tokens=2".to_string()]);
    assert_eq!(after.len(), 5);

    // Deleting the split-off part hangs its replies from the first part.
    let del =
        forge.rpc("session.delete_node", serde_json::json!({"session": id, "node": new_node, "cascade": false})).await;
    assert_eq!(del["result"]["deleted"].as_array().map(Vec::len), Some(1), "{del}");
    assert_eq!(texts(&history(&forge, &id).await).len(), 4);
    // Deleting with cascade takes the rest; the head goes up.
    let second_q = history(&forge, &id).await[2]["id"].as_str().unwrap_or_default().to_string();
    let del = forge.rpc("session.delete_node", serde_json::json!({"session": id, "node": second_q})).await;
    assert_eq!(del["result"]["deleted"].as_array().map(Vec::len), Some(2), "{del}");
    assert_eq!(history(&forge, &id).await.len(), 2);
    // What happened is in the event log for every client.
    let events = forge.ok(&["--json", "attach", &id, "--until-idle"]).await.json_lines();
    for kind in ["node_split", "nodes_deleted", "head_moved"] {
        assert!(events.iter().any(|e| e["kind"] == kind), "{kind}");
    }
    // And it survives a restart.
    forge.restart().await;
    assert_eq!(history(&forge, &id).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_under_the_same_node_is_that_node_answered_again() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&[]).await;
    forge.ok(&["send", "-s", &id, "hello mock:tokens=2"]).await;
    forge.ok(&["send", "-s", &id, "again mock:tokens=3"]).await;
    let h = history(&forge, &id).await;
    let (first_answer, second_q) = (h[1]["id"].as_str().unwrap_or_default(), h[2]["id"].as_str().unwrap_or_default());
    // Back to the first answer, and the same question again.
    forge.ok(&["checkout", &id, first_answer]).await;
    forge.ok(&["send", "-s", &id, "again mock:tokens=3"]).await;
    let now = history(&forge, &id).await;
    assert_eq!(now[2]["id"], second_q, "the question's node is reused, not copied");
    assert_ne!(now[3]["id"], h[3]["id"], "a new answer beside the first one");
    let tree = forge.ok(&["--json", "tree", &id]).await.json_lines();
    assert_eq!(tree[0]["nodes"].as_array().map(Vec::len), Some(5), "two questions, three answers");
}

/// Seed 003's generation semantics through `forgectl send`: `-n 3` makes
/// three sibling answers, with the events in order; `--continue` answers
/// the path as it is, with no empty user message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_answers_are_siblings_and_continue_adds_no_user_message() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.write_config("[tools]\nmode = \"disabled\"\n");
    forge.start().await;
    let id = forge.new_session(&[]).await;
    let events = forge.ok(&["--json", "send", "-s", &id, "-n", "3", "pick one mock:tokens=2"]).await.json_lines();
    let kinds: Vec<&str> =
        events.iter().filter_map(|e| e["kind"].as_str()).filter(|k| !matches!(*k, "text_delta" | "usage")).collect();
    let call = ["provider_request", "provider_response", "assistant_node"];
    let mut expected = vec!["turn_started"];
    for _ in 0..3 {
        expected.extend(call);
    }
    expected.extend(["done", "turn_finished"]);
    assert_eq!(kinds, expected);
    let done = events.iter().find(|e| e["kind"] == "done").cloned().unwrap_or_default();
    let message = events[0]["message_id"].as_str().unwrap_or_default().to_string();
    let tree = forge.ok(&["--json", "tree", &id]).await.json_lines();
    let nodes = tree[0]["nodes"].as_array().cloned().unwrap_or_default();
    let answers: Vec<&Value> = nodes.iter().filter(|n| n["parent_id"] == message.as_str()).collect();
    assert_eq!(answers.len(), 3, "three siblings under the message: {nodes:?}");
    assert_eq!(done["nodes"].as_array().map(Vec::len), Some(3));

    let before = history(&forge, &id).await;
    let continued = forge.ok(&["send", "-s", &id, "--continue"]).await;
    assert!(!continued.stdout.trim().is_empty(), "an answer streams");
    let after = history(&forge, &id).await;
    assert_eq!(after.len(), before.len() + 1, "one node more: the answer");
    assert_eq!(after.last().map(|m| m["role"].clone()), Some(Value::from("assistant")));
    assert!(after.iter().all(|m| !(m["role"] == "user" && m["text"] == "")), "no empty user message");
    let refused = forge.ctl(&["send", "--continue", "text too"]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
}

/// `forgectl clear` (the TUI's /clear): the next message starts a new
/// conversation, and what came before stays in the tree to go back to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_starts_afresh_and_the_tree_keeps_what_came_before() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let id = forge.new_session(&["--name", "c"]).await;
    forge.ok(&["send", "-s", &id, "remember the plums mock:tokens=3"]).await;
    let before = history(&forge, &id).await;
    let cleared = forge.ok(&["clear", "c"]).await;
    assert!(cleared.stdout.contains("starts afresh"), "{}", cleared.stdout);
    assert!(history(&forge, &id).await.is_empty(), "the conversation is empty");
    forge.ok(&["send", "-s", &id, "what did I say? mock:tokens=2"]).await;
    let asked = mock.last_turn_request();
    assert!(!asked.contains("plums"), "the model is not sent what came before: {asked}");
    let tree = forge.ok(&["--json", "tree", "c"]).await.json_lines();
    assert_eq!(tree[0]["nodes"].as_array().map(Vec::len), Some(4), "nothing is deleted");
    let first_answer = before[1]["id"].as_str().unwrap_or_default();
    forge.ok(&["checkout", "c", first_answer]).await;
    assert_eq!(texts(&history(&forge, &id).await), texts(&before), "and it can be gone back to");
    let json = forge.ok(&["--json", "clear", "c"]).await.json_lines();
    assert_eq!(json[0]["id"], id.as_str(), "--json prints the session");
}
