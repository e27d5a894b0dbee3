//! One daemon per home: `forged` holds `$FORGE_HOME/daemon.lock` locked
//! for its whole life and writes its pid and socket there, so a second
//! one (started by a terminal whose computed socket differs, e.g. without
//! `XDG_RUNTIME_DIR`) exits at once naming the first one's socket instead
//! of opening the same store, and clients find the running daemon by its
//! home (see `forge_proto::paths::running_socket`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Held until the daemon exits; the file's text is cleared then.
pub struct HomeLock {
    file: File,
}

impl HomeLock {
    pub fn take(home: &Path, socket: &Path) -> anyhow::Result<Self> {
        let text = forge_proto::paths::home_lock_text(std::process::id(), socket);
        match hold(&forge_proto::paths::home_lock(home), &text)? {
            Ok(file) => Ok(Self { file }),
            Err(holder) => bail!("{}", refusal(home, &holder)),
        }
    }

    /// The socket clients find this daemon by is `socket` after all (the
    /// one systemd passed).
    pub fn name_socket(&mut self, socket: &Path) -> anyhow::Result<()> {
        let text = forge_proto::paths::home_lock_text(std::process::id(), socket);
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        Ok(self.file.flush()?)
    }
}

/// Opens `path` and locks it for as long as the file is kept, writing
/// `text` (who holds it) in it; `Err` with the holder's text when another
/// process holds it already. The one lock both the home and the socket
/// use.
pub fn hold(path: &Path, text: &str) -> anyhow::Result<Result<File, String>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // Never through a link (one planted there would have the daemon write
    // into whatever it names), and only a regular file of this user's.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            match link {
                true => {
                    format!("the lock file {} is a symbolic link: remove it (forged makes its own)", path.display())
                }
                false => format!("cannot open the lock file {}", path.display()),
            }
        })?;
    let meta = file.metadata().with_context(|| format!("cannot read the lock file {}", path.display()))?;
    // SAFETY: getuid(2) cannot fail.
    let me = unsafe { libc::getuid() };
    if !meta.is_file() || meta.uid() != me {
        anyhow::bail!(
            "the lock file {} is not a regular file of yours: remove it (forged makes its own)",
            path.display()
        );
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Ok(Err(holder));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())?;
    file.flush()?;
    Ok(Ok(file))
}

impl Drop for HomeLock {
    fn drop(&mut self) {
        // A client reading it after this finds no running daemon at once.
        let _ = self.file.set_len(0);
    }
}

/// Why a second daemon does not start, naming the first one's socket.
fn refusal(home: &Path, text: &str) -> String {
    let mut lines = text.lines();
    let pid = lines.next().map(str::trim).filter(|p| !p.is_empty());
    let socket = lines.next().map(PathBuf::from);
    let who = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    let where_ = socket.map(|s| format!(", listening on {}", s.display())).unwrap_or_default();
    format!(
        "another forged{who} is already running on the home {}{where_}; clients find it through the home \
         (or pass --socket with that path); stop it with `forgectl shutdown` to start a new one here",
        home.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_home_is_refused_naming_the_first_socket() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let first =
            HomeLock::take(dir.path(), Path::new("/run/user/1000/forge/forged.sock")).unwrap_or_else(|e| panic!("{e}"));
        let err = match HomeLock::take(dir.path(), Path::new("/home/u/.forge/forged.sock")) {
            Ok(_) => panic!("a second daemon on the same home must be refused"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("/run/user/1000/forge/forged.sock"), "{err}");
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        drop(first);
        let again = HomeLock::take(dir.path(), Path::new("/x.sock"));
        assert!(again.is_ok(), "free again once the first exits");
    }

    #[test]
    fn a_lock_that_is_a_link_or_not_a_file_is_refused_and_what_it_names_untouched() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let victim = dir.path().join("notes.txt");
        std::fs::write(&victim, "mine\n").unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
        let lock = forge_proto::paths::home_lock(&home);
        std::os::unix::fs::symlink(&victim, &lock).unwrap_or_else(|e| panic!("{e}"));
        let err = HomeLock::take(&home, Path::new("/x.sock")).err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(err.contains("is a symbolic link: remove it"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap_or_default(), "mine\n", "the file it names is untouched");
        std::fs::remove_file(&lock).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(&lock).unwrap_or_else(|e| panic!("{e}"));
        assert!(HomeLock::take(&home, Path::new("/x.sock")).is_err(), "a directory is no lock");
    }
}
