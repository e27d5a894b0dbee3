//! Starting a confined command: the supervisor clones an init process
//! into new namespaces (user, mount, PID, IPC, and network for `deny`),
//! moves it into the command's cgroup before it runs anything, and lets
//! it go on. The init builds the command's view of the file system,
//! forks the command (which restricts itself and `exec`s), answers the
//! command's `connect` calls ([`super::netfilter`]: from inside the
//! command's namespaces, so paths mean what they mean to the command and
//! a server sees a peer in its PID namespace), reaps what the command
//! leaves behind, and reports the command's own wait status. When the
//! init dies, the kernel kills everything left in its PID namespace:
//! `setsid`, double forks and daemons included.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::Policy;
use super::cgroup::CommandGroup;

/// A confined command started: its init's pid (in the supervisor's
/// namespace) and the pipe its wait status comes through.
pub struct Spawned {
    pub init: libc::pid_t,
    status: OwnedFd,
}

impl Spawned {
    /// The command's own wait status, once its init has exited (`None`
    /// if the init died before it could say, e.g. killed).
    pub fn command_status(&self) -> Option<i32> {
        let mut b = [0u8; 4];
        // SAFETY: read(2) into a 4-byte buffer.
        let n = unsafe { libc::read(self.status.as_raw_fd(), b.as_mut_ptr().cast(), 4) };
        (n == 4).then(|| i32::from_ne_bytes(b))
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors of ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn c_strings<I: IntoIterator<Item = std::ffi::OsString>>(items: I) -> io::Result<Vec<CString>> {
    items
        .into_iter()
        .map(|s| CString::new(s.into_encoded_bytes()).map_err(|e| io::Error::other(e.to_string())))
        .collect()
}

/// Starts `argv` confined by `policy`, in `group` if given, with the
/// supervisor's environment less `drop_env`. Call it while the
/// supervisor is single-threaded.
pub fn spawn(
    policy: &Policy,
    argv: Vec<std::ffi::OsString>,
    drop_env: &str,
    group: Option<&CommandGroup>,
) -> io::Result<Spawned> {
    let argv = c_strings(argv)?;
    let envp = c_strings(std::env::vars_os().filter(|(k, _)| k != drop_env).map(|(k, v)| {
        let mut kv = k;
        kv.push("=");
        kv.push(v);
        kv
    }))?;
    if argv.is_empty() {
        return Err(io::Error::other("no program to run"));
    }
    let (go_r, go_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let mut fds = [0; 2];
    // SAFETY: socketpair into a two-int array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are new descriptors of ours.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: plain system calls.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let flags = super::enter::namespace_flags(policy) | libc::SIGCHLD;
    // SAFETY: clone without a new stack is fork with namespaces; the
    // supervisor is single-threaded, so the child may allocate.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        return Err(io::Error::new(
            io::Error::last_os_error().kind(),
            format!("clone: {}", io::Error::last_os_error()),
        ));
    }
    if pid == 0 {
        drop((go_w, status_r));
        init_main(policy, &argv, &envp, go_r, status_w, (ours, theirs), uid, gid);
    }
    let pid = pid as libc::pid_t;
    drop((go_r, status_w, ours, theirs));
    if let Some(g) = group
        && let Err(e) = g.add(pid)
    {
        // SAFETY: kill(2) on our own child, which waits for `go`.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        return Err(io::Error::new(e.kind(), format!("cannot move the command into its cgroup: {e}")));
    }
    // SAFETY: write(2) of one byte.
    unsafe { libc::write(go_w.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    drop(go_w);
    Ok(Spawned { init: pid, status: status_r })
}

fn die(message: impl std::fmt::Display, code: i32) -> ! {
    eprintln!("forged: {message}");
    // SAFETY: _exit never returns and runs nothing of the parent's.
    unsafe { libc::_exit(code) }
}

/// The command's init (pid 1 of its namespace). Never returns.
#[allow(clippy::too_many_arguments)]
fn init_main(
    policy: &Policy,
    argv: &[CString],
    envp: &[CString],
    go: OwnedFd,
    status: OwnedFd,
    (ours, theirs): (OwnedFd, OwnedFd),
    uid: libc::uid_t,
    gid: libc::gid_t,
) -> ! {
    let mut b = [0u8; 1];
    // SAFETY: read(2) of one byte; prctl with plain values.
    unsafe {
        if libc::read(go.as_raw_fd(), b.as_mut_ptr().cast(), 1) != 1 {
            libc::_exit(126);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    drop(go);
    // The sockets the user allows, opened before their places may be
    // hidden from the command.
    let mut rules = super::Rules::of(policy);
    let (writable, fresh_proc) = super::enter::init_namespaces(policy, uid, gid)
        .unwrap_or_else(|e| die(format!("cannot enter the sandbox: {e}"), 126));
    rules.unix.relative = fresh_proc;
    // Nothing in the namespace may read the init's memory (set after the
    // user maps: it makes /proc/self the real root's).
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    // SAFETY: fork in a single-threaded process.
    let command = unsafe { libc::fork() };
    if command < 0 {
        die(format!("fork: {}", io::Error::last_os_error()), 126);
    }
    if command == 0 {
        drop((status, ours));
        exec_command(policy, &writable, argv, envp, theirs);
    }
    drop(theirs);
    // `None`: the command failed before it had a filter (and says why).
    if let Some(listener) = take_over(ours.as_raw_fd(), command) {
        std::thread::spawn(move || super::netfilter::serve_notifications(listener, rules));
    }
    drop(ours);
    loop {
        let mut raw = 0;
        // SAFETY: waitpid for any child; orphans of the namespace are ours.
        let got = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if got == command {
            // SAFETY: write(2) of four bytes, then leave: the kernel kills
            // whatever the command left in the namespace.
            unsafe {
                libc::write(status.as_raw_fd(), raw.to_ne_bytes().as_ptr().cast(), 4);
                libc::_exit(0);
            }
        }
        if got < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
    }
}

/// The command: restricts itself, hands the seccomp listener to its
/// init, and becomes the program. Never returns.
fn exec_command(
    policy: &Policy,
    writable: &[std::path::PathBuf],
    argv: &[CString],
    envp: &[CString],
    channel: OwnedFd,
) -> ! {
    let listener =
        super::enter::restrict(policy, writable).unwrap_or_else(|e| die(format!("cannot enter the sandbox: {e}"), 126));
    if let Err(e) = hand_over(channel.as_raw_fd(), listener.as_raw_fd()) {
        die(format!("cannot hand over the sandbox's listener: {e}"), 126);
    }
    drop((listener, channel));
    let mut args: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    args.push(std::ptr::null());
    let mut env: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    env.push(std::ptr::null());
    // SAFETY: an empty signal mask for the program; execvpe with
    // NULL-terminated arrays of valid C strings.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execvpe(args[0], args.as_ptr(), env.as_ptr());
    }
    let e = io::Error::last_os_error();
    let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
    die(format!("cannot start {}: {e}", argv[0].to_string_lossy()), code)
}

/// Hands the seccomp listener `fd` to the init, which takes a copy of
/// it: by number, since a descriptor sent in a message would be a send
/// the listener itself must answer. Returns once the init has it.
fn hand_over(channel: RawFd, fd: RawFd) -> io::Result<()> {
    // SAFETY: prctl with plain values; write(2) and read(2) of our own
    // small buffers.
    unsafe {
        // The init, a separate process, may take it (inherited from the
        // init, which is not dumpable; exec resets it anyway).
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        if libc::write(channel, fd.to_ne_bytes().as_ptr().cast(), 4) != 4 {
            return Err(io::Error::last_os_error());
        }
        let mut ack = [0u8; 1];
        if libc::read(channel, ack.as_mut_ptr().cast(), 1) != 1 {
            return Err(io::Error::other("the sandbox's init did not take the listener"));
        }
    }
    Ok(())
}

/// Takes the listener the command hands over with [`hand_over`]; `None`
/// at end of file (the command failed before it had one).
fn take_over(channel: RawFd, command: libc::pid_t) -> Option<OwnedFd> {
    let mut number = [0u8; 4];
    // SAFETY: read(2) into a four-byte buffer.
    let n = loop {
        let n = unsafe { libc::read(channel, number.as_mut_ptr().cast(), 4) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        break n;
    };
    if n != 4 {
        return None;
    }
    let listener = super::notif::take_fd(command as u32, i32::from_ne_bytes(number));
    if listener.is_some() {
        // SAFETY: write(2) of one byte.
        unsafe { libc::write(channel, [1u8].as_ptr().cast(), 1) };
    }
    listener
}
