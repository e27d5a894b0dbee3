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
use jsonrpsee::server::{ServerConfig, stop_channel};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::Semaphore;

use crate::rpc::Daemon;
use crate::served::{Incoming, Served, slot};
use crate::socket::SocketClaim;

use crate::conn::{MAX_CONNECTIONS, MAX_SOCKETS};

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

pub async fn serve(
    claim: &mut SocketClaim,
    daemon: Arc<Daemon>,
    signals: Signals,
    tcp: Option<crate::tcp::Listeners>,
) -> anyhow::Result<()> {
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

    let ctx = Served { daemon: daemon.clone(), builder: builder.clone(), stop: stop_handle.clone() };
    let running = Arc::new(tokio::sync::Mutex::new(tcp.map(|tcp| tcp.spawn(ctx.clone()))));
    let listening = running.lock().await.as_ref().map(|t| t.listening.clone());
    let (cfg, home) = (daemon.daemon_config.clone(), daemon.home.clone());
    let starter: crate::web::Starter = Box::new(move |listen| {
        let (running, ctx, cfg, home) = (running.clone(), ctx.clone(), cfg.clone(), home.clone());
        Box::pin(async move {
            let mut running = running.lock().await;
            let tcp = crate::tcp::Tcp::start_web(running.clone(), ctx, &cfg, &home, listen.as_deref()).await?;
            *running = Some(tcp.clone());
            Ok(tcp.listening.clone())
        })
    });
    daemon.serving(starter, listening).await;
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
        let ctx = Served { daemon: daemon.clone(), builder: builder.clone(), stop: stop_handle.clone() };
        if !ctx.spawn(Incoming::Unix(stream), permit) {
            break;
        }
    }
    // Stop accepting, tell connections to finish, and give them a moment.
    claim.unlink();
    let _ = server_handle.stop();
    daemon.shutdown_token().cancel();
    Ok(())
}
