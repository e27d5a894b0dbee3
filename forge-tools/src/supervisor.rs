//! Commands die with the daemon, and run in their sandbox.
//!
//! A command the model runs is led by a small supervisor: the daemon's own
//! executable started in this mode, in a process group of its own.
//! - It is a child subreaper: whatever the command starts stays below it,
//!   even after `setsid` or a double fork, and it kills all of that when
//!   the command ends, when it is told to stop (SIGTERM: a timeout or a
//!   cancel), and when the daemon dies (the kernel sends it SIGTERM then,
//!   `PR_SET_PDEATHSIG`). Otherwise it exits as the command did, so the
//!   daemon sees the command's own status.
//! - It applies the command's sandbox ([`crate::confine`]) between `fork`
//!   and `exec`, and for `network = "localhost"` answers the command's
//!   `connect` and `bind` calls.
//!
//! `PR_SET_PDEATHSIG` alone on the shell would stop the shell but not the
//! children it started (`npm run dev` → node): the signal is not inherited.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::confine::{self, Policy};

/// The first argument that starts the supervisor mode.
pub const SUPERVISE_ARG: &str = "__forge-supervise";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Tells `run_command` to start commands under `program SUPERVISE_ARG`.
/// Called once by the daemon with its own executable.
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// Whether commands run under a supervisor (in the daemon; not in unit
/// tests, where nothing is confined either).
pub fn enabled() -> bool {
    PROGRAM.get().is_some()
}

/// The sandbox a supervised process runs in, as the supervisor reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Confinement {
    pub policy: Policy,
}

impl Confinement {
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }

    /// Whether the kernel enforces the process limit: `RLIMIT_NPROC`,
    /// counted in the command's own user namespace, from which root is
    /// exempt: for root the supervisor counts instead.
    fn kernel_limits_processes(&self) -> bool {
        // SAFETY: plain system call.
        (unsafe { libc::getuid() }) != 0
    }
}

/// What starts a supervised process: the shell with a command line, or a
/// program with its arguments.
enum Start<'a> {
    Shell(&'a str, &'a str),
    Exec(&'a str, &'a [String]),
}

/// The daemon's side of starting a supervised process.
fn supervised(start: Start<'_>, confinement: Option<&Confinement>) -> std::process::Command {
    let daemon = std::process::id();
    // What a command writes gets the user's modes, not the daemon's 077.
    let umask = crate::user_umask() as libc::mode_t;
    let mut cmd = match (PROGRAM.get(), &start) {
        (Some(program), _) => {
            let mut cmd = std::process::Command::new(program);
            cmd.arg0("forged-command").arg(SUPERVISE_ARG).arg(daemon.to_string());
            match start {
                Start::Shell(shell, line) => cmd.arg(shell).arg(line),
                Start::Exec(program, args) => cmd.arg(EXEC_MARK).arg(program).args(args),
            };
            if let Some(c) = confinement {
                // A policy that cannot be written makes the supervisor
                // refuse to start the command, never run it unconfined.
                cmd.env(confine::POLICY_ENV, serde_json::to_string(c).unwrap_or_else(|_| "unwritable".into()));
            }
            cmd
        }
        (None, Start::Shell(shell, line)) => {
            let mut cmd = std::process::Command::new(shell);
            cmd.arg("-c").arg(line);
            cmd
        }
        (None, Start::Exec(program, args)) => {
            let mut cmd = std::process::Command::new(program);
            cmd.args(*args);
            cmd
        }
    };
    let direct = PROGRAM.get().is_none();
    // SAFETY: umask, prctl and getppid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask);
            if direct {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The daemon died before the line above: do not start.
                if libc::getppid() as u32 != daemon {
                    libc::_exit(137);
                }
            }
            Ok(())
        });
    }
    cmd.process_group(0);
    cmd
}

/// A shell command line, supervised and (given a confinement) sandboxed.
/// Without a supervisor (unit tests) the shell itself, which then at
/// least dies with the daemon's thread that started it.
pub fn command(shell: &str, command_line: &str, confinement: Option<&Confinement>) -> tokio::process::Command {
    supervised(Start::Shell(shell, command_line), confinement).into()
}

/// A program (an MCP server, git) started the same way. It inherits the
/// stdio the command is given.
pub fn exec_command(program: &str, args: &[String], confinement: Option<&Confinement>) -> tokio::process::Command {
    supervised(Start::Exec(program, args), confinement).into()
}

/// Stops a supervised process and everything it started when dropped:
/// on a timeout, and when the call is cancelled. Disarm it once the
/// process has exited (its supervisor cleaned up already).
pub struct StopGuard {
    pid: Option<i32>,
    /// The supervisor's pidfd, taken while it surely runs: whether it
    /// still does is then asked of it, never of a pid that may be reused.
    pidfd: Option<OwnedFd>,
}

impl StopGuard {
    pub fn new(pid: Option<u32>) -> Self {
        let pid = pid.map(|p| p as i32);
        // SAFETY: pidfd_open returns a new descriptor or -1.
        let pidfd = pid.and_then(|p| {
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p, 0) };
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
        });
        Self { pid, pidfd }
    }

    pub fn disarm(&mut self) {
        self.pid = None;
    }
}

/// Signals the process behind `pidfd`; false once it has exited.
fn signal(pidfd: &OwnedFd, sig: i32) -> bool {
    // SAFETY: pidfd_send_signal on our own pidfd, no siginfo.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), sig, std::ptr::null::<u8>(), 0) == 0 }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        let Some(pid) = self.pid else { return };
        if !enabled() {
            // SAFETY: kill(2) on the process group we created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            // No pidfd (an old kernel): the group, at once.
            // SAFETY: kill(2) on the group the supervisor leads.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            return;
        };
        // The supervisor kills the whole tree below it; should it still
        // run after a few seconds, its group goes (the group id is still
        // its own while it runs).
        if !signal(&pidfd, libc::SIGTERM) {
            return;
        }
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(3));
            if signal(&pidfd, 0) {
                // SAFETY: kill(2) on the group the running supervisor leads.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        });
    }
}

/// Marks [`exec_command`]'s form: the program and its arguments follow.
const EXEC_MARK: &str = "--exec";

fn fail(message: impl std::fmt::Display, code: i32) -> ! {
    eprintln!("forged: {message}");
    std::process::exit(code)
}

/// A message of `iov` with `control` as room for one descriptor (both
/// must outlive it).
fn fd_message(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: a zeroed msghdr is valid; the pointers set are the caller's.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    msg
}

/// Sends descriptor `fd` over the Unix socket `sock`.
fn send_fd(sock: i32, fd: i32) -> std::io::Result<()> {
    // SAFETY: sendmsg with one byte and one SCM_RIGHTS descriptor in a
    // control buffer sized by CMSG_SPACE.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = vec![0u8; libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize];
        let msg = fd_message(&mut iov, &mut control);
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        if libc::sendmsg(sock, &msg, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives a descriptor sent with [`send_fd`]; `None` at end of file.
fn recv_fd(sock: i32) -> Option<OwnedFd> {
    // SAFETY: recvmsg into a buffer sized by CMSG_SPACE; the descriptor is
    // read only from an SCM_RIGHTS message.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = vec![0u8; libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize];
        let mut msg = fd_message(&mut iov, &mut control);
        if libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) <= 0 {
            return None;
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>());
        Some(OwnedFd::from_raw_fd(fd))
    }
}

/// The supervisor's `main`: `args` after [`SUPERVISE_ARG`] are the daemon's
/// pid, then the shell and the command line, or `--exec` and a program
/// with its arguments; the sandbox comes in [`confine::POLICY_ENV`].
/// Never returns.
pub fn run(args: &[OsString]) -> ! {
    let (daemon, mut child) = match args {
        [daemon, mark, program, rest @ ..] if mark == EXEC_MARK => {
            let mut cmd = std::process::Command::new(program);
            cmd.args(rest);
            (daemon, cmd)
        }
        [daemon, shell, command_line] => {
            let mut cmd = std::process::Command::new(shell);
            cmd.arg("-c").arg(command_line);
            (daemon, cmd)
        }
        _ => {
            fail(format!("{SUPERVISE_ARG} takes DAEMON_PID SHELL COMMAND_LINE or DAEMON_PID --exec PROGRAM ARGS..."), 2)
        }
    };
    let daemon: u32 = daemon.to_str().and_then(|d| d.parse().ok()).unwrap_or(0);
    // SIGTERM (a stop, or the daemon's death), SIGHUP and SIGCHLD are
    // blocked and taken with sigtimedwait: no handler, no race between a
    // check and a wait. The command gets an empty mask back.
    // SAFETY: signal-set calls on a local set; prctl and getppid with
    // plain integers.
    let signals = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD] {
            libc::sigaddset(&mut set, sig);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        set
    };
    // The daemon may have died before the line above.
    // SAFETY: plain system call.
    let mut stop = unsafe { libc::getppid() } as u32 != daemon;
    confine::reap::become_subreaper();

    let confinement: Option<Confinement> = std::env::var(confine::POLICY_ENV).ok().map(|json| {
        serde_json::from_str(&json).unwrap_or_else(|e| fail(format!("the sandbox policy cannot be read: {e}"), 126))
    });
    child.env_remove(confine::POLICY_ENV);
    let confinement_limit = confinement.as_ref().map(|c| c.policy.limits.processes);
    let kernel_counts = confinement.as_ref().is_some_and(Confinement::kernel_limits_processes);
    let mut channel: Option<(OwnedFd, OwnedFd)> = None;
    if confinement.as_ref().is_some_and(|c| c.policy.network == confine::NetworkAccess::Localhost) {
        let mut fds = [0; 2];
        // SAFETY: socketpair into a two-int array.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) }
            != 0
        {
            fail(format!("socketpair: {}", std::io::Error::last_os_error()), 126);
        }
        // SAFETY: both are new descriptors of ours.
        channel = Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) });
    }
    let sender = channel.as_ref().map(|(_, theirs)| theirs.as_raw_fd());
    // SAFETY: the supervisor is single-threaded here, so entering the
    // sandbox may allocate between fork and exec.
    unsafe {
        child.pre_exec(move || {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if let Some(c) = &confinement {
                let entered = confine::enter(&c.policy)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("cannot enter the sandbox: {e}")))?;
                if let (Some(listener), Some(sock)) = (entered.listener, sender) {
                    send_fd(sock, listener.as_raw_fd())?;
                }
            }
            Ok(())
        });
    }
    let mut started = match child.spawn() {
        Ok(c) => c,
        Err(e) => fail(format!("cannot start {}: {e}", child.get_program().to_string_lossy()), 127),
    };
    if let Some((ours, theirs)) = channel {
        drop(theirs);
        if let Some(listener) = recv_fd(ours.as_raw_fd()) {
            std::thread::spawn(move || confine::serve_notifications(listener));
        }
    }
    let pid = started.id() as libc::pid_t;
    let count_limit =
        confinement_limit.filter(|_| !kernel_counts).map(|limit| (limit, std::time::Duration::from_millis(100)));
    let mut status: Option<i32> = None;
    while status.is_none() && !stop {
        // Reap the command and any orphan that ended (orphans are ours:
        // unreaped they would count against the process limit).
        loop {
            let mut raw = 0;
            // SAFETY: waitpid for any child, without blocking.
            let got = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if got == pid {
                status = Some(raw);
            }
            if got <= 0 {
                break;
            }
        }
        if status.is_some() {
            break;
        }
        let timeout = match count_limit {
            Some((_, every)) => libc::timespec { tv_sec: 0, tv_nsec: every.as_nanos() as libc::c_long },
            None => libc::timespec { tv_sec: 1, tv_nsec: 0 },
        };
        // SAFETY: waits for one of the blocked signals.
        let sig = unsafe { libc::sigtimedwait(&signals, std::ptr::null_mut(), &timeout) };
        stop = sig == libc::SIGTERM || sig == libc::SIGHUP;
        if let Some((limit, _)) = count_limit
            && confine::reap::tasks_below_me() > limit
        {
            eprintln!(
                "[forge sandbox] stopped: the command ran more than {limit} processes and threads at once ([tools.sandbox] max_processes)"
            );
            confine::reap::kill_descendants();
            std::process::exit(137);
        }
    }
    // Whatever the command left running goes with it.
    confine::reap::kill_descendants();
    let Some(raw) = status else {
        let _ = started.kill();
        std::process::exit(143)
    };
    let s = std::process::ExitStatus::from_raw(raw);
    match (s.code(), s.signal()) {
        (Some(code), _) => std::process::exit(code),
        (None, Some(sig)) => {
            // Die the same way, so the daemon reports the signal.
            // SAFETY: default action for `sig`, then raise it.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            std::process::exit(128 + sig)
        }
        _ => std::process::exit(1),
    }
}
