//! The stdio connection to a server's process. rmcp drops a message longer
//! than its line limit and says nothing to the caller, whose call then
//! waits for its timeout and reports "timed out". Here the server's
//! stdout passes through [`Oversize`], which answers such a result itself
//! at once: a JSON-RPC error with the request's id and the size, so the
//! call fails saying what happened.

use std::pin::Pin;
use std::task::{Context, Poll};

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};

/// The most one message from a server may hold (rmcp's own default, set
/// here so the two limits are the same number).
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The error code of the answer [`Oversize`] makes (a server error in
/// JSON-RPC's implementation-defined range).
pub(crate) const TOO_LARGE: i32 = -32_090;

/// How long a server may take to exit once its stdin is closed.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A server process and the connection over its stdin and stdout. Its
/// process group is killed when the connection is dropped.
pub(crate) struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    io: AsyncRwTransport<RoleClient, Oversize<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    pub(crate) fn spawn(
        mut cmd: CommandWrap,
    ) -> std::io::Result<(ChildTransport, Option<tokio::process::ChildStderr>)> {
        use std::process::Stdio;
        cmd.command_mut().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout().take(), child.stdin().take()) else {
            return Err(std::io::Error::other("the server's stdin or stdout was not piped"));
        };
        let stderr = child.stderr().take();
        let io = AsyncRwTransport::new_client(Oversize::new(stdout), stdin).with_max_line_length(MAX_MESSAGE_BYTES);
        Ok((ChildTransport { child: Some(child), io }, stderr))
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            // Reaped beside, so no zombie is left.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    /// Closes its stdin and gives it a second to exit on its own (as the
    /// MCP spec's stdio shutdown asks); the drop kills what is left.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = self.io.close().await;
        if let Some(child) = self.child.as_mut()
            && let Ok(Ok(_)) = tokio::time::timeout(EXIT_GRACE, child.wait()).await
        {
            self.child = None;
        }
        closed
    }
}

/// A server's stdout, with a line longer than [`MAX_MESSAGE_BYTES`] that
/// answers a request followed by an error answer to that request (rmcp
/// drops the line itself).
pub(crate) struct Oversize<R> {
    inner: R,
    scan: Scan,
    /// Bytes read and looked at, not yet handed on.
    out: Vec<u8>,
    at: usize,
}

impl<R> Oversize<R> {
    pub(crate) fn new(inner: R) -> Self {
        Oversize { inner, scan: Scan::default(), out: Vec::new(), at: 0 }
    }

    /// Looks at `read`, adding it (and any error answer) to `out`.
    fn take_in(&mut self, read: &[u8]) {
        let mut from = 0;
        for (i, &b) in read.iter().enumerate() {
            if b != b'\n' {
                self.scan.byte(b);
                continue;
            }
            let line = std::mem::take(&mut self.scan);
            self.out.extend_from_slice(&read[from..=i]);
            from = i + 1;
            if line.len + 1 > MAX_MESSAGE_BYTES
                && !line.is_request
                && let Some(id) = line.id
            {
                self.out.extend_from_slice(&too_large(&id, line.len + 1));
            }
        }
        self.out.extend_from_slice(&read[from..]);
    }
}

/// The error answer to request `id` (as it was written) whose result was
/// `bytes` long.
fn too_large(id: &[u8], bytes: usize) -> Vec<u8> {
    let message = format!(
        "sent a result of {:.1} MiB, more than the {} MiB Forge takes from an MCP server; the call was made but its result is lost",
        bytes as f64 / (1024.0 * 1024.0),
        MAX_MESSAGE_BYTES / (1024 * 1024)
    );
    let error = serde_json::json!({"code": TOO_LARGE, "message": message});
    let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":".to_vec();
    line.extend_from_slice(id);
    line.extend_from_slice(b",\"error\":");
    line.extend_from_slice(error.to_string().as_bytes());
    line.extend_from_slice(b"}\n");
    line
}

impl<R: AsyncRead + Unpin> AsyncRead for Oversize<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.at == this.out.len() {
            this.out.clear();
            this.at = 0;
            let mut chunk = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            if read.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
            this.take_in(read.filled());
        }
        let n = buf.remaining().min(this.out.len() - this.at);
        buf.put_slice(&this.out[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

/// What one line says at its top level, read a byte at a time (a line
/// may be far too long to hold): its `id` as written, and whether it has
/// a `method` (a request or notification from the server, which gets no
/// answer from here).
#[derive(Default)]
struct Scan {
    len: usize,
    depth: u32,
    in_string: bool,
    escaped: bool,
    at: Place,
    /// The top-level key being read (only its first bytes matter).
    key: Vec<u8>,
    /// The `id` value being read.
    value: Vec<u8>,
    id: Option<Vec<u8>>,
    is_request: bool,
}

#[derive(Default, Clone, Copy, PartialEq)]
enum Place {
    /// Inside a value that is not the id.
    #[default]
    Elsewhere,
    /// Where a top-level key starts.
    Key,
    InKey,
    /// After a top-level key, before its `:`.
    AfterKey {
        id: bool,
    },
    /// Where the id's value starts.
    IdValue,
    /// Reading the id's value (a string or a number).
    InId,
}

/// An id longer than this is not answered.
const MAX_ID: usize = 256;

impl Scan {
    fn byte(&mut self, b: u8) {
        self.len += 1;
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            match self.at {
                Place::InKey if self.in_string && self.key.len() < 8 => self.key.push(b),
                Place::InKey if !self.in_string => {
                    self.is_request |= self.key == b"method";
                    self.at = Place::AfterKey { id: self.key == b"id" };
                }
                Place::InId => {
                    self.value.push(b);
                    if !self.in_string {
                        self.finish_id();
                    } else if self.value.len() > MAX_ID {
                        self.value.clear();
                        self.at = Place::Elsewhere;
                    }
                }
                _ => {}
            }
            return;
        }
        if self.at == Place::InId && matches!(b, b',' | b'}' | b' ' | b'\t' | b'\r') {
            self.finish_id();
        }
        match b {
            b'"' => {
                self.in_string = true;
                match self.at {
                    Place::Key if self.depth == 1 => {
                        self.key.clear();
                        self.at = Place::InKey;
                    }
                    Place::IdValue => {
                        self.value = vec![b'"'];
                        self.at = Place::InId;
                    }
                    _ => {}
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.at = if self.depth == 1 && b == b'{' { Place::Key } else { Place::Elsewhere };
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                self.at = Place::Elsewhere;
            }
            b',' if self.depth == 1 => self.at = Place::Key,
            b':' if self.depth == 1 => {
                self.at = match self.at {
                    Place::AfterKey { id: true } => Place::IdValue,
                    _ => Place::Elsewhere,
                }
            }
            b' ' | b'\t' | b'\r' => {}
            _ => match self.at {
                Place::IdValue if b == b'-' || b.is_ascii_digit() => {
                    self.value = vec![b];
                    self.at = Place::InId;
                }
                Place::InId => self.value.push(b),
                Place::IdValue => self.at = Place::Elsewhere,
                _ => {}
            },
        }
        if self.value.len() > MAX_ID {
            self.value.clear();
            self.at = Place::Elsewhere;
        }
    }

    fn finish_id(&mut self) {
        self.id = Some(std::mem::take(&mut self.value));
        self.at = Place::Elsewhere;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(line: &str) -> (Option<String>, bool) {
        let mut s = Scan::default();
        line.bytes().for_each(|b| s.byte(b));
        (s.id.map(|id| String::from_utf8_lossy(&id).into_owned()), s.is_request)
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(scan(r#"{"jsonrpc":"2.0","id":7,"result":{"id":99}}"#), (Some("7".into()), false));
        // The TypeScript SDK writes the id last.
        assert_eq!(scan(r#"{"result":{"content":[{"id":"x"}]},"jsonrpc":"2.0","id":12}"#), (Some("12".into()), false));
        assert_eq!(scan(r#"{ "id" : "a\"b", "result": {} }"#), (Some(r#""a\"b""#.into()), false));
        assert_eq!(scan(r#"{"result":"{\"id\":5}","id":-3}"#), (Some("-3".into()), false));
        assert!(scan(r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage"}"#).1);
        assert_eq!(scan(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#), (None, true));
    }

    #[tokio::test]
    async fn an_oversized_result_is_followed_by_an_error_answer_with_its_id() {
        use tokio::io::AsyncReadExt;
        let big = "x".repeat(MAX_MESSAGE_BYTES);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}\n{{\"result\":{{\"text\":\"{big}\"}},\"jsonrpc\":\"2.0\",\"id\":2}}\n{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{}}}}\n"
        );
        let mut out = String::new();
        let mut reader = Oversize::new(input.as_bytes());
        reader.read_to_string(&mut out).await.unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].len() > MAX_MESSAGE_BYTES && lines[1].ends_with(r#""id":2}"#), "passed unchanged");
        let answer: serde_json::Value = serde_json::from_str(lines[2]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer["id"], 2);
        assert_eq!(answer["error"]["code"], TOO_LARGE);
        assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("16.0 MiB")), "{answer}");
        assert_eq!(lines[3], r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
    }
}
