//! Anthropic Messages API, streamed (`POST {base}/v1/messages`, SSE with
//! `event:` names equal to the data's `type`).

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{ChatRequest, ChatRole, ProviderError, ProviderEvent, ProviderSettings, emit, read_error_body};
use forge_proto::Usage;

const API_VERSION: &str = "2023-06-01";

fn body(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                ChatRole::User => "user",
                ChatRole::Assistant => "assistant",
            };
            json!({ "role": role, "content": m.text })
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &req.system {
        body["system"] = json!(system);
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
    let url = format!("{}/v1/messages", settings.base_url);
    let mut request = http
        .post(&url)
        .header("anthropic-version", API_VERSION)
        .header("accept", "text/event-stream")
        .json(&body(req));
    if let Some(key) = &settings.api_key {
        request = request.header("x-api-key", key);
    }
    let resp = request.send().await.map_err(|e| ProviderError::connect(settings, &e))?;
    let status = resp.status();
    if !status.is_success() {
        let text = read_error_body(resp).await;
        return Err(ProviderError::from_http(settings, &req.model, status.as_u16(), &text));
    }
    let mut events = resp.bytes_stream().eventsource();
    let mut usage = Usage::default();
    while let Some(item) = events.next().await {
        let ev = item.map_err(|e| ProviderError::stream_broken(settings, &e.to_string()))?;
        if ev.data.is_empty() {
            continue;
        }
        let data: Value = serde_json::from_str(&ev.data).map_err(|e| {
            ProviderError::stream_broken(settings, &format!("malformed event data ({e}) in `{}` event", ev.event))
        })?;
        let ty = data.get("type").and_then(Value::as_str).unwrap_or(ev.event.as_str());
        match ty {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage") {
                    merge_usage(&mut usage, u);
                }
            }
            "content_block_start" => {
                // A text block may start with text already in it.
                if let Some(t) = data.pointer("/content_block/text").and_then(Value::as_str)
                    && !t.is_empty()
                {
                    emit(tx, ProviderEvent::TextDelta(t.to_string())).await?;
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = delta.get("text").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            emit(tx, ProviderEvent::TextDelta(t.to_string())).await?;
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = delta.get("thinking").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            emit(tx, ProviderEvent::ThinkingDelta(t.to_string())).await?;
                        }
                    }
                    // Tool input and signatures are handled by the tool system.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    emit(tx, ProviderEvent::StopReason(r.to_string())).await?;
                }
                if let Some(u) = data.get("usage") {
                    merge_usage(&mut usage, u);
                }
            }
            "message_stop" => {
                emit(tx, ProviderEvent::Usage(usage)).await?;
                return Ok(());
            }
            "error" => {
                let et = data.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
                let msg = data.pointer("/error/message").and_then(Value::as_str).unwrap_or("unknown error");
                return Err(ProviderError::midstream(settings, et, msg));
            }
            // ping and event types added after this client was written.
            _ => {}
        }
    }
    Err(ProviderError::stream_broken(settings, "the connection closed before `message_stop`"))
}

/// Usage fields overwrite: `message_delta` carries cumulative numbers.
fn merge_usage(usage: &mut Usage, u: &Value) {
    let get = |k: &str| u.get(k).and_then(Value::as_u64);
    if let Some(v) = get("input_tokens") {
        usage.input_tokens = v;
    }
    if let Some(v) = get("output_tokens") {
        usage.output_tokens = v;
    }
    if let Some(v) = get("cache_read_input_tokens") {
        usage.cache_read_tokens = v;
    }
    if let Some(v) = get("cache_creation_input_tokens") {
        usage.cache_write_tokens = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;

    #[test]
    fn request_body_has_the_required_fields() {
        let req = ChatRequest {
            model: "claude-x".into(),
            system: None,
            messages: vec![ChatMessage { role: ChatRole::User, text: "hi".into() }],
            max_output_tokens: 100,
        };
        let b = body(&req);
        assert_eq!(b["model"], "claude-x");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["stream"], true);
        assert_eq!(b["messages"][0]["role"], "user");
        assert_eq!(b["messages"][0]["content"], "hi");
    }
}
