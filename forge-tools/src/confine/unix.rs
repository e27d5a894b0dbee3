//! Unix sockets: a confined command reaches only sockets inside the
//! session's roots and its temporary directory, and those the user lists
//! (`[tools.sandbox] allow_unix_sockets`). Any other socket may belong to
//! a program that runs code outside the sandbox (a tmux server, another
//! Forge daemon, Docker, an editor's language server), wherever it lives.
//!
//! Every `connect` is answered by the command's init (see
//! [`super::netfilter`]): it reads the address, resolves a path inside a
//! granted tree without leaving it (`openat2` with `RESOLVE_BENEATH`: no
//! `..` or symbolic link out), and connects the command's socket itself
//! through the descriptor it opened, so nothing the command changes
//! afterwards matters. Abstract names are refused: they are not files, so
//! no tree grants them.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::lexical::lexical;

/// Where the command may connect.
#[derive(Debug, Default)]
pub struct UnixRules {
    /// Trees whose sockets it may reach, the deepest first.
    pub trees: Vec<PathBuf>,
    /// Each tree opened before the command started: a tree inside a
    /// writable one could be swapped for a link later.
    tree_dirs: Vec<Option<OwnedFd>>,
    /// Single sockets the user allowed (exact paths).
    pub sockets: Vec<Allowed>,
    /// Relative addresses can be resolved: the command's `/proc` is its
    /// own, so its working directory can be read there.
    pub relative: bool,
}

/// A socket the user allows, by its directory opened before the command
/// started (its place may be hidden from the command) and its name.
#[derive(Debug)]
pub struct Allowed {
    pub path: PathBuf,
    dir: Option<OwnedFd>,
}

impl UnixRules {
    pub fn new(trees: Vec<PathBuf>, sockets: &[PathBuf]) -> UnixRules {
        let sockets = sockets
            .iter()
            .map(|p| Allowed { path: p.clone(), dir: p.parent().and_then(|d| open_path(d, libc::O_DIRECTORY).ok()) })
            .collect();
        let mut trees = trees;
        trees.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
        let tree_dirs = trees.iter().map(|t| open_path(t, libc::O_DIRECTORY | libc::O_NOFOLLOW).ok()).collect();
        UnixRules { trees, tree_dirs, sockets, relative: true }
    }
}

/// What a `sockaddr_un` names.
#[derive(Debug, PartialEq, Eq)]
pub enum UnixAddr {
    Unnamed,
    Abstract(String),
    Path(PathBuf),
}

impl UnixAddr {
    pub fn parse(bytes: &[u8]) -> Option<UnixAddr> {
        let family = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]) as i32;
        if family != libc::AF_UNIX {
            return None;
        }
        let path = &bytes[2..];
        match path.first() {
            None => Some(UnixAddr::Unnamed),
            Some(0) => Some(UnixAddr::Abstract(String::from_utf8_lossy(&path[1..]).into_owned())),
            Some(_) => {
                let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
                let p = std::ffi::OsStr::from_bytes(&path[..end]);
                Some(UnixAddr::Path(PathBuf::from(p)))
            }
        }
    }
}

/// The working directory of thread `tid`, as a path.
fn cwd_of(tid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{tid}/cwd")).ok()
}

fn open_path(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
    // SAFETY: open(2) with a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `rest` opened below the tree `dir`, never leaving it.
fn open_beneath(dir: &OwnedFd, rest: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(rest.as_os_str().as_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
    // struct open_how { u64 flags, mode, resolve }
    let how: [u64; 3] =
        [(libc::O_PATH | libc::O_CLOEXEC) as u64, 0, libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS];
    // SAFETY: openat2(2) with a valid C string and a filled open_how.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), c.as_ptr(), how.as_ptr(), std::mem::size_of_val(&how))
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl Allowed {
    /// The socket, opened in its directory as it is now.
    fn open(&self) -> io::Result<OwnedFd> {
        let (Some(dir), Some(name)) = (&self.dir, self.path.file_name()) else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        let c = CString::new(name.as_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: openat(2) with our directory and a valid C string.
        // Not through a link: the directory may be one the command writes.
        let flags = libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor of ours.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// The name of our `O_PATH` descriptor `target` of a socket, as a Unix
/// address: the very file opened, whatever its path becomes.
pub fn proc_address(target: &OwnedFd) -> Result<(libc::sockaddr_un, libc::socklen_t), i32> {
    // SAFETY: fstat on our descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(target.as_raw_fd(), &mut st) } != 0 {
        return Err(libc::ENOENT);
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED);
    }
    let name = format!("/proc/self/fd/{}", target.as_raw_fd());
    // SAFETY: a zeroed sockaddr_un is valid; the name is short.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, b) in name.bytes().enumerate() {
        addr.sun_path[i] = b as libc::c_char;
    }
    Ok((addr, (std::mem::size_of::<libc::sa_family_t>() + name.len() + 1) as libc::socklen_t))
}

/// Connects `sock` to the socket `target` (an `O_PATH` descriptor of
/// ours).
fn connect_to(sock: &OwnedFd, target: &OwnedFd) -> Result<(), i32> {
    let (addr, len) = proc_address(target)?;
    // SAFETY: connect on our copy of the command's socket.
    let r = unsafe { libc::connect(sock.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::ECONNREFUSED)) }
}

/// What to do with a `connect` of thread `tid` to `addr` on `sock`:
/// `Ok` once connected, or the error to return (refusals are said on
/// the command's stderr by the caller with [`refusal`]).
pub fn connect(tid: u32, sock: &OwnedFd, addr: &UnixAddr, rules: &UnixRules) -> Result<(), Refused> {
    let target = resolve(tid, addr, rules)?;
    connect_to(sock, &target).map_err(Refused::Errno)
}

/// The socket file `addr` names for thread `tid`, opened (`O_PATH`) where
/// the rules let the command reach it: inside a granted tree without
/// leaving it, or one the user listed.
pub fn resolve(tid: u32, addr: &UnixAddr, rules: &UnixRules) -> Result<OwnedFd, Refused> {
    let path = match addr {
        UnixAddr::Unnamed => return Err(Refused::Errno(libc::EINVAL)),
        UnixAddr::Abstract(name) => return Err(Refused::Policy(format!("@{name}"))),
        UnixAddr::Path(p) => p,
    };
    let full = if path.is_absolute() {
        path.clone()
    } else {
        match cwd_of(tid).filter(|_| rules.relative) {
            Some(cwd) => cwd.join(path),
            None => return Err(Refused::Policy(format!("{} (a relative name: give the full path)", path.display()))),
        }
    };
    let plain = lexical(&full);
    if let Some(allowed) = rules.sockets.iter().find(|s| s.path == plain) {
        return allowed.open().map_err(|e| Refused::Errno(e.raw_os_error().unwrap_or(libc::ENOENT)));
    }
    if lookup_service(&plain) {
        return Err(Refused::Errno(libc::ENOENT));
    }
    for (tree, dir) in rules.trees.iter().zip(&rules.tree_dirs) {
        if let Ok(rest) = full.strip_prefix(tree) {
            let Some(dir) = dir else { return Err(Refused::Errno(libc::ENOENT)) };
            return match open_beneath(dir, rest) {
                Ok(t) => Ok(t),
                // Out of the tree by `..` or a link.
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => Err(Refused::Policy(full.display().to_string())),
                Err(e) => Err(Refused::Errno(e.raw_os_error().unwrap_or(libc::ENOENT))),
            };
        }
    }
    Err(Refused::Policy(full.display().to_string()))
}

/// Whether descriptors may be passed on `sock`, connected already: its
/// peer's socket lies in a granted tree or is one the user listed. A
/// peer without a name is another socket of the command's pair, or a
/// client that connected to the command.
pub fn peer_allowed(sock: &OwnedFd, rules: &UnixRules) -> Result<(), Refused> {
    // SAFETY: a zeroed sockaddr_un is valid for getpeername to fill.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: getpeername into a sockaddr_un of the given size.
    let r = unsafe { libc::getpeername(sock.as_raw_fd(), (&mut addr as *mut libc::sockaddr_un).cast(), &mut len) };
    if r != 0 {
        return Err(Refused::Errno(io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOTCONN)));
    }
    // SAFETY: the kernel filled `len` bytes of the struct.
    let bytes = unsafe { std::slice::from_raw_parts((&addr as *const libc::sockaddr_un).cast::<u8>(), len as usize) };
    match UnixAddr::parse(bytes) {
        None | Some(UnixAddr::Unnamed) => Ok(()),
        Some(UnixAddr::Abstract(name)) => Err(Refused::Policy(format!("@{name}"))),
        // A relative name resolves against the peer's working directory
        // at the time it bound, which is not ours to know.
        Some(UnixAddr::Path(p)) if !p.is_absolute() => {
            Err(Refused::Policy(format!("{} (bound by a relative name)", p.display())))
        }
        Some(peer) => resolve(0, &peer, rules).map(drop),
    }
}

/// The system's lookup services (users, groups, names), which the C
/// library asks on its own before it falls back to the files: refused as
/// if absent, without a word.
const LOOKUP_SERVICES: &[&str] = &[
    "/run/nscd/socket",
    "/var/run/nscd/socket",
    "/var/lib/sss/pipes/nss",
    "/run/systemd/userdb",
    "/run/systemd/resolve/io.systemd.Resolve",
];

/// Whether `path` is one of [`LOOKUP_SERVICES`].
fn lookup_service(path: &Path) -> bool {
    LOOKUP_SERVICES.iter().any(|s| path.starts_with(s))
}

/// Why a connect did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The sandbox refuses this socket (named).
    Policy(String),
    /// The call failed as it would have anyway.
    Errno(i32),
}

/// The line the command's stderr gets for a refused socket (`verb`:
/// "connect to", "send to", "pass a descriptor to").
pub fn refusal(verb: &str, what: &str) -> String {
    format!(
        "[forge sandbox] refused {verb} the Unix socket {what}: commands reach only sockets in the session's roots and $TMPDIR ([tools.sandbox] allow_unix_sockets lists others)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(path: &[u8]) -> Vec<u8> {
        let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(path);
        b
    }

    #[test]
    fn addresses_are_told_apart() {
        assert_eq!(UnixAddr::parse(&raw(b"/tmp/s.sock\0junk")), Some(UnixAddr::Path("/tmp/s.sock".into())));
        assert_eq!(UnixAddr::parse(&raw(b"\0name")), Some(UnixAddr::Abstract("name".into())));
        assert_eq!(UnixAddr::parse(&raw(b"")), Some(UnixAddr::Unnamed));
        assert_eq!(UnixAddr::parse(&[2, 0, 1]), None);
        assert_eq!(lexical(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
    }

    #[test]
    fn only_sockets_inside_the_trees_or_listed_are_reached() {
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let (root, outside) = (d.join("root"), d.join("outside"));
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&outside).unwrap_or_else(|e| panic!("{e}"));
        let _inner = UnixListener::bind(root.join("in.sock")).unwrap_or_else(|e| panic!("{e}"));
        let _outer = UnixListener::bind(outside.join("out.sock")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.join("out.sock"), root.join("link.sock")).unwrap_or_else(|e| panic!("{e}"));
        let rules = UnixRules::new(vec![root.clone()], &[]);
        let fresh = || {
            // SAFETY: socket(2) returns a new descriptor or -1.
            let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
            assert!(fd >= 0);
            // SAFETY: a new descriptor of ours.
            unsafe { OwnedFd::from_raw_fd(fd) }
        };
        let me = std::process::id();
        assert_eq!(connect(me, &fresh(), &UnixAddr::Path(root.join("in.sock")), &rules), Ok(()));
        let out = UnixAddr::Path(outside.join("out.sock"));
        assert!(matches!(connect(me, &fresh(), &out, &rules), Err(Refused::Policy(_))));
        let dotdot = UnixAddr::Path(root.join("../outside/out.sock"));
        assert!(matches!(connect(me, &fresh(), &dotdot, &rules), Err(Refused::Policy(_))), "no way out by ..");
        let link = UnixAddr::Path(root.join("link.sock"));
        assert!(matches!(connect(me, &fresh(), &link, &rules), Err(Refused::Policy(_))), "nor by a link");
        assert!(matches!(connect(me, &fresh(), &UnixAddr::Abstract("x".into()), &rules), Err(Refused::Policy(_))));
        let listed = UnixRules::new(vec![root.clone()], &[outside.join("out.sock")]);
        assert_eq!(connect(me, &fresh(), &out, &listed), Ok(()), "a socket the user lists is reached");

        // A tree inside another, swapped for a link to the outside after
        // the rules were made: still the tree as it was.
        let inner = root.join("inner");
        std::fs::create_dir_all(&inner).unwrap_or_else(|e| panic!("{e}"));
        let nested = UnixRules::new(vec![root.clone(), inner.clone()], &[]);
        std::fs::rename(&inner, root.join("inner.old")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&outside, &inner).unwrap_or_else(|e| panic!("{e}"));
        let swapped = UnixAddr::Path(inner.join("out.sock"));
        assert!(connect(me, &fresh(), &swapped, &nested).is_err(), "not through the link");
    }
}
