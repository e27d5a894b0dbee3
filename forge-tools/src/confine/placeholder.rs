//! Places a command may not create (a root's `.git`, `.claude`, `.forge`
//! where there is none): a confined command could otherwise make a git
//! repository whose configuration runs its program when the user next
//! runs git there, or project settings another tool honours. While the
//! command runs, the supervisor holds an empty directory at each such
//! place, which the command's view shows read-only; the last command
//! using one removes it (a shared lock says who still does). An empty
//! directory is nothing to git: it looks further up, as if it were not
//! there.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

/// The placeholders one command holds.
pub struct Placeholders {
    held: Vec<(PathBuf, OwnedFd)>,
}

fn lock(fd: &OwnedFd, how: libc::c_int) -> bool {
    // SAFETY: flock(2) on our own descriptor.
    unsafe { libc::flock(fd.as_raw_fd(), how) == 0 }
}

impl Placeholders {
    /// Makes (or shares) an empty directory at each of `places`; one that
    /// is there already with something in it is left alone (the command
    /// got it read-only when its policy was built, or it raced in: the
    /// mount over it fails and the command does not start).
    pub fn hold(places: &[PathBuf]) -> Placeholders {
        let mut held = Vec::new();
        for p in places {
            match std::fs::create_dir(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(_) => continue,
            }
            let Ok(dir) = std::fs::File::open(p) else { continue };
            let fd = OwnedFd::from(dir);
            if lock(&fd, libc::LOCK_SH) {
                held.push((p.clone(), fd));
            }
        }
        Placeholders { held }
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for (p, fd) in self.held.drain(..) {
            // The last holder removes it, and only while empty.
            if lock(&fd, libc::LOCK_EX | libc::LOCK_NB) {
                let _ = std::fs::remove_dir(&p);
            }
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
        let a = Placeholders::hold(std::slice::from_ref(&git));
        let b = Placeholders::hold(std::slice::from_ref(&git));
        assert!(git.is_dir());
        drop(a);
        assert!(git.is_dir(), "still held by another command");
        drop(b);
        assert!(!git.exists(), "the last one removes it");
        let claude = dir.path().join(".claude");
        let c = Placeholders::hold(std::slice::from_ref(&claude));
        std::fs::write(claude.join("settings.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        drop(c);
        assert!(claude.join("settings.json").exists(), "never a directory with something in it");
    }
}
