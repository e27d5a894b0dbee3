//! The command's view of the file system, set up by its init process in
//! a mount namespace of its own: private `/tmp`, `/var/tmp` and `/dev/shm`
//! (other sessions' temporary files, test daemons' homes and the sockets
//! of tmux and friends are not there), with the granted places under them
//! mounted back in; `.git` and `.claude` read-only; the user's socket
//! directories behind empty mounts; a `/proc` of the command's own PID
//! namespace.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::Policy;

/// Device files every command may read and write.
/// (Not `/dev/tty`: commands have no terminal, and one could type into
/// the user's.)
pub(super) const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Shared scratch places every user's programs can reach: each command
/// gets empty ones of its own.
pub const PRIVATE_PLACES: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

pub(super) fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret < 0 { Err(os_err(what)) } else { Ok(()) }
}

pub(super) fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|e| io::Error::other(e.to_string()))
}

/// Nothing mounted here reaches the parent namespace (it would not
/// anyway from a user namespace; this says so).
pub(super) fn make_private() -> io::Result<()> {
    // SAFETY: mount(2) changing propagation only.
    check(
        unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        },
        "make / private",
    )
}

/// A detached copy of the mount tree at `path` (with what is mounted
/// below it), to be placed elsewhere with [`move_tree`].
pub(super) fn clone_tree(path: &Path) -> io::Result<OwnedFd> {
    let c = c_path(path)?;
    // SAFETY: open_tree(2) with a valid path; returns a new descriptor.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(os_err(&format!("open_tree {}", path.display())));
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(super) fn move_tree(tree: &OwnedFd, at: &Path) -> io::Result<()> {
    let c = c_path(at)?;
    // SAFETY: move_mount(2) of our detached tree onto an existing path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(r as libc::c_int, &format!("move_mount {}", at.display()))
}

/// What the policy lets the command write under `place`, and the read
/// places it names (`shown`): mounted back after `place` is replaced (the
/// outermost of nested ones), with whether it is writable. Other read
/// grants are not: they are pieces of the system tree (`/tmp`'s entries,
/// when a hidden place lies in `/tmp`), which is what a private place
/// hides.
fn exposed(policy: &Policy, place: &Path) -> Vec<(PathBuf, bool)> {
    let mut out: Vec<(PathBuf, bool)> = policy
        .write
        .iter()
        .map(|p| (p.clone(), true))
        .chain(policy.shown.iter().map(|p| (p.clone(), false)))
        .filter(|(p, _)| p.starts_with(place) && p != place)
        .collect();
    out.sort();
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (p, w) in out {
        match kept.iter_mut().find(|(k, _)| p.starts_with(k.as_path())) {
            Some(k) => k.1 |= w && k.0 == p,
            None => kept.push((p, w)),
        }
    }
    kept
}

/// Replaces each of [`PRIVATE_PLACES`] with an empty tmpfs of at most
/// `size_mb` (charged to the command's memory), mounting back what the
/// policy grants under it. Returns the places the command may write
/// everywhere in: those with nothing read-only mounted back inside
/// (Landlock's rights pass down into mounts below a place).
pub(super) fn private_places(policy: &Policy, size_mb: u64) -> io::Result<Vec<PathBuf>> {
    let mut writable = Vec::new();
    for place in PRIVATE_PLACES.iter().map(Path::new) {
        match std::fs::symlink_metadata(place) {
            Ok(m) if m.is_dir() => {}
            _ => continue,
        }
        let back = exposed(policy, place);
        let trees: Vec<(PathBuf, bool, bool, OwnedFd)> = back
            .iter()
            .filter_map(|(p, w)| {
                let dir = std::fs::metadata(p).ok()?.is_dir();
                Some(clone_tree(p).map(|fd| (p.clone(), *w, dir, fd)))
            })
            .collect::<io::Result<_>>()?;
        let c = c_path(place)?;
        let opts = CString::new(format!("mode=1777,size={size_mb}m")).map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: mount(2) of a new tmpfs with valid C strings.
        check(
            unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    c.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    opts.as_ptr().cast(),
                )
            },
            &format!("tmpfs on {}", place.display()),
        )?;
        for (path, _, dir, tree) in &trees {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            if *dir {
                std::fs::create_dir_all(path)?;
            } else {
                std::fs::write(path, b"")?;
            }
            move_tree(tree, path)?;
        }
        if trees.iter().all(|(_, w, _, _)| *w) {
            writable.push(place.to_path_buf());
        }
    }
    Ok(writable)
}

/// `dir` read-only in this mount namespace: a bind mount of itself,
/// remounted read-only with the flags the kernel locks kept.
pub(super) fn bind_read_only(dir: &Path) -> io::Result<()> {
    let c = c_path(dir)?;
    // SAFETY: mount(2) and statvfs(2) with valid C strings.
    unsafe {
        check(
            libc::mount(c.as_ptr(), c.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()),
            &format!("bind mount {}", dir.display()),
        )?;
        let mut st: libc::statvfs = std::mem::zeroed();
        check(libc::statvfs(c.as_ptr(), &mut st), "statvfs")?;
        let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        for (st_flag, ms_flag) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if st.f_flag & st_flag != 0 {
                flags |= ms_flag;
            }
        }
        check(libc::mount(std::ptr::null(), c.as_ptr(), std::ptr::null(), flags, std::ptr::null()), "remount read-only")
    }
}

/// Hides `place` in this mount namespace: an empty, read-only tmpfs over
/// a directory, `/dev/null` over anything else (a socket).
pub(super) fn mask(place: &Path) -> io::Result<()> {
    let c = c_path(place)?;
    let Ok(meta) = std::fs::symlink_metadata(place) else { return Ok(()) };
    // SAFETY: mount(2) with valid C strings.
    unsafe {
        if meta.is_dir() {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
            let opts = c"size=4k,mode=755";
            check(libc::mount(c"tmpfs".as_ptr(), c.as_ptr(), c"tmpfs".as_ptr(), flags, opts.as_ptr().cast()), "mask")
        } else if meta.file_type().is_symlink() {
            Ok(())
        } else {
            check(
                libc::mount(c"/dev/null".as_ptr(), c.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()),
                "mask",
            )
        }
    }
}

/// A `/proc` showing the command's PID namespace only (where the kernel
/// lets a user namespace mount one; else the host's stays, whose other
/// processes Landlock keeps the command from inspecting).
pub(super) fn fresh_proc() -> bool {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount(2) of procfs with constant C strings.
    unsafe { libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(write: &[&str], read: &[&str]) -> Policy {
        Policy::of(read, write)
    }

    #[test]
    fn what_lies_under_a_private_place_is_mounted_back_once() {
        let p = policy(
            &["/tmp/project", "/tmp/project/sub", "/tmp/forge-cmd-x", "/home/u/src"],
            &["/tmp", "/tmp/shared", "/usr"],
        );
        let back = exposed(&p, Path::new("/tmp"));
        assert_eq!(
            back,
            vec![
                (PathBuf::from("/tmp/build/forged"), false),
                (PathBuf::from("/tmp/forge-cmd-x"), true),
                (PathBuf::from("/tmp/project"), true),
            ],
            "other read grants stay hidden: they are pieces of the system tree"
        );
        assert!(exposed(&p, Path::new("/var/tmp")).is_empty());
    }
}
