//! A small async client for Rust programs: connects to the daemon's Unix
//! socket over WebSocket, performs the `hello` handshake, and exposes the
//! typed [`ForgeClient`](forge_proto::methods::ForgeClient) methods;
//! [`Follow`] follows a session over newline-delimited JSON-RPC.

use forge_proto::params::HelloParams;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonrpsee::async_client::{Client, ClientBuilder};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::ClientError;
use jsonrpsee::types::ErrorObjectOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use forge_proto::events::SubscriptionItem;
use forge_proto::methods::ForgeClient;
use forge_proto::types::{ClientInfo, HelloResult};
use forge_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing listens on the socket (no file, or connection refused).
    #[error("no daemon is listening on {path}: {source}")]
    NotRunning { path: PathBuf, source: std::io::Error },
    #[error("could not connect to {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WebSocket handshake with the daemon on {path} failed: {message}")]
    Handshake { path: PathBuf, message: String },
    #[error("the daemon refused the hello: {0}")]
    Hello(String),
    /// The socket exists and a daemon holds it, but it did not take the
    /// connection or answer in time.
    #[error(
        "forged on {path} did not answer within {secs} s: it is alive but overloaded (every connection it serves may be taken, by clients following sessions or by a flood); close some clients, then try again (its log: $FORGE_HOME/logs/)"
    )]
    NoAnswer { path: PathBuf, secs: u64 },
    #[error(
        "forged on {path} is alive but its queue of new connections is full (too many clients at once); close some clients, then try again"
    )]
    Full { path: PathBuf },
    #[error(
        "protocol mismatch: this client speaks version {client}, the daemon speaks {daemon}; upgrade the older one"
    )]
    Protocol { client: u32, daemon: u32 },
}

/// A connected, greeted client.
pub struct Connection {
    pub client: Client,
    pub hello: HelloResult,
    /// Where the daemon listens and who this client is, for the
    /// connections a [`Follow`] opens.
    pub socket: PathBuf,
    pub info: ClientInfo,
}

/// How long a daemon may take to take a connection and answer its hello.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to `socket` and says hello as `info`.
pub async fn connect(socket: &Path, info: ClientInfo) -> Result<Connection, ConnectError> {
    let no_answer = || ConnectError::NoAnswer { path: socket.to_path_buf(), secs: ANSWER_TIMEOUT.as_secs() };
    tokio::time::timeout(ANSWER_TIMEOUT, greet(socket, info)).await.map_err(|_| no_answer())?
}

async fn greet(socket: &Path, info: ClientInfo) -> Result<Connection, ConnectError> {
    let stream = UnixStream::connect(socket).await.map_err(|source| {
        let path = socket.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ConnectError::NotRunning { path, source }
            }
            // Its listen backlog is full.
            std::io::ErrorKind::WouldBlock => ConnectError::Full { path },
            _ => ConnectError::Io { path, source },
        }
    })?;
    let handshake_err = |message: String| ConnectError::Handshake { path: socket.to_path_buf(), message };
    let url = Url::parse("ws://forge/").map_err(|e| handshake_err(e.to_string()))?;
    let (tx, rx) = WsTransportClientBuilder::default()
        .max_request_size(MAX_MESSAGE_BYTES)
        .max_response_size(MAX_MESSAGE_BYTES)
        .build_with_stream(url, stream)
        .await
        .map_err(|e| handshake_err(e.to_string()))?;
    // Notifications buffered per subscription while the program is busy;
    // past this the subscription lags and `Follow` re-opens it.
    let buffer = std::env::var("FORGE_CLIENT_BUFFER").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0);
    let client = ClientBuilder::default()
        // Calls answer quickly; long waits happen on subscriptions, which
        // this timeout does not cover.
        .request_timeout(Duration::from_secs(120))
        .max_buffer_capacity_per_subscription(buffer.unwrap_or(4096))
        .build_with_tokio(tx, rx);
    let hello =
        client.hello(HelloParams { protocol_version: PROTOCOL_VERSION, client: info.clone() }).await.map_err(|e| {
            match e {
                jsonrpsee::core::ClientError::Call(obj) => ConnectError::Hello(obj.message().to_string()),
                other => ConnectError::Hello(other.to_string()),
            }
        })?;
    if hello.protocol_version != PROTOCOL_VERSION {
        return Err(ConnectError::Protocol { client: PROTOCOL_VERSION, daemon: hello.protocol_version });
    }
    Ok(Connection { client, hello, socket: socket.to_path_buf(), info })
}

/// Follows a session's events with the guarantees of `session.subscribe`
/// kept end to end: every event exactly once, in order, from `from_seq`.
///
/// Follows over a connection of its own that speaks newline-delimited
/// JSON-RPC, where the daemon writes each event straight to the socket (the
/// lowest-latency path). A follower that stops reading (its program busy,
/// its stdout blocked) fills the socket; the daemon then falls back to the
/// store for it, so it catches up later without losing anything.
pub struct Follow {
    lines: BufReader<OwnedReadHalf>,
    /// Where requests go; closing it ends the subscription.
    write: OwnedWriteHalf,
    /// The next seq this follower has not delivered; `None` until the first
    /// event when following live only.
    next_seq: Option<u64>,
    line: Vec<u8>,
}

#[derive(Deserialize)]
struct Reply {
    result: Option<Box<RawValue>>,
    error: Option<ErrorObjectOwned>,
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
        Self::open(&conn.socket, &conn.info, session, from_seq).await
    }

    /// Says hello as `info` to the daemon on `socket` and subscribes.
    pub async fn open(
        socket: &Path,
        info: &ClientInfo,
        session: String,
        from_seq: Option<u64>,
    ) -> Result<Follow, ClientError> {
        let lost = |e: std::io::Error| ClientError::Transport(Box::new(e));
        let stream = UnixStream::connect(socket).await.map_err(lost)?;
        let (read, write) = stream.into_split();
        let hello = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "hello",
            "params": {"protocol_version": PROTOCOL_VERSION, "client": info}});
        let subscribe = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session.subscribe",
            "params": {"session": session, "from_seq": from_seq}});
        let mut follow = Follow { lines: BufReader::new(read), write, next_seq: from_seq, line: Vec::new() };
        // One at a time: calls may be answered in any order, and the
        // subscription's events follow its answer at once.
        for request in [hello, subscribe] {
            follow.write.write_all(format!("{request}\n").as_bytes()).await.map_err(lost)?;
            let line = follow.read_line().await.map_err(lost)?.ok_or_else(|| {
                lost(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the daemon closed the connection"))
            })?;
            let reply: Reply = serde_json::from_slice(line)?;
            if let Some(e) = reply.error {
                return Err(ClientError::Call(e));
            }
            if reply.result.is_none() {
                return Err(ClientError::Custom("the daemon answered without a result".into()));
            }
        }
        Ok(follow)
    }

    /// The next line, without its newline; `None` at the end of the stream.
    async fn read_line(&mut self) -> std::io::Result<Option<&[u8]>> {
        self.line.clear();
        let limit = MAX_MESSAGE_BYTES as u64 + 1;
        let n = (&mut self.lines).take(limit).read_until(b'\n', &mut self.line).await?;
        if n == 0 {
            return Ok(None);
        }
        if self.line.last() != Some(&b'\n') && self.line.len() as u64 >= limit {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a message from the daemon is too large"));
        }
        Ok(Some(self.line.trim_ascii_end()))
    }

    /// The next item; `None` when the daemon ends the stream or the
    /// connection is lost.
    pub async fn next(&mut self) -> Option<Result<SubscriptionItem, FollowError>> {
        loop {
            let line = match self.read_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some(Err(FollowError::Decode(e.to_string()))),
            };
            let item = match serde_json::from_slice::<Notification>(line) {
                Ok(n) => n.params.result,
                Err(e) => return Some(Err(FollowError::Decode(e.to_string()))),
            };
            if let SubscriptionItem::Event(ev) = &item {
                if self.next_seq.is_some_and(|n| ev.seq < n) {
                    continue; // the daemon never repeats one; be safe anyway
                }
                self.next_seq = Some(ev.seq + 1);
            }
            return Some(Ok(item));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("undecodable event from the daemon: {0}")]
    Decode(String),
}
