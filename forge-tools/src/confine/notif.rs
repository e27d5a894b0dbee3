//! What a seccomp notification names, reached from the command's init:
//! the calling thread's memory and descriptors, and the answer it gets.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What to answer one notification: go on, a result, or an error.
pub(super) enum Answer {
    Continue,
    Value(i64),
    Error(i32),
}

/// Reads `len` bytes at `addr` in process `pid` (fewer where its memory
/// ends).
pub(super) fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Some(buf);
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: process_vm_readv into our own buffer of `len` bytes.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n >= 0).then(|| {
        buf.truncate(n as usize);
        buf
    })
}

/// Exactly `len` bytes at `addr`, or EFAULT.
pub(super) fn read_exact(pid: u32, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
    read_memory(pid, addr, len).filter(|b| b.len() == len).ok_or(libc::EFAULT)
}

/// Writes `bytes` at `addr` in process `pid`.
pub(super) fn write_memory(pid: u32, addr: u64, bytes: &[u8]) -> Result<(), i32> {
    let local = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: bytes.len() };
    // SAFETY: process_vm_writev from our own buffer of its length.
    let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n == bytes.len() as isize { Ok(()) } else { Err(libc::EFAULT) }
}

/// Whether the notification is still live: the process may have died
/// and its id been reused while its memory was read.
pub(super) fn still_live(listener: i32, id: u64) -> Result<(), i32> {
    let mut id = id;
    // SAFETY: an ioctl on the listener with a u64.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } != 0 {
        return Err(libc::ESRCH);
    }
    Ok(())
}

/// The thread group (process) of thread `tid`.
pub(super) fn tgid_of(tid: u32) -> Option<libc::pid_t> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// Whether thread `tid` is its process's only one. The filter lets no
/// process share its descriptor table but as threads, so then no other
/// task can swap what a descriptor number names while the call waits.
pub(super) fn single_threaded(tid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return false };
    // After the command name (which may hold spaces and parentheses):
    // state is field 3, the number of threads field 20.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(17)).is_some_and(|n| n == "1")
}

/// A copy of descriptor `fd` of thread `tid` of the command.
pub(super) fn take_fd(tid: u32, fd: i32) -> Option<OwnedFd> {
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

pub(super) fn socket_option(fd: &OwnedFd, option: libc::c_int) -> Option<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int.
    let r = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, option, (&mut value as *mut libc::c_int).cast(), &mut len)
    };
    (r == 0).then_some(value)
}

/// The socket's address family (`None`: not a socket).
pub(super) fn socket_family(fd: &OwnedFd) -> Option<i32> {
    socket_option(fd, libc::SO_DOMAIN)
}

/// Whether the socket streams bytes (a short send is then legal).
pub(super) fn is_stream(fd: &OwnedFd) -> bool {
    socket_option(fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
}

/// Writes a refusal to the command's stderr, once per command (a program
/// retrying in a loop would fill its output).
pub(super) fn say_once(line: String) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if said.len() < 64 && !said.contains(&line) {
        eprintln!("{line}");
        said.push(line);
    }
}

/// The last system call's error number.
pub(super) fn last_errno(otherwise: i32) -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(otherwise)
}
