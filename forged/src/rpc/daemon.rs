//! `hello` and `daemon.*`.

use forge_proto::error::rpc_error;
use forge_proto::methods::RpcResult;
use forge_proto::params::HelloParams;
use forge_proto::{DaemonStatus, ErrorKind, HelloResult, PROTOCOL_VERSION, ServerInfo};

use super::{ConnServer, to_rpc};

pub fn hello(server: &ConnServer, p: HelloParams) -> RpcResult<HelloResult> {
    let HelloParams { protocol_version, client } = p;
    if protocol_version != PROTOCOL_VERSION {
        return Err(rpc_error(
            ErrorKind::ProtocolMismatch,
            format!(
                "this daemon speaks protocol version {PROTOCOL_VERSION}, the client {} {} speaks {protocol_version}; upgrade the older one",
                client.name, client.version
            ),
        ));
    }
    tracing::debug!(conn = server.conn.id, name = %client.name, version = %client.version, "hello");
    *server.conn.client.lock().unwrap_or_else(|p| p.into_inner()) = Some(client);
    Ok(HelloResult {
        protocol_version: PROTOCOL_VERSION,
        server: ServerInfo {
            name: "forged".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        },
        client_id: server.conn.id,
    })
}

pub async fn status(server: &ConnServer) -> RpcResult<DaemonStatus> {
    let d = &server.daemon;
    let (sessions, active_sessions) = d.engine.counts().await.map_err(to_rpc)?;
    let (journal, journal_reason) = d.engine.journal_health();
    Ok(DaemonStatus {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: PROTOCOL_VERSION,
        uptime_ms: d.started.elapsed().as_millis() as u64,
        socket: d.socket.display().to_string(),
        home: d.home.display().to_string(),
        sessions,
        active_sessions,
        clients: d.connections(),
        journal,
        journal_reason,
        sandbox: Some(d.engine.sandbox_status()),
    })
}
