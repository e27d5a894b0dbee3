//! A small async client for Rust programs: connects to the daemon's Unix
//! socket over WebSocket, performs the `hello` handshake, and exposes the
//! typed [`ForgeClient`](forge_proto::methods::ForgeClient) methods. The
//! JSON-lines connection ([`crate::LineClient`], [`crate::Follow`]) shares
//! its errors and its hello.

use forge_proto::params::HelloParams;
use std::path::Path;

pub use crate::connect_error::ConnectError;
use crate::endpoint::{Endpoint, Link, SshProbe};
use std::time::Duration;

use jsonrpsee::async_client::{Client, ClientBuilder};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};

use forge_proto::methods::ForgeClient;
use forge_proto::types::{ClientInfo, HelloResult};
use forge_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

/// A connected, greeted client.
pub struct Connection {
    pub client: Client,
    pub hello: HelloResult,
    /// Where the daemon listens and who this client is, for the
    /// connections a [`Follow`] opens.
    pub endpoint: Endpoint,
    pub info: ClientInfo,
}

/// How long a daemon may take to take a connection and answer its hello.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long ssh may take to log in and the far daemon to answer (a
/// passphrase may be typed meanwhile).
const REMOTE_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A way of talking to the daemon that begins with `hello`: over
/// WebSocket ([`Connection`]) or JSON lines ([`crate::LineClient`]).
pub trait Greet: Sized {
    /// Connects to `endpoint` and says hello as `info`.
    fn greet(
        endpoint: &Endpoint,
        info: ClientInfo,
    ) -> impl std::future::Future<Output = Result<Self, ConnectError>> + Send;
}

impl Greet for Connection {
    fn greet(
        endpoint: &Endpoint,
        info: ClientInfo,
    ) -> impl std::future::Future<Output = Result<Self, ConnectError>> + Send {
        connect_to(endpoint, info)
    }
}

/// Connects to the daemon's `socket` on this machine and says hello as `info`.
pub async fn connect(socket: &Path, info: ClientInfo) -> Result<Connection, ConnectError> {
    connect_to(&Endpoint::Socket(socket.to_path_buf()), info).await
}

/// Connects to `endpoint` and says hello as `info`.
pub async fn connect_to(endpoint: &Endpoint, info: ClientInfo) -> Result<Connection, ConnectError> {
    within_answer_time(endpoint, greet(endpoint, info)).await
}

/// `hello` must be answered within [`ANSWER_TIMEOUT`] of connecting.
pub(crate) async fn within_answer_time<T>(
    endpoint: &Endpoint,
    greeting: impl std::future::Future<Output = Result<T, ConnectError>>,
) -> Result<T, ConnectError> {
    let (limit, no_answer) = match endpoint {
        Endpoint::Socket(path) => {
            (ANSWER_TIMEOUT, ConnectError::NoAnswer { path: path.clone(), secs: ANSWER_TIMEOUT.as_secs() })
        }
        Endpoint::Ssh(r) => (
            REMOTE_ANSWER_TIMEOUT,
            ConnectError::Remote {
                remote: r.url.clone(),
                message: format!(
                    "no answer within {} s (ssh still logging in, or the far daemon overloaded)",
                    REMOTE_ANSWER_TIMEOUT.as_secs()
                ),
            },
        ),
    };
    tokio::time::timeout(limit, greeting).await.map_err(|_| no_answer)?
}

/// Opens a connection and says hello on it with `greet`; a link through
/// ssh that fails before the daemon answers is explained with what ssh said.
pub(crate) async fn open_and<T, F>(endpoint: &Endpoint, greet: impl FnOnce(Link) -> F) -> Result<T, ConnectError>
where
    F: std::future::Future<Output = Result<T, ConnectError>>,
{
    let (link, probe): (Link, Option<SshProbe>) = endpoint.open().await?;
    match (greet(link).await, probe, endpoint) {
        (Ok(t), _, _) => Ok(t),
        // The link carried bytes but not the daemon's words: ssh's say why.
        (Err(ConnectError::HelloLost(_) | ConnectError::Handshake { .. }), Some(probe), Endpoint::Ssh(remote)) => {
            Err(probe.explain(remote).await)
        }
        // The daemon answered (a refusal, another protocol): its words.
        (Err(e), _, _) => Err(e),
    }
}

/// Says hello as `info` on `client` and checks the daemon's version.
pub(crate) async fn hello(client: &impl ForgeClient, info: ClientInfo) -> Result<HelloResult, ConnectError> {
    let hello =
        client.hello(HelloParams { protocol_version: PROTOCOL_VERSION, client: info }).await.map_err(|e| match e {
            jsonrpsee::core::ClientError::Call(obj) => ConnectError::Hello(obj.message().to_string()),
            other => ConnectError::HelloLost(other.to_string()),
        })?;
    if hello.protocol_version != PROTOCOL_VERSION {
        return Err(ConnectError::Protocol { client: PROTOCOL_VERSION, daemon: hello.protocol_version });
    }
    Ok(hello)
}

async fn greet(endpoint: &Endpoint, info: ClientInfo) -> Result<Connection, ConnectError> {
    open_and(endpoint, |link| ws_greet(endpoint, link, info)).await
}

async fn ws_greet(endpoint: &Endpoint, link: Link, info: ClientInfo) -> Result<Connection, ConnectError> {
    let stream = tokio::io::join(link.read, link.write);
    let handshake_err = |message: String| ConnectError::Handshake { at: endpoint.to_string(), message };
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
        .request_timeout(CALL_TIMEOUT)
        .max_buffer_capacity_per_subscription(buffer.unwrap_or(4096))
        .build_with_tokio(tx, rx);
    let hello = hello(&client, info.clone()).await?;
    Ok(Connection { client, hello, endpoint: endpoint.clone(), info })
}

/// How long a call may wait for its answer.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(120);
