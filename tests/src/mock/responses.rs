//! The OpenAI Responses wire format: `POST /v1/responses`, named SSE events
//! (`response.created`, `response.output_item.*`, `response.*.delta`,
//! `response.completed`), no `[DONE]`.

use serde_json::{Value, json};

use super::{Counts, Format, pieces, sse};

pub(super) struct Responses;

fn ev(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_string();
    sse(Some(&name), &data)
}

impl Format for Responses {
    fn error_body(&self, _status: u16, ty: &str, message: &str) -> String {
        json!({"error":{"message":message,"type":ty,"param":null,"code":ty}}).to_string()
    }

    fn api_key(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, ()> {
        Ok(header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_string)))
    }

    fn key_required(&self) -> bool {
        true
    }

    fn start(&self, model: &str, thinking: &[String], counts: Counts) -> Vec<String> {
        let response = json!({"id":"resp_mock","object":"response","created_at":1,"status":"in_progress","model":model,"output":[],"usage":null});
        let mut out = vec![
            ev(json!({"type":"response.created","sequence_number":0,"response":response})),
            ev(json!({"type":"response.in_progress","sequence_number":1,"response":response})),
        ];
        if !thinking.is_empty() {
            out.push(ev(json!({"type":"response.output_item.added","output_index":0,"item":{"id":"rs_mock","type":"reasoning","summary":[]}})));
            out.push(ev(json!({"type":"response.reasoning_summary_part.added","item_id":"rs_mock","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}})));
            for piece in thinking {
                out.push(ev(json!({"type":"response.reasoning_summary_text.delta","item_id":"rs_mock","output_index":0,"summary_index":0,"delta":piece})));
            }
            let whole: String = thinking.concat();
            out.push(ev(json!({"type":"response.reasoning_summary_text.done","item_id":"rs_mock","output_index":0,"summary_index":0,"text":whole})));
            out.push(ev(json!({"type":"response.output_item.done","output_index":0,"item":{"id":"rs_mock","type":"reasoning",
                "summary":[{"type":"summary_text","text":whole}],"encrypted_content":"gAAAA-mock-encrypted-reasoning"}})));
        }
        let mut index = usize::from(!thinking.is_empty());
        if counts.searched {
            let search = json!({"id":"ws_mock","type":"web_search_call","status":"completed","action":{"type":"search","query":"forge daemon"}});
            out.push(ev(json!({"type":"response.output_item.added","output_index":index,"item":{"id":"ws_mock","type":"web_search_call","status":"in_progress"}})));
            out.push(ev(json!({"type":"response.output_item.done","output_index":index,"item":search})));
            index += 1;
        }
        out.push(ev(json!({"type":"response.output_item.added","output_index":index,"item":{"id":"msg_mock","type":"message","status":"in_progress","role":"assistant","content":[]}})));
        out.push(ev(json!({"type":"response.content_part.added","item_id":"msg_mock","output_index":index,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}})));
        if counts.searched {
            out.push(ev(json!({"type":"response.output_text.annotation.added","item_id":"msg_mock","output_index":index,"content_index":0,
                "annotation_index":0,"annotation":{"type":"url_citation","url":super::anthropic::SEARCH_URL,"title":"Forge mock result","start_index":0,"end_index":4}})));
        }
        out
    }

    fn text(&self, _model: &str, block: usize, chunk: &str) -> String {
        ev(
            json!({"type":"response.output_text.delta","item_id":"msg_mock","output_index":block,"content_index":0,"delta":chunk,"logprobs":[]}),
        )
    }

    fn midstream_error(&self) -> String {
        ev(json!({"type":"error","code":"server_error","message":"The server had an error (mock)","param":null}))
    }

    fn text_end(&self, block: usize, whole: &str) -> Vec<String> {
        // As the API does, the done events repeat the whole text: clients
        // such as Codex build the message from `output_item.done`.
        let part = json!({"type":"output_text","text":whole,"annotations":[]});
        vec![
            ev(
                json!({"type":"response.output_text.done","item_id":"msg_mock","output_index":block,"content_index":0,"text":whole,"logprobs":[]}),
            ),
            ev(
                json!({"type":"response.content_part.done","item_id":"msg_mock","output_index":block,"content_index":0,"part":part}),
            ),
            ev(json!({"type":"response.output_item.done","output_index":block,
                "item":{"id":"msg_mock","type":"message","status":"completed","role":"assistant","content":[part]}})),
        ]
    }

    fn tool_call(&self, _model: &str, block: usize, k: usize, id: &str, name: &str, args: &str) -> Vec<String> {
        let item_id = format!("fc_mock_{k}");
        let mut out = vec![ev(json!({"type":"response.output_item.added","output_index":block,
            "item":{"id":item_id,"type":"function_call","status":"in_progress","arguments":"","call_id":id,"name":name}}))];
        for frag in pieces(args, 5) {
            out.push(ev(json!({"type":"response.function_call_arguments.delta","item_id":item_id,"output_index":block,"delta":frag})));
        }
        out.push(ev(json!({"type":"response.function_call_arguments.done","item_id":item_id,"output_index":block,"name":name,"arguments":args})));
        out.push(ev(json!({"type":"response.output_item.done","output_index":block,
            "item":{"id":item_id,"type":"function_call","status":"completed","arguments":args,"call_id":id,"name":name}})));
        out
    }

    fn finish(&self, model: &str, _tool_use: bool, counts: Counts) -> Vec<String> {
        let (output_tokens, thinking) = (counts.output, counts.thinking);
        vec![ev(
            json!({"type":"response.completed","response":{"id":"resp_mock","object":"response","status":"completed","model":model,"output":[],
            "usage":{"input_tokens":counts.input,"input_tokens_details":{"cached_tokens":0},"output_tokens":output_tokens + thinking,
                     "output_tokens_details":{"reasoning_tokens":thinking},"total_tokens":counts.input + output_tokens + thinking}}}),
        )]
    }
}
