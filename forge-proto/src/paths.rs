//! Where the daemon's socket and data live. Shared by the daemon and every
//! client so they agree without talking.

use std::path::PathBuf;

/// `$FORGE_HOME`, else `~/.forge`.
pub fn forge_home() -> PathBuf {
    if let Some(home) = std::env::var_os("FORGE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let base =
        std::env::var_os("HOME").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(".forge")
}

/// The socket path: `$FORGE_SOCKET`, else `$XDG_RUNTIME_DIR/forge/forged.sock`,
/// else `$FORGE_HOME/forged.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(sock) = std::env::var_os("FORGE_SOCKET").filter(|v| !v.is_empty()) {
        return PathBuf::from(sock);
    }
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(rt).join("forge").join("forged.sock");
    }
    forge_home().join("forged.sock")
}
