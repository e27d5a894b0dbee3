//! Totals per command: a cgroup of its own with `pids.max` and
//! `memory.max`, so that a fork bomb or six children of 200 MB stop at
//! the command's allowance, whoever the user is (root's processes escape
//! `RLIMIT_NPROC`, and `RLIMIT_DATA` is per process).
//!
//! cgroup v2: the daemon's own cgroup, once the daemon has moved itself
//! into a leaf of it (`forge-daemon`) and enabled `pids` and `memory` for
//! its children (a systemd unit with `Delegate=`, or a cgroup it has to
//! itself). cgroup v1: a directory of the daemon's own
//! (`forge-<pid>`) in the `pids` and `memory` hierarchies, where it may
//! write. Each command gets `forge-cmd-<supervisor pid>` there; the name
//! is also how `forged` recognizes a peer that runs in a Forge sandbox.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The start of every command's cgroup name.
pub const COMMAND_PREFIX: &str = "forge-cmd-";

/// Where commands' cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version", rename_all = "lowercase")]
pub enum Tree {
    /// A cgroup v2 directory with `pids` and/or `memory` enabled for its
    /// children.
    V2 { dir: PathBuf, pids: bool, memory: bool },
    /// Directories of the daemon's own in the v1 hierarchies it may use.
    V1 { pids: Option<PathBuf>, memory: Option<PathBuf> },
}

impl Tree {
    pub fn pids(&self) -> bool {
        match self {
            Tree::V2 { pids, .. } => *pids,
            Tree::V1 { pids, .. } => pids.is_some(),
        }
    }

    pub fn memory(&self) -> bool {
        match self {
            Tree::V2 { memory, .. } => *memory,
            Tree::V1 { memory, .. } => memory.is_some(),
        }
    }

    /// Where, in words.
    pub fn describe(&self) -> String {
        match self {
            Tree::V2 { dir, .. } => format!("cgroup v2 under {}", dir.display()),
            Tree::V1 { pids, memory } => {
                let dirs: Vec<String> = pids.iter().chain(memory).map(|d| d.display().to_string()).collect();
                format!("cgroup v1 under {}", dirs.join(" and "))
            }
        }
    }
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    std::fs::write(path, text).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// `(mount point, root, filesystem type, super options)` of each mount.
fn mounts() -> Vec<(PathBuf, String, String, String)> {
    let text = read(Path::new("/proc/self/mountinfo")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let f: Vec<&str> = before.split(' ').collect();
            let a: Vec<&str> = after.split(' ').collect();
            Some((
                PathBuf::from(unescape(f.get(4)?)),
                unescape(f.get(3)?),
                a.first()?.to_string(),
                a.get(2)?.to_string(),
            ))
        })
        .collect()
}

/// mountinfo escapes spaces and a few others as `\NNN` (octal).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `mount` + `path` below the mount's own root.
fn under(mount: &Path, root: &str, path: &str) -> PathBuf {
    let rel = path.strip_prefix(root.trim_end_matches('/')).unwrap_or(path);
    mount.join(rel.trim_start_matches('/'))
}

/// Whether the machine runs cgroup v2 alone (no v1 hierarchy mounted
/// beside it), where a daemon outside a delegated unit has no totals.
pub fn unified() -> bool {
    let all = mounts();
    all.iter().any(|m| m.2 == "cgroup2") && !all.iter().any(|m| m.2 == "cgroup")
}

/// Finds where commands' cgroups can go, moving the daemon into a leaf
/// of its cgroup on v2. `Err` says why no total can be bounded.
pub fn prepare() -> Result<Tree, String> {
    let own = read(Path::new("/proc/self/cgroup")).map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let all = mounts();
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::")).and_then(|path| {
        let (mount, root, _, _) = all.iter().find(|m| m.2 == "cgroup2")?;
        Some(under(mount, root, path))
    });
    let mut why = Vec::new();
    if let Some(dir) = v2 {
        match prepare_v2(&dir) {
            Ok(tree) => return Ok(tree),
            Err(e) => why.push(e),
        }
    }
    let mut v1 = |controller: &str| -> Option<PathBuf> {
        let path = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|c| c == controller).then(|| path.to_string())
        })?;
        let (mount, root, _, _) = all.iter().find(|m| m.2 == "cgroup" && m.3.split(',').any(|o| o == controller))?;
        let dir = under(mount, root, &path).join(format!("forge-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                why.push(format!("cannot make {}: {e}", dir.display()));
                return None;
            }
        }
        if let Some(parent) = dir.parent() {
            remove_stale(parent, "forge-");
        }
        Some(dir)
    };
    let (pids, memory) = (v1("pids"), v1("memory"));
    if pids.is_some() || memory.is_some() {
        return Ok(Tree::V1 { pids, memory });
    }
    if why.is_empty() {
        why.push("this machine has no cgroup with the pids or memory controller for forged".into());
    }
    Err(why.join("; "))
}

fn prepare_v2(dir: &Path) -> Result<Tree, String> {
    let controllers = read(&dir.join("cgroup.controllers")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let has = |c: &str| controllers.split_whitespace().any(|w| w == c);
    let (pids, memory) = (has("pids"), has("memory"));
    if !pids && !memory {
        return Err(format!("forged's cgroup {} has neither the pids nor the memory controller", dir.display()));
    }
    let wanted: Vec<&str> = [("pids", pids), ("memory", memory)].iter().filter(|(_, h)| *h).map(|(c, _)| *c).collect();
    let enable = wanted.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ");
    let control = dir.join("cgroup.subtree_control");
    let enabled = |text: &str| wanted.iter().all(|c| text.split_whitespace().any(|w| w == *c));
    if !enabled(&read(&control).unwrap_or_default()) {
        // Only a cgroup without processes of its own may pass
        // controllers on: the daemon moves into a leaf first, which it
        // can do only if it is alone there.
        let procs = read(&dir.join("cgroup.procs")).unwrap_or_default();
        let me = std::process::id().to_string();
        if procs.lines().any(|p| p.trim() != me) {
            return Err(format!(
                "forged shares its cgroup {} with other processes (run it as a systemd user service: forgectl daemon install)",
                dir.display()
            ));
        }
        let leaf = dir.join("forge-daemon");
        match std::fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot make {}: {e}", leaf.display())),
        }
        write(&leaf.join("cgroup.procs"), &me).map_err(|e| e.to_string())?;
        write(&control, &enable).map_err(|e| e.to_string())?;
    }
    remove_stale(dir, COMMAND_PREFIX);
    Ok(Tree::V2 { dir: dir.to_path_buf(), pids, memory })
}

/// Removes empty cgroups named `prefix<pid>` whose process is gone.
fn remove_stale(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// One command's cgroup (one directory per hierarchy on v1), removed
/// when dropped.
#[derive(Debug)]
pub struct CommandGroup {
    dirs: Vec<PathBuf>,
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
    v2: bool,
}

impl CommandGroup {
    /// Makes the cgroup `forge-cmd-<pid>` with `processes` tasks and
    /// `memory_mb` of memory at most.
    pub fn create(tree: &Tree, processes: u64, memory_mb: u64) -> io::Result<CommandGroup> {
        let name = format!("{COMMAND_PREFIX}{}", std::process::id());
        let (pids, memory, v2) = match tree {
            Tree::V2 { dir, pids, memory } => {
                let d = dir.join(&name);
                (pids.then(|| d.clone()), memory.then(|| d.clone()), true)
            }
            Tree::V1 { pids, memory } => {
                (pids.as_ref().map(|d| d.join(&name)), memory.as_ref().map(|d| d.join(&name)), false)
            }
        };
        let mut dirs: Vec<PathBuf> = pids.iter().chain(memory.iter()).cloned().collect();
        dirs.dedup();
        let mut group = CommandGroup { dirs: Vec::new(), pids, memory, v2 };
        for d in &dirs {
            std::fs::create_dir(d).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", d.display())))?;
            group.dirs.push(d.clone());
        }
        if let Some(d) = &group.pids {
            write(&d.join("pids.max"), &processes.to_string())?;
        }
        if let Some(d) = &group.memory {
            let bytes = memory_mb.saturating_mul(1024 * 1024).to_string();
            if v2 {
                write(&d.join("memory.max"), &bytes)?;
                // Swap would let the total past the limit.
                let _ = write(&d.join("memory.swap.max"), "0");
            } else {
                write(&d.join("memory.limit_in_bytes"), &bytes)?;
                let swap = d.join("memory.memsw.limit_in_bytes");
                if swap.exists() {
                    write(&swap, &bytes)?;
                }
            }
        }
        Ok(group)
    }

    /// Moves process `pid` (and what it starts later) into the cgroup.
    pub fn add(&self, pid: i32) -> io::Result<()> {
        for d in &self.dirs {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Processes and threads in the cgroup now.
    pub fn tasks(&self) -> Option<u64> {
        let d = self.pids.as_ref().or(self.memory.as_ref())?;
        match read(&d.join("pids.current")) {
            Ok(t) => t.trim().parse().ok(),
            Err(_) => {
                read(&d.join(if self.v2 { "cgroup.threads" } else { "tasks" })).ok().map(|t| t.lines().count() as u64)
            }
        }
    }

    /// How often a fork was refused at `pids.max`.
    pub fn forks_refused(&self) -> u64 {
        self.pids.as_ref().map(|d| event(&d.join("pids.events"), "max")).unwrap_or(0)
    }

    /// How many processes the kernel killed at `memory.max`.
    pub fn oom_kills(&self) -> u64 {
        let Some(d) = &self.memory else { return 0 };
        let file = if self.v2 { "memory.events" } else { "memory.oom_control" };
        event(&d.join(file), "oom_kill")
    }

    /// Kills every process in the cgroup (the PID namespace's end does
    /// this too; this is for whatever got out of it).
    pub fn kill(&self) {
        if self.v2 && self.dirs.first().is_some_and(|d| write(&d.join("cgroup.kill"), "1").is_ok()) {
            return;
        }
        for _ in 0..50 {
            let pids: Vec<i32> = self
                .dirs
                .iter()
                .flat_map(|d| {
                    read(&d.join("cgroup.procs")).unwrap_or_default().lines().map(str::to_string).collect::<Vec<_>>()
                })
                .filter_map(|p| p.trim().parse().ok())
                .collect();
            if pids.is_empty() {
                return;
            }
            for p in pids {
                // SAFETY: kill(2) on a process in the command's cgroup.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The number after `key` in a flat-keyed cgroup file.
fn event(path: &Path, key: &str) -> u64 {
    read(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

impl Drop for CommandGroup {
    fn drop(&mut self) {
        for d in &self.dirs {
            // Emptied by the PID namespace's end; the last tasks may take
            // a moment to leave.
            for _ in 0..100 {
                match std::fs::remove_dir(d) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(10))
                    }
                    _ => break,
                }
            }
        }
    }
}

/// Whether process `pid` runs in a command's cgroup (a Forge sandbox,
/// of this daemon or another).
pub fn in_command_group(pid: i32) -> bool {
    read(Path::new(&format!("/proc/{pid}/cgroup"))).is_ok_and(|t| {
        t.lines().any(|l| l.rsplit(':').next().is_some_and(|p| p.contains(&format!("/{COMMAND_PREFIX}"))))
    })
}

/// Removes the daemon's own v1 directories (at exit).
pub fn release(tree: &Tree) {
    if let Tree::V1 { pids, memory } = tree {
        for d in pids.iter().chain(memory) {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped_and_joined_below_the_root() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(
            under(Path::new("/sys/fs/cgroup"), "/", "/user.slice/x"),
            PathBuf::from("/sys/fs/cgroup/user.slice/x")
        );
        // A cgroup namespace: the mount's root is the namespace's.
        assert_eq!(under(Path::new("/sys/fs/cgroup"), "/ns", "/ns/a"), PathBuf::from("/sys/fs/cgroup/a"));
    }

    #[test]
    fn flat_keyed_files_are_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = dir.path().join("memory.events");
        std::fs::write(&f, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(event(&f, "oom_kill"), 2);
        assert_eq!(event(&f, "oom"), 1);
        assert_eq!(event(&f, "max"), 3);
        assert_eq!(event(&f, "missing"), 0);
    }
}
