//! Accepts connections on the socket and serves each one by its first
//! byte: `{` starts newline-delimited JSON-RPC ([`ndjson`]); anything else
//! goes to jsonrpsee's tower service: HTTP POST for calls, WebSocket
//! upgrade for subscriptions. A connection from another uid is refused; a semaphore
//! bounds the open connections, and when it runs out the longest-idle
//! connection that follows no session is closed to make room (see
//! [`crate::conn`]). Stops on SIGTERM/SIGINT or
//! `daemon.shutdown`, letting open connections finish gracefully.

use forge_core::tools::confine::reap::{Peer, judge_peer};
use std::sync::Arc;
use std::time::Duration;

use forge_proto::MAX_MESSAGE_BYTES;
use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{ServerConfig, serve_with_graceful_shutdown, stop_channel};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn::{Activity, partial_request_timeout};
use crate::ndjson;
use crate::rpc::{ConnServer, Daemon};
use crate::socket::SocketClaim;

use crate::conn::{MAX_CONNECTIONS, MAX_SOCKETS};

/// A connection slot: at once if one is free; else the longest-idle
/// connection that follows no session is closed to make room, so a new
/// client is answered within a moment however many connections sit idle.
/// Waits for a slot only when every connection is busy or following.
async fn slot(permits: &Arc<Semaphore>, daemon: &Daemon) -> Option<OwnedSemaphorePermit> {
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

/// SIGTERM and SIGINT, caught from start-up on.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn install() -> anyhow::Result<Self> {
        Ok(Self { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }
}

pub async fn serve(claim: &mut SocketClaim, daemon: Arc<Daemon>, signals: Signals) -> anyhow::Result<()> {
    let config = ServerConfig::builder()
        .max_request_body_size(MAX_MESSAGE_BYTES)
        .max_response_body_size(MAX_MESSAGE_BYTES)
        .max_connections(MAX_CONNECTIONS as u32)
        .max_subscriptions_per_connection(64)
        // Per-connection outgoing buffer; a subscriber that cannot keep up
        // is told it lagged and catches up from the store.
        .set_message_buffer_capacity(256)
        .build();
    let builder = jsonrpsee::server::Server::builder().set_config(config).to_service_builder();
    let (stop_handle, server_handle) = stop_channel();
    let permits = Arc::new(Semaphore::new(MAX_SOCKETS));
    let my_uid = unsafe { libc::geteuid() };

    let Signals { term: mut sigterm, int: mut sigint } = signals;
    let shutdown = daemon.shutdown_token();
    let Some(listener) = claim.listener() else { anyhow::bail!("the socket is not listening") };

    loop {
        let (stream, _) = tokio::select! {
            _ = sigterm.recv() => { tracing::info!("SIGTERM received"); break }
            _ = sigint.recv() => { tracing::info!("SIGINT received"); break }
            _ = shutdown.cancelled() => { tracing::info!("shutdown requested by a client"); break }
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and friends: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let peer = stream.peer_cred().map(|cred| (cred, cred.pid().map_or(Peer::Descendant, judge_peer)));
        match peer {
            // A command the model runs (or a hook, an MCP server) must not
            // drive the daemon: it could approve its own calls.
            Ok((cred, Peer::Descendant)) => {
                tracing::warn!(
                    pid = cred.pid(),
                    "refused a connection from a process forged started for a session (or one that is gone)"
                );
                continue;
            }
            // Nor one confined by another Forge's sandbox (a second
            // daemon's command), unless this daemon runs in that very
            // sandbox (Forge's own tests, run by Forge).
            Ok((cred, Peer::OtherSandbox)) => {
                tracing::warn!(pid = cred.pid(), "refused a connection from a command in a Forge sandbox");
                continue;
            }
            Ok((cred, Peer::Free)) if cred.uid() == my_uid => {}
            Ok((cred, Peer::Free)) => {
                tracing::warn!(uid = cred.uid(), "refused a connection from another user");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused a connection whose peer could not be identified");
                continue;
            }
        }
        let permit = tokio::select! {
            _ = sigterm.recv() => { tracing::info!("SIGTERM received"); break }
            _ = sigint.recv() => { tracing::info!("SIGINT received"); break }
            _ = shutdown.cancelled() => { tracing::info!("shutdown requested by a client"); break }
            p = slot(&permits, &daemon) => match p { Some(p) => p, None => break },
        };
        let conn = daemon.connections.open();
        let methods = match forge_proto::methods::into_module(ConnServer::new(daemon.clone(), conn.clone())) {
            Ok(m) => m,
            Err(e) => {
                // A method named twice in the table: a bug of this build.
                tracing::error!(error = %e, "the methods could not be registered");
                break;
            }
        };
        let (builder, stop) = (builder.clone(), stop_handle.clone());
        let daemon = daemon.clone();
        tokio::spawn(async move {
            let serve = async {
                match ndjson::sniff(&stream).await {
                    Some(true) => {
                        ndjson::serve(stream, ConnServer::new(daemon.clone(), conn.clone()), methods.into()).await
                    }
                    Some(false) => {
                        let activity = conn.clone();
                        let service = builder
                            .set_rpc_middleware(
                                RpcServiceBuilder::new()
                                    .layer_fn(move |inner| Activity { inner, conn: activity.clone() }),
                            )
                            .build(methods, stop.clone());
                        // hyper sets no deadline on a request's head: the first
                        // request must be whole in time (the WebSocket upgrade
                        // counts once its first call arrives).
                        let first_request = async {
                            tokio::time::sleep(partial_request_timeout()).await;
                            if conn.has_requested() {
                                std::future::pending::<()>().await;
                            }
                        };
                        tokio::select! {
                            r = serve_with_graceful_shutdown(stream, service, stop.shutdown()) => if let Err(e) = r {
                                tracing::debug!(conn = conn.id, error = %e, "connection ended with an error");
                            },
                            () = first_request => tracing::info!(
                                conn = conn.id,
                                "closed an HTTP connection that sent no whole request within {} s",
                                partial_request_timeout().as_secs()
                            ),
                        }
                    }
                    None => tracing::debug!(conn = conn.id, "connection closed before its first byte"),
                }
            };
            tokio::select! {
                () = serve => {}
                () = conn.close.cancelled() => tracing::debug!(conn = conn.id, "connection closed to make room"),
            }
            daemon.connections.close(&conn);
            drop(permit);
        });
    }
    // Stop accepting, tell connections to finish, and give them a moment.
    claim.unlink();
    let _ = server_handle.stop();
    daemon.shutdown_token().cancel();
    Ok(())
}
