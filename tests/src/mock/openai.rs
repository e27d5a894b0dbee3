//! The OpenAI Chat Completions wire format (also what OpenAI-compatible
//! local servers speak): `POST /v1/chat/completions`, unnamed SSE chunks,
//! `data: [DONE]` at the end.

use serde_json::json;

use super::{Counts, Format, pieces, sse};

pub(super) struct OpenAi;

const ID: &str = "chatcmpl-mock";

impl Format for OpenAi {
    fn error_body(&self, _status: u16, ty: &str, message: &str) -> String {
        json!({"error":{"message":message,"type":ty,"param":null,"code":ty}}).to_string()
    }

    fn api_key(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, ()> {
        Ok(header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_string)))
    }

    fn key_required(&self) -> bool {
        false
    }

    fn start(&self, model: &str, thinking: &[String], _counts: Counts) -> Vec<String> {
        let first = json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
            "choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null});
        let mut out = vec![sse(None, &first)];
        // As OpenAI-compatible servers (vLLM, llama.cpp, DeepSeek) stream
        // reasoning.
        for piece in thinking {
            out.push(sse(
                None,
                &json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
                    "choices":[{"index":0,"delta":{"reasoning_content":piece},"logprobs":null,"finish_reason":null}],"usage":null}),
            ));
        }
        out
    }

    fn text(&self, model: &str, _block: usize, chunk: &str) -> String {
        sse(
            None,
            &json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
                "choices":[{"index":0,"delta":{"content":chunk},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x7"}),
        )
    }

    fn midstream_error(&self) -> String {
        sse(None, &json!({"error":{"message":"The server had an error (mock)","type":"server_error","code":null}}))
    }

    fn text_end(&self, _block: usize, _whole: &str) -> Vec<String> {
        Vec::new()
    }

    fn tool_call(&self, model: &str, _block: usize, k: usize, id: &str, name: &str, args: &str) -> Vec<String> {
        let first = json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
            "choices":[{"index":0,"delta":{"tool_calls":[{"index":k,"id":id,"type":"function","function":{"name":name,"arguments":""}}]},"finish_reason":null}]});
        let mut out = vec![sse(None, &first)];
        for frag in pieces(args, 5) {
            let c = json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
                "choices":[{"index":0,"delta":{"tool_calls":[{"index":k,"function":{"arguments":frag}}]},"finish_reason":null}]});
            out.push(sse(None, &c));
        }
        out
    }

    fn finish(&self, model: &str, tool_use: bool, counts: Counts) -> Vec<String> {
        let output_tokens = counts.output;
        let finish = if tool_use { "tool_calls" } else { "stop" };
        if counts.no_usage {
            return vec![
                sse(
                    None,
                    &json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
                        "choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":finish}]}),
                ),
                "data: [DONE]\n\n".to_string(),
            ];
        }
        vec![
            sse(
                None,
                &json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,
                    "choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":finish}],"usage":null}),
            ),
            sse(
                None,
                &json!({"id":ID,"object":"chat.completion.chunk","created":1,"model":model,"choices":[],
                    "usage":{"prompt_tokens":counts.input,"completion_tokens":output_tokens,"total_tokens":counts.input + output_tokens}}),
            ),
            "data: [DONE]\n\n".to_string(),
        ]
    }
}
