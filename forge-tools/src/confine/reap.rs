//! Killing everything a command started, even what left its process
//! group (`setsid`, a double fork): the supervisor is a child subreaper,
//! so every orphan below it is re-parented to it rather than to init, and
//! the tree under it is all the command's.

use std::collections::HashMap;

/// Marks the calling process as a subreaper: orphans below it become its
/// children.
pub fn become_subreaper() {
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// `(pid, parent pid, threads)` of every live process (zombies left out).
fn processes() -> Vec<(i32, i32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid ...": comm may hold spaces and parens.
            let rest = &stat[stat.rfind(')')? + 2..];
            let mut fields = rest.split(' ');
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            // Field 20 of stat, the 18th after the state.
            let threads = fields.nth(15).and_then(|t| t.parse().ok()).unwrap_or(1);
            (state != "Z" && state != "X").then_some((pid, ppid, threads))
        })
        .collect()
}

/// The parent of `pid`, from `/proc/PID/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(1)?.parse().ok()
}

/// Whether `pid` is a command supervisor (`forged __forge-supervise`).
fn is_supervisor(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.split(|b| *b == 0).nth(1) == Some(super::SUPERVISE_ARG.as_bytes())
}

/// The supervisors (`forged __forge-supervise`) above `pid`: the Forge
/// sandboxes it runs in, as this PID namespace shows them.
fn supervisors_above(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut p = pid;
    for _ in 0..4096 {
        match parent_of(p) {
            Some(parent) if parent > 0 => {
                if is_supervisor(parent) {
                    out.push(parent);
                }
                p = parent;
            }
            _ => break,
        }
    }
    out
}

/// The Forge command cgroup `pid` runs in, if any.
fn command_group_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let marker = format!("/{}", super::cgroup::COMMAND_PREFIX);
    text.lines().find_map(|l| {
        let path = l.splitn(3, ':').nth(2)?;
        path.contains(&marker).then(|| path.to_string())
    })
}

/// The calling process's own sandboxes: the supervisors above it and its
/// command cgroup. Read once: a process's ancestors above it only go away
/// (and a supervisor that goes takes its tree with it), and nothing moves
/// the daemon between command cgroups.
fn own_sandboxes() -> &'static (Vec<i32>, Option<String>) {
    static OWN: std::sync::OnceLock<(Vec<i32>, Option<String>)> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        // SAFETY: plain system call.
        let me = unsafe { libc::getpid() };
        (supervisors_above(me), command_group_of(me))
    })
}

/// Who a peer on the daemon's socket is, judged from one walk up its
/// ancestors.
#[derive(Debug, PartialEq, Eq)]
pub enum Peer {
    /// Below the calling process (a command, hook or server it started),
    /// or it cannot be told: refuse.
    Descendant,
    /// Confined by a Forge sandbox the caller does not run in: refuse.
    OtherSandbox,
    /// Neither.
    Free,
}

/// Judges the process `pid` connecting to the caller.
pub fn judge_peer(pid: i32) -> Peer {
    // SAFETY: plain system call.
    let me = unsafe { libc::getpid() };
    let (mine, my_group) = own_sandboxes();
    let mut foreign_supervisor = false;
    let mut p = pid;
    for _ in 0..4096 {
        match parent_of(p) {
            None => return Peer::Descendant,
            Some(parent) if parent == me => return Peer::Descendant,
            Some(parent) if parent > 0 => {
                foreign_supervisor |= !mine.contains(&parent) && is_supervisor(parent);
                p = parent;
            }
            Some(_) => {
                let other_group = match (command_group_of(pid), my_group) {
                    (Some(theirs), Some(ours)) => &theirs != ours,
                    (theirs, _) => theirs.is_some(),
                };
                return if foreign_supervisor || other_group { Peer::OtherSandbox } else { Peer::Free };
            }
        }
    }
    Peer::Descendant
}

/// The live processes below `root`, with their thread counts.
fn tree(root: i32) -> Vec<(i32, u64)> {
    let mut children: HashMap<i32, Vec<(i32, u64)>> = HashMap::new();
    for (pid, ppid, threads) in processes() {
        children.entry(ppid).or_default().push((pid, threads));
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(c, threads) in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push((c, threads));
            todo.push(c);
        }
    }
    out
}

/// The live processes below `root`.
pub fn descendants(root: i32) -> Vec<i32> {
    tree(root).into_iter().map(|(pid, _)| pid).collect()
}

/// Threads (processes count as one each) of everything below the caller.
pub fn tasks_below_me() -> u64 {
    // SAFETY: plain system call.
    tree(unsafe { libc::getpid() }).iter().map(|(_, t)| *t).sum()
}

/// Kills every process below the caller and reaps them. Repeats until
/// none is left: a process forked just before its parent died is
/// re-parented here and found on the next round.
pub fn kill_descendants() {
    // SAFETY: getpid, kill and waitpid with plain values.
    let me = unsafe { libc::getpid() };
    for _ in 0..200 {
        let below = descendants(me);
        if below.is_empty() {
            break;
        }
        for pid in below {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}
