//! The seccomp filter every confined command gets: each `connect` and
//! `bind` goes to the command's init (seccomp user notification), which
//! runs outside the command's Landlock domain but inside its namespaces.
//!
//! - Unix sockets: see [`super::unix`] (every network setting).
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
use std::sync::atomic::{AtomicUsize, Ordering};

use super::NetworkAccess;
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
                    Target::Label(name) => at(name).map(|to| (to - i - 1) as u8).unwrap_or(0),
                };
                libc::sock_filter { code: insn.code, jt: offset(insn.jt), jf: offset(insn.jf), k: insn.k }
            })
            .collect()
    }
}

fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

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
    if localhost {
        a.jeq(libc::SYS_sendto as u32, "sendto");
        a.jeq(libc::SYS_sendmsg as u32, "sendmsg");
        a.jeq(libc::SYS_sendmmsg as u32, "sendmmsg");
    }
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
    if localhost {
        for (label, flags_arg) in [("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3)] {
            a.label(label);
            a.load(arg(flags_arg));
            a.jset(libc::MSG_FASTOPEN as u32, "eacces");
            a.ret(libc::SECCOMP_RET_ALLOW);
        }
    }
    a.label("notify");
    a.ret(libc::SECCOMP_RET_USER_NOTIF);
    a.label("eacces");
    a.ret(errno(libc::EACCES));
    a.label("enosys");
    a.ret(errno(libc::ENOSYS));
    a.label("allow");
    a.ret(libc::SECCOMP_RET_ALLOW);
    a.assemble()
}

/// Installs the filter on the calling thread (no new privileges must be
/// set) and returns the listener the command's init answers on.
pub(super) fn install(network: NetworkAccess) -> io::Result<OwnedFd> {
    let mut filter = program(network);
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
    // SAFETY: seccomp(2) with a valid program that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
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

/// Reads `len` bytes at `addr` in process `pid`.
fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: process_vm_readv into our own buffer of `len` bytes.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n >= 0).then(|| {
        buf.truncate(n as usize);
        buf
    })
}

/// The thread group (process) of thread `tid`.
fn tgid_of(tid: u32) -> Option<libc::pid_t> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// A copy of descriptor `fd` of thread `tid` of the command.
fn take_fd(tid: u32, fd: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open and pidfd_getfd return new descriptors or -1.
    unsafe {
        let mut pidfd = libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, libc::O_EXCL /* PIDFD_THREAD */);
        // Before Linux 6.9 only a process's own id opens a pidfd; its
        // threads share the descriptor table.
        if pidfd < 0 {
            pidfd = libc::syscall(libc::SYS_pidfd_open, tgid_of(tid).unwrap_or(tid as libc::pid_t), 0);
        }
        if pidfd < 0 {
            return None;
        }
        let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
        let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        (copy >= 0).then(|| OwnedFd::from_raw_fd(copy as i32))
    }
}

fn socket_family(fd: &OwnedFd) -> Option<i32> {
    let mut family: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut family as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(family)
}

/// What to answer one notification: go on, a result, or an error.
enum Answer {
    Continue,
    Value(i64),
    Error(i32),
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
    let mut id = notif.id;
    // SAFETY: an ioctl on the listener with a u64.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } != 0 {
        return Err(libc::ESRCH);
    }
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
            say_once(super::unix::refusal(&what));
            Answer::Error(libc::EACCES)
        }
    }
}

fn decide(notif: &libc::seccomp_notif, listener: i32, rules: &Rules) -> Answer {
    let nr = notif.data.nr as i64;
    let is_connect = nr == libc::SYS_connect;
    let fd = notif.data.args[0] as i32;
    let Some(sock) = take_fd(notif.pid, fd) else { return Answer::Error(libc::EBADF) };
    match socket_family(&sock) {
        Some(libc::AF_UNIX) => return decide_unix(notif, listener, &sock, &rules.unix),
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

/// Answers the command's `connect` and `bind` calls until the listener
/// closes (every confined process is gone). Runs on a thread of the
/// command's init; a blocking connect gets a thread of its own so the
/// others are not held up.
pub fn serve_notifications(listener: OwnedFd, rules: Rules) {
    let listener = std::sync::Arc::new(listener);
    let rules = std::sync::Arc::new(rules);
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
        let (listener, rules) = (listener.clone(), rules.clone());
        let answer = move || {
            let answer = decide(&notif, listener.as_raw_fd(), &rules);
            let (val, error, flags) = match answer {
                Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
                Answer::Value(v) => (v, 0, 0),
                Answer::Error(e) => (0, -e, 0),
            };
            let mut resp = libc::seccomp_notif_resp { id: notif.id, val, error, flags };
            // SAFETY: SEND with a filled response; a dead process is ENOENT.
            unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        };
        // A thread per call so a slow connect holds no other up; past a
        // bound, the calls are answered in turn.
        if IN_FLIGHT.fetch_add(1, Ordering::SeqCst) < MAX_THREADS {
            std::thread::spawn(answer);
        } else {
            answer();
        }
    }
}

/// Writes a refusal to the command's stderr, once per command (a program
/// retrying in a loop would fill its output).
fn say_once(line: String) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if said.len() < 64 && !said.contains(&line) {
        eprintln!("{line}");
        said.push(line);
    }
}

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
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
