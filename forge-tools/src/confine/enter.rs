//! Entering the sandbox: run in the command's process after `fork` and
//! before `exec`, by the supervisor (a single-threaded process, so the
//! allocations here are safe).

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{NetworkAccess, Policy};

/// Device files every command may read and write.
/// (Not `/dev/tty`: commands have no terminal, and one could type into
/// the user's.)
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// The Landlock ABI Forge's rules are written for (scopes: abstract Unix
/// sockets and signals). An older kernel gets what it supports of it.
const ABI_USED: ABI = ABI::V6;

/// What entering set up.
pub struct Entered {
    /// The seccomp listener (network = "localhost"): the supervisor
    /// answers the command's `connect` and `bind` calls on it.
    pub listener: Option<OwnedFd>,
}

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret < 0 { Err(os_err(what)) } else { Ok(()) }
}

fn write_file(path: &str, text: &str) -> io::Result<()> {
    std::fs::write(path, text).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// A user namespace with the current user and group mapped to
/// themselves: the caller gets capabilities over namespaces it creates
/// next, and its process count starts from zero.
fn enter_user_namespace() -> io::Result<()> {
    // SAFETY: plain system calls.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER) }, "unshare(CLONE_NEWUSER)")?;
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1"))
}

/// For the daemon's start-up check: can this process enter a user
/// namespace and a mount and network namespace inside it?
pub(super) fn user_namespace_works() -> bool {
    enter_user_namespace().is_ok()
        // SAFETY: plain system call.
        && unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWNET) } == 0
}

/// `dir` read-only in this mount namespace: a bind mount of itself,
/// remounted read-only with the flags the kernel locks kept.
fn bind_read_only(dir: &Path) -> io::Result<()> {
    let c = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
    // SAFETY: mount(2) and statvfs(2) with valid C strings.
    unsafe {
        check(
            libc::mount(c.as_ptr(), c.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()),
            "bind mount",
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
fn mask(place: &Path) -> io::Result<()> {
    let c = CString::new(place.as_os_str().as_encoded_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
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

/// Brings up `lo` in a new network namespace: the command's own servers
/// and tests on 127.0.0.1 work, nothing else is reachable.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket and two ioctls on a zeroed, NUL-terminated ifreq.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(os_err("socket"));
        }
        let fd = OwnedFd::from_raw_fd(fd);
        use std::os::fd::AsRawFd;
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        check(libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr), "SIOCGIFFLAGS")?;
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        check(libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr), "SIOCSIFFLAGS")
    }
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64, what: &str) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: setrlimit with a valid struct.
    check(unsafe { libc::setrlimit(resource, &lim) }, what)
}

/// No capabilities, now or after any `exec` (a root user's commands
/// included); nothing to do for a user who has none.
fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset with plain values and a zeroed header/data.
    unsafe {
        // Root (in whatever namespace) gets no capabilities back at exec.
        let bits = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80;
        if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) != 0 {
            // Without CAP_SETPCAP there is nothing to drop.
            return Ok(());
        }
        let mut cap = 0;
        while libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 {
            cap += 1;
        }
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header { version: 0x2008_0522, pid: 0 };
        let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        check(libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) as libc::c_int, "capset")
    }
}

fn landlock_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("Landlock: {e}"))
}

/// The Landlock domain: `read` and `write` trees, the devices, and (for
/// `localhost`, where the supervisor makes the allowed connections) no TCP
/// bind or connect.
fn restrict_files(policy: &Policy, filter_tcp: bool) -> io::Result<()> {
    let abi = ABI_USED;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_error)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(landlock_error)?;
    if filter_tcp {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(landlock_error)?;
    }
    let mut created = ruleset.create().map_err(landlock_error)?;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let grants = policy
        .read
        .iter()
        .map(|p| (p.as_path(), read))
        .chain(policy.write.iter().map(|p| (p.as_path(), all)))
        .chain(DEVICES.iter().map(|d| (Path::new(*d), all)))
        .chain([(Path::new("/dev/pts"), all)]);
    for (path, access) in grants {
        // A place that does not exist (any more) grants nothing.
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let access = if meta.is_dir() { access } else { access & AccessFs::from_file(abi) };
        let Ok(fd) = PathFd::new(path) else { continue };
        created = created.add_rule(PathBeneath::new(fd, access)).map_err(landlock_error)?;
    }
    let status = created.restrict_self().map_err(landlock_error)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(io::Error::other("Landlock is not enforced by this kernel"));
    }
    Ok(())
}

/// Puts the calling process (the command, between `fork` and `exec`)
/// into the sandbox `policy` describes (kernel mode guarantees user
/// namespaces: see `Support::kernel`).
pub fn enter(policy: &Policy) -> io::Result<Entered> {
    enter_user_namespace()?;
    let network_namespace = policy.network == NetworkAccess::Deny;
    let mut flags = libc::CLONE_NEWNS;
    if network_namespace {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: plain system call.
    check(unsafe { libc::unshare(flags) }, "unshare(mount, network)")?;
    for dir in &policy.read_only {
        bind_read_only(dir)?;
    }
    // Never a place the command works in.
    for place in policy.masked.iter().filter(|m| !policy.write.iter().any(|w| w.starts_with(m))) {
        mask(place)?;
    }
    if network_namespace {
        loopback_up()?;
    }
    // Counted in this namespace only: the user's other processes do not
    // use the command's allowance up (root is exempt: the supervisor
    // counts for it).
    set_limit(libc::RLIMIT_NPROC, policy.limits.processes, "RLIMIT_NPROC")?;
    // A session of its own: no controlling terminal to type into.
    // SAFETY: plain system call; fails only for a group leader, which the
    // command (a child of its supervisor) is not.
    unsafe { libc::setsid() };
    set_limit(libc::RLIMIT_DATA, policy.limits.memory_mb.saturating_mul(1024 * 1024), "RLIMIT_DATA")?;
    set_limit(libc::RLIMIT_CPU, policy.limits.cpu_seconds, "RLIMIT_CPU")?;
    // SAFETY: plain prctl.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }, "PR_SET_NO_NEW_PRIVS")?;
    drop_capabilities()?;
    let localhost = policy.network == NetworkAccess::Localhost;
    restrict_files(policy, localhost)?;
    let listener = if localhost { Some(super::netfilter::install()?) } else { None };
    Ok(Entered { listener })
}
