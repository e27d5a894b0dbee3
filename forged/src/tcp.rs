//! `[daemon] listen`: WebSocket (and HTTP POST) on TCP for clients beyond
//! this machine's socket, every request checked by the [`Guard`] before
//! any method runs. A request with an `Origin` not in `[daemon]
//! allowed_origins` is refused, so a web page cannot drive the daemon
//! with a token it happens to hold. No TLS here: a reverse proxy or a
//! tailnet goes in front. The token file is made, or checked private.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use forge_core::daemon_config::{DaemonConfig, ListenAddr};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::guard::Guard;
use crate::served::{Incoming, Served};

/// Connections served on TCP at once, all listeners together.
const TCP_SLOTS: usize = 64;
/// Connections one address may hold before any request of theirs is
/// admitted: a stranger without the token cannot take every slot.
const PENDING_PER_ADDRESS: usize = 8;

/// The TCP listeners, bound, and their guard.
pub struct Listeners {
    bound: Vec<(String, TcpListener)>,
    guard: Arc<Guard>,
}

/// `~/` at the start of a configured path is the user's home; a relative
/// path is in `FORGE_HOME` (not wherever the daemon happened to start).
fn expand(path: &Path, forge_home: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ if path.is_relative() => forge_home.join(path),
        _ => path.to_path_buf(),
    }
}

/// The token in `path`, made (random, `0600`) when the file is missing.
/// A file others can read, or a token too short to guess at, is refused.
fn token(path: &Path) -> anyhow::Result<String> {
    if !path.exists() {
        make_token(path)?;
    }
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    // SAFETY: geteuid cannot fail.
    if std::os::unix::fs::MetadataExt::uid(&meta) != unsafe { libc::geteuid() } {
        anyhow::bail!("[daemon] token_file {} belongs to another user; use a file of your own", path.display());
    }
    if meta.permissions().mode() & 0o077 != 0 {
        anyhow::bail!(
            "[daemon] token_file {} can be read by other users; `chmod 600 {}` (the token lets anyone who has it run commands as you)",
            path.display(),
            path.display()
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let token = text.trim().to_string();
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
        anyhow::bail!(
            "[daemon] token_file {}: the token must be at least 16 characters of letters, digits and -._~ (delete the file and forged writes a random one)",
            path.display()
        );
    }
    Ok(token)
}

/// Writes a random token to `path`, whole or not at all: written aside,
/// then linked in place (a reader never sees half of it, and a file
/// someone else made meanwhile is kept).
fn make_token(path: &Path) -> anyhow::Result<()> {
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut random))
        .context("cannot read /dev/urandom for a token")?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let aside = path.with_extension(format!("new-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&aside)
        .and_then(|mut f| f.write_all(format!("{token}\n").as_bytes()).and_then(|()| f.sync_all()));
    let linked = written.and_then(|()| std::fs::hard_link(&aside, path));
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => {
            tracing::info!(file = %path.display(), "wrote a new token for [daemon] listen");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot write the token file {}", path.display())),
    }
}

impl Listeners {
    /// Binds every `[daemon] listen` address (none: `None`). A listener
    /// without a token never starts: the configuration is refused first.
    pub async fn bind(cfg: &DaemonConfig, forge_home: &Path) -> anyhow::Result<Option<Listeners>> {
        if cfg.listen.is_empty() {
            return Ok(None);
        }
        cfg.validate().map_err(anyhow::Error::msg)?;
        let file =
            cfg.token_file.as_deref().map(|f| expand(f, forge_home)).context("[daemon] listen needs token_file")?;
        let token = token(&file)?;
        let devices = Arc::new(crate::web::Devices::open(forge_home, &token));
        let guard = Arc::new(Guard::new(token, cfg.allowed_origins.clone(), devices));
        let mut bound = Vec::new();
        for l in &cfg.listen {
            let a = ListenAddr::parse(l).map_err(anyhow::Error::msg)?;
            let listener = TcpListener::bind((a.host.as_str(), a.port))
                .await
                .with_context(|| format!("cannot listen on {l} ([daemon] listen)"))?;
            tracing::info!(listen = %l, token_file = %file.display(), "listening on TCP; every request needs the token");
            bound.push((l.clone(), listener));
        }
        Ok(Some(Listeners { bound, guard }))
    }

    /// Accepts on every listener until the daemon stops. TCP has slots of
    /// its own and never closes another connection to make room: a
    /// stranger without the token must not push local clients out.
    pub(crate) fn spawn(self, served: Served) {
        let addresses = self.bound.iter().filter_map(|(_, l)| l.local_addr().ok()).map(|a| a.to_string()).collect();
        served.daemon.set_web(self.guard.devices.clone(), addresses);
        let permits = Arc::new(Semaphore::new(TCP_SLOTS));
        let pending: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> = Default::default();
        for (name, listener) in self.bound {
            let (served, permits, guard) = (served.clone(), permits.clone(), self.guard.clone());
            let pending = pending.clone();
            tokio::spawn(async move {
                let stopped = served.daemon.shutdown_token();
                loop {
                    let accepted = tokio::select! {
                        a = listener.accept() => a,
                        () = stopped.cancelled() => return,
                    };
                    let (stream, peer) = match accepted {
                        Ok((s, peer)) => (s, peer.ip()),
                        Err(e) => {
                            tracing::warn!(listen = %name, error = %e, "accept failed");
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let slot = {
                        let mut counts = pending.lock().unwrap_or_else(|p| p.into_inner());
                        let n = counts.entry(peer).or_insert(0);
                        (*n < PENDING_PER_ADDRESS).then(|| {
                            *n += 1;
                            crate::guard::Pending { counts: pending.clone(), ip: peer }
                        })
                    };
                    let Some(slot) = slot else {
                        tracing::debug!(listen = %name, %peer, "too many connections from one address wait for their first request; one was turned away");
                        continue;
                    };
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        tracing::debug!(listen = %name, "every TCP slot is taken; a connection was turned away");
                        continue;
                    };
                    if !served.spawn(Incoming::Tcp(stream, guard.clone(), slot), permit) {
                        return;
                    }
                }
            });
        }
    }
}
