//! Where the daemon's socket and data live. Shared by the daemon and every
//! client so they agree without talking.

use std::path::{Path, PathBuf};

/// `$FORGE_HOME`, else `~/.forge`.
pub fn forge_home() -> PathBuf {
    if let Some(home) = std::env::var_os("FORGE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let base =
        std::env::var_os("HOME").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(".forge")
}

/// The socket path: `$FORGE_SOCKET`; else the socket the daemon running on
/// `$FORGE_HOME` listens on (see [`running_socket`]: a terminal without
/// `XDG_RUNTIME_DIR`, under su, ssh or cron, finds the same daemon); else
/// `$XDG_RUNTIME_DIR/forge/forged.sock`, else `$FORGE_HOME/forged.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(sock) = std::env::var_os("FORGE_SOCKET").filter(|v| !v.is_empty()) {
        return PathBuf::from(sock);
    }
    if let Some(sock) = running_socket(&forge_home()) {
        return sock;
    }
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(rt).join("forge").join("forged.sock");
    }
    forge_home().join("forged.sock")
}

/// The file a daemon holds locked for its whole life in its home: one
/// daemon per home. It holds the daemon's pid and socket path, a line each.
pub fn home_lock(home: &Path) -> PathBuf {
    home.join("daemon.lock")
}

/// What a daemon writes in its [`home_lock`].
pub fn home_lock_text(pid: u32, socket: &Path) -> String {
    format!("{pid}\n{}\n", socket.display())
}

/// The socket of the daemon running on `home`: the one its lock file names,
/// while that process is alive and the socket exists. Read without taking
/// the lock, so a client never makes a starting daemon think another holds
/// it.
pub fn running_socket(home: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(home_lock(home)).ok()?;
    let mut lines = text.lines();
    let pid: i32 = lines.next()?.trim().parse().ok()?;
    let socket = PathBuf::from(lines.next()?);
    if pid <= 0 || !process_alive(pid) {
        return None;
    }
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(&socket).ok()?.file_type().is_socket().then_some(socket)
}

fn process_alive(pid: i32) -> bool {
    // /proc/PID exists while the process (or a zombie of it) does; a pid
    // namespace that hides it hides the daemon's socket's owner too.
    Path::new("/proc").join(pid.to_string()).exists()
}
