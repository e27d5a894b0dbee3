//! Newline-delimited JSON-RPC 2.0 on the daemon's socket.
//!
//! A connection whose first byte is `{` speaks plain JSON-RPC: one request
//! per line in, one response or notification per line out (what `socat`,
//! `nc -U` or an editor plugin can speak with no HTTP or WebSocket stack).
//! Calls go to the same methods as over HTTP/WebSocket. `session.subscribe`
//! is served here directly: the task that reads the session's feed writes
//! each event to the socket itself, with no WebSocket framing and no hop
//! through a per-connection send queue, which makes this the lowest-latency
//! way to follow a session; Forge's own clients follow sessions this way.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use forge_core::{FeedItem, LiveTap};
use forge_proto::MAX_MESSAGE_BYTES;
use jsonrpsee::Methods;
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::types::error::{
    INVALID_PARAMS_CODE, INVALID_REQUEST_CODE, OVERSIZED_REQUEST_CODE, PARSE_ERROR_CODE, TOO_MANY_SUBSCRIPTIONS_CODE,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::conn::partial_request_timeout;
use crate::follow::Outlet;
use crate::follow::event_text;
use crate::rpc::{ConnServer, to_rpc};

/// Calls one connection may have running at once; past this the next line
/// is read only when one finishes.
const MAX_CALLS_IN_FLIGHT: usize = 32;
/// Same limit as over WebSocket.
const MAX_SUBSCRIPTIONS: usize = 64;
/// Longest line read, in bytes.
const MAX_LINE: usize = MAX_MESSAGE_BYTES as usize;
/// A client that connects and says nothing is let go after this.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the client on `stream` speaks, judged by its first byte (without
/// consuming it): `Some(true)` for JSON lines, `Some(false)` for HTTP, and
/// `None` if it closed or said nothing in time.
pub async fn sniff(stream: &UnixStream) -> Option<bool> {
    let mut first = [0u8; 1];
    let peek = stream.async_io(tokio::io::Interest::READABLE, || {
        use std::os::fd::AsRawFd;
        // SAFETY: a one-byte buffer we own, on a socket we own.
        let n = unsafe { libc::recv(stream.as_raw_fd(), first.as_mut_ptr().cast(), 1, libc::MSG_PEEK) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n) }
    });
    match tokio::time::timeout(FIRST_BYTE_TIMEOUT, peek).await {
        Ok(Ok(1)) => Some(first[0] == b'{'),
        _ => None,
    }
}

/// The connection's write side. Every write is one whole line.
struct Lines(Mutex<Out>);

struct Out {
    half: OwnedWriteHalf,
    /// The rest of a line a tap could write only in part: it goes out
    /// before anything else.
    spill: Vec<u8>,
}

impl Out {
    async fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        if !self.spill.is_empty() {
            self.half.write_all(&self.spill).await?;
            self.spill = Vec::new();
        }
        self.half.write_all(line).await
    }
}

impl Lines {
    async fn send(&self, mut line: String) -> io::Result<()> {
        line.push('\n');
        self.0.lock().await.write_line(line.as_bytes()).await
    }

    async fn respond(&self, id: &RawValue, result: Result<String, ErrorObjectOwned>) -> io::Result<()> {
        let line = match result {
            Ok(result) => format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get()),
            Err(e) => format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
                id.get(),
                serde_json::to_string(&e).unwrap_or_else(|_| r#"{"code":-32603,"message":"internal error"}"#.into())
            ),
        };
        self.send(line).await
    }
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SubscribeParams {
    session: String,
    from_seq: Option<u64>,
}

#[derive(Deserialize)]
struct UnsubscribeParams {
    subscription: u64,
}

fn null_id() -> Box<RawValue> {
    RawValue::from_string("null".into()).unwrap_or_else(|_| unreachable!("null is JSON"))
}

fn error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), None::<()>)
}

/// Serves one JSON-lines connection until the client closes it (or breaks
/// the protocol beyond repair). Its calls and subscriptions end with it.
pub async fn serve(stream: UnixStream, server: ConnServer, methods: Methods) {
    let (read, write) = stream.into_split();
    let out = Arc::new(Lines(Mutex::new(Out { half: write, spill: Vec::new() })));
    let mut reader = BufReader::new(read);
    let calls = Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT));
    let mut tasks = JoinSet::new();
    let mut subscriptions: HashMap<u64, (AbortHandle, Arc<Sub>)> = HashMap::new();
    let mut next_sub = 1u64;
    let mut buf = Vec::new();
    loop {
        // Do not keep a buffer an 8 MiB request grew.
        if buf.capacity() > 1 << 16 {
            buf = Vec::new();
        }
        buf.clear();
        // Idle between requests for as long as it likes (it may be closed
        // to make room), but once a line has begun it must end in time.
        if let Err(e) = reader.fill_buf().await {
            tracing::debug!(conn = server.conn_id(), error = %e, "JSON-lines connection read failed");
            break;
        }
        // One byte past the limit tells a long line from one that fits.
        let mut limited = (&mut reader).take(MAX_LINE as u64 + 1);
        let n = match tokio::time::timeout(partial_request_timeout(), limited.read_until(b'\n', &mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                tracing::debug!(conn = server.conn_id(), error = %e, "JSON-lines connection read failed");
                break;
            }
            Err(_) => {
                tracing::info!(
                    conn = server.conn_id(),
                    "closed a JSON-lines connection whose request line did not end within {} s",
                    partial_request_timeout().as_secs()
                );
                break;
            }
        };
        server.conn().touch();
        if n == 0 {
            // The client has said all it will say (`printf ... | socat`
            // shuts its side down): what it asked is still answered, and
            // its subscriptions go on, until it hangs up.
            finish(&mut tasks, reader.get_ref().as_ref()).await;
            break;
        }
        if buf.last() != Some(&b'\n') && buf.len() > MAX_LINE {
            // Refuse the line, not the connection: skip to its end.
            if skip_line(&mut reader).await.is_err() {
                break;
            }
            let msg = format!("request too large: a line may hold at most {MAX_MESSAGE_BYTES} bytes");
            if out.respond(&null_id(), Err(error(OVERSIZED_REQUEST_CODE, msg))).await.is_err() {
                break;
            }
            continue;
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            let _ = out.respond(&null_id(), Err(error(PARSE_ERROR_CODE, "parse error: the line is not UTF-8"))).await;
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let head: Head = match serde_json::from_str(line) {
            Ok(h) => h,
            Err(e) => {
                let msg = format!(
                    "parse error: {e} (send one JSON-RPC request object per line; batches are not supported here)"
                );
                if out.respond(&null_id(), Err(error(PARSE_ERROR_CODE, msg))).await.is_err() {
                    break;
                }
                continue;
            }
        };
        let Some(method) = head.method else {
            let id = head.id.map_or_else(null_id, |id| id.to_owned());
            let msg = "invalid request: no method (send one JSON-RPC request object per line)";
            if out.respond(&id, Err(error(INVALID_REQUEST_CODE, msg))).await.is_err() {
                break;
            }
            continue;
        };
        // A notification (no id) gets no answer, as JSON-RPC demands.
        let Some(id) = head.id.map(|id| id.to_owned()) else {
            tracing::debug!(conn = server.conn_id(), %method, "ignored a notification from a client");
            continue;
        };
        let params = head.params.map(RawValue::get).unwrap_or("{}");
        match method.as_str() {
            "session.subscribe" => {
                let p: SubscribeParams = match serde_json::from_str(params) {
                    Ok(p) => p,
                    Err(e) => {
                        let msg = format!("invalid params: {e} (expected {{\"session\": ..., \"from_seq\": ...}})");
                        let _ = out.respond(&id, Err(error(INVALID_PARAMS_CODE, msg))).await;
                        continue;
                    }
                };
                subscriptions.retain(|_, (h, _)| !h.is_finished());
                if subscriptions.len() >= MAX_SUBSCRIPTIONS {
                    let msg = format!("too many subscriptions on one connection (at most {MAX_SUBSCRIPTIONS})");
                    let _ = out.respond(&id, Err(error(TOO_MANY_SUBSCRIPTIONS_CODE, msg))).await;
                    continue;
                }
                let following = match server.conn().subscription() {
                    Ok(f) => f,
                    Err(e) => {
                        let e = forge_proto::error::rpc_error(forge_proto::ErrorKind::Overloaded, e);
                        let _ = out.respond(&id, Err(e)).await;
                        continue;
                    }
                };
                let feed = match server.engine().subscribe(&p.session, p.from_seq).await {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = out.respond(&id, Err(to_rpc(e))).await;
                        continue;
                    }
                };
                let sub = next_sub;
                next_sub += 1;
                // The answer goes out before the first event can.
                if out.respond(&id, Ok(sub.to_string())).await.is_err() {
                    break;
                }
                tracing::debug!(conn = server.conn_id(), session = %p.session, from_seq = ?p.from_seq, sub, "subscribed (JSON lines)");
                let sub = Sub::new(sub, out.clone());
                let handle = tasks.spawn({
                    let sub = sub.clone();
                    async move { crate::follow::follow(feed, sub, following).await }
                });
                subscriptions.insert(sub.id, (handle, sub));
            }
            "session.unsubscribe" => {
                let result = match serde_json::from_str::<UnsubscribeParams>(params) {
                    Ok(p) => Ok(match subscriptions.remove(&p.subscription) {
                        // Nothing of it is written after this answer: its
                        // tap stops at once, its task before its next write.
                        Some((_, sub)) => {
                            sub.end.cancel();
                            "true".to_string()
                        }
                        None => "false".to_string(),
                    }),
                    Err(e) => Err(error(
                        INVALID_PARAMS_CODE,
                        format!("invalid params: {e} (expected {{\"subscription\": N}})"),
                    )),
                };
                if out.respond(&id, result).await.is_err() {
                    break;
                }
            }
            _ => {
                let Ok(permit) = calls.clone().acquire_owned().await else { break };
                let (methods, out, request) = (methods.clone(), out.clone(), line.to_string());
                let busy = server.conn().call();
                tasks.spawn(async move {
                    match methods.raw_json_request(&request, 1).await {
                        Ok((response, _)) => drop(out.send(response.get().to_string()).await),
                        Err(e) => drop(
                            out.respond(&id, Err(error(INVALID_REQUEST_CODE, format!("invalid request: {e}")))).await,
                        ),
                    }
                    drop((permit, busy));
                });
            }
        }
        // Reap finished tasks so a long-lived connection does not pile them up.
        while tasks.try_join_next().is_some() {}
    }
    tasks.abort_all();
}

/// How often a connection whose client stopped sending is checked for
/// having gone altogether.
const HANGUP_CHECK: Duration = Duration::from_secs(1);

/// Waits until the connection's calls and subscriptions are done or the
/// client has closed the socket entirely (not just its sending side).
async fn finish(tasks: &mut JoinSet<()>, stream: &UnixStream) {
    let mut check = tokio::time::interval(HANGUP_CHECK);
    loop {
        tokio::select! {
            done = tasks.join_next() => if done.is_none() { return },
            _ = check.tick() => if hung_up(stream) { return },
        }
    }
}

/// Whether both directions of the connection are shut: the client closed
/// it (a client that only shut its sending side still reads).
fn hung_up(stream: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: stream.as_raw_fd(), events: 0, revents: 0 };
    // SAFETY: one pollfd we own, for a socket we own; no waiting.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR) != 0
}

/// Reads past the end of the current line without keeping it.
async fn skip_line(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// Longest event a tap writes; longer ones go through the subscription's
/// task, which can wait for room on the socket.
const TAP_MAX_EVENT: usize = 16 * 1024;

/// One subscription: shared by the task that writes its feed and by the
/// tap the session offers each event to the moment it is durable. Either
/// may write an event; `next` (changed only under the connection's write
/// lock) makes sure each goes out once and in order.
struct Sub {
    id: u64,
    out: Arc<Lines>,
    /// The seq the client gets next.
    next: AtomicU64,
    /// The `live` marker is written: from here on the tap may write too.
    live: AtomicBool,
    /// Unsubscribed: write nothing more.
    end: CancellationToken,
}

impl Sub {
    fn new(id: u64, out: Arc<Lines>) -> Arc<Self> {
        Arc::new(Self { id, out, next: AtomicU64::new(0), live: AtomicBool::new(false), end: CancellationToken::new() })
    }

    fn notification(&self, result: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"subscription":{},"result":{result}}}}}"#,
            self.id
        ) + "\n"
    }
}

impl LiveTap for Sub {
    /// Writes the event now if the client is caught up and its socket has
    /// room; otherwise leaves it to the subscription's task.
    fn offer(&self, seq: u64, json: &Arc<str>) {
        if !self.live.load(Ordering::Acquire)
            || self.next.load(Ordering::Acquire) != seq
            || json.len() > TAP_MAX_EVENT
            || self.end.is_cancelled()
        {
            return;
        }
        let Ok(mut out) = self.out.0.try_lock() else { return };
        if !out.spill.is_empty() || self.next.load(Ordering::Acquire) != seq || self.end.is_cancelled() {
            return;
        }
        let Some(result) = event_text(json) else { return };
        let line = self.notification(&result);
        match out.half.try_write(line.as_bytes()) {
            Ok(0) | Err(_) => {} // full (or gone): the task writes it, or finds out
            Ok(n) => {
                self.next.store(seq + 1, Ordering::Release);
                if n < line.len() {
                    // The rest goes first, whoever writes next; someone must.
                    out.spill.extend_from_slice(&line.as_bytes()[n..]);
                    let lines = self.out.clone();
                    tokio::spawn(async move { drop(lines.0.lock().await.write_line(&[]).await) });
                }
            }
        }
    }

    fn next_seq(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }
}

/// Each item goes out as one notification line, through the connection's
/// write lock; `next` tells whether the tap wrote an event already.
impl Outlet for Arc<Sub> {
    fn delivered(&self, item: &FeedItem) -> bool {
        matches!(item, FeedItem::Event { seq, .. } if *seq < self.next.load(Ordering::Acquire))
    }

    fn tap(&self) -> Option<Arc<dyn LiveTap>> {
        Some(self.clone())
    }

    async fn closed(&self) {
        self.end.cancelled().await
    }

    async fn send(&self, item: &FeedItem, json: String) -> Result<(), ()> {
        let line = self.notification(&json);
        // Not cancelled mid-line: a write once begun is finished.
        let mut out = self.out.0.lock().await;
        if self.end.is_cancelled() {
            return Err(());
        }
        match item {
            FeedItem::Event { seq, .. } if *seq < self.next.load(Ordering::Acquire) => return Ok(()),
            FeedItem::Event { seq, .. } => self.next.store(seq + 1, Ordering::Release),
            FeedItem::Live { last_seq } => {
                self.next.store(self.next.load(Ordering::Acquire).max(last_seq + 1), Ordering::Release);
                self.live.store(true, Ordering::Release);
            }
            _ => {}
        }
        out.write_line(line.as_bytes()).await.map_err(drop)
    }
}
