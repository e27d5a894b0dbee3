//! A small async client for Rust programs: connects to the daemon's Unix
//! socket over WebSocket, performs the `hello` handshake, and exposes the
//! typed [`ForgeApiClient`](crate::api::ForgeApiClient) methods.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonrpsee::async_client::{Client, ClientBuilder};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use tokio::net::UnixStream;

use crate::api::ForgeApiClient;
use crate::types::{ClientInfo, HelloResult};
use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

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
    #[error(
        "protocol mismatch: this client speaks version {client}, the daemon speaks {daemon}; upgrade the older one"
    )]
    Protocol { client: u32, daemon: u32 },
}

/// A connected, greeted client.
pub struct Connection {
    pub client: Client,
    pub hello: HelloResult,
}

/// Connects to `socket` and says hello as `info`.
pub async fn connect(socket: &Path, info: ClientInfo) -> Result<Connection, ConnectError> {
    let stream = UnixStream::connect(socket).await.map_err(|source| {
        let path = socket.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ConnectError::NotRunning { path, source }
            }
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
    let hello = client.hello(PROTOCOL_VERSION, info).await.map_err(|e| match e {
        jsonrpsee::core::ClientError::Call(obj) => ConnectError::Hello(obj.message().to_string()),
        other => ConnectError::Hello(other.to_string()),
    })?;
    if hello.protocol_version != PROTOCOL_VERSION {
        return Err(ConnectError::Protocol { client: PROTOCOL_VERSION, daemon: hello.protocol_version });
    }
    Ok(Connection { client, hello })
}

/// Follows a session's events with the guarantees of `session.subscribe`
/// kept end to end: if this client itself falls behind (its subscription
/// buffer fills while it is busy, e.g. writing to a blocked pipe), the
/// subscription is re-opened from the next seq it has not seen, so it still
/// gets every event exactly once, in order.
pub struct Follow<'a> {
    client: &'a Client,
    session: String,
    /// The next seq this follower has not delivered; `None` until the first
    /// event when following live only.
    next_seq: Option<u64>,
    sub: jsonrpsee::core::client::Subscription<crate::events::SubscriptionItem>,
}

impl<'a> Follow<'a> {
    pub async fn start(
        client: &'a Client,
        session: String,
        from_seq: Option<u64>,
    ) -> Result<Follow<'a>, jsonrpsee::core::ClientError> {
        let sub = client.session_subscribe(session.clone(), from_seq).await?;
        Ok(Self { client, session, next_seq: from_seq, sub })
    }

    /// The next item; `None` when the daemon ends the stream or the
    /// connection is lost.
    pub async fn next(&mut self) -> Option<Result<crate::events::SubscriptionItem, FollowError>> {
        use crate::events::SubscriptionItem;
        use jsonrpsee::core::client::SubscriptionCloseReason;
        loop {
            match self.sub.next().await {
                Some(Ok(item)) => {
                    if let SubscriptionItem::Event(ev) = &item {
                        if self.next_seq.is_some_and(|n| ev.seq < n) {
                            continue; // already delivered before a re-subscribe
                        }
                        self.next_seq = Some(ev.seq + 1);
                    }
                    return Some(Ok(item));
                }
                Some(Err(e)) => return Some(Err(FollowError::Decode(e.to_string()))),
                None => {
                    if !matches!(self.sub.close_reason(), Some(SubscriptionCloseReason::Lagged)) {
                        return None;
                    }
                    let from = self.next_seq;
                    match self.client.session_subscribe(self.session.clone(), from).await {
                        Ok(sub) => {
                            self.sub = sub;
                            return Some(Ok(SubscriptionItem::Lagged { resume_seq: from.unwrap_or(0) }));
                        }
                        Err(e) => return Some(Err(FollowError::Resubscribe(e.to_string()))),
                    }
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("undecodable event from the daemon: {0}")]
    Decode(String),
    #[error("could not re-subscribe after falling behind: {0}")]
    Resubscribe(String),
}
