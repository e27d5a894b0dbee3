//! Every built-in tool's argument schema as each wire format sends it,
//! checked against tests/fixtures/tool_schemas_in_requests.json. The
//! request goes through the real client to a local server that keeps its
//! body, so what is compared is what a provider receives. After a
//! deliberate change to a tool's arguments: `FORGE_UPDATE_TOOL_SCHEMAS=1
//! cargo test -p forge-core --test tool_schemas` writes the file again.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use forge_core::agents::{AgentType, GENERAL_PURPOSE, TaskTool};
use forge_core::config::ForgeConfig;
use forge_core::provider::{ChatMessage, ChatRequest, ProviderClient, ProviderKind, ProviderSettings};
use forge_core::tools::ToolRegistry;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FIXTURE: &str = "tests/fixtures/tool_schemas_in_requests.json";

/// Differences accepted on purpose: (wire format or `*`, tool or `*`,
/// JSON pointer into the schema, why it is harmless). None today. Key
/// order inside an object needs no entry: schemas are compared as JSON
/// values (the order of a body's keys depends on serde_json's features,
/// and a provider reads them in any order).
const ALLOWED: &[(&str, &str, &str, &str)] = &[];

/// The wire formats, named as `forge_core::provider::Wire::as_str` names them.
const WIRES: [&str; 4] = ["anthropic-messages", "openai-chat", "openai-responses", "gemini"];

fn agent(name: &str, description: &str) -> AgentType {
    AgentType {
        info: forge_proto::AgentInfo {
            name: name.into(),
            description: description.into(),
            tools: None,
            model: None,
            source: "builtin".into(),
            path: None,
        },
        instructions: String::new(),
    }
}

/// The built-in tools and the `task` tool, as a session offers them.
fn registry() -> ToolRegistry {
    let mut tools = ToolRegistry::builtin();
    let agents = [agent(GENERAL_PURPOSE, "does anything"), agent("reviewer", "reviews code")];
    tools.register(Arc::new(TaskTool::new(&agents))).unwrap_or_else(|e| panic!("{e}"));
    tools
}

fn settings(wire: &str, url: &str) -> ProviderSettings {
    let mut cfg = ForgeConfig::default();
    let kind = match wire {
        "anthropic-messages" => {
            cfg.anthropic.base_url = Some(url.into());
            ProviderKind::Claude
        }
        "openai-chat" | "openai-responses" => {
            cfg.openai.base_url = Some(url.into());
            cfg.openai.wire_api = Some(if wire == "openai-chat" { "chat" } else { "responses" }.into());
            ProviderKind::OpenAi
        }
        _ => {
            cfg.google.base_url = Some(url.into());
            // One request, not a cache's first.
            cfg.google.cache_enabled = Some(false);
            ProviderKind::Gemini
        }
    };
    ProviderSettings::resolve(kind, &cfg)
}

/// The body of the one request `wire`'s client sends with every tool.
async fn request_body(wire: &str) -> Value {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://{}", listener.local_addr().unwrap_or_else(|e| panic!("{e}")));
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            let n = conn.read(&mut chunk).await.unwrap_or_else(|e| panic!("{e}"));
            assert!(n > 0, "the request ended early");
            bytes.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&bytes);
            let Some(end) = text.find("\r\n\r\n") else { continue };
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no content-length: {}", &text[..end]));
            if bytes.len() >= end + 4 + length {
                let _ = conn
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                    .await;
                return bytes[end + 4..end + 4 + length].to_vec();
            }
        }
    });
    let req = ChatRequest {
        model: "m".into(),
        system: Some("s".into()),
        messages: vec![ChatMessage::user("hi")],
        max_output_tokens: 100,
        tools: registry().specs(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let client = ProviderClient::new().unwrap_or_else(|e| panic!("{e}"));
    // The server's refusal ends the stream; only the request matters.
    let _ = forge_core::provider::collect_text(client.stream(settings(wire, &url), req)).await;
    let body = server.await.unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{wire}: the body is not JSON: {e}"))
}

/// Each tool's parameters schema in a request body, by tool name.
fn schemas_in(wire: &str, body: &Value) -> Map<String, Value> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let (list, key): (Vec<Value>, &str) = match wire {
        "anthropic-messages" => (tools, "input_schema"),
        "openai-chat" => (tools.iter().map(|t| t["function"].clone()).collect(), "parameters"),
        "openai-responses" => (tools, "parameters"),
        _ => (
            tools.iter().flat_map(|t| t["functionDeclarations"].as_array().cloned().unwrap_or_default()).collect(),
            "parametersJsonSchema",
        ),
    };
    let mut out = Map::new();
    for t in list {
        let name = t["name"].as_str().unwrap_or_else(|| panic!("{wire}: a tool without a name: {t}"));
        let schema = t.get(key).cloned().unwrap_or_else(|| panic!("{wire}: {name} has no `{key}`: {t}"));
        assert!(out.insert(name.to_string(), schema).is_none(), "{wire}: {name} twice");
    }
    assert!(!out.is_empty(), "{wire}: no tools in {body}");
    out
}

/// The JSON pointers at which `a` and `b` differ.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => differences(v, w, &here, out),
                    _ => out.push(here),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differences(v, w, &format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at.to_string()),
        _ => {}
    }
}

fn allowed(wire: &str, tool: &str, pointer: &str) -> bool {
    ALLOWED.iter().any(|(w, t, p, _)| (*w == "*" || *w == wire) && (*t == "*" || *t == tool) && *p == pointer)
}

#[tokio::test]
async fn every_tool_schema_reaches_every_provider_as_recorded() {
    let mut now = Map::new();
    for wire in WIRES {
        now.insert(wire.into(), Value::Object(schemas_in(wire, &request_body(wire).await)));
    }
    let now = Value::Object(now);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    if std::env::var_os("FORGE_UPDATE_TOOL_SCHEMAS").is_some() {
        let text = serde_json::to_string_pretty(&now).unwrap_or_default() + "\n";
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let recorded: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));

    let show =
        |v: Option<&Value>| v.map_or("(missing)".into(), |v| serde_json::to_string_pretty(v).unwrap_or_default());
    let mut failures = Vec::new();
    let wires: BTreeSet<&String> =
        recorded.as_object().into_iter().chain(now.as_object()).flat_map(|m| m.keys()).collect();
    for wire in wires {
        let (then, sent) = (&recorded[wire.as_str()], &now[wire.as_str()]);
        let tools: BTreeSet<&String> =
            then.as_object().into_iter().chain(sent.as_object()).flat_map(|m| m.keys()).collect();
        for tool in tools {
            let (a, b) = (then.get(tool.as_str()), sent.get(tool.as_str()));
            let mut diffs = Vec::new();
            match (a, b) {
                (Some(a), Some(b)) => differences(a, b, "", &mut diffs),
                _ => diffs.push("(the whole tool)".into()),
            }
            diffs.retain(|p| !allowed(wire, tool, p));
            if !diffs.is_empty() {
                failures.push(format!(
                    "{wire} / {tool}: differs at {}\nrecorded:\n{}\nsent now:\n{}",
                    diffs.join(", "),
                    show(a),
                    show(b)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} tool schema(s) differ from {FIXTURE} (after a deliberate change: FORGE_UPDATE_TOOL_SCHEMAS=1 cargo test -p forge-core --test tool_schemas):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn a_tool_missing_on_either_side_is_a_difference() {
    let mut out = Vec::new();
    differences(&json!({"a": {"type": "string"}}), &json!({"a": {"type": "string"}, "b": {}}), "", &mut out);
    assert_eq!(out, ["/b"]);
    out.clear();
    differences(&json!({"required": ["x", "y"]}), &json!({"required": ["y", "x"]}), "", &mut out);
    assert_eq!(out, ["/required/0", "/required/1"]);
}
