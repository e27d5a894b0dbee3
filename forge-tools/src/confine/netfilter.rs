//! The seccomp filter every confined command gets: each `connect`,
//! `bind` and send that can name an address or carry descriptors goes to
//! the command's init (seccomp user notification), which runs outside the
//! command's Landlock domain but inside its namespaces. The filter also
//! refuses setuid and setgid modes, and processes sharing a descriptor
//! table other than as threads.
//!
//! - Unix sockets: see [`super::unix`] and [`super::sends`] (every
//!   network setting).
//! - `network = "localhost"`: the init performs a TCP `connect` or
//!   `bind` itself on a copy of the command's socket when the address is
//!   a loopback one, and refuses it otherwise. Performing it (rather than
//!   letting the kernel go on) leaves no window for another thread of the
//!   command to swap the address after the check; Landlock's TCP rules
//!   refuse any TCP connect the kernel would make on its own. UDP, raw
//!   sockets, SCTP and TCP Fast Open (a connect hidden in `sendto`) are
//!   refused. (`deny` is a network namespace of the command's own, `allow`
//!   lets TCP and UDP go.)
//!
//! `io_uring` (its operations bypass seccomp) and system calls of another
//! architecture (the 32-bit `socketcall` multiplexer) are refused.
//!
//! seccomp filters are classic BPF; the few instructions needed are
//! assembled here (seccompiler cannot return user notifications).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::NetworkAccess;
use super::notif::{Answer, read_memory, say_once, socket_family, still_live, take_fd};
use super::unix::{Refused, UnixAddr, UnixRules};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
fn arg(i: u32) -> u32 {
    16 + 8 * i
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Next,
    Label(&'static str),
}

struct Insn {
    code: u16,
    k: u32,
    jt: Target,
    jf: Target,
}

#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn load(&mut self, offset: u32) {
        self.insns.push(Insn { code: LD_W_ABS, k: offset, jt: Target::Next, jf: Target::Next });
    }
    fn and(&mut self, k: u32) {
        self.insns.push(Insn { code: AND_K, k, jt: Target::Next, jf: Target::Next });
    }
    /// If the accumulator equals `k`, go to `label`.
    fn jeq(&mut self, k: u32, label: &'static str) {
        self.insns.push(Insn { code: JEQ_K, k, jt: Target::Label(label), jf: Target::Next });
    }
    fn jge(&mut self, k: u32, label: &'static str) {
        self.insns.push(Insn { code: JGE_K, k, jt: Target::Label(label), jf: Target::Next });
    }
    fn jset(&mut self, k: u32, label: &'static str) {
        self.insns.push(Insn { code: JSET_K, k, jt: Target::Label(label), jf: Target::Next });
    }
    /// If none of the bits `k` is set in the accumulator, go to `label`.
    fn jclear(&mut self, k: u32, label: &'static str) {
        self.insns.push(Insn { code: JSET_K, k, jt: Target::Next, jf: Target::Label(label) });
    }
    /// If the accumulator differs from `k`, go to `label`.
    fn jne(&mut self, k: u32, label: &'static str) {
        self.insns.push(Insn { code: JEQ_K, k, jt: Target::Next, jf: Target::Label(label) });
    }
    fn ret(&mut self, k: u32) {
        self.insns.push(Insn { code: RET_K, k, jt: Target::Next, jf: Target::Next });
    }
    fn label(&mut self, name: &'static str) {
        self.labels.push((name, self.insns.len()));
    }
    fn assemble(self) -> Vec<libc::sock_filter> {
        let at = |name: &str| self.labels.iter().find(|(n, _)| *n == name).map(|(_, i)| *i);
        self.insns
            .iter()
            .enumerate()
            .map(|(i, insn)| {
                let offset = |t: Target| match t {
                    Target::Next => 0,
                    // Labels are always ahead and near: the program is small.
                    Target::Label(name) => at(name)
                        .map(|to| {
                            debug_assert!(to - i - 1 < 256, "a jump of {} from #{i}", to - i - 1);
                            (to - i - 1) as u8
                        })
                        .unwrap_or(0),
                };
                libc::sock_filter { code: insn.code, jt: offset(insn.jt), jf: offset(insn.jf), k: insn.k }
            })
            .collect()
    }
}

fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// The setuid and setgid bits, which no command may set (see
/// [`mode_calls`]).
const SET_IDS: u32 = libc::S_ISUID | libc::S_ISGID;

/// The calls that give a file a mode, and which argument holds it: a
/// setuid or setgid file left in the project would run with the daemon
/// user's rights for whoever starts it later (what systemd's
/// `RestrictSUIDSGID=` refuses). `open`-like calls are in [`program`].
fn mode_calls() -> Vec<(i64, u32)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
        (libc::SYS_mkdirat, 2),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([(libc::SYS_chmod, 1), (libc::SYS_creat, 1), (libc::SYS_mkdir, 1), (libc::SYS_mknod, 1)]);
    calls
}

/// `open` flags under which the mode argument counts.
const CREATING: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// The filter for a `network` setting.
fn program(network: NetworkAccess) -> Vec<libc::sock_filter> {
    let localhost = network == NetworkAccess::Localhost;
    let mut a = Asm::default();
    a.load(ARCH);
    a.jne(AUDIT_ARCH, "enosys");
    a.load(NR);
    #[cfg(target_arch = "x86_64")]
    a.jge(0x4000_0000, "enosys"); // the x32 ABI
    for nr in [libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register] {
        a.jeq(nr as u32, "enosys");
    }
    a.jeq(libc::SYS_socket as u32, "socket");
    a.jeq(libc::SYS_connect as u32, "notify");
    a.jeq(libc::SYS_bind as u32, "notify");
    // Every send that can name an address or carry descriptors: the
    // supervisor sends on Unix sockets itself (see `sends`).
    a.jeq(libc::SYS_sendto as u32, "sendto");
    a.jeq(libc::SYS_sendmsg as u32, "sendmsg");
    a.jeq(libc::SYS_sendmmsg as u32, "sendmmsg");
    for (nr, mode_arg) in mode_calls() {
        a.jeq(nr as u32, if mode_arg == 1 { "mode1" } else { "mode2" });
    }
    #[cfg(target_arch = "x86_64")]
    a.jeq(libc::SYS_open as u32, "open");
    a.jeq(libc::SYS_openat as u32, "openat");
    // Its mode sits in a structure a filter cannot read: the C library
    // falls back to `openat` on ENOSYS. So do `clone3`'s flags.
    a.jeq(libc::SYS_openat2 as u32, "enosys");
    a.jeq(libc::SYS_clone3 as u32, "enosys");
    // The kernel's keyrings are the daemon user's, in every namespace
    // (as Docker's default profile refuses them).
    for nr in [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key] {
        a.jeq(nr as u32, "eperm");
    }
    a.jeq(libc::SYS_clone as u32, "clone");
    a.ret(libc::SECCOMP_RET_ALLOW);

    a.label("socket");
    if !localhost {
        a.ret(libc::SECCOMP_RET_ALLOW);
    }
    a.load(arg(0));
    a.jeq(libc::AF_UNIX as u32, "allow");
    a.jeq(libc::AF_NETLINK as u32, "allow");
    a.jeq(libc::AF_INET as u32, "stream");
    a.jeq(libc::AF_INET6 as u32, "stream");
    a.ret(errno(libc::EACCES));
    // TCP only: SCTP and MPTCP could connect without `connect`.
    a.label("stream");
    a.load(arg(1));
    a.and(0xf);
    a.jne(libc::SOCK_STREAM as u32, "eacces");
    a.load(arg(2));
    a.jeq(0, "allow");
    a.jeq(libc::IPPROTO_TCP as u32, "allow");
    a.ret(errno(libc::EACCES));

    // `send` is `sendto` without an address: left to the kernel, so a
    // plain send costs nothing (its socket is connected, to a peer that
    // `connect` checked, and it carries no descriptor).
    a.label("sendto");
    if localhost {
        a.load(arg(3));
        a.jset(libc::MSG_FASTOPEN as u32, "eacces");
    }
    a.load(arg(4));
    a.jne(0, "notify");
    a.load(arg(4) + 4);
    a.jne(0, "notify");
    a.ret(libc::SECCOMP_RET_ALLOW);
    for (label, flags_arg) in [("sendmsg", 2), ("sendmmsg", 3)] {
        a.label(label);
        if localhost {
            // TCP Fast Open: a connect hidden in a send.
            a.load(arg(flags_arg));
            a.jset(libc::MSG_FASTOPEN as u32, "eacces");
        }
        a.ret(libc::SECCOMP_RET_USER_NOTIF);
    }

    for (label, mode_arg) in [("mode1", 1), ("mode2", 2)] {
        a.label(label);
        a.load(arg(mode_arg));
        a.jset(SET_IDS, "eperm");
        a.ret(libc::SECCOMP_RET_ALLOW);
    }
    #[cfg(target_arch = "x86_64")]
    let opens = [("open", 1), ("openat", 2)];
    #[cfg(not(target_arch = "x86_64"))]
    let opens = [("openat", 2)];
    for (label, flags_arg) in opens {
        a.label(label);
        a.load(arg(flags_arg));
        a.jclear(CREATING, "allow");
        a.load(arg(flags_arg + 1));
        a.jset(SET_IDS, "eperm");
        a.ret(libc::SECCOMP_RET_ALLOW);
    }

    // Processes share a descriptor table only as threads of one (see
    // `notif::single_threaded`).
    a.label("clone");
    a.load(arg(0));
    a.jclear(libc::CLONE_FILES as u32, "allow");
    a.jclear(libc::CLONE_THREAD as u32, "eperm");
    a.ret(libc::SECCOMP_RET_ALLOW);

    a.label("notify");
    a.ret(libc::SECCOMP_RET_USER_NOTIF);
    a.label("eacces");
    a.ret(errno(libc::EACCES));
    a.label("eperm");
    a.ret(errno(libc::EPERM));
    a.label("enosys");
    a.ret(errno(libc::ENOSYS));
    a.label("allow");
    a.ret(libc::SECCOMP_RET_ALLOW);
    a.assemble()
}

/// Installs the filter on the calling thread (no new privileges must be
/// set) and returns the listener the command's init answers on.
pub(super) fn install(network: NetworkAccess) -> io::Result<OwnedFd> {
    load(&program(network))
}

fn load(filter: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
    // Once the init has a call in hand, only a fatal signal interrupts
    // the caller: the init performs sends and connects itself, and a
    // call restarted after a signal would happen twice (Linux 5.19).
    let killable = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let mut ret = -1;
    for flags in [killable, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER] {
        // SAFETY: seccomp(2) with a valid program that outlives the call.
        ret = unsafe {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog)
        };
        if ret >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            break;
        }
    }
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("seccomp: {e}")));
    }
    // SAFETY: with NEW_LISTENER the return value is a new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as i32) })
}

/// A socket address the command passed, read from its memory.
enum Addr {
    V4(std::net::SocketAddrV4),
    V6(std::net::SocketAddrV6),
}

impl Addr {
    fn parse(bytes: &[u8]) -> Option<Addr> {
        let family = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]) as i32;
        let port = u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]);
        match family {
            libc::AF_INET => {
                let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
                Some(Addr::V4(std::net::SocketAddrV4::new(ip.into(), port)))
            }
            libc::AF_INET6 => {
                let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
                Some(Addr::V6(std::net::SocketAddrV6::new(ip.into(), port, 0, 0)))
            }
            _ => None,
        }
    }

    fn is_loopback(&self) -> bool {
        match self {
            Addr::V4(a) => a.ip().is_loopback(),
            Addr::V6(a) => a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        }
    }

    fn show(&self) -> String {
        match self {
            Addr::V4(a) => a.to_string(),
            Addr::V6(a) => a.to_string(),
        }
    }

    /// The address in the kernel's form, for our own call.
    fn raw(&self) -> (Vec<u8>, libc::socklen_t) {
        match self {
            Addr::V4(a) => {
                // SAFETY: a zeroed sockaddr_in is valid.
                let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                s.sin_family = libc::AF_INET as libc::sa_family_t;
                s.sin_port = a.port().to_be();
                s.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                let len = std::mem::size_of::<libc::sockaddr_in>();
                // SAFETY: reading the struct's bytes.
                (
                    unsafe { std::slice::from_raw_parts((&s as *const libc::sockaddr_in).cast::<u8>(), len) }.to_vec(),
                    len as _,
                )
            }
            Addr::V6(a) => {
                // SAFETY: a zeroed sockaddr_in6 is valid.
                let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                s.sin6_port = a.port().to_be();
                s.sin6_addr.s6_addr = a.ip().octets();
                let len = std::mem::size_of::<libc::sockaddr_in6>();
                // SAFETY: reading the struct's bytes.
                (
                    unsafe { std::slice::from_raw_parts((&s as *const libc::sockaddr_in6).cast::<u8>(), len) }.to_vec(),
                    len as _,
                )
            }
        }
    }
}

/// What the init enforces: the network setting and where Unix sockets
/// may be reached.
#[derive(Debug)]
pub struct Rules {
    pub network: NetworkAccess,
    pub unix: UnixRules,
}

impl Rules {
    /// Opens the directories of the sockets the user allows: call it
    /// before they may be hidden.
    pub fn of(policy: &super::Policy) -> Rules {
        Rules { network: policy.network, unix: UnixRules::new(policy.write.clone(), &policy.unix_sockets) }
    }
}

/// The address the call passed, read from the command's memory, once the
/// notification is known to be still live (the process may have died and
/// its id been reused while we read).
fn address(notif: &libc::seccomp_notif, listener: i32) -> Result<Vec<u8>, i32> {
    let len = (notif.data.args[2] as usize).min(128);
    let bytes = read_memory(notif.pid, notif.data.args[1], len).ok_or(libc::EFAULT)?;
    still_live(listener, notif.id)?;
    Ok(bytes)
}

fn decide_unix(notif: &libc::seccomp_notif, listener: i32, sock: &OwnedFd, rules: &UnixRules) -> Answer {
    let bytes = match address(notif, listener) {
        Ok(b) => b,
        Err(e) => return Answer::Error(e),
    };
    let Some(addr) = UnixAddr::parse(&bytes) else { return Answer::Error(libc::EINVAL) };
    if notif.data.nr as i64 == libc::SYS_bind {
        // Where a socket file may be made is Landlock's to say; an
        // abstract name is not a file.
        return match addr {
            UnixAddr::Abstract(name) => {
                say_once(format!("[forge sandbox] refused bind to the abstract Unix socket @{name}"));
                Answer::Error(libc::EACCES)
            }
            _ => Answer::Continue,
        };
    }
    match super::unix::connect(notif.pid, sock, &addr, rules) {
        Ok(()) => Answer::Value(0),
        Err(Refused::Errno(e)) => Answer::Error(e),
        Err(Refused::Policy(what)) => {
            say_once(super::unix::refusal("connect to", &what));
            Answer::Error(libc::EACCES)
        }
    }
}

fn is_send(nr: i64) -> bool {
    nr == libc::SYS_sendto || nr == libc::SYS_sendmsg || nr == libc::SYS_sendmmsg
}

fn decide(notif: &libc::seccomp_notif, listener: i32, sock: &OwnedFd, rules: &Rules) -> Answer {
    let nr = notif.data.nr as i64;
    let is_connect = nr == libc::SYS_connect;
    let family = socket_family(sock);
    if is_send(nr) {
        let unix = (family == Some(libc::AF_UNIX)).then_some(&rules.unix);
        return super::sends::perform(notif, listener, sock, unix, false).unwrap_or(Answer::Error(libc::EAGAIN));
    }
    match family {
        Some(libc::AF_UNIX) => return decide_unix(notif, listener, sock, &rules.unix),
        // Netlink addresses name no file and no host.
        Some(libc::AF_NETLINK) => return Answer::Continue,
        // `deny`: the command's own network namespace decides; `allow`:
        // nothing to decide.
        _ if rules.network != NetworkAccess::Localhost => return Answer::Continue,
        Some(libc::AF_INET) | Some(libc::AF_INET6) => {}
        _ => return Answer::Error(libc::EACCES),
    }
    let bytes = match address(notif, listener) {
        Ok(b) => b,
        Err(e) => return Answer::Error(e),
    };
    let Some(addr) = Addr::parse(&bytes) else { return Answer::Error(libc::EAFNOSUPPORT) };
    let verb = if is_connect { "connect to" } else { "bind to" };
    let port = match &addr {
        Addr::V4(a) => a.port(),
        Addr::V6(a) => a.port(),
    };
    let privileged = !is_connect && port != 0 && port < 1024;
    if !addr.is_loopback() || privileged {
        let why = if privileged {
            "ports below 1024 are not bound for commands".to_string()
        } else {
            "commands may reach only this machine's loopback ([tools.sandbox] network = \"localhost\")".to_string()
        };
        say_once(format!("[forge sandbox] refused {verb} {}: {why}", addr.show()));
        return Answer::Error(libc::EACCES);
    }
    let (raw, raw_len) = addr.raw();
    // SAFETY: connect/bind on our copy of the socket with a valid address.
    let r = unsafe {
        if is_connect {
            libc::connect(sock.as_raw_fd(), raw.as_ptr().cast(), raw_len)
        } else {
            libc::bind(sock.as_raw_fd(), raw.as_ptr().cast(), raw_len)
        }
    };
    if r == 0 {
        Answer::Value(0)
    } else {
        Answer::Error(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EACCES))
    }
}

/// Answers the command's `connect`, `bind` and send calls until the
/// listener closes (every confined process is gone). Runs on a thread of
/// the command's init; the calls are answered by a few threads of their
/// own, so a blocking connect or send holds no other up.
pub fn serve_notifications(listener: OwnedFd, rules: Rules) {
    let listener = std::sync::Arc::new(listener);
    let rules = std::sync::Arc::new(rules);
    // The command's thread and ours on one CPU, woken at once: most of
    // what a notification costs (Linux 6.6; older kernels go on without).
    // Measured on a 2-core machine: 35 µs a round trip without, 4 µs with.
    const SYNC_WAKE_UP: libc::c_ulong = 1; // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
    // SAFETY: an ioctl on the listener whose argument is the flags' value.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, SYNC_WAKE_UP) };
    let pool = super::pool::Pool::new(MAX_THREADS);
    loop {
        // SAFETY: a zeroed notification is what RECV expects.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills `notif`.
        let r = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) };
        if r != 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return,
            }
        }
        // Counted before the socket is looked at: once the caller is its
        // process's only thread (and blocked here), no task can swap the
        // socket behind the number; counted after, one could have, and
        // left. Thread ids are the namespace's: its own `/proc` tells them.
        let alone = is_send(notif.data.nr as i64) && rules.unix.relative && super::notif::single_threaded(notif.pid);
        let Some(sock) = take_fd(notif.pid, notif.data.args[0] as i32) else {
            respond(listener.as_raw_fd(), notif.id, Answer::Error(libc::EBADF));
            continue;
        };
        // The common case at once, on this thread (a hand-over to another
        // would cost more than the call): a send on a socket of another
        // family than Unix goes on where the process is the only task that
        // could swap the socket behind the number, and is made here
        // otherwise, unless it would wait.
        if is_send(notif.data.nr as i64) && socket_family(&sock) != Some(libc::AF_UNIX) {
            let answer = if alone {
                Some(Answer::Continue)
            } else {
                unbroken(|| super::sends::perform(&notif, listener.as_raw_fd(), &sock, None, true))
                    .unwrap_or(Some(Answer::Error(libc::EPERM)))
            };
            if let Some(answer) = answer {
                respond(listener.as_raw_fd(), notif.id, answer);
                continue;
            }
        }
        let (listener, rules) = (listener.clone(), rules.clone());
        pool.run(move || {
            let answer = unbroken(|| decide(&notif, listener.as_raw_fd(), &sock, &rules));
            respond(listener.as_raw_fd(), notif.id, answer.unwrap_or(Answer::Error(libc::EPERM)));
        });
    }
}

/// `f`'s answer, or `None` where it panicked: a call is always answered
/// (refused), and the thread that answers calls goes on.
fn unbroken<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

fn respond(listener: i32, id: u64, answer: Answer) {
    let (val, error, flags) = match answer {
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Answer::Value(v) => (v, 0, 0),
        Answer::Error(e) => (0, -e, 0),
    };
    let mut resp = libc::seccomp_notif_resp { id, val, error, flags };
    // SAFETY: SEND with a filled response; a dead process is ENOENT.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
}

/// Threads answering at once; past them, calls wait their turn.
const MAX_THREADS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        for network in [NetworkAccess::Deny, NetworkAccess::Localhost, NetworkAccess::Allow] {
            let prog = program(network);
            for (i, insn) in prog.iter().enumerate() {
                if insn.code & 0x07 == 0x05 {
                    assert!(i + 1 + (insn.jt as usize) < prog.len(), "{network:?} #{i}");
                    assert!(i + 1 + (insn.jf as usize) < prog.len(), "{network:?} #{i}");
                }
            }
            assert_eq!(prog.last().map(|i| i.code), Some(RET_K));
        }
    }

    /// In a child under the filter, what each way of making a setuid or
    /// setgid file returns (`errno`, 0 for success), one byte per try.
    #[test]
    fn no_call_makes_a_setuid_or_setgid_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("x");
        std::fs::write(&file, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        let c = |p: &std::path::Path| {
            std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_else(|e| panic!("{e}"))
        };
        let (f, new1, new2, sub) =
            (c(&file), c(&dir.path().join("n1")), c(&dir.path().join("n2")), c(&dir.path().join("d")));
        let filter = program(NetworkAccess::Deny);
        let mut pipe = [0i32; 2];
        // SAFETY: pipe(2) into an array of two.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child calls only system calls on memory made before
        // the fork, then exits.
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                let errno = || *libc::__errno_location();
                let mut out = [0u8; 8];
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
                if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog) != 0 {
                    libc::_exit(9);
                }
                let r = |ret: libc::c_long| if ret < 0 { errno() as u8 } else { 0 };
                out[0] = r(libc::chmod(f.as_ptr(), 0o4755) as _);
                out[1] = r(libc::chmod(f.as_ptr(), 0o2755) as _);
                out[2] = r(libc::fchmodat(libc::AT_FDCWD, f.as_ptr(), 0o6755, 0) as _);
                out[3] = r(libc::open(new1.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o4755) as _);
                out[4] = r(libc::openat(libc::AT_FDCWD, new2.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o2755) as _);
                out[5] = r(libc::mkdir(sub.as_ptr(), 0o2755) as _);
                out[6] = r(libc::chmod(f.as_ptr(), 0o755) as _);
                let fd = libc::open(f.as_ptr(), libc::O_RDONLY);
                out[7] = r(libc::fchmod(fd, 0o4755) as _);
                libc::write(pipe[1], out.as_ptr().cast(), out.len());
                libc::_exit(0);
            }
            libc::close(pipe[1]);
            let mut out = [0xffu8; 8];
            assert_eq!(libc::read(pipe[0], out.as_mut_ptr().cast(), 8), 8, "the child reported");
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            let eperm = libc::EPERM as u8;
            assert_eq!(out, [eperm, eperm, eperm, eperm, eperm, eperm, 0, eperm], "refused, but a plain chmod works");
        }
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&file).map(|m| m.permissions()).unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(mode & 0o7777, 0o755);
        assert!(!dir.path().join("n1").exists() && !dir.path().join("d").exists());
    }

    #[test]
    fn loopback_addresses_are_told_apart() {
        let v4 = |a: [u8; 4]| {
            let mut b = vec![0u8; 16];
            b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b[2..4].copy_from_slice(&8080u16.to_be_bytes());
            b[4..8].copy_from_slice(&a);
            Addr::parse(&b).map(|a| a.is_loopback())
        };
        assert_eq!(v4([127, 0, 0, 1]), Some(true));
        assert_eq!(v4([127, 1, 2, 3]), Some(true));
        assert_eq!(v4([93, 184, 216, 34]), Some(false));
        let mut b = vec![0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        let mapped: std::net::Ipv6Addr = std::net::Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped();
        b[8..24].copy_from_slice(&mapped.octets());
        assert_eq!(Addr::parse(&b).map(|a| a.is_loopback()), Some(true));
        assert!(Addr::parse(&[0u8; 3]).is_none(), "short addresses are refused");
    }
}
