//! The web client's methods: a pairing code for `forgectl web`, the
//! paired browsers, and signing them out.

use forge_proto::ErrorKind;
use forge_proto::error::rpc_error;
use forge_proto::methods::RpcResult;
use forge_proto::params::{WebPairParams, WebRevokeParams};
use forge_proto::web::{WebDevice, WebPairing};

use super::ConnServer;

const NO_LISTENER: &str = "no TCP listener runs, so no browser is paired: `forgectl web` starts one";

impl ConnServer {
    async fn devices(&self) -> RpcResult<std::sync::Arc<crate::web::Devices>> {
        let listening =
            self.daemon.listening().await.ok_or_else(|| rpc_error(ErrorKind::InvalidParams, NO_LISTENER))?;
        Ok(listening.devices.clone())
    }
}

pub(super) async fn pair(s: &ConnServer, p: WebPairParams) -> RpcResult<WebPairing> {
    // A browser pairs no others: only a token holder (or the socket) may.
    if let Some(device) = s.conn.device() {
        return Err(rpc_error(
            ErrorKind::InvalidParams,
            format!("paired browser {device} cannot pair others; run `forgectl web` on the daemon's machine"),
        ));
    }
    if let Some(l) = p.listen.as_deref() {
        forge_core::daemon_config::ListenAddr::parse(l).map_err(|e| rpc_error(ErrorKind::InvalidParams, e))?;
    }
    let listening = s.daemon.web_listener(p.listen.as_deref()).await.map_err(|e| {
        rpc_error(ErrorKind::InvalidParams, format!("the web client's listener could not start: {e:#}"))
    })?;
    let listeners = listening.addresses.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let code = listening.devices.mint().map_err(|e| rpc_error(ErrorKind::Internal, format!("no random code: {e}")))?;
    let expires = std::time::SystemTime::now() + crate::web::pairing::CODE_LIFETIME;
    let expires_ms = expires.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    tracing::info!(client = s.conn.id, "a pairing code for the web client was made");
    Ok(WebPairing { code, expires_ms, listeners })
}

pub(super) async fn devices(s: &ConnServer) -> RpcResult<Vec<WebDevice>> {
    let Some(listening) = s.daemon.listening().await else { return Ok(Vec::new()) };
    Ok(listening
        .devices
        .list()
        .into_iter()
        .map(|d| WebDevice {
            id: d.id,
            name: d.name,
            first_seen_ms: d.first_seen_ms,
            last_seen_ms: d.last_seen_ms,
            address: d.address,
        })
        .collect())
}

pub(super) async fn revoke(s: &ConnServer, p: WebRevokeParams) -> RpcResult<Vec<String>> {
    let devices = s.devices().await?;
    let which = match (p.device.as_deref(), p.all) {
        (Some(id), false) => Some(id),
        (None, true) => None,
        _ => return Err(rpc_error(ErrorKind::InvalidParams, "give one device id, or `all`")),
    };
    let removed = devices.revoke(which);
    if let (Some(id), true) = (which, removed.is_empty()) {
        return Err(rpc_error(
            ErrorKind::InvalidParams,
            format!("no paired browser {id}; `forgectl web devices` lists them"),
        ));
    }
    tracing::info!(client = s.conn.id, signed_out = removed.len(), "paired browsers signed out");
    Ok(removed)
}
