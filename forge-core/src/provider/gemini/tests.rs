//! The Gemini wire: parsing at every split, errors, and the request.
use super::*;
use crate::provider::ChatMessage;
use crate::provider::sse::testing::{assert_every_split, run, tool_args};

fn chunk(v: Value) -> String {
    format!("data: {v}\r\n\r\n")
}

/// A thought part, text in two chunks, then two parallel calls (the
/// first signed) with the finish reason and usage, CRLF-framed.
fn stream() -> String {
    let mut s = chunk(
        json!({"candidates":[{"content":{"parts":[{"text":"Plan: read.","thought":true}],"role":"model"},"index":0}],
        "usageMetadata":{"promptTokenCount":16,"totalTokenCount":16}}),
    );
    s += &chunk(json!({"candidates":[{"content":{"parts":[{"text":"Reading "}],"role":"model"},"index":0}]}));
    s += &chunk(json!({"candidates":[{"content":{"parts":[{"text":"\u{65e5}\u{672c}"}],"role":"model"},"index":0}]}));
    s += &chunk(json!({"candidates":[{"content":{"parts":[
            {"functionCall":{"name":"read_file","args":{"path":"a.rs"}},"thoughtSignature":"c2ln"},
            {"functionCall":{"name":"glob","args":{"pattern":"*"}}}],"role":"model"},
          "finishReason":"STOP","index":0}],
        "usageMetadata":{"promptTokenCount":16,"cachedContentTokenCount":4,"candidatesTokenCount":9,"thoughtsTokenCount":5,"totalTokenCount":30},
        "modelVersion":"gemini-3.5-flash"}));
    s
}

#[test]
fn thoughts_text_calls_and_signatures_parse_identically_at_every_split() {
    let body = stream();
    let (reference, ok) = run(GeminiParser::default(), &body, usize::MAX);
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(reference[0], ProviderEvent::ThinkingDelta("Plan: read.".into()));
    assert_eq!(reference[1], ProviderEvent::TextDelta("Reading ".into()));
    assert!(matches!(&reference[3], ProviderEvent::ToolCallStart { index: 0, name, .. } if name == "read_file"));
    assert_eq!(serde_json::from_str::<Value>(&tool_args(&reference, 0)).ok(), Some(json!({"path": "a.rs"})));
    assert!(
        reference.contains(&ProviderEvent::Reasoning(Reasoning::GeminiSignature {
            signature: "c2ln".into(),
            call: Some(0)
        }))
    );
    assert!(reference.contains(&ProviderEvent::StopReason("tool_calls".into())));
    assert!(reference.iter().any(|e| matches!(e, ProviderEvent::Usage(u)
        if u.input_tokens == 12 && u.cache_read_tokens == 4 && u.output_tokens == 14 && u.reasoning_tokens == 5)));
    // Split anywhere, CRLF included; the generated call ids differ.
    let shape = |events: Vec<ProviderEvent>| -> Vec<ProviderEvent> {
        events
            .into_iter()
            .map(|e| match e {
                ProviderEvent::ToolCallStart { index, name, .. } => {
                    ProviderEvent::ToolCallStart { index, id: String::new(), name }
                }
                other => other,
            })
            .collect()
    };
    let reference = shape(reference);
    for split in [1, 2, 3, 17, 64] {
        assert_eq!(shape(run(GeminiParser::default(), &body, split).0), reference, "split {split}");
    }
    assert_every_split(GeminiParser::default, &body, shape);
}

#[test]
fn a_bare_json_error_mid_stream_is_the_providers_error() {
    let mut body = chunk(json!({"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}]}));
    body +=
        "{\"error\": {\"code\": 503,\r\n \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\r\n";
    let (events, end) = run(GeminiParser::default(), &body, 7);
    assert_eq!(events, vec![ProviderEvent::TextDelta("Hel".into())]);
    assert!(end.is_err_and(|e| e.message.contains("The model is overloaded") && e.retry.is_some()));
}

#[test]
fn errors_blocks_and_cuts_are_errors() {
    let err = chunk(json!({"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}));
    let (_, end) = run(GeminiParser::default(), &err, 5);
    assert!(end.is_err_and(|e| e.retry.is_some() && e.message.contains("overloaded")));
    let blocked = chunk(json!({"promptFeedback":{"blockReason":"SAFETY"}}));
    assert!(run(GeminiParser::default(), &blocked, 5).1.is_err_and(|e| e.message.contains("SAFETY")));
    let body = stream();
    let cut = &body[..body.rfind("data:").unwrap_or(0)];
    assert!(run(GeminiParser::default(), cut, 9).1.is_err(), "EOF without finishReason is a truncation");
}

#[test]
fn the_request_sends_signatures_back_and_names_function_responses() {
    let call = |id: &str, name: &str| forge_proto::ToolCallRecord {
        id: id.into(),
        name: name.into(),
        arguments: "{\"path\":\"a\"}".into(),
    };
    let answer = ChatMessage::assistant("reading", vec![call("gemini-call-1", "read_file"), call("g2", "glob")])
        .with_reasoning(vec![Reasoning::GeminiSignature { signature: "c2ln".into(), call: Some(0) }]);
    let req = ChatRequest {
        model: "gemini-3.5-flash".into(),
        system: Some("be Forge".into()),
        messages: vec![
            ChatMessage::user("go"),
            answer,
            ChatMessage::tool_result("gemini-call-1", "contents", false),
            ChatMessage::tool_result("g2", "no match", true),
        ],
        max_output_tokens: 100,
        tools: crate::tools::ToolRegistry::builtin().specs(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let b = body(&req, &WireOptions { gemini_thinking: true, ..Default::default() }, None);
    assert_eq!(b["systemInstruction"]["parts"][0]["text"], "be Forge");
    assert_eq!(b["generationConfig"]["thinkingConfig"]["includeThoughts"], true);
    let c = &b["contents"];
    assert_eq!(c[1]["role"], "model");
    assert_eq!(c[1]["parts"][1]["thoughtSignature"], "c2ln");
    assert!(c[1]["parts"][1]["functionCall"].get("id").is_none(), "a local id is not sent");
    assert_eq!(c[1]["parts"][2]["functionCall"]["id"], "g2");
    assert_eq!(c[2]["role"], "user");
    assert_eq!(c[2]["parts"][0]["functionResponse"]["name"], "read_file");
    assert_eq!(c[2]["parts"][1]["functionResponse"]["response"]["error"], "no match");
    assert_eq!(c.as_array().map(Vec::len), Some(3), "parallel responses share one turn");
    assert!(b["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].is_object());
    // With a cache of the prefix, the request carries its name instead.
    let c = body(&req, &WireOptions::default(), Some("cachedContents/abc"));
    assert_eq!(c["cachedContent"], "cachedContents/abc");
    assert!(c.get("systemInstruction").is_none() && c.get("tools").is_none());
    assert_eq!(c["contents"], b["contents"]);
}

#[test]
fn google_search_grounding_is_offered_read_and_sent_back() {
    let search = json!([
        {"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "s1", "args": {"queries": ["forge daemon"]}}, "thoughtSignature": "c2ln"},
        {"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "id": "s1", "response": {}}}
    ]);
    let mut sse = chunk(json!({"candidates":[{"content":{"parts":search,"role":"model"},"index":0}]}));
    sse +=
        &chunk(json!({"candidates":[{"content":{"parts":[{"text":"Forge is a daemon."}],"role":"model"},"index":0}]}));
    let grounding = json!({"webSearchQueries": ["forge daemon"],
        "groundingChunks": [{"web": {"uri": "https://example.com/forge", "title": "Forge"}}],
        "groundingSupports": [{"segment": {"text": "Forge is a daemon."}, "groundingChunkIndices": [0]}]});
    sse += &chunk(json!({"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"STOP","index":0,
        "groundingMetadata": grounding}], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 4}}));
    let (events, end) = run(GeminiParser::default(), &sse, usize::MAX);
    assert!(end.is_ok());
    let at = |want: &ProviderEvent| events.iter().position(|e| e == want);
    let search = at(&ProviderEvent::WebSearch("forge daemon".into()));
    assert!(
        search.is_some() && search < at(&ProviderEvent::TextDelta("Forge is a daemon.".into())),
        "said as it starts"
    );
    assert_eq!(events.iter().filter(|e| matches!(e, ProviderEvent::WebSearch(_))).count(), 1, "once");
    assert!(events.contains(&ProviderEvent::Citation(forge_proto::Citation {
        url: "https://example.com/forge".into(),
        title: "Forge".into(),
        cited_text: Some("Forge is a daemon.".into()),
    })));
    let kept: Vec<Reasoning> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Reasoning(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(kept.len(), 2, "the search's call and response are kept: {kept:?}");
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Usage(u) if u.web_search_requests == 1)));
    // Every split parses alike.
    for split in [1, 7, 64] {
        assert_eq!(run(GeminiParser::default(), &sse, split).0, events, "split {split}");
    }

    // Offered beside the functions; the next request sends the search back.
    let answer = ChatMessage::assistant("Forge is a daemon.", Vec::new()).with_reasoning(kept);
    let req = ChatRequest {
        model: "gemini-3.5-flash".into(),
        system: None,
        messages: vec![ChatMessage::user("what is forge?"), answer, ChatMessage::user("more")],
        max_output_tokens: 100,
        tools: crate::tools::ToolRegistry::builtin().specs(),
        output_schema: None,
        web_search: Some(Default::default()),
        sampling: Default::default(),
        active_files: None,
    };
    let b = body(&req, &WireOptions::default(), None);
    assert_eq!(b["tools"][1], json!({"googleSearch": {}}));
    assert_eq!(b["toolConfig"]["includeServerSideToolInvocations"], true);
    let parts = &b["contents"][1]["parts"];
    assert_eq!(parts[0]["toolCall"]["id"], "s1");
    assert_eq!(parts[0]["thoughtSignature"], "c2ln");
    assert_eq!(parts[1]["toolResponse"]["id"], "s1");
    assert_eq!(parts[2]["text"], "Forge is a daemon.");
}
