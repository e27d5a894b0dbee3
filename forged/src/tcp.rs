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

/// The TCP side running: what a listener added later (`forgectl web`)
/// shares with those started with the daemon.
pub(crate) struct Tcp {
    guard: Arc<Guard>,
    permits: Arc<Semaphore>,
    pending: PendingCounts,
    served: Served,
    /// The addresses and paired browsers, as the daemon's methods see them.
    pub listening: Arc<crate::web::Listening>,
}

type PendingCounts = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// Where the listener `forgectl web` started is remembered, so that it
/// comes back on the same address when the daemon restarts.
fn remembered_file(forge_home: &Path) -> PathBuf {
    forge_home.join("web").join("listen")
}

/// The token file of a listener `forgectl web` started, when `[daemon]`
/// names none.
fn web_token_file(forge_home: &Path) -> PathBuf {
    forge_home.join("web").join("listener.token")
}

/// The token file in force: `[daemon] token_file`, else the web client's.
fn token_file(cfg: &DaemonConfig, forge_home: &Path) -> PathBuf {
    cfg.token_file.as_deref().map(|f| expand(f, forge_home)).unwrap_or_else(|| web_token_file(forge_home))
}

/// The guard of every listener: the token (made if missing) and the
/// paired browsers.
fn guard(cfg: &DaemonConfig, forge_home: &Path) -> anyhow::Result<(Arc<Guard>, PathBuf)> {
    let file = token_file(cfg, forge_home);
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).ok();
    }
    let token = token(&file)?;
    let devices = Arc::new(crate::web::Devices::open(forge_home, &token));
    Ok((Arc::new(Guard::new(token, cfg.allowed_origins.clone(), devices)), file))
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
    /// Binds every `[daemon] listen` address, and the one `forgectl web`
    /// started before (none of either: `None`). A configured listener
    /// without a token never starts: the configuration is refused first;
    /// the remembered one that cannot be bound again is said and left.
    pub async fn bind(cfg: &DaemonConfig, forge_home: &Path) -> anyhow::Result<Option<Listeners>> {
        let remembered = std::fs::read_to_string(remembered_file(forge_home)).ok().map(|t| t.trim().to_string());
        let remembered = remembered.filter(|r| !r.is_empty() && !cfg.listen.contains(r));
        if cfg.listen.is_empty() && remembered.is_none() {
            return Ok(None);
        }
        cfg.validate().map_err(anyhow::Error::msg)?;
        let (guard, file) = guard(cfg, forge_home)?;
        let mut bound = Vec::new();
        for l in &cfg.listen {
            let a = ListenAddr::parse(l).map_err(anyhow::Error::msg)?;
            let listener = TcpListener::bind((a.host.as_str(), a.port))
                .await
                .with_context(|| format!("cannot listen on {l} ([daemon] listen)"))?;
            tracing::info!(listen = %l, token_file = %file.display(), "listening on TCP; every request needs the token");
            bound.push((l.clone(), listener));
        }
        if let Some(l) = remembered {
            match bind_one(&l).await {
                Ok(listener) => {
                    tracing::info!(listen = %l, "listening on TCP for the web client (forgectl web)");
                    bound.push((l, listener));
                }
                Err(e) => tracing::warn!(listen = %l, error = %e, "the web client's listener could not start again"),
            }
        }
        Ok(Some(Listeners { bound, guard }))
    }

    /// Accepts on every listener until the daemon stops. TCP has slots of
    /// its own and never closes another connection to make room: a
    /// stranger without the token must not push local clients out.
    pub(crate) fn spawn(self, served: Served) -> Arc<Tcp> {
        let listening =
            Arc::new(crate::web::Listening { devices: self.guard.devices.clone(), addresses: Default::default() });
        let tcp = Arc::new(Tcp {
            guard: self.guard,
            permits: Arc::new(Semaphore::new(TCP_SLOTS)),
            pending: Default::default(),
            served,
            listening,
        });
        for (name, listener) in self.bound {
            tcp.accept(name, listener);
        }
        tcp
    }
}

async fn bind_one(l: &str) -> anyhow::Result<TcpListener> {
    let a = ListenAddr::parse(l).map_err(anyhow::Error::msg)?;
    TcpListener::bind((a.host.as_str(), a.port)).await.with_context(|| format!("cannot listen on {l}"))
}

impl Tcp {
    /// The listeners `forgectl web` asks for: `listen` bound now (or the
    /// ones running, when it names none or one of them), remembered for
    /// the daemon's next start. Started with no listener yet: the token
    /// is `[daemon] token_file`'s, else one made for the web client.
    pub(crate) async fn start_web(
        running: Option<Arc<Tcp>>,
        served: Served,
        cfg: &DaemonConfig,
        forge_home: &Path,
        listen: Option<&str>,
    ) -> anyhow::Result<Arc<Tcp>> {
        if let Some(tcp) = &running
            && listen.is_none_or(|l| tcp.names(l))
        {
            return Ok(tcp.clone());
        }
        // Loopback by default, on a port the system picks (kept after).
        let listener = match listen {
            Some(l) => bind_one(l).await?,
            None => TcpListener::bind(("127.0.0.1", 0)).await.context("cannot listen on loopback")?,
        };
        let bound = match listener.local_addr() {
            Ok(a) => format!("ws://{a}"),
            Err(e) => anyhow::bail!("the new listener has no address: {e}"),
        };
        let tcp = match running {
            Some(tcp) => tcp,
            None => {
                let (guard, _) = guard(cfg, forge_home)?;
                Listeners { bound: Vec::new(), guard }.spawn(served)
            }
        };
        tracing::info!(listen = %bound, "listening on TCP for the web client (forgectl web)");
        tcp.accept(bound.clone(), listener);
        let file = remembered_file(forge_home);
        if let Err(e) = std::fs::write(&file, format!("{bound}\n")) {
            tracing::warn!(file = %file.display(), error = %e, "the web client's listener could not be remembered");
        }
        Ok(tcp)
    }

    /// Whether `listen` is one of the running listeners.
    fn names(&self, listen: &str) -> bool {
        let wanted = listen.trim_start_matches("ws://").trim_end_matches('/');
        self.listening.addresses.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|a| a == wanted)
    }

    /// Accepts on `listener` until the daemon stops.
    fn accept(self: &Arc<Tcp>, name: String, listener: TcpListener) {
        if let Ok(a) = listener.local_addr() {
            self.listening.addresses.lock().unwrap_or_else(|p| p.into_inner()).push(a.to_string());
        }
        let tcp = self.clone();
        tokio::spawn(async move {
            let stopped = tcp.served.daemon.shutdown_token();
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
                    let mut counts = tcp.pending.lock().unwrap_or_else(|p| p.into_inner());
                    let n = counts.entry(peer).or_insert(0);
                    (*n < PENDING_PER_ADDRESS).then(|| {
                        *n += 1;
                        crate::guard::Pending { counts: tcp.pending.clone(), ip: peer }
                    })
                };
                let Some(slot) = slot else {
                    tracing::debug!(listen = %name, %peer, "too many connections from one address wait for their first request; one was turned away");
                    continue;
                };
                let Ok(permit) = tcp.permits.clone().try_acquire_owned() else {
                    tracing::debug!(listen = %name, "every TCP slot is taken; a connection was turned away");
                    continue;
                };
                if !tcp.served.spawn(Incoming::Tcp(stream, tcp.guard.clone(), slot), permit) {
                    return;
                }
            }
        });
    }
}
