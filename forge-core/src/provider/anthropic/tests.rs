//! The Messages wire: request bodies and the event stream parsed at every split.

use super::*;
use crate::provider::ChatMessage;
use crate::provider::sse::testing::{assert_every_split, run, tool_args};

/// A text block then two tool calls whose JSON arguments arrive in
/// fragments (the first one empty), as the API streams them.
const TOOL_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":14,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I\\u2019ll read \\u65e5\\u672c\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_A\",\"name\":\"read_file\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"th\\\": \\\"a.rs\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_B\",\"name\":\"glob\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pattern\\\":\\\"*.rs\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":58}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"      }\n\n";

#[test]
fn tool_calls_text_and_usage_parse_identically_at_every_split() {
    let (reference, ok) = run(AnthropicParser::default(), TOOL_STREAM, usize::MAX);
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(reference[0], ProviderEvent::TextDelta("I\u{2019}ll read \u{65e5}\u{672c}".into()));
    assert_eq!(reference[1], ProviderEvent::ToolCallStart { index: 0, id: "toolu_A".into(), name: "read_file".into() });
    let args = tool_args(&reference, 0);
    assert_eq!(serde_json::from_str::<Value>(&args).ok(), Some(json!({"path": "a.rs"})));
    assert!(reference.contains(&ProviderEvent::ToolCallStart { index: 1, id: "toolu_B".into(), name: "glob".into() }));
    assert!(reference.contains(&ProviderEvent::StopReason("tool_use".into())));
    assert!(matches!(reference.last(), Some(ProviderEvent::Usage(u)) if u.input_tokens == 14 && u.output_tokens == 58));
    for split in [1, 2, 3, 5, 7, 64] {
        let (events, ok) = run(AnthropicParser::default(), TOOL_STREAM, split);
        assert!(ok.is_ok());
        assert_eq!(events, reference, "split {split}");
    }
    let crlf = TOOL_STREAM.replace('\n', "\r\n");
    assert_eq!(run(AnthropicParser::default(), &crlf, 3).0, reference, "CRLF framing");
    assert_every_split(AnthropicParser::default, TOOL_STREAM, |e| e);
    assert_every_split(AnthropicParser::default, &crlf, |e| e);
}

#[test]
fn a_stream_cut_before_message_stop_is_an_error() {
    let cut = &TOOL_STREAM[..TOOL_STREAM.find("event: message_delta").unwrap_or(0)];
    let (_, result) = run(AnthropicParser::default(), cut, 5);
    assert!(result.is_err());
}

#[test]
fn request_body_has_the_required_fields() {
    let req = ChatRequest {
        model: "claude-x".into(),
        system: None,
        messages: vec![ChatMessage::user("hi")],
        max_output_tokens: 100,
        tools: Vec::new(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let b = body(&req, &WireOptions::default());
    assert_eq!(b["model"], "claude-x");
    assert_eq!(b["max_tokens"], 100);
    assert_eq!(b["stream"], true);
    assert_eq!(b["messages"][0]["role"], "user");
    assert_eq!(b["messages"][0]["content"][0]["text"], "hi");
    assert!(b.get("tools").is_none());
    assert!(b.get("thinking").is_none());
    assert!(!b.to_string().contains("cache_control"), "no breakpoints when caching is off");
}

#[test]
fn a_continued_answer_is_a_prefill_without_trailing_space_or_thinking() {
    let req = ChatRequest {
        model: "m".into(),
        system: None,
        messages: vec![ChatMessage::user("write"), ChatMessage::assistant("Roses are red,\n", Vec::new())],
        max_output_tokens: 4096,
        tools: Vec::new(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let opts = WireOptions { anthropic_thinking_budget: Some(2048), ..Default::default() };
    let b = body(&req, &opts);
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert_eq!(b["messages"][1]["content"][0]["text"], "Roses are red,");
    assert!(b.get("thinking").is_none(), "the API takes no thinking with a prefill");
}

#[test]
fn tool_calls_and_results_become_blocks_and_unanswered_calls_get_a_result() {
    let call = |id: &str| forge_proto::ToolCallRecord {
        id: id.into(),
        name: "read_file".into(),
        arguments: "{\"path\":\"a\"}".into(),
    };
    let req = ChatRequest {
        model: "m".into(),
        system: None,
        messages: vec![
            ChatMessage::user("go"),
            ChatMessage::assistant("reading", vec![call("t1"), call("t2")]),
            ChatMessage::tool_result("t1", "contents", false),
            ChatMessage::user("next"),
        ],
        max_output_tokens: 10,
        tools: crate::tools::ToolRegistry::builtin().specs(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let b = body(&req, &WireOptions::default());
    let m = &b["messages"];
    assert_eq!(m[1]["content"][1]["type"], "tool_use");
    assert_eq!(m[1]["content"][1]["input"]["path"], "a");
    assert_eq!(m[2]["content"][0]["tool_use_id"], "t1");
    assert_eq!(m[3]["content"][0]["tool_use_id"], "t2", "the unanswered call gets a result");
    assert_eq!(m[3]["content"][0]["is_error"], true);
    assert_eq!(m[4]["content"][0]["text"], "next");
    assert!(
        b["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "read_file" && t["input_schema"]["type"] == "object"))
    );
}

/// A thinking block (signed), a redacted one, text and a call.
const THINKING_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"think.\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAh\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":30}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

#[test]
fn thinking_is_streamed_and_kept_whole_with_its_signature() {
    let (reference, ok) = run(AnthropicParser::default(), THINKING_STREAM, usize::MAX);
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(
        &reference[..5],
        &[
            ProviderEvent::ThinkingDelta("Let me ".into()),
            ProviderEvent::ThinkingDelta("think.".into()),
            ProviderEvent::Reasoning(Reasoning::Thinking {
                thinking: "Let me think.".into(),
                signature: "EqQBCgIYAh".into()
            }),
            ProviderEvent::Reasoning(Reasoning::RedactedThinking { data: "EmwKAhgB".into() }),
            ProviderEvent::TextDelta("Done.".into()),
        ]
    );
    assert!(reference.iter().any(|e| matches!(e, ProviderEvent::Usage(u) if u.cache_read_tokens == 900)));
    assert_every_split(AnthropicParser::default, THINKING_STREAM, |e| e);
}

fn tool_loop_request() -> ChatRequest {
    let call = forge_proto::ToolCallRecord { id: "t1".into(), name: "read_file".into(), arguments: "{}".into() };
    ChatRequest {
        model: "claude-sonnet-4-6".into(),
        system: Some("be Forge".into()),
        messages: vec![
            ChatMessage::user("go"),
            ChatMessage::assistant("reading", vec![call]).with_reasoning(vec![
                Reasoning::Thinking { thinking: "hmm".into(), signature: "sig".into() },
                Reasoning::RedactedThinking { data: "xx".into() },
                Reasoning::GeminiSignature { signature: "other provider's".into(), call: None },
            ]),
            ChatMessage::tool_result("t1", "contents", false),
        ],
        max_output_tokens: 18_000,
        tools: crate::tools::ToolRegistry::builtin().specs(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    }
}

#[test]
fn thinking_goes_back_first_and_unmodified_with_the_thinking_config() {
    let opts = WireOptions { anthropic_thinking_budget: Some(10_000), ..Default::default() };
    let b = body(&tool_loop_request(), &opts);
    assert_eq!(b["thinking"], json!({"type": "enabled", "budget_tokens": 10_000}));
    let blocks = &b["messages"][1]["content"];
    assert_eq!(blocks[0], json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}));
    assert_eq!(blocks[1], json!({"type": "redacted_thinking", "data": "xx"}));
    assert_eq!(blocks[2]["type"], "text");
    assert_eq!(blocks[3]["type"], "tool_use");
    assert_eq!(blocks.as_array().map(Vec::len), Some(4), "another provider's signature is left out");
    // The budget stays below max_tokens; too little room means no thinking.
    let small = ChatRequest { max_output_tokens: 4000, ..tool_loop_request() };
    assert_eq!(body(&small, &opts)["thinking"]["budget_tokens"], 3999);
    let tiny = ChatRequest { max_output_tokens: 1000, ..tool_loop_request() };
    assert!(body(&tiny, &opts).get("thinking").is_none());
    // Continuing calls that were made without thinking: the API would
    // refuse thinking, so it is off for this request.
    let mut unsigned = tool_loop_request();
    unsigned.messages[1].reasoning.clear();
    assert!(body(&unsigned, &opts).get("thinking").is_none());
}

#[test]
fn cache_breakpoints_cover_tools_system_and_the_conversation() {
    let mut req = tool_loop_request();
    req.messages.push(ChatMessage::assistant("read it", Vec::new()));
    req.messages.push(ChatMessage::user("now edit"));
    let b = body(&req, &WireOptions { anthropic_cache: true, ..Default::default() });
    let text = b.to_string();
    assert_eq!(text.matches("cache_control").count(), 4, "at most 4 breakpoints: {text}");
    let tools = b["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.last().is_some_and(|t| t["cache_control"]["type"] == "ephemeral"));
    assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
    let m = b["messages"].as_array().cloned().unwrap_or_default();
    let last = m.last().and_then(|m| m["content"].as_array().and_then(|c| c.last().cloned()));
    assert!(last.is_some_and(|b| b["cache_control"].is_object()), "the end of the conversation");
    // The previous user turn (the tool result) too, so this request
    // reads what the last one wrote.
    assert!(m[2]["content"][0]["cache_control"].is_object());
    // Byte-stable: the same request twice is the same body.
    assert_eq!(body(&req, &WireOptions { anthropic_cache: true, ..Default::default() }), b);
}

fn schema_request(schema: Value, tools: bool) -> ChatRequest {
    ChatRequest {
        output_schema: Some(schema),
        tools: if tools { crate::tools::ToolRegistry::builtin().specs() } else { Vec::new() },
        ..tool_loop_request()
    }
}

#[test]
fn a_schema_answer_is_asked_for_through_the_answer_tool() {
    let object = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let b = body(&schema_request(object.clone(), false), &WireOptions::default());
    let tools = b["tools"].as_array().cloned().unwrap_or_default();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], ANSWER_TOOL);
    assert_eq!(tools[0]["input_schema"], object, "an object schema is the tool's input as it is");
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": ANSWER_TOOL}), "nothing else to call: forced");

    let list = json!({"type": "array", "items": {"type": "string"}});
    let b = body(&schema_request(list.clone(), true), &WireOptions::default());
    let answer = b["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == ANSWER_TOOL).cloned());
    assert_eq!(answer.map(|a| a["input_schema"]["properties"]["value"].clone()), Some(list), "wrapped");
    assert!(b.get("tool_choice").is_none(), "with tools to use, the model chooses");
    assert!(body(&tool_loop_request(), &WireOptions::default()).get("tool_choice").is_none());
}

const ANSWER_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Counted.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_F\",\"name\":\"final_answer\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"val\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ue\\\": [\\\"a\\\", \\\"b\\\"]}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

#[test]
fn the_answer_tools_input_comes_back_as_the_answer_not_a_call() {
    let req = schema_request(json!({"type": "array"}), false);
    let (events, ok) = run(AnthropicParser::for_request(&req), ANSWER_STREAM, usize::MAX);
    assert!(ok.is_ok(), "{ok:?}");
    assert!(!events.iter().any(|e| matches!(e, ProviderEvent::ToolCallStart { .. })), "{events:?}");
    let text: String = events
        .iter()
        .filter_map(|e| if let ProviderEvent::TextDelta(t) = e { Some(t.as_str()) } else { None })
        .collect();
    assert_eq!(text, "Counted.\n\n[\"a\",\"b\"]", "unwrapped, on a paragraph of its own");
    assert!(events.contains(&ProviderEvent::StopReason("end_turn".into())), "the turn ends with the answer");
    assert_every_split(|| AnthropicParser::for_request(&req), ANSWER_STREAM, |e| e);
    // Without a schema the same tool name is an ordinary call.
    let (events, _) = run(AnthropicParser::default(), ANSWER_STREAM, usize::MAX);
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::ToolCallStart { name, .. } if name == ANSWER_TOOL)));
}
