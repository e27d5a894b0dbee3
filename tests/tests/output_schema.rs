//! `forgectl send --output-schema`: the final answer must be JSON valid
//! against the schema; the validated object is printed (and carried as
//! `structured_output` with --json); an answer that never validates is
//! sent back once with the errors, then the turn fails and forgectl exits 6.

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::{Value, json};

fn schema_file(dir: &std::path::Path) -> String {
    let schema = json!({
        "type": "object",
        "required": ["files", "ok"],
        "properties": {"files": {"type": "integer"}, "ok": {"type": "boolean"}},
        "additionalProperties": false
    });
    let path = dir.join("s.json");
    std::fs::write(&path, schema.to_string()).unwrap_or_else(|e| panic!("{e}"));
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_answer_is_printed_as_the_object_and_an_invalid_one_exits_6() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let schema = schema_file(dir.path());

    let ok = forge.ok(&["send", "--output-schema", &schema, r#"count them mock:json={"files":3,"ok":true}"#]).await;
    let printed: Value = serde_json::from_str(&ok.stdout).unwrap_or_else(|e| panic!("{e}: {}", ok.stdout));
    assert_eq!(printed, json!({"files": 3, "ok": true}));
    let asked = mock.requests().last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(asked.contains("valid against this JSON schema") && asked.contains("additionalProperties"), "{asked}");
    assert!(asked.contains("<output-schema>") && !asked.contains("<hook-context>"), "labelled as what it is: {asked}");

    // --json carries the parsed object.
    let lines = forge
        .ok(&["--json", "send", "--output-schema", &schema, r#"again mock:json={"files":1,"ok":false}"#])
        .await
        .json_lines();
    let out = lines.iter().find(|l| l["kind"] == "structured_output").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(out["output"], json!({"files": 1, "ok": false}));

    // Wrong, then (asked to fix it) not JSON at all: exit 6 with the errors.
    let before = mock.requests().len();
    let bad = forge.ctl(&["send", "--output-schema", &schema, r#"wrong mock:json={"files":"three","ok":true}"#]).await;
    assert_eq!(bad.code, 6, "{}", bad.stderr);
    assert!(bad.stderr.contains("not JSON valid against the output schema"), "{}", bad.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), before + 2, "asked once to fix it");
    let fix = requests[requests.len() - 1].body.to_string();
    assert!(fix.contains("/files") && fix.contains("Answer again with only the JSON object"), "{fix}");

    // A schema that is not one is refused before anything is sent.
    std::fs::write(dir.path().join("bad.json"), "[1, 2]").unwrap_or_else(|e| panic!("{e}"));
    let refused =
        forge.ctl(&["send", "--output-schema", &dir.path().join("bad.json").display().to_string(), "x"]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("JSON schema"), "{}", refused.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_with_structured_output_are_asked_for_it() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let schema = schema_file(dir.path());
    for provider in ["openai", "gemini", "claude"] {
        let ok = forge
            .ok(&["send", "--provider", provider, "--output-schema", &schema, r#"go mock:json={"files":2,"ok":true}"#])
            .await;
        assert!(ok.stdout.contains("\"files\": 2"), "{provider}: {}", ok.stdout);
        let body = mock.requests().last().map(|r| r.body.clone()).unwrap_or_default();
        match provider {
            "openai" => assert_eq!(body["response_format"]["type"], "json_schema", "{body}"),
            // Claude answers through a tool held to the schema.
            "claude" => assert!(
                body["tools"].as_array().is_some_and(|t| t
                    .iter()
                    .any(|t| t["name"] == "final_answer" && t["input_schema"]["required"] == json!(["files", "ok"]))),
                "{body}"
            ),
            _ => assert_eq!(body["generationConfig"]["responseMimeType"], "application/json", "{body}"),
        }
    }
}
