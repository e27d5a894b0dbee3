//! Entering the sandbox, in two steps: the command's init process (pid 1
//! of a PID namespace of its own, in a user, mount and IPC namespace, and
//! a network namespace for `network = "deny"`) sets up what the command
//! sees ([`init_namespaces`]); the command itself, between `fork` and
//! `exec`, then gives up what it may do ([`restrict`]). Both run in
//! copies of the single-threaded supervisor, so allocating is safe.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{NetworkAccess, Policy};

/// The Landlock ABI Forge's rules are written for (scopes: abstract Unix
/// sockets and signals). An older kernel gets what it supports of it.
const ABI_USED: i32 = 6;

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

/// Maps the user and group (as they were before the user namespace was
/// entered) to themselves in the caller's new user namespace: it then has
/// capabilities over the namespaces made with it, and its process count
/// starts from zero.
pub(super) fn map_user(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1"))
}

/// The namespaces every command gets (the network one only for `deny`).
pub(super) fn namespace_flags(policy: &Policy) -> libc::c_int {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if policy.network == NetworkAccess::Deny {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// What the daemon's start-up check found (`forged __forge-probe userns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NamespaceProbe {
    /// User, mount, PID and network namespaces, and a `/proc` of their own.
    Full,
    /// The namespaces, but the kernel refuses a new `/proc` (a container
    /// whose `/proc` is partly hidden).
    NoFreshProc,
    None,
}

/// Can this (single-threaded) process make the namespaces a command gets,
/// and mount a `/proc` in them? Checked in a child, as a command's init.
pub(super) fn probe_namespaces() -> NamespaceProbe {
    // SAFETY: plain system calls; the child only maps its user, mounts
    // and exits.
    unsafe {
        let (uid, gid) = (libc::getuid(), libc::getgid());
        let flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWIPC;
        let pid =
            libc::syscall(libc::SYS_clone, (flags | libc::SIGCHLD) as libc::c_ulong, 0usize, 0usize, 0usize, 0usize);
        if pid < 0 {
            return NamespaceProbe::None;
        }
        if pid == 0 {
            let code = if map_user(uid, gid).is_err() || super::mounts::make_private().is_err() {
                1
            } else if super::mounts::fresh_proc() {
                0
            } else {
                3
            };
            libc::_exit(code);
        }
        let mut status = 0;
        libc::waitpid(pid as libc::pid_t, &mut status, 0);
        match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
            Some(0) => NamespaceProbe::Full,
            Some(3) => NamespaceProbe::NoFreshProc,
            _ => NamespaceProbe::None,
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
fn restrict_files(policy: &Policy, writable: &[PathBuf], filter_tcp: bool) -> io::Result<()> {
    // No more than the policy says (the tests take an older kernel's).
    let abi = ABI::from(policy.landlock_abi.min(ABI_USED));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_error)?;
    if policy.landlock_abi >= ABI_USED {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal).map_err(landlock_error)?;
    }
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
        .chain(policy.write.iter().chain(writable).map(|p| (p.as_path(), all)))
        .chain(super::mounts::DEVICES.iter().map(|d| (Path::new(*d), all)))
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

/// Run by the command's init process, in its new namespaces: maps the
/// user, builds the file system view ([`super::mounts`]) and brings up
/// loopback. Returns the private places the command may write in, and
/// whether its `/proc` is its own.
pub(super) fn init_namespaces(policy: &Policy, uid: libc::uid_t, gid: libc::gid_t) -> io::Result<(Vec<PathBuf>, bool)> {
    map_user(uid, gid)?;
    super::mounts::make_private()?;
    // Taken by name before the mounts change under it (see below).
    let cwd = std::env::current_dir()?;
    if policy.mount_boundary {
        super::new_root::enter(policy)?;
    }
    // A private place's files are memory: at most the command's own, and
    // never more than a quarter of the machine's (without a memory
    // cgroup nothing else would bound them).
    let machine = super::machine_memory_mb();
    let size = if machine > 0 { policy.limits.memory_mb.min(machine / 4) } else { policy.limits.memory_mb };
    let writable = super::mounts::private_places(policy, size.max(64))?;
    for dir in &policy.read_only {
        super::mounts::bind_read_only(dir)?;
    }
    // The supervisor's placeholders: empty and read-only, so nothing can
    // be made there.
    for place in policy.absent.iter().filter(|p| p.is_dir()) {
        super::mounts::mask(place)?;
    }
    for place in policy.absent_files.iter().filter(|p| p.is_file()) {
        super::mounts::mask(place)?;
    }
    // Never a place the command works in.
    for place in policy.masked.iter().filter(|m| !policy.write.iter().any(|w| w.starts_with(m))) {
        super::mounts::mask(place)?;
    }
    // The working directory still points into the mounts as they were
    // (a private place's original, under no read-only `.git`, or the old
    // root): take it again by name, through the new ones.
    std::env::set_current_dir(&cwd)?;
    let fresh_proc = super::mounts::fresh_proc();
    // The kernel's keyrings are not namespaced: what `/proc/keys` lists is
    // the daemon user's (the filter refuses the keyring calls too).
    for keys in ["/proc/keys", "/proc/key-users"] {
        let _ = super::mounts::mask(Path::new(keys));
    }
    if policy.network == NetworkAccess::Deny {
        loopback_up()?;
    }
    Ok((writable, fresh_proc))
}

/// Run by the command between `fork` and `exec`: limits, its own session,
/// no privileges, Landlock (with `writable` private places) and the
/// seccomp filter, whose listener the supervisor answers on.
pub(super) fn restrict(policy: &Policy, writable: &[PathBuf]) -> io::Result<OwnedFd> {
    // Counted in this user namespace only: the user's other processes do
    // not use the command's allowance up (root is exempt: the cgroup or
    // the supervisor counts for it).
    set_limit(libc::RLIMIT_NPROC, policy.limits.processes, "RLIMIT_NPROC")?;
    // A session of its own: no controlling terminal to type into.
    // SAFETY: plain system call; fails only for a group leader, which the
    // command (a child of its init) is not.
    unsafe { libc::setsid() };
    set_limit(libc::RLIMIT_DATA, policy.limits.memory_mb.saturating_mul(1024 * 1024), "RLIMIT_DATA")?;
    set_limit(libc::RLIMIT_CPU, policy.limits.cpu_seconds, "RLIMIT_CPU")?;
    // SAFETY: plain prctl.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }, "PR_SET_NO_NEW_PRIVS")?;
    drop_capabilities()?;
    let localhost = policy.network == NetworkAccess::Localhost;
    if policy.landlock_abi > 0 {
        restrict_files(policy, writable, localhost)?;
    }
    super::netfilter::install(policy.network)
}
