//! OpenAI Chat Completions, streamed (`POST {base}/chat/completions`,
//! data-only SSE ending in `[DONE]`). Also the client for OpenAI-compatible
//! local servers (Ollama, llama.cpp, vLLM), whose quirks it tolerates.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{ChatRequest, ChatRole, ProviderError, ProviderEvent, ProviderSettings, emit, read_error_body};
use forge_proto::Usage;

fn body(req: &ChatRequest, compat: bool) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = &req.system {
        // Local servers often do not know the `developer` role.
        let role = if compat { "system" } else { "developer" };
        messages.push(json!({ "role": role, "content": system }));
    }
    for m in &req.messages {
        let role = match m.role {
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        };
        messages.push(json!({ "role": role, "content": m.text }));
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if compat {
        body["max_tokens"] = json!(req.max_output_tokens);
    } else {
        body["max_completion_tokens"] = json!(req.max_output_tokens);
    }
    body
}

/// Streams one answer into `tx`; the caller sends the final `Done`/`Error`.
pub(super) async fn stream(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    req: &ChatRequest,
    tx: &mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    let url = format!("{}/chat/completions", settings.base_url);
    let mut request = http
        .post(&url)
        .header("accept", "text/event-stream")
        .json(&body(req, settings.custom_base_url));
    if let Some(key) = &settings.api_key {
        request = request.bearer_auth(key);
    }
    let resp = request.send().await.map_err(|e| ProviderError::connect(settings, &e))?;
    let status = resp.status();
    if !status.is_success() {
        let text = read_error_body(resp).await;
        return Err(ProviderError::from_http(settings, &req.model, status.as_u16(), &text));
    }
    let mut events = resp.bytes_stream().eventsource();
    let mut finish_seen = false;
    while let Some(item) = events.next().await {
        let ev = item.map_err(|e| ProviderError::stream_broken(settings, &e.to_string()))?;
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::stream_broken(settings, &format!("malformed chunk ({e})")))?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let et = err
                .get("type")
                .or_else(|| err.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("error");
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| err.as_str())
                .unwrap_or("unknown error");
            return Err(ProviderError::midstream(settings, et, msg));
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            for key in ["reasoning_content", "reasoning"] {
                if let Some(t) = delta.get(key).and_then(Value::as_str)
                    && !t.is_empty()
                {
                    emit(tx, ProviderEvent::ThinkingDelta(t.to_string())).await?;
                }
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str)
                && !t.is_empty()
            {
                emit(tx, ProviderEvent::TextDelta(t.to_string())).await?;
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                finish_seen = true;
                emit(tx, ProviderEvent::StopReason(r.to_string())).await?;
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let get = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let usage = Usage {
                input_tokens: get("prompt_tokens"),
                output_tokens: get("completion_tokens"),
                cache_read_tokens: u
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cache_write_tokens: 0,
            };
            emit(tx, ProviderEvent::Usage(usage)).await?;
        }
    }
    if finish_seen {
        // Some local servers end without `[DONE]` after a finish_reason.
        Ok(())
    } else {
        Err(ProviderError::stream_broken(settings, "the connection closed before the answer finished"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;

    #[test]
    fn compat_servers_get_system_role_and_max_tokens() {
        let req = ChatRequest {
            model: "llama".into(),
            system: Some("be brief".into()),
            messages: vec![ChatMessage { role: ChatRole::User, text: "hi".into() }],
            max_output_tokens: 10,
        };
        let b = body(&req, true);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["max_tokens"], 10);
        let b = body(&req, false);
        assert_eq!(b["messages"][0]["role"], "developer");
        assert_eq!(b["max_completion_tokens"], 10);
        assert_eq!(b["stream_options"]["include_usage"], true);
    }
}
