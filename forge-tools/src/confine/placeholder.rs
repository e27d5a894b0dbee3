//! Places a command may not create (a root's `.git`, `.claude`, `.forge`
//! where there is none, git's hooks directory where it is missing, and a
//! hook's settings files): a confined command could otherwise make a git
//! repository whose configuration runs its program when the user next
//! runs git there, or settings another tool honours. While the command
//! runs, the supervisor holds an empty directory (or file) at each such
//! place, which the command's view shows read-only; the last command
//! using one removes it (a shared lock says who still does). An empty
//! directory is nothing to git: it looks further up, as if it were not
//! there.
//!
//! A placeholder is made with no write permission for anyone, which no
//! one's own settings file or directory has: that mark, not only its
//! emptiness, is what lets a command share one and the last remove it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The placeholders one command holds: each place, its descriptor
/// (locked shared while held), and for a file what it was made with.
pub struct Placeholders {
    held: Vec<(PathBuf, OwnedFd, Option<&'static [u8]>)>,
}

fn lock(fd: &OwnedFd, how: libc::c_int) -> bool {
    // SAFETY: flock(2) on our own descriptor.
    unsafe { libc::flock(fd.as_raw_fd(), how) == 0 }
}

/// What a placeholder file holds: nothing, or an empty JSON object where
/// a settings file is read as JSON (so that a reader meanwhile sees
/// settings that say nothing, as when there are none).
fn file_content(path: &Path) -> &'static [u8] {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => b"{}\n",
        _ => b"",
    }
}

/// Whether `path` is a placeholder as made: marked, and still empty (or
/// holding what it was made with).
fn is_placeholder(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
    if meta.permissions().mode() & 0o222 != 0 {
        return false;
    }
    if meta.is_dir() {
        std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
    } else {
        meta.is_file() && std::fs::read(path).is_ok_and(|now| now == file_content(path))
    }
}

impl Placeholders {
    /// Makes (or shares) an empty directory at each of `dirs` and an
    /// empty file at each of `files`; one that is there already and is
    /// not a placeholder is left alone (the command got it read-only when
    /// its policy was built, or it raced in: the mount over it fails and
    /// the command does not start).
    pub fn hold(dirs: &[PathBuf], files: &[PathBuf]) -> Placeholders {
        let mut held = Placeholders { held: Vec::new() };
        held.make(dirs, files);
        held
    }

    /// Shares each of `places` that is another command's placeholder
    /// now, so that it stays while this command's view is built and used
    /// (its policy names it read-only: gone before the mount, the command
    /// could not start).
    pub fn share(places: &[PathBuf]) -> Placeholders {
        let mut held = Placeholders { held: Vec::new() };
        for p in places.iter().filter(|p| is_placeholder(p)) {
            let content = (!p.is_dir()).then(|| file_content(p));
            held.keep(p, content);
        }
        held
    }

    /// Adds the placeholders [`Placeholders::hold`] makes.
    pub fn make(&mut self, dirs: &[PathBuf], files: &[PathBuf]) {
        for p in dirs {
            match std::fs::DirBuilder::new().mode(0o555).create(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && is_placeholder(p) => {}
                Err(_) => continue,
            }
            self.keep(p, None);
        }
        for p in files {
            use std::io::Write;
            let content = file_content(p);
            match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o400).open(p) {
                Ok(mut f) => {
                    let _ = f.write_all(content);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && is_placeholder(p) => {}
                Err(_) => continue,
            }
            self.keep(p, Some(content));
        }
    }

    fn keep(&mut self, p: &Path, content: Option<&'static [u8]>) {
        let Ok(f) = std::fs::File::open(p) else { return };
        let fd = OwnedFd::from(f);
        if lock(&fd, libc::LOCK_SH) {
            self.held.push((p.to_path_buf(), fd, content));
        }
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for (p, fd, content) in self.held.drain(..) {
            // The last holder removes it, and only as made.
            if !lock(&fd, libc::LOCK_EX | libc::LOCK_NB) || !is_placeholder(&p) {
                continue;
            }
            let _ = match content {
                None => std::fs::remove_dir(&p),
                Some(_) => std::fs::remove_file(&p),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_holder_removes_an_empty_placeholder_only() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let git = dir.path().join(".git");
        let a = Placeholders::hold(std::slice::from_ref(&git), &[]);
        let b = Placeholders::hold(std::slice::from_ref(&git), &[]);
        assert!(git.is_dir());
        drop(a);
        assert!(git.is_dir(), "still held by another command");
        drop(b);
        assert!(!git.exists(), "the last one removes it");
        let claude = dir.path().join(".claude");
        let c = Placeholders::hold(std::slice::from_ref(&claude), &[]);
        std::fs::write(claude.join("settings.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        drop(c);
        assert!(claude.join("settings.json").exists(), "never a directory with something in it");
        let settings = dir.path().join("settings.local.json");
        let config = dir.path().join("config.toml");
        let d = Placeholders::hold(&[], &[settings.clone(), config.clone()]);
        let e = Placeholders::hold(&[], std::slice::from_ref(&config));
        assert_eq!(std::fs::read_to_string(&settings).unwrap_or_default(), "{}\n", "settings that say nothing");
        drop(d);
        assert!(!settings.exists() && config.exists(), "the last holder removes it");
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&config, "[daemon]\n").unwrap_or_else(|e| panic!("{e}"));
        drop(e);
        assert!(config.exists(), "a file someone wrote meanwhile is theirs");
    }

    #[test]
    fn a_command_shares_anothers_placeholder_and_never_takes_the_users_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let settings = dir.path().join("settings.local.json");
        let hooks = dir.path().join("hooks");
        let first = Placeholders::hold(std::slice::from_ref(&hooks), std::slice::from_ref(&settings));
        // A second command built its policy while they were there: they
        // are read-only places to it, and must stay until it ends.
        let second = Placeholders::share(&[settings.clone(), hooks.clone()]);
        drop(first);
        assert!(settings.is_file() && hooks.is_dir(), "shared: the first command does not remove them");
        drop(second);
        assert!(!settings.exists() && !hooks.exists(), "the last holder removes them");

        // The user's own, even empty or saying nothing, are never shared
        // nor removed.
        std::fs::write(&settings, "{}\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(&hooks).unwrap_or_else(|e| panic!("{e}"));
        drop(Placeholders::share(&[settings.clone(), hooks.clone()]));
        drop(Placeholders::hold(std::slice::from_ref(&hooks), std::slice::from_ref(&settings)));
        assert!(settings.is_file() && hooks.is_dir(), "the user's files stay");
    }
}
