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
pub use crate::confine::SUPERVISE_ARG;

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

/// Whether the process behind `pidfd` has ended (a pidfd reads ready
/// then, reaped or not).
fn exited(pidfd: &OwnedFd) -> bool {
    let mut p = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll(2) on one valid descriptor, without waiting.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Supervisors told to stop and perhaps still stopping (their pidfds).
static STOPPING: std::sync::Mutex<Vec<OwnedFd>> = std::sync::Mutex::new(Vec::new());

/// Waits (blocking, at most `max`) until every command told to stop has
/// ended with all it started: what a stopped command changed is read only
/// once nothing of it can change anything more.
pub fn wait_stopped(max: std::time::Duration) {
    let deadline = std::time::Instant::now() + max;
    loop {
        let running = {
            let mut stopping = STOPPING.lock().unwrap_or_else(|p| p.into_inner());
            stopping.retain(|fd| !exited(fd));
            stopping.len()
        };
        if running == 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

impl StopGuard {
    /// Stops the process now (once): its supervisor kills all below it
    /// and says how many on its stderr.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
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
        if let Ok(copy) = pidfd.try_clone() {
            STOPPING.lock().unwrap_or_else(|p| p.into_inner()).push(copy);
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

/// The supervisor's `main`: `args` after [`SUPERVISE_ARG`] are the daemon's
/// pid, then the shell and the command line, or `--exec` and a program
/// with its arguments; the sandbox comes in [`confine::POLICY_ENV`].
/// Never returns.
pub fn run(args: &[OsString]) -> ! {
    let (daemon, argv): (&OsString, Vec<OsString>) = match args {
        [daemon, mark, program, rest @ ..] if mark == EXEC_MARK => {
            (daemon, std::iter::once(program.clone()).chain(rest.iter().cloned()).collect())
        }
        [daemon, shell, command_line] => (daemon, vec![shell.clone(), "-c".into(), command_line.clone()]),
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
    let stop = unsafe { libc::getppid() } as u32 != daemon;
    confine::reap::become_subreaper();
    let confinement: Option<Confinement> = std::env::var(confine::POLICY_ENV).ok().map(|json| {
        serde_json::from_str(&json).unwrap_or_else(|e| fail(format!("the sandbox policy cannot be read: {e}"), 126))
    });
    match confinement {
        Some(mut c) => {
            // The program itself stays visible, wherever it lives (an MCP
            // server built under /tmp is behind a private /tmp otherwise).
            let program = std::path::Path::new(&argv[0]);
            if program.is_absolute() {
                c.policy.shown.push(program.canonicalize().unwrap_or_else(|_| program.to_path_buf()));
            }
            run_confined(&c.policy, argv, &signals, stop)
        }
        None => run_plain(argv, &signals, stop),
    }
}

/// Waits for one of the blocked signals for at most `timeout`; true for
/// a stop (SIGTERM, SIGHUP).
fn wait_signal(signals: &libc::sigset_t, timeout: std::time::Duration) -> bool {
    let t =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: waits for one of the blocked signals.
    let sig = unsafe { libc::sigtimedwait(signals, std::ptr::null_mut(), &t) };
    sig == libc::SIGTERM || sig == libc::SIGHUP
}

/// Reaps every child that ended; the status of `pid` if it was one.
fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = None;
    loop {
        let mut raw = 0;
        // SAFETY: waitpid for any child, without blocking.
        let got = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        if got == pid {
            status = Some(raw);
        }
        if got <= 0 {
            return status;
        }
    }
}

/// A confined command: its own namespaces and cgroup ([`confine::spawn`]).
fn run_confined(policy: &Policy, argv: Vec<OsString>, signals: &libc::sigset_t, mut stop: bool) -> ! {
    let group = policy.cgroup.as_ref().map(|tree| {
        confine::cgroup::CommandGroup::create(tree, policy.limits.processes, policy.limits.memory_mb)
            .unwrap_or_else(|e| fail(format!("cannot make the command's cgroup: {e}"), 126))
    });
    // A read-only place that is another command's placeholder is shared,
    // so that it stays while this one runs; one gone since the policy was
    // built (removed as that command ended) is held as one too: it must
    // not be made while this command runs.
    let mut placeholders = confine::placeholder::Placeholders::share(&policy.read_only);
    let gone: Vec<PathBuf> =
        policy.read_only.iter().filter(|p| std::fs::symlink_metadata(p).is_err()).cloned().collect();
    let (gone_files, gone_dirs): (Vec<PathBuf>, Vec<PathBuf>) =
        gone.into_iter().partition(|p| p.extension().is_some_and(|e| e == "json" || e == "toml"));
    let dirs: Vec<PathBuf> = policy.absent.iter().cloned().chain(gone_dirs).collect();
    let files: Vec<PathBuf> = policy.absent_files.iter().cloned().chain(gone_files).collect();
    placeholders.make(&dirs, &files);
    let spawned = confine::spawn::spawn(policy, argv, confine::POLICY_ENV, group.as_ref())
        .unwrap_or_else(|e| fail(format!("cannot start the command in its sandbox: {e}"), 126));
    let init = spawned.init;
    // Root is exempt from RLIMIT_NPROC: without a pids cgroup, count.
    // SAFETY: plain system call.
    let count = (group.as_ref().is_none_or(|g| g.tasks().is_none()) && unsafe { libc::getuid() } == 0)
        .then_some(policy.limits.processes);
    let mut init_status = None;
    while init_status.is_none() && !stop {
        init_status = reap(init);
        if init_status.is_some() {
            break;
        }
        let every =
            if count.is_some() { std::time::Duration::from_millis(100) } else { std::time::Duration::from_secs(1) };
        stop = wait_signal(signals, every);
        if let Some(limit) = count
            && confine::reap::tasks_below_me() > limit
        {
            eprintln!(
                "[forge sandbox] stopped: the command ran more than {limit} processes and threads at once ([tools.sandbox] max_processes)"
            );
            stop = true;
        }
    }
    if init_status.is_none() {
        // A stop: everything in the namespace goes with its init.
        // (Less the init, which is Forge's.)
        let running = match group.as_ref().and_then(|g| g.tasks()) {
            Some(t) => t.saturating_sub(1),
            None => confine::reap::descendants(init).len() as u64,
        };
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(init, libc::SIGKILL) };
        if let Some(g) = &group {
            g.kill();
        }
        eprintln!("[forge sandbox] stopped: {running} process(es) and thread(s) of the command killed");
    }
    confine::reap::kill_descendants();
    // What the init reported of the command, else how the init ended.
    let command = init_status.and_then(|_| spawned.command_status()).or(init_status);
    if let Some(g) = &group {
        let refused = g.forks_refused();
        if refused > 0 {
            eprintln!(
                "[forge sandbox] {refused} process start(s) refused: the command reached {} processes and threads at once ([tools.sandbox] max_processes)",
                policy.limits.processes
            );
        }
        let oom = g.oom_kills();
        if oom > 0 {
            eprintln!(
                "[forge sandbox] {oom} process(es) killed: the command used its {} MiB of memory ([tools.sandbox] max_memory_mb)",
                policy.limits.memory_mb
            );
        }
    }
    drop((group, placeholders));
    match command {
        Some(raw) => exit_like(raw),
        None => std::process::exit(143),
    }
}

/// An unconfined command (`sandbox: false`, or no kernel sandbox): only
/// supervised, so that nothing it starts outlives it.
fn run_plain(argv: Vec<OsString>, signals: &libc::sigset_t, mut stop: bool) -> ! {
    let mut child = std::process::Command::new(&argv[0]);
    child.args(&argv[1..]);
    child.env_remove(confine::POLICY_ENV);
    // SAFETY: resets the signal mask in the child before exec.
    unsafe {
        child.pre_exec(|| {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut started = match child.spawn() {
        Ok(c) => c,
        Err(e) => fail(format!("cannot start {}: {e}", argv[0].to_string_lossy()), 127),
    };
    let pid = started.id() as libc::pid_t;
    let mut status = None;
    while status.is_none() && !stop {
        status = reap(pid);
        if status.is_none() {
            stop = wait_signal(signals, std::time::Duration::from_secs(1));
        }
    }
    // Whatever the command left running goes with it.
    confine::reap::kill_descendants();
    match status {
        Some(raw) => exit_like(raw),
        None => {
            let _ = started.kill();
            std::process::exit(143)
        }
    }
}

/// Exits as the command did, so the daemon sees its own status.
fn exit_like(raw: i32) -> ! {
    let s = std::process::ExitStatus::from_raw(raw);
    match (s.code(), s.signal()) {
        (Some(code), _) => std::process::exit(code),
        (None, Some(sig)) => {
            // Die the same way, so the daemon reports the signal.
            // SAFETY: default action for `sig`, then raise it.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(sig);
            }
            std::process::exit(128 + sig)
        }
        _ => std::process::exit(1),
    }
}
