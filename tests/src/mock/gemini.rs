//! The Gemini wire format: `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! data-only SSE framed with CRLF, the stream ending at EOF after the
//! chunk with `finishReason`. Thoughts are `thought: true` parts; the
//! first function call and the final text carry a `thoughtSignature`.

use serde_json::{Value, json};

use super::{Counts, Format};

/// The signature on the first function call of an answer.
pub const CALL_SIGNATURE: &str = "bW9jay1jYWxsLXNpZ25hdHVyZQ==";

fn chunk(parts: Value, model: &str) -> String {
    let data = json!({"candidates":[{"content":{"parts":parts,"role":"model"},"index":0}],"modelVersion":model,"responseId":"mock"});
    format!("data: {data}\r\n\r\n")
}

pub(super) struct Gemini;

impl Format for Gemini {
    fn error_body(&self, status: u16, ty: &str, message: &str) -> String {
        let rpc = match (status, ty) {
            (_, "authentication_error") => "INVALID_ARGUMENT",
            (429, _) => "RESOURCE_EXHAUSTED",
            (503 | 529, _) => "UNAVAILABLE",
            (500, _) => "INTERNAL",
            (403, _) => "PERMISSION_DENIED",
            (404, _) => "NOT_FOUND",
            _ => "INVALID_ARGUMENT",
        };
        if ty == "authentication_error" {
            // As the API answers a bad key: 400 with the reason in details.
            return json!({"error":{"code":400,"message":"API key not valid. Please pass a valid API key. (mock)","status":rpc,
                "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}})
            .to_string();
        }
        json!({"error":{"code":status,"message":message,"status":rpc}}).to_string()
    }

    fn auth_status(&self) -> u16 {
        400
    }

    fn api_key(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, ()> {
        Ok(header("x-goog-api-key"))
    }

    fn key_required(&self) -> bool {
        true
    }

    fn start(&self, model: &str, thinking: &[String], counts: Counts) -> Vec<String> {
        let mut out: Vec<String> =
            thinking.iter().map(|piece| chunk(json!([{"text": piece, "thought": true}]), model)).collect();
        if counts.searched {
            // The search the API ran itself, shown as Gemini 3 shows it
            // beside function declarations.
            out.push(chunk(
                json!([
                    {"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mock-search", "args": {"queries": ["forge daemon"]}}},
                    {"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mock-search", "response": {"search_suggestions": "forge daemon"}}}
                ]),
                model,
            ));
        }
        out
    }

    fn text(&self, model: &str, _block: usize, text: &str) -> String {
        chunk(json!([{"text": text}]), model)
    }

    fn midstream_error(&self) -> String {
        // The API writes a mid-stream error as bare JSON, not as an SSE event.
        format!(
            "{}\r\n",
            json!({"error":{"code":503,"message":"The model is overloaded. (mock)","status":"UNAVAILABLE"}})
        )
    }

    fn text_end(&self, _block: usize, _whole: &str) -> Vec<String> {
        Vec::new()
    }

    fn tool_call(&self, model: &str, _block: usize, k: usize, _id: &str, name: &str, args: &str) -> Vec<String> {
        let args: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
        let mut part = json!({"functionCall": {"name": name, "args": args}});
        if k == 0 {
            part["thoughtSignature"] = json!(CALL_SIGNATURE);
        }
        vec![chunk(json!([part]), model)]
    }

    fn finish(&self, model: &str, tool_use: bool, counts: Counts) -> Vec<String> {
        let (output_tokens, thinking) = (counts.output, counts.thinking);
        let parts = if tool_use {
            json!([])
        } else {
            json!([{"text": "", "thoughtSignature": "bW9jay10ZXh0LXNpZ25hdHVyZQ=="}])
        };
        let mut candidate = json!({"content":{"parts":parts,"role":"model"},"finishReason":"STOP","index":0});
        if counts.searched {
            candidate["groundingMetadata"] = json!({
                "webSearchQueries": ["forge daemon"],
                "groundingChunks": [{"web": {"uri": super::anthropic::SEARCH_URL, "title": "Forge mock result"}}],
                "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 36, "text": "Forge is a local coding-agent daemon."},
                                       "groundingChunkIndices": [0], "confidenceScores": [0.9]}]
            });
        }
        let data = json!({"candidates":[candidate],
            "usageMetadata":{"promptTokenCount":counts.input + counts.cached_input,"cachedContentTokenCount":counts.cached_input,
                             "candidatesTokenCount":output_tokens,"thoughtsTokenCount":thinking,
                             "totalTokenCount":counts.input + counts.cached_input + output_tokens + thinking},
            "modelVersion":model,"responseId":"mock"});
        vec![format!("data: {data}\r\n\r\n")]
    }
}
