//! `forgectl bridge`: this machine's daemon on stdin and stdout, byte for
//! byte, for a client on another machine that runs `ssh -T host forgectl
//! bridge` and speaks the protocol through it. The daemon is started first
//! if none runs, as for any local client. It ends when the daemon closes
//! the connection (it stopped, or died: the far client sees its link drop
//! and reconnects, which starts the daemon again), or once the other side
//! has closed its end (stdin) and the daemon has answered what was sent.

use tokio::io::AsyncWriteExt;

use crate::Global;
use crate::connect::{daemon_lines, socket_path};
use crate::exit::{Failure, UNREACHABLE};

pub async fn run(g: &Global) -> Result<(), Failure> {
    // Always this machine's daemon: a FORGE_REMOTE exported on every
    // machine alike must not send the bridge onwards.
    let g = &Global { remote: None, ..g.clone() };
    // Started if need be (and its greeting checked), then let go of: the
    // far client says its own hello through the bridge.
    drop(daemon_lines(g).await?);
    let socket = socket_path(g);
    let stream = tokio::net::UnixStream::connect(&socket).await.map_err(|e| {
        Failure::new(UNREACHABLE, "daemon_unreachable", format!("cannot connect to {}: {e}", socket.display()))
    })?;
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let (mut stdin, mut stdout) = (tokio::io::stdin(), tokio::io::stdout());
    let mut answers = Box::pin(async move {
        let copied = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    });
    let mut asks = Box::pin(async move {
        let copied = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        // The far side is gone: the daemon hears the end of the requests.
        let _ = to_daemon.shutdown().await;
        copied
    });
    let done = tokio::select! {
        done = &mut answers => done,
        _ = &mut asks => answers.await,
    };
    done.map(drop).map_err(|e| Failure::new(UNREACHABLE, "daemon_unreachable", format!("the bridge broke: {e}")))
}
