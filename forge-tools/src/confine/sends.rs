//! Sends that can name an address or carry descriptors (`sendto` with an
//! address, `sendmsg`, `sendmmsg`), performed by the command's init on
//! its copy of the command's socket, from a copy of the message it read.
//!
//! On a Unix socket the address must lie where `connect` may reach (see
//! [`super::unix`]), and descriptors (`SCM_RIGHTS`) go only to a peer
//! there: otherwise a datagram, or the descriptor of a directory, would
//! reach any program's socket on the machine. Performing the send
//! (rather than checking and letting the kernel go on) leaves no window
//! for another thread of the command to change the message, or the
//! socket behind the descriptor number, after the check. Other sockets'
//! sends are performed the same way for that last reason.

use std::os::fd::{AsRawFd, OwnedFd};

use super::notif::{Answer, is_stream, last_errno, read_exact, say_once, still_live, take_fd, write_memory};
use super::unix::{self, Refused, UnixAddr, UnixRules};

/// Bytes copied per call: a stream send may be short, a datagram this
/// large fails as too long (a Unix datagram's limit is lower by default).
const MAX_DATA: usize = 1 << 20;
/// Ancillary data read per call (the kernel's own bound, `optmem_max`,
/// is lower by default).
const MAX_CONTROL: usize = 256 * 1024;
/// A message's pieces (the kernel's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;
/// `struct msghdr` on 64-bit Linux (`struct mmsghdr` adds the length
/// sent).
const MSGHDR: usize = 56;
const _: () = assert!(std::mem::size_of::<libc::msghdr>() == MSGHDR);

/// A message as the command passed it, copied out of its memory.
struct Message {
    name: Option<Vec<u8>>,
    data: Vec<u8>,
    control: Vec<u8>,
}

fn word(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes).unwrap_or(0)
}

fn half(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes).unwrap_or(0)
}

/// The address at `ptr` of `len` bytes, where there is one.
fn read_name(pid: u32, ptr: u64, len: u64) -> Result<Option<Vec<u8>>, i32> {
    if ptr == 0 || len == 0 {
        return Ok(None);
    }
    if len > std::mem::size_of::<libc::sockaddr_storage>() as u64 {
        return Err(libc::EINVAL);
    }
    read_exact(pid, ptr, len as usize).map(Some)
}

/// The bytes of `iovcnt` pieces at `iov`, at most `MAX_DATA` of them;
/// `Err(EMSGSIZE)` past that unless `short_ok`.
fn read_data(pid: u32, iov: u64, iovcnt: u64, short_ok: bool) -> Result<Vec<u8>, i32> {
    if iovcnt > MAX_IOV as u64 {
        return Err(libc::EMSGSIZE);
    }
    let table = read_exact(pid, iov, iovcnt as usize * 16)?;
    let pieces = (0..iovcnt as usize).map(|i| (word(&table, i * 16), word(&table, i * 16 + 8)));
    copy_in(pid, pieces, short_ok)
}

thread_local! {
    /// A buffer kept for the next send of this thread: a fresh one of a
    /// megabyte costs more in page faults than the copy does.
    static SPARE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The command's bytes at `pieces` (address, length), at most
/// `MAX_DATA` of them.
fn copy_in(pid: u32, pieces: impl Iterator<Item = (u64, u64)>, short_ok: bool) -> Result<Vec<u8>, i32> {
    let mut remote = Vec::new();
    let mut total = 0usize;
    for (base, len) in pieces {
        let take = (len as usize).min(MAX_DATA - total);
        if take < len as usize && !short_ok {
            return Err(libc::EMSGSIZE);
        }
        if take > 0 {
            remote.push(libc::iovec { iov_base: base as *mut libc::c_void, iov_len: take });
            total += take;
        }
        if total == MAX_DATA {
            break;
        }
    }
    let mut data = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    data.clear();
    data.reserve(total);
    if total > 0 {
        let local = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: total };
        // SAFETY: process_vm_readv into our buffer's `total` reserved bytes.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, remote.as_ptr(), remote.len() as _, 0) };
        if n != total as isize {
            give_back(data);
            return Err(libc::EFAULT);
        }
        // SAFETY: the kernel wrote all `total` bytes.
        unsafe { data.set_len(total) };
    }
    Ok(data)
}

fn give_back(data: Vec<u8>) {
    SPARE.with(|s| *s.borrow_mut() = data);
}

/// The message of the `msghdr` at `at`.
fn read_message(pid: u32, at: u64, short_ok: bool) -> Result<Message, i32> {
    let h = read_exact(pid, at, MSGHDR)?;
    let name = read_name(pid, word(&h, 0), half(&h, 8) as u64)?;
    let data = read_data(pid, word(&h, 16), word(&h, 24), short_ok)?;
    let (control_at, control_len) = (word(&h, 32), word(&h, 40));
    if control_len > MAX_CONTROL as u64 {
        return Err(libc::ENOBUFS);
    }
    let control = if control_at == 0 { Vec::new() } else { read_exact(pid, control_at, control_len as usize)? };
    Ok(Message { name, data, control })
}

/// The descriptors an `SCM_RIGHTS` message carries, replaced in
/// `control` by copies of ours (kept open until the send); `Ok(empty)`
/// where it carries none.
fn take_rights(pid: u32, control: &mut [u8]) -> Result<Vec<OwnedFd>, i32> {
    const HEADER: usize = 16; // cmsg_len, cmsg_level, cmsg_type
    let mut taken = Vec::new();
    let mut at = 0usize;
    while control.len().saturating_sub(at) >= HEADER {
        let len = word(control, at);
        // Checked without overflow: a length near 2^64 is refused, not
        // wrapped around.
        if len < HEADER as u64 || len > (control.len() - at) as u64 {
            return Err(libc::EINVAL);
        }
        let len = len as usize;
        let (level, kind) = (half(control, at + 8) as i32, half(control, at + 12) as i32);
        if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
            for slot in (at + HEADER..at + len).step_by(4).take_while(|s| s + 4 <= at + len) {
                // The kernel's own bound on descriptors in one message.
                if taken.len() >= 253 {
                    return Err(libc::EINVAL);
                }
                let fd = half(control, slot) as i32;
                let ours = take_fd(pid, fd).ok_or(libc::EBADF)?;
                control[slot..slot + 4].copy_from_slice(&ours.as_raw_fd().to_ne_bytes());
                taken.push(ours);
            }
        }
        at = at.saturating_add(len.next_multiple_of(8));
    }
    Ok(taken)
}

/// Why a send did not happen.
enum Refusal {
    Errno(i32),
    /// Said on the command's stderr: what, and how it was tried.
    Policy(&'static str, String),
}

impl From<i32> for Refusal {
    fn from(e: i32) -> Refusal {
        Refusal::Errno(e)
    }
}

fn from_unix(verb: &'static str) -> impl Fn(Refused) -> Refusal {
    move |r| match r {
        Refused::Errno(e) => Refusal::Errno(e),
        Refused::Policy(what) => Refusal::Policy(verb, what),
    }
}

/// The address a Unix send goes to, checked: ours for the file the
/// command's names, or none (then, where descriptors go, the peer's).
#[allow(clippy::type_complexity)]
fn unix_name(
    tid: u32,
    sock: &OwnedFd,
    name: Option<&[u8]>,
    rights: bool,
    rules: &UnixRules,
) -> Result<(Option<Vec<u8>>, Option<OwnedFd>), Refusal> {
    match name.map(UnixAddr::parse) {
        Some(Some(addr)) => {
            // A connected stream or seqpacket socket sends to its peer
            // whatever the name says: the peer is what descriptors reach.
            if rights && super::notif::socket_option(sock, libc::SO_TYPE) != Some(libc::SOCK_DGRAM) {
                unix::peer_allowed(sock, rules).map_err(from_unix("pass a descriptor to"))?;
            }
            let target = unix::resolve(tid, &addr, rules).map_err(from_unix("send to"))?;
            let (raw, len) = unix::proc_address(&target)?;
            // SAFETY: the bytes of a sockaddr_un, `len` of them in use.
            let bytes =
                unsafe { std::slice::from_raw_parts((&raw as *const libc::sockaddr_un).cast::<u8>(), len as usize) };
            Ok((Some(bytes.to_vec()), Some(target)))
        }
        Some(None) => Err(Refusal::Errno(libc::EINVAL)),
        None if rights => {
            unix::peer_allowed(sock, rules).map_err(from_unix("pass a descriptor to"))?;
            Ok((None, None))
        }
        None => Ok((None, None)),
    }
}

/// Sends `msg` on `sock` (a copy of thread `tid`'s socket) with the
/// command's `flags`; `unix`: the rules where it is a Unix socket.
fn send(
    tid: u32,
    sock: &OwnedFd,
    mut msg: Message,
    (flags, ours): (i32, i32),
    unix: Option<&UnixRules>,
) -> Result<usize, Refusal> {
    let rights = take_rights(tid, &mut msg.control)?;
    // The file the address names, held open until the send.
    let (mut name, _target) = match unix {
        Some(rules) => unix_name(tid, sock, msg.name.as_deref(), !rights.is_empty(), rules)?,
        None => (msg.name.clone(), None),
    };
    let mut iov = libc::iovec { iov_base: msg.data.as_mut_ptr().cast(), iov_len: msg.data.len() };
    // SAFETY: a zeroed msghdr is valid; every pointer set below is ours
    // and outlives the call.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(n) = name.as_mut() {
        h.msg_name = n.as_mut_ptr().cast();
        h.msg_namelen = n.len() as libc::socklen_t;
    }
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    if !msg.control.is_empty() {
        h.msg_control = msg.control.as_mut_ptr().cast();
        h.msg_controllen = msg.control.len() as _;
    }
    // The signal of a broken pipe is the command's, not ours.
    // SAFETY: sendmsg on our copy of the socket with the header above.
    let mut n = unsafe { libc::sendmsg(sock.as_raw_fd(), &h, flags | ours | libc::MSG_NOSIGNAL) };
    // A full buffer that the reader is draining: wait for it a moment
    // here rather than hand the call to a thread that may wait longer.
    if n < 0 && ours != 0 && last_errno(0) == libc::EAGAIN && flags & libc::MSG_DONTWAIT == 0 && blocking(sock) {
        let mut ready = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: poll on one descriptor of ours; sendmsg as above.
        if unsafe { libc::poll(&mut ready, 1, 2) } == 1 {
            n = unsafe { libc::sendmsg(sock.as_raw_fd(), &h, flags | ours | libc::MSG_NOSIGNAL) };
        }
    }
    give_back(std::mem::take(&mut msg.data));
    if n < 0 {
        let e = last_errno(libc::EIO);
        if e == libc::EPIPE
            && flags & libc::MSG_NOSIGNAL == 0
            && let Some(tgid) = super::notif::tgid_of(tid)
        {
            // SAFETY: tgkill to the calling thread of the command.
            unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid as libc::pid_t, libc::SIGPIPE) };
        }
        return Err(Refusal::Errno(e));
    }
    drop(rights);
    Ok(n as usize)
}

/// Performs the send `notif` stands for on `sock` (a copy of the
/// command's socket); `unix`: the rules where it is a Unix socket. With
/// `at_once`, a send that would wait is not made: `None`, for a thread
/// that may wait.
pub(super) fn perform(
    notif: &libc::seccomp_notif,
    listener: i32,
    sock: &OwnedFd,
    unix: Option<&UnixRules>,
    at_once: bool,
) -> Option<Answer> {
    let (pid, args) = (notif.pid, notif.data.args);
    let short_ok = is_stream(sock);
    let nr = notif.data.nr as i64;
    let read = || -> Result<(Message, i32), i32> {
        if nr == libc::SYS_sendto {
            let data = copy_in(pid, std::iter::once((args[1], args[2])), short_ok)?;
            let name = read_name(pid, args[4], args[5])?;
            Ok((Message { name, data, control: Vec::new() }, args[3] as i32))
        } else if nr == libc::SYS_sendmsg {
            Ok((read_message(pid, args[1], short_ok)?, args[2] as i32))
        } else {
            Ok((read_message(pid, args[1], short_ok)?, args[3] as i32))
        }
    };
    if nr == libc::SYS_sendmmsg && args[2] as u32 == 0 {
        return Some(Answer::Value(0));
    }
    let (msg, flags) = match read().and_then(|m| still_live(listener, notif.id).map(|()| m)) {
        Ok(m) => m,
        Err(e) => return Some(Answer::Error(e)),
    };
    let ours = if at_once { libc::MSG_DONTWAIT } else { 0 };
    let sent = send(pid, sock, msg, (flags, ours), unix);
    if at_once && matches!(sent, Err(Refusal::Errno(libc::EAGAIN))) && flags & libc::MSG_DONTWAIT == 0 && blocking(sock)
    {
        return None;
    }
    Some(match sent {
        // `sendmmsg` may send fewer messages than asked: one, its length
        // written back as the kernel would.
        Ok(n) if nr == libc::SYS_sendmmsg => {
            match write_memory(pid, args[1] + MSGHDR as u64, &(n as u32).to_ne_bytes()) {
                Ok(()) => Answer::Value(1),
                Err(e) => Answer::Error(e),
            }
        }
        Ok(n) => Answer::Value(n as i64),
        Err(Refusal::Errno(e)) => Answer::Error(e),
        Err(Refusal::Policy(verb, what)) => {
            say_once(unix::refusal(verb, &what));
            Answer::Error(libc::EACCES)
        }
    })
}

/// Whether the command's socket waits (the flag is its open file's, ours
/// too).
fn blocking(sock: &OwnedFd) -> bool {
    // SAFETY: fcntl F_GETFL on our descriptor.
    let flags = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_length_near_the_top_is_refused_not_wrapped() {
        let mut control = vec![0u8; 32];
        // A first header of 16 bytes, then one claiming 2^64 - 16.
        control[..8].copy_from_slice(&16u64.to_ne_bytes());
        control[16..24].copy_from_slice(&(u64::MAX - 15).to_ne_bytes());
        assert_eq!(take_rights(std::process::id(), &mut control).err(), Some(libc::EINVAL));
        let mut empty: Vec<u8> = Vec::new();
        assert!(take_rights(std::process::id(), &mut empty).is_ok_and(|t| t.is_empty()));
    }
}
