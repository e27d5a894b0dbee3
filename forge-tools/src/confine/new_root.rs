//! The whole file boundary in the command's mount namespace, for kernels
//! whose Landlock cannot carry it (before ABI 3, Linux 6.2: Debian 12,
//! Ubuntu 22.04, RHEL 9), the way bubblewrap builds a sandbox: a new root
//! made of the policy's grants only, bind-mounted from the real tree,
//! read-only where the policy only reads, writable where it writes. What
//! no grant names (the home directory around the toolchains, the user's
//! secrets, other Forge homes) is simply not there, and nothing outside
//! the roots can be written, whatever path, link or race a command tries.
//! Landlock, where the kernel has a usable ABI, is still layered on top.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::Policy;
use super::mounts::{PRIVATE_PLACES, c_path, move_tree, os_err};

/// Where the new root is assembled: a place every system has, and that
/// the command gets a private one of anyway.
const STAGING: &str = "/tmp";

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How a grant is mounted in the new root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// Read-only, with everything mounted below it.
    Read,
    /// As it is (writable where the file system is).
    Write,
    /// As it is: `/proc`, which a fresh one of the command's own covers
    /// where the kernel allows (a read-only copy would keep it from
    /// mounting one).
    Keep,
}

/// The grants to place, outermost first, without those a grant of the
/// same access already holds, nor read grants under the private places
/// (replaced by empty ones later; the `shown` ones are mounted back then).
pub(super) fn plan(policy: &Policy) -> Vec<(PathBuf, Access)> {
    let mut grants: Vec<(PathBuf, Access)> = Vec::new();
    let devices = super::mounts::DEVICES.iter().map(PathBuf::from).chain([PathBuf::from("/dev/pts")]);
    let private = |p: &Path| PRIVATE_PLACES.iter().any(|place| p.starts_with(place));
    grants.extend(policy.read.iter().filter(|p| !private(p)).map(|p| (p.clone(), Access::Read)));
    grants.extend(policy.shown.iter().map(|p| (p.clone(), Access::Read)));
    grants.extend(policy.unix_sockets.iter().map(|p| (p.clone(), Access::Write)));
    grants.extend(policy.write.iter().map(|p| (p.clone(), Access::Write)));
    grants.extend(devices.map(|p| (p, Access::Write)));
    grants.push((PathBuf::from("/proc"), Access::Keep));
    for g in grants.iter_mut() {
        if g.0 == Path::new("/proc") || g.0.starts_with("/proc/") {
            g.1 = Access::Keep;
        }
    }
    // Parents before children; of one path, the writable grant wins.
    grants.sort_by(|a, b| a.0.cmp(&b.0).then((a.1 == Access::Read).cmp(&(b.1 == Access::Read))));
    grants.dedup_by(|later, first| later.0 == first.0);
    let mut kept: Vec<(PathBuf, Access)> = Vec::new();
    for (path, access) in grants {
        // Only what adds a right to the innermost grant holding it (rights
        // pass down, as Landlock's do): a root in a read-only tree.
        let holder = kept.iter().rev().find(|(k, _)| path.starts_with(k)).map(|(_, a)| *a);
        let adds = matches!((holder, access), (None, _) | (_, Access::Keep) | (Some(Access::Read), Access::Write));
        if adds {
            kept.push((path, access));
        }
    }
    kept
}

/// A detached copy of the mount tree at `path`, read-only for `Read`.
fn clone_tree(path: &Path, access: Access) -> io::Result<OwnedFd> {
    let tree = super::mounts::clone_tree(path)?;
    if access == Access::Read {
        // A device node under a read grant (a tty in /dev) stays usable.
        let nodev = if path.starts_with("/dev") { 0 } else { MOUNT_ATTR_NODEV };
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | nodev,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: mount_setattr(2) on our detached tree with a valid struct.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if r < 0 {
            return Err(os_err(&format!("read-only {}", path.display())));
        }
    }
    Ok(tree)
}

fn mount_tmpfs(at: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let c = c_path(at)?;
    // SAFETY: mount(2) of a tmpfs with valid C strings.
    let r = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            c.as_ptr(),
            c"tmpfs".as_ptr(),
            flags | libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=755,size=1m".as_ptr().cast(),
        )
    };
    if r < 0 { Err(os_err(&format!("tmpfs on {}", at.display()))) } else { Ok(()) }
}

/// Makes `dir` (absolute, in the real tree) in the new root at `top`, with
/// each directory on the way that is not there yet; a directory made here
/// gets the symbolic links its original has (`/bin` -> `usr/bin` on a
/// merged-/usr system), so paths through them still resolve.
fn skeleton(top: &Path, dir: &Path) -> io::Result<()> {
    let mut real = PathBuf::from("/");
    let mut made = top.to_path_buf();
    for part in dir.components().skip(1) {
        real.push(part);
        made.push(part);
        if std::fs::symlink_metadata(&made).is_ok() {
            continue;
        }
        std::fs::create_dir(&made)?;
        copy_links(&real, &made);
    }
    Ok(())
}

/// The symbolic links directly in `real`, made again in `made`.
fn copy_links(real: &Path, made: &Path) {
    let Ok(entries) = std::fs::read_dir(real) else { return };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_symlink())
            && let Ok(target) = std::fs::read_link(e.path())
        {
            let _ = std::os::unix::fs::symlink(target, made.join(e.file_name()));
        }
    }
}

/// Builds the new root from the policy's grants and makes it the
/// command's `/`. The private places, read-only `.git`, masks and `/proc`
/// are then set up in it as anywhere else.
pub(super) fn enter(policy: &Policy) -> io::Result<()> {
    let grants = plan(policy);
    // Every tree is taken before the staging place covers /tmp.
    let mut trees = Vec::new();
    for (path, access) in grants {
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        trees.push((path.clone(), meta.is_dir(), clone_tree(&path, access)?));
    }
    let top = Path::new(STAGING);
    mount_tmpfs(top, 0)?;
    copy_links(Path::new("/"), top);
    for (path, dir, tree) in &trees {
        let at = top.join(path.strip_prefix("/").unwrap_or(path));
        if let Some(parent) = path.parent() {
            skeleton(top, parent)?;
        }
        if std::fs::symlink_metadata(&at).is_err() {
            if *dir {
                std::fs::create_dir(&at)?;
            } else {
                std::fs::write(&at, b"")?;
            }
        }
        move_tree(tree, &at)?;
    }
    // What the later steps mount on.
    for place in PRIVATE_PLACES {
        skeleton(top, Path::new(place))?;
    }
    // Nothing can be made in the new root's own directories.
    let c = c_path(top)?;
    // SAFETY: remounting our own tmpfs read-only, valid C strings.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            c.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=755".as_ptr().cast(),
        )
    };
    if r < 0 {
        return Err(os_err("read-only new root"));
    }
    pivot(top)
}

/// Makes `top` the root and lets the old one go (`pivot_root(".", ".")`,
/// then detach what is stacked under it).
fn pivot(top: &Path) -> io::Result<()> {
    std::env::set_current_dir(top)?;
    // SAFETY: pivot_root(2) and umount2(2) with constant C strings.
    unsafe {
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) < 0 {
            return Err(os_err("pivot_root"));
        }
        if libc::umount2(c".".as_ptr(), libc::MNT_DETACH) < 0 {
            return Err(os_err("detach the old root"));
        }
    }
    std::env::set_current_dir("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::of(
            &["/usr", "/usr/bin", "/etc", "/tmp/shared", "/home/u/.cargo", "/proc", "/srv"],
            &["/srv/proj", "/tmp/forge-cmd-x", "/usr"],
        )
    }

    #[test]
    fn the_new_root_holds_each_grant_once_with_its_access() {
        let planned = plan(&policy());
        let get = |p: &str| planned.iter().find(|(g, _)| g == Path::new(p)).map(|(_, a)| *a);
        assert_eq!(get("/usr"), Some(Access::Write), "of one path, the writable grant wins");
        assert_eq!(get("/usr/bin"), None, "held by the writable /usr already");
        assert_eq!(get("/srv"), Some(Access::Read));
        assert_eq!(get("/srv/proj"), Some(Access::Write), "a root inside a read grant is mounted on top");
        assert_eq!(get("/home/u/.cargo"), Some(Access::Read));
        assert_eq!(get("/tmp/shared"), None, "read grants under /tmp are hidden by its private copy");
        assert_eq!(get("/tmp/forge-cmd-x"), Some(Access::Write));
        assert_eq!(get("/tmp/build/forged"), Some(Access::Read), "shown places are kept");
        assert_eq!(get("/proc"), Some(Access::Keep));
        assert_eq!(get("/dev/null"), Some(Access::Write));
        let order: Vec<&PathBuf> = planned.iter().map(|(p, _)| p).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "parents are placed before what lies in them");
    }
}
