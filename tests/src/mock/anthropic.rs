//! The Anthropic Messages wire format: `POST /v1/messages`, named SSE
//! events (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`).

use serde_json::json;

use super::{Counts, Format, pieces, sse};

pub(super) struct Anthropic;

/// The data of the mock's redacted thinking block.
pub const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";

impl Format for Anthropic {
    fn error_body(&self, _status: u16, ty: &str, message: &str) -> String {
        json!({"type":"error","error":{"type":ty,"message":message},"request_id":"req_mock"}).to_string()
    }

    fn api_key(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, ()> {
        // The real API refuses a request without its version header.
        if header("anthropic-version").is_none() {
            return Err(());
        }
        Ok(header("x-api-key"))
    }

    fn key_required(&self) -> bool {
        true
    }

    fn start(&self, model: &str, thinking: &[String], counts: Counts) -> Vec<String> {
        let start = json!({"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant",
            "model":model,"content":[],"stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":counts.input,"cache_creation_input_tokens":counts.cache_written,
                     "cache_read_input_tokens":counts.cached_input,"output_tokens":1}}});
        let mut out = vec![sse(Some("message_start"), &start)];
        if !thinking.is_empty() {
            out.push(sse(
                Some("content_block_start"),
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
            ));
            for piece in thinking {
                out.push(sse(
                    Some("content_block_delta"),
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":piece}}),
                ));
            }
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM-mock-signature"}}),
            ));
            out.push(sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":0})));
        }
        if counts.redacted {
            out.push(sse(
                Some("content_block_start"),
                &json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":REDACTED}}),
            ));
            out.push(sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":1})));
        }
        let mut text = usize::from(!thinking.is_empty()) + usize::from(counts.redacted);
        if counts.searched {
            out.extend(search_blocks(text));
            text += 2;
        }
        out.push(sse(
            Some("content_block_start"),
            &json!({"type":"content_block_start","index":text,"content_block":{"type":"text","text":""}}),
        ));
        if counts.searched {
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type":"content_block_delta","index":text,"delta":{"type":"citations_delta","citation":{
                    "type":"web_search_result_location","url":SEARCH_URL,"title":"Forge mock result",
                    "cited_text":"Forge is a local coding-agent daemon.","encrypted_index":"bW9jaw=="}}}),
            ));
        }
        out.push("event: ping\ndata: {\"type\": \"ping\"}\n\n".to_string());
        out
    }

    fn text(&self, _model: &str, block: usize, chunk: &str) -> String {
        sse(
            Some("content_block_delta"),
            &json!({"type":"content_block_delta","index":block,"delta":{"type":"text_delta","text":chunk}}),
        )
    }

    fn midstream_error(&self) -> String {
        sse(Some("error"), &json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded (mock)"}}))
    }

    fn text_end(&self, block: usize, _whole: &str) -> Vec<String> {
        vec![sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":block}))]
    }

    fn tool_call(&self, _model: &str, block: usize, _k: usize, id: &str, name: &str, args: &str) -> Vec<String> {
        let index = block;
        let mut out = vec![sse(
            Some("content_block_start"),
            &json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        )];
        for frag in std::iter::once(String::new()).chain(pieces(args, 5)) {
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":frag}}),
            ));
        }
        out.push(sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":index})));
        out
    }

    fn finish(&self, _model: &str, tool_use: bool, counts: Counts) -> Vec<String> {
        let output_tokens = counts.output;
        let stop = if tool_use { "tool_use" } else { "end_turn" };
        let mut usage = json!({"output_tokens": output_tokens});
        if counts.searched {
            usage["server_tool_use"] = json!({"web_search_requests": 1});
        }
        vec![
            sse(
                Some("message_delta"),
                &json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":usage}),
            ),
            sse(Some("message_stop"), &json!({"type":"message_stop"})),
        ]
    }
}

/// The page every mock search finds.
pub const SEARCH_URL: &str = "https://example.com/forge";

/// A web search (its query) and what it found, as content blocks from
/// `first`.
fn search_blocks(first: usize) -> Vec<String> {
    let result = first + 1;
    vec![
        sse(
            Some("content_block_start"),
            &json!({"type":"content_block_start","index":first,"content_block":{"type":"server_tool_use","id":"srvtoolu_mock","name":"web_search","input":{}}}),
        ),
        sse(
            Some("content_block_delta"),
            &json!({"type":"content_block_delta","index":first,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"forge daemon\"}"}}),
        ),
        sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":first})),
        sse(
            Some("content_block_start"),
            &json!({"type":"content_block_start","index":result,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_mock",
                "content":[{"type":"web_search_result","url":SEARCH_URL,"title":"Forge mock result","encrypted_content":"bW9jaw==","page_age":null}]}}),
        ),
        sse(Some("content_block_stop"), &json!({"type":"content_block_stop","index":result})),
    ]
}
