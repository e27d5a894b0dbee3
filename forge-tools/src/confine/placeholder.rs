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

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

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
fn file_content(path: &std::path::Path) -> &'static [u8] {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => b"{}\n",
        _ => b"",
    }
}

impl Placeholders {
    /// Makes (or shares) an empty directory at each of `dirs` and an
    /// empty file at each of `files`; one that is there already with
    /// something in it is left alone (the command got it read-only when
    /// its policy was built, or it raced in: the mount over it fails and
    /// the command does not start).
    pub fn hold(dirs: &[PathBuf], files: &[PathBuf]) -> Placeholders {
        let mut held = Vec::new();
        for p in dirs {
            match std::fs::create_dir(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(_) => continue,
            }
            let Ok(dir) = std::fs::File::open(p) else { continue };
            let fd = OwnedFd::from(dir);
            if lock(&fd, libc::LOCK_SH) {
                held.push((p.clone(), fd, None));
            }
        }
        for p in files {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let content = file_content(p);
            let made = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(p);
            let file = match made {
                Ok(mut f) => {
                    let _ = f.write_all(content);
                    f
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let Ok(f) = std::fs::File::open(p) else { continue };
                    f
                }
                Err(_) => continue,
            };
            let fd = OwnedFd::from(file);
            if lock(&fd, libc::LOCK_SH) {
                held.push((p.clone(), fd, Some(content)));
            }
        }
        Placeholders { held }
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for (p, fd, content) in self.held.drain(..) {
            // The last holder removes it, and only while empty (as made).
            if !lock(&fd, libc::LOCK_EX | libc::LOCK_NB) {
                continue;
            }
            match content {
                None => {
                    let _ = std::fs::remove_dir(&p);
                }
                Some(content) => {
                    if std::fs::read(&p).is_ok_and(|now| now == content) {
                        let _ = std::fs::remove_file(&p);
                    }
                }
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
        std::fs::write(&config, "[daemon]\n").unwrap_or_else(|e| panic!("{e}"));
        drop(e);
        assert!(config.exists(), "a file someone wrote meanwhile is theirs");
    }
}
