//! The editor's wire, read and written here rather than by the SDK's
//! stdio transport, for what an editor may send that the SDK does not
//! survive or answer: a line that is not UTF-8 (read with replacement
//! characters instead of ending the connection), a request that is not
//! JSON-RPC 2.0 (answered with "invalid request", as the specification
//! asks, instead of silence), and an over-long line (refused, and the
//! connection goes on). Every line out goes through one writer task.

use futures::{Sink, Stream};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The longest line read from the editor. A prompt is refused with a
/// clear error well before this (the daemon takes 8 MiB); this only keeps
/// memory bounded.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// The transport for `Agent::connect_to`: lines from `input`, lines to
/// `output`.
pub fn lines(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> agent_client_protocol::Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let (tx, rx) = mpsc::channel::<String>(256);
    tokio::spawn(write_lines(rx, output));
    let outgoing = futures::sink::unfold(tx.clone(), |tx, line: String| async move {
        tx.send(line).await.map_err(|_| std::io::Error::other("the editor's output is closed"))?;
        Ok::<_, std::io::Error>(tx)
    });
    let incoming = futures::stream::unfold((BufReader::new(input), tx), |(mut input, tx)| async move {
        loop {
            let line = match read_line(&mut input).await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some((Err(e), (input, tx))),
            };
            match check(&line) {
                Check::Pass => return Some((Ok(line), (input, tx))),
                Check::Skip => {}
                Check::Answer(answer) => {
                    let _ = tx.send(answer.to_string()).await;
                }
            }
        }
    });
    agent_client_protocol::Lines::new(outgoing, incoming)
}

async fn write_lines(mut rx: mpsc::Receiver<String>, mut output: impl AsyncWrite + Unpin) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
}

/// The next line (without its end), not-UTF-8 bytes replaced; an
/// over-long line is replaced by a marker `check` answers.
async fn read_line(input: &mut (impl AsyncBufReadExt + Unpin)) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            if bytes.is_empty() && !too_long {
                return Ok(None);
            }
            break;
        }
        let (take, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if bytes.len() + take <= MAX_LINE {
            bytes.extend_from_slice(&buf[..take]);
        } else {
            too_long = true;
            bytes.clear();
        }
        input.consume(take);
        if end {
            break;
        }
    }
    if too_long {
        return Ok(Some(TOO_LONG.into()));
    }
    let line = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(Some(line.trim_end_matches(['\n', '\r']).to_string()))
}

const TOO_LONG: &str = "\u{0}too long";

enum Check {
    /// For the SDK.
    Pass,
    /// Nothing to do (a blank line, a notification that is not 2.0).
    Skip,
    /// Answered here.
    Answer(Value),
}

fn check(line: &str) -> Check {
    if line.trim().is_empty() {
        return Check::Skip;
    }
    if line == TOO_LONG {
        let message = format!("a message may be at most {} MiB", MAX_LINE / (1024 * 1024));
        return Check::Answer(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}}));
    }
    // The SDK answers what is not JSON; only the version is checked here,
    // without building the message (a prompt may be megabytes).
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        jsonrpc: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        id: Option<&'a serde_json::value::RawValue>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let Ok(head) = serde_json::from_str::<Head>(line) else { return Check::Pass };
    if head.jsonrpc.as_deref() == Some("2.0") {
        return Check::Pass;
    }
    match (head.id, head.method) {
        (Some(id), Some(_)) => Check::Answer(json!({
            "jsonrpc": "2.0",
            "id": serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null),
            "error": {"code": -32600, "message": "invalid request: \"jsonrpc\" must be \"2.0\""},
        })),
        _ => Check::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_bytes_are_replaced_and_long_lines_refused() {
        let mut input: &[u8] = b"{\"a\":\"\xff\"}\r\n\nlast";
        let mut reader = BufReader::new(&mut input);
        assert_eq!(read_line(&mut reader).await.ok().flatten().as_deref(), Some("{\"a\":\"\u{fffd}\"}"));
        assert_eq!(read_line(&mut reader).await.ok().flatten().as_deref(), Some(""));
        assert_eq!(read_line(&mut reader).await.ok().flatten().as_deref(), Some("last"));
        assert_eq!(read_line(&mut reader).await.ok().flatten(), None);
    }

    #[test]
    fn only_json_rpc_2_goes_on_and_other_requests_are_answered() {
        assert!(matches!(check(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#), Check::Pass));
        assert!(matches!(check("not json"), Check::Pass));
        assert!(matches!(check(r#"{"jsonrpc":"1.0","method":"x"}"#), Check::Skip));
        let Check::Answer(a) = check(r#"{"jsonrpc":"1.0","id":7,"method":"initialize"}"#) else { panic!("answered") };
        assert_eq!((a["id"].as_i64(), a["error"]["code"].as_i64()), (Some(7), Some(-32600)));
    }
}
