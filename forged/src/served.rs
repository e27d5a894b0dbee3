//! Serving one connection, taken on the socket or a TCP listener: JSON
//! lines or jsonrpsee's HTTP/WebSocket service (behind the [`Guarded`]
//! token check on TCP), in a task of its own holding a connection slot.

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{StopHandle, TowerServiceBuilder, serve_with_graceful_shutdown};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::layer::util::Identity;

use crate::conn::{Activity, partial_request_timeout};
use crate::guard::{Guard, Guarded};
use crate::ndjson;
use crate::rpc::{ConnServer, Daemon};

/// A connection slot: at once if one is free; else the longest-idle
/// connection that follows no session is closed to make room, so a new
/// client is answered within a moment however many connections sit idle.
/// Waits for a slot only when every connection is busy or following.
pub(crate) async fn slot(permits: &Arc<Semaphore>, daemon: &Daemon) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(p) = permits.clone().try_acquire_owned() {
            return Some(p);
        }
        if !daemon.connections.close_longest_idle() {
            return permits.clone().acquire_owned().await.ok();
        }
        // The closed connection's task lets its slot go at once.
        if let Ok(p) = tokio::time::timeout(Duration::from_millis(200), permits.clone().acquire_owned()).await {
            return p.ok();
        }
    }
}

/// What serving a connection needs, on the socket or a TCP listener.
#[derive(Clone)]
pub(crate) struct Served {
    pub daemon: Arc<Daemon>,
    pub builder: TowerServiceBuilder<Identity, Identity>,
    pub stop: StopHandle,
}

impl Served {
    /// Serves `stream` in a task of its own: on the socket, JSON lines or
    /// HTTP/WebSocket by its first byte; on a TCP listener, HTTP only, each
    /// request's token and origin checked first. False when the methods
    /// cannot be registered (a bug of this build).
    pub(crate) fn spawn(&self, stream: Incoming, permit: OwnedSemaphorePermit) -> bool {
        let Served { daemon, builder, stop } = self.clone();
        let conn = daemon.connections.open();
        let gone = tokio_util::sync::CancellationToken::new();
        let methods =
            match forge_proto::methods::into_module(ConnServer::ending(daemon.clone(), conn.clone(), gone.clone())) {
                Ok(m) => m,
                Err(e) => {
                    tracing::error!(error = %e, "the methods could not be registered");
                    return false;
                }
            };
        tokio::spawn(async move {
            let serve = async {
                let lines = match &stream {
                    Incoming::Unix(s) => ndjson::sniff(s).await,
                    Incoming::Tcp(..) => Some(false),
                };
                let stream = match (lines, stream) {
                    (Some(true), Incoming::Unix(s)) => {
                        return ndjson::serve(s, ConnServer::new(daemon.clone(), conn.clone()), methods.into()).await;
                    }
                    (None, _) => return tracing::debug!(conn = conn.id, "connection closed before its first byte"),
                    (_, stream) => stream,
                };
                let activity = conn.clone();
                // A stop of this connection's own: a WebSocket outlives the
                // HTTP request that upgraded it, and must close too when
                // the connection is closed (a revoked browser's, say).
                let (own_stop, own_handle) = jsonrpsee::server::stop_channel();
                let (daemon_stop, closed) = (stop.clone(), conn.close.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = daemon_stop.shutdown() => {}
                        () = closed.cancelled() => {}
                        // Ended by itself: nothing left to stop.
                        () = gone.cancelled() => return,
                    }
                    let _ = own_handle.stop();
                });
                let service = builder
                    .set_rpc_middleware(
                        RpcServiceBuilder::new().layer_fn(move |inner| Activity { inner, conn: activity.clone() }),
                    )
                    .build(methods, own_stop.clone());
                // hyper sets no deadline on a request's head: the first
                // request must be whole in time (the WebSocket upgrade
                // counts once its first call arrives).
                // A stranger on TCP gets less: a connection without an
                // admitted request holds its slot for seconds, not half a
                // minute.
                let deadline = match &stream {
                    Incoming::Tcp(..) => partial_request_timeout().min(TCP_FIRST_REQUEST),
                    Incoming::Unix(_) => partial_request_timeout(),
                };
                let first_request = async {
                    tokio::time::sleep(deadline).await;
                    if conn.has_requested() {
                        std::future::pending::<()>().await;
                    }
                };
                let served = async {
                    match stream {
                        Incoming::Unix(s) => serve_with_graceful_shutdown(s, service, own_stop.shutdown()).await,
                        Incoming::Tcp(s, guard, pending) => {
                            let peer = pending.ip;
                            let pending = Arc::new(std::sync::Mutex::new(Some(pending)));
                            let guarded = Guarded { inner: service, guard, peer, pending, conn: conn.clone() };
                            serve_with_graceful_shutdown(s, guarded, own_stop.shutdown()).await
                        }
                    }
                };
                tokio::select! {
                    r = served => if let Err(e) = r {
                        tracing::debug!(conn = conn.id, error = %e, "connection ended with an error");
                    },
                    () = first_request => tracing::info!(
                        conn = conn.id,
                        "closed an HTTP connection that sent no whole request within {} s",
                        deadline.as_secs()
                    ),
                }
            };
            tokio::select! {
                () = serve => {}
                () = conn.close.cancelled() => tracing::debug!(conn = conn.id, "connection closed to make room"),
            }
            daemon.connections.close(&conn);
            drop(permit);
        });
        true
    }
}

/// A connection taken: on the socket, or on a TCP listener with the
/// guard of its token and origins and its address's pending slot.
pub(crate) enum Incoming {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream, Arc<Guard>, crate::guard::Pending),
}

/// How long a TCP connection may take to have a request admitted (its
/// token checked) before it is closed.
const TCP_FIRST_REQUEST: Duration = Duration::from_secs(5);
