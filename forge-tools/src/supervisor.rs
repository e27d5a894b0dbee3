//! Commands die with the daemon.
//!
//! A command the model runs gets a process group of its own (so a cancel
//! or timeout kills all of it). If `forged` itself is killed (`kill -9`, an
//! OOM kill) nobody is left to kill that group, and a `sleep 1000` or a dev
//! server would run on. So the group's leader is a small supervisor: the
//! daemon's own executable started in this mode. The kernel sends it
//! SIGTERM when the daemon dies (`PR_SET_PDEATHSIG`), and it kills its whole
//! group, itself included. Otherwise it waits for the shell it started and
//! exits as the shell did, so the daemon sees the command's own status.
//!
//! `PR_SET_PDEATHSIG` alone on the shell would stop the shell but not the
//! children it started (`npm run dev` → node): the signal is not inherited.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The first argument that starts the supervisor mode.
pub const SUPERVISE_ARG: &str = "__forge-supervise";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Tells `run_command` to start commands under `program SUPERVISE_ARG`.
/// Called once by the daemon with its own executable.
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// How a command is started: the supervisor with the shell command line,
/// or (without a supervisor, e.g. in unit tests) the shell itself, which
/// then at least dies with the daemon's thread that started it.
pub(crate) fn command(shell: &str, command_line: &str) -> tokio::process::Command {
    let daemon = std::process::id();
    // What a command writes gets the user's modes, not the daemon's 077.
    let umask = crate::user_umask() as libc::mode_t;
    match PROGRAM.get() {
        Some(program) => {
            let mut cmd = std::process::Command::new(program);
            cmd.arg0("forged-command").arg(SUPERVISE_ARG).arg(daemon.to_string()).arg(shell).arg(command_line);
            // SAFETY: umask(2) is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(umask);
                    Ok(())
                });
            }
            cmd.into()
        }
        None => {
            let mut cmd = std::process::Command::new(shell);
            cmd.arg("-c").arg(command_line);
            // SAFETY: prctl and getppid are async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(umask);
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The daemon died before the line above: do not start.
                    if libc::getppid() as u32 != daemon {
                        libc::_exit(137);
                    }
                    Ok(())
                });
            }
            cmd.into()
        }
    }
}

/// A program (an MCP server) started the same way: in a process group of
/// its own, led by the supervisor, which dies with the daemon and takes
/// the group with it. It inherits the stdio the command is given.
pub fn exec_command(program: &str, args: &[String]) -> tokio::process::Command {
    let daemon = std::process::id();
    let umask = crate::user_umask() as libc::mode_t;
    let mut cmd = match PROGRAM.get() {
        Some(supervisor) => {
            let mut cmd = std::process::Command::new(supervisor);
            cmd.arg0("forged-command").arg(SUPERVISE_ARG).arg(daemon.to_string()).arg(EXEC_MARK).arg(program);
            cmd.args(args);
            cmd
        }
        None => {
            let mut cmd = std::process::Command::new(program);
            cmd.args(args);
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
                if libc::getppid() as u32 != daemon {
                    libc::_exit(137);
                }
            }
            Ok(())
        });
    }
    cmd.process_group(0);
    cmd.into()
}

/// Marks [`exec_command`]'s form: the program and its arguments follow.
const EXEC_MARK: &str = "--exec";

/// The supervisor's `main`: `args` after [`SUPERVISE_ARG`] are the daemon's
/// pid, then the shell and the command line, or `--exec` and a program
/// with its arguments. Never returns.
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
            eprintln!(
                "forged: {SUPERVISE_ARG} takes DAEMON_PID SHELL COMMAND_LINE or DAEMON_PID --exec PROGRAM ARGS..."
            );
            std::process::exit(2);
        }
    };
    let daemon: u32 = daemon.to_str().and_then(|d| d.parse().ok()).unwrap_or(0);
    extern "C" fn kill_group(_: libc::c_int) {
        // SAFETY: kill(2) is async-signal-safe; 0 is our own process group.
        unsafe { libc::kill(0, libc::SIGKILL) };
    }
    // SAFETY: installing a handler that only calls kill(2); prctl and
    // getppid with plain integers.
    unsafe {
        libc::signal(libc::SIGTERM, kill_group as *const () as libc::sighandler_t);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        // The daemon may have died before the line above.
        if libc::getppid() as u32 != daemon {
            kill_group(0);
        }
    }
    let status = child.status();
    match status {
        Ok(s) => match (s.code(), s.signal()) {
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
        },
        Err(e) => {
            eprintln!("cannot start {}: {e}", child.get_program().to_string_lossy());
            std::process::exit(127)
        }
    }
}
