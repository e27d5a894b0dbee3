//! Why a client could not reach its daemon, in words a user can act on;
//! and the socket connected, with those words when it cannot be.

use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing listens on the socket (no file, or connection refused).
    #[error("no daemon is listening on {path}: {source}")]
    NotRunning { path: PathBuf, source: std::io::Error },
    #[error("could not connect to {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WebSocket handshake with the daemon on {at} failed: {message}")]
    Handshake { at: String, message: String },
    #[error("the daemon refused the hello: {0}")]
    Hello(String),
    /// The connection ended before the daemon answered the hello.
    #[error("the connection closed before the daemon answered: {0}")]
    HelloLost(String),
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
    /// The link to a remote daemon (ssh, or the bridge behind it) failed.
    #[error("cannot reach the daemon on {remote}: {message}")]
    Remote { remote: String, message: String },
}

/// The daemon's socket, connected, or why not in words a user can act on.
pub(crate) async fn open_socket(socket: &Path) -> Result<UnixStream, ConnectError> {
    UnixStream::connect(socket).await.map_err(|source| {
        let path = socket.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ConnectError::NotRunning { path, source }
            }
            // Its listen backlog is full.
            std::io::ErrorKind::WouldBlock => ConnectError::Full { path },
            _ => ConnectError::Io { path, source },
        }
    })
}
