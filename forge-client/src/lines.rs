//! Newline-delimited JSON-RPC to the daemon, the lightest way to talk to
//! it: [`LineClient`] says hello and makes calls one at a time (every
//! [`ForgeClient`](forge_proto::methods::ForgeClient) method), and can then
//! follow a session on the same connection ([`LineClient::follow`]).
//! `forgectl send` does all of a turn this way: hello, send and follow on
//! one connection, with no WebSocket stack and no second connection.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use jsonrpsee::core::client::{BatchResponse, ClientT};
use jsonrpsee::core::params::BatchRequestBuilder;
use jsonrpsee::core::traits::ToRpcParams;
use jsonrpsee::core::{ClientError, DeserializeOwned};
use jsonrpsee::types::ErrorObjectOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use forge_proto::MAX_MESSAGE_BYTES;
use forge_proto::events::SubscriptionItem;
use forge_proto::types::{ClientInfo, HelloResult};

use crate::connection::{CALL_TIMEOUT, ConnectError, Connection, Greet, hello, open_and, within_answer_time};
use crate::endpoint::Endpoint;

/// A connected, greeted JSON-lines client. Its calls go one at a time,
/// each waiting for its answer.
pub struct LineClient {
    calls: Calls,
    pub hello: HelloResult,
    /// Where the daemon listens and who this client is.
    pub endpoint: Endpoint,
    pub info: ClientInfo,
}

impl Greet for LineClient {
    fn greet(
        endpoint: &Endpoint,
        info: ClientInfo,
    ) -> impl std::future::Future<Output = Result<Self, ConnectError>> + Send {
        within_answer_time(endpoint, async move {
            open_and(endpoint, |link| async move {
                let io = LineIo { read: BufReader::new(link.read), write: link.write, line: Vec::new(), taken: false };
                let calls = Calls { io: tokio::sync::Mutex::new(io), next_id: AtomicU64::new(1) };
                let hello = hello(&calls, info.clone()).await?;
                Ok(LineClient { calls, hello, endpoint: endpoint.clone(), info })
            })
            .await
        })
    }
}

impl LineClient {
    /// Follows `session` from `from_seq` (or live only) on this connection,
    /// which then carries nothing else.
    pub async fn follow(self, session: String, from_seq: Option<u64>) -> Result<Follow, ClientError> {
        let params = serde_json::json!({"session": session, "from_seq": from_seq});
        let id = self.calls.next_id.load(Ordering::Relaxed);
        let mut io = self.calls.io.into_inner();
        // The events follow its answer at once.
        io.call(id, forge_proto::methods::SUBSCRIBE, Some(&RawValue::from_string(params.to_string())?)).await?;
        Ok(Follow { io, next_seq: from_seq })
    }
}

/// The connection's two halves and its line buffer.
struct LineIo {
    read: BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    write: Box<dyn AsyncWrite + Send + Unpin>,
    /// The line being read; a read cut short (its future dropped in a
    /// `select!`) keeps what it had here and the next read goes on.
    line: Vec<u8>,
    /// `line` was handed out whole: the next read starts a new one.
    taken: bool,
}

/// An answer, or a notification (which has a method).
#[derive(Deserialize)]
struct Reply {
    id: Option<u64>,
    method: Option<String>,
    result: Option<Box<RawValue>>,
    error: Option<ErrorObjectOwned>,
}

/// One JSON-RPC request (a notification without `id`) as a line.
fn request_line(id: Option<u64>, method: &str, params: Option<&RawValue>) -> Result<String, serde_json::Error> {
    let method = serde_json::to_string(method)?;
    let params = params.map_or("{}", RawValue::get);
    let id = id.map(|id| format!("\"id\":{id},")).unwrap_or_default();
    Ok(format!("{{\"jsonrpc\":\"2.0\",{id}\"method\":{method},\"params\":{params}}}\n"))
}

fn lost(e: io::Error) -> ClientError {
    ClientError::RestartNeeded(std::sync::Arc::new(ClientError::Transport(Box::new(e))))
}

impl LineIo {
    /// The next line, without its newline; `None` at the end of the
    /// stream (a line the end cut off is never given). Cancel-safe.
    async fn read_line(&mut self) -> io::Result<Option<&[u8]>> {
        if std::mem::take(&mut self.taken) {
            self.line.clear();
        }
        let limit = MAX_MESSAGE_BYTES as u64 + 1;
        let room = limit.saturating_sub(self.line.len() as u64);
        (&mut self.read).take(room).read_until(b'\n', &mut self.line).await?;
        if self.line.last() != Some(&b'\n') {
            if self.line.len() as u64 >= limit {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a message from the daemon is too large"));
            }
            return Ok(None);
        }
        self.taken = true;
        Ok(Some(self.line.trim_ascii_end()))
    }

    /// Sends one request and waits for its answer. Answers to earlier
    /// calls that gave up waiting are skipped; an error with no id (a
    /// line the daemon could not read) answers this one, the only call
    /// in flight.
    async fn call(&mut self, id: u64, method: &str, params: Option<&RawValue>) -> Result<Box<RawValue>, ClientError> {
        let line = request_line(Some(id), method, params)?;
        self.write.write_all(line.as_bytes()).await.map_err(lost)?;
        loop {
            let line = self.read_line().await.map_err(lost)?.ok_or_else(|| {
                lost(io::Error::new(io::ErrorKind::UnexpectedEof, "the daemon closed the connection"))
            })?;
            let reply: Reply = serde_json::from_slice(line)?;
            if reply.method.is_some() || reply.id.is_some_and(|n| n != id) {
                continue;
            }
            if let Some(e) = reply.error {
                return Err(ClientError::Call(e));
            }
            return reply.result.ok_or_else(|| ClientError::Custom("the daemon answered without a result".into()));
        }
    }
}

/// The calls of a [`LineClient`], one at a time.
struct Calls {
    io: tokio::sync::Mutex<LineIo>,
    next_id: AtomicU64,
}

impl ClientT for LineClient {
    fn notification<Params>(&self, method: &str, params: Params) -> impl Future<Output = Result<(), ClientError>> + Send
    where
        Params: ToRpcParams + Send,
    {
        self.calls.notification(method, params)
    }

    fn request<R, Params>(&self, method: &str, params: Params) -> impl Future<Output = Result<R, ClientError>> + Send
    where
        R: DeserializeOwned,
        Params: ToRpcParams + Send,
    {
        self.calls.request(method, params)
    }

    fn batch_request<'a, R>(
        &self,
        batch: BatchRequestBuilder<'a>,
    ) -> impl Future<Output = Result<BatchResponse<'a, R>, ClientError>> + Send
    where
        R: DeserializeOwned + std::fmt::Debug + 'a,
    {
        self.calls.batch_request(batch)
    }
}

impl ClientT for Calls {
    async fn notification<Params>(&self, method: &str, params: Params) -> Result<(), ClientError>
    where
        Params: ToRpcParams + Send,
    {
        let line = request_line(None, method, params.to_rpc_params()?.as_deref())?;
        self.io.lock().await.write.write_all(line.as_bytes()).await.map_err(lost)
    }

    async fn request<R, Params>(&self, method: &str, params: Params) -> Result<R, ClientError>
    where
        R: DeserializeOwned,
        Params: ToRpcParams + Send,
    {
        let params = params.to_rpc_params()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut io = self.io.lock().await;
        let answer = tokio::time::timeout(CALL_TIMEOUT, io.call(id, method, params.as_deref()))
            .await
            .map_err(|_| ClientError::RequestTimeout)??;
        Ok(serde_json::from_str(answer.get())?)
    }

    async fn batch_request<'a, R>(&self, _batch: BatchRequestBuilder<'a>) -> Result<BatchResponse<'a, R>, ClientError>
    where
        R: DeserializeOwned + std::fmt::Debug + 'a,
    {
        Err(ClientError::Custom("batch requests are not supported over JSON lines".into()))
    }
}

/// Follows a session's events with the guarantees of `session.subscribe`
/// kept end to end: every event exactly once, in order, from `from_seq`.
///
/// Follows over a JSON-lines connection, where the daemon writes each
/// event straight to the socket (the lowest-latency path). A follower that
/// stops reading (its program busy, its stdout blocked) fills the socket;
/// the daemon then falls back to the store for it, so it catches up later
/// without losing anything. Dropping it closes the connection, which ends
/// the subscription.
pub struct Follow {
    io: LineIo,
    /// The next seq this follower has not delivered; `None` until the first
    /// event when following live only.
    next_seq: Option<u64>,
}

#[derive(Deserialize)]
struct Notification {
    params: NotificationParams,
}

#[derive(Deserialize)]
struct NotificationParams {
    result: SubscriptionItem,
}

impl Follow {
    /// Says hello as `conn`'s client on a new connection and subscribes.
    pub async fn start(conn: &Connection, session: String, from_seq: Option<u64>) -> Result<Follow, ClientError> {
        Self::open_at(&conn.endpoint, &conn.info, session, from_seq).await
    }

    /// Says hello as `info` to the daemon on `socket` and subscribes.
    pub async fn open(
        socket: &Path,
        info: &ClientInfo,
        session: String,
        from_seq: Option<u64>,
    ) -> Result<Follow, ClientError> {
        Self::open_at(&Endpoint::Socket(socket.to_path_buf()), info, session, from_seq).await
    }

    /// Says hello as `info` to the daemon at `endpoint` and subscribes.
    pub async fn open_at(
        endpoint: &Endpoint,
        info: &ClientInfo,
        session: String,
        from_seq: Option<u64>,
    ) -> Result<Follow, ClientError> {
        let client =
            LineClient::greet(endpoint, info.clone()).await.map_err(|e| ClientError::Transport(Box::new(e)))?;
        client.follow(session, from_seq).await
    }

    /// The next seq this follower has not delivered (where a new follow
    /// resumes without a gap or a repeat).
    pub fn next_seq(&self) -> Option<u64> {
        self.next_seq
    }

    /// The next item; `None` when the daemon ends the stream or the
    /// connection is lost.
    pub async fn next(&mut self) -> Option<Result<SubscriptionItem, FollowError>> {
        loop {
            let line = match self.io.read_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some(Err(FollowError::Decode(e.to_string()))),
            };
            let item = match serde_json::from_slice::<Notification>(line) {
                Ok(n) => n.params.result,
                Err(e) => return Some(Err(FollowError::Decode(e.to_string()))),
            };
            match &item {
                SubscriptionItem::Event(ev) => {
                    if self.next_seq.is_some_and(|n| ev.seq < n) {
                        continue; // the daemon never repeats one; be safe anyway
                    }
                    self.next_seq = Some(ev.seq + 1);
                }
                // Following live only: from here on, a resume loses nothing.
                SubscriptionItem::Live { last_seq } if self.next_seq.is_none() => self.next_seq = Some(last_seq + 1),
                _ => {}
            }
            return Some(Ok(item));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("undecodable event from the daemon: {0}")]
    Decode(String),
    /// Following again, the daemon refused (the session was removed
    /// meanwhile).
    #[error("{}", .0.message())]
    Refused(ErrorObjectOwned),
    /// [`crate::Resume`] gave up: the link stayed down too long.
    #[error(
        "the link to {endpoint} has been down for {secs} s; gave up (its turns go on there: `forgectl --remote {endpoint} attach {session} --from {from}` follows on from here)"
    )]
    LinkDown { endpoint: String, secs: u64, session: String, from: u64 },
}
