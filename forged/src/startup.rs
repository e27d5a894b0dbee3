//! Process-wide set-up before any thread starts: private files, no core
//! dumps or ptrace by other same-user processes, the descriptor limit, and
//! API keys out of the environment.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Everything the daemon creates is private to its user: files 0600,
/// directories 0700, whatever mode the code asks for. Returns the umask
/// it replaced (the user's, for what tools create in projects).
pub fn private_umask() -> u32 {
    // SAFETY: umask(2) cannot fail.
    unsafe { libc::umask(0o077) as u32 }
}

/// Makes the daemon non-dumpable, as ssh-agent does: another process of the
/// same user (a command the model runs included) can then neither read
/// `/proc/PID/environ` or `/proc/PID/mem` nor attach a debugger to it, and
/// no core file holds its memory. Root is not kept out.
pub fn no_dumps() {
    // SAFETY: prctl(2) with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        eprintln!("forged: warning: cannot make the process non-dumpable: {}", std::io::Error::last_os_error());
    }
}

/// Large buffers (a long answer's text, a big batch) get pages of their own
/// that go back to the system when freed. glibc otherwise raises this
/// threshold after the first such buffer is freed, so later ones come
/// from the heap and leave it fragmented: RSS grew by twice the text
/// streamed and stayed there.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt with integer arguments, before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Gives memory freed since the last call back to the system (glibc keeps
/// freed heap pages otherwise). Cheap when there is nothing to give back.
pub fn trim_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Lets go of the daemon's own code pages: start-up runs code (the store's
/// migrations, recovery, configuration, the sandbox probe) that an idle
/// daemon never runs again, and the kernel maps code in 64 KiB windows
/// around each page run, so most of an idle daemon's resident size was
/// code it no longer uses. Only the executable's read-only mappings that
/// hold no private copy of a page are dropped (`MADV_DONTNEED`): their
/// pages stay in the page cache and come back on the next use, without a
/// disk read. Returns the KiB unmapped.
pub fn release_code_pages() -> u64 {
    let Ok(maps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    let here = release_code_pages as *const () as usize;
    let parsed = parse_smaps(&maps);
    // The executable is the file whose text holds this function.
    let Some(exe) = parsed.iter().find(|m| m.start <= here && here < m.end).map(|m| m.file.clone()) else {
        return 0;
    };
    let mut released = 0;
    for m in parsed.iter().filter(|m| m.file == exe && m.droppable()) {
        // SAFETY: the range is a whole mapping of this process, read-only
        // and with no private pages: dropping it only unmaps page-cache
        // pages, which the next access maps again.
        if unsafe { libc::madvise(m.start as *mut libc::c_void, m.end - m.start, libc::MADV_DONTNEED) } == 0 {
            released += m.rss_kib;
        }
    }
    released
}

/// One mapping of `/proc/self/smaps`, as far as `release_code_pages` needs.
#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    end: usize,
    /// A private mapping of a file, never writable.
    read_only_file: bool,
    /// Device and inode: which file is mapped.
    file: String,
    rss_kib: u64,
    anonymous_kib: u64,
}

impl Mapping {
    /// Whether dropping it loses nothing: only page-cache pages, no
    /// private copy of one (a relocated page is such a copy).
    fn droppable(&self) -> bool {
        self.read_only_file && self.anonymous_kib == 0
    }
}

fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
        {
            let perms = fields.next().unwrap_or("");
            let (_offset, dev, inode) = (fields.next(), fields.next().unwrap_or(""), fields.next().unwrap_or("0"));
            out.push(Mapping {
                start,
                end,
                read_only_file: !perms.contains('w') && perms.ends_with('p') && inode != "0",
                file: format!("{dev} {inode}"),
                rss_kib: 0,
                // Unknown until its line is read: counts as not droppable.
                anonymous_kib: u64::MAX,
            });
        } else if let Some(m) = out.last_mut() {
            let mut value = || fields.next().and_then(|v| v.parse().ok()).unwrap_or(u64::MAX);
            match first {
                "Rss:" => m.rss_kib = value(),
                "Anonymous:" => m.anonymous_kib = value(),
                _ => {}
            }
        }
    }
    out
}

/// Many clients and sessions need descriptors: lift the soft limit to the
/// hard one, as servers commonly do.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Removes the variables that held API keys from the environment (they
/// live in the configuration from here on).
///
/// Must run before any other thread exists: the environment is not
/// synchronised.
pub fn forget_key_variables(names: &[String]) {
    for name in names {
        let Ok(c_name) = std::ffi::CString::new(name.as_str()) else { continue };
        // SAFETY: called from `main` before the runtime starts any thread.
        // `getenv` points into the block the kernel shows as
        // `/proc/PID/environ` (unsetenv only drops the pointer), so the
        // value is overwritten there first.
        unsafe {
            let value = libc::getenv(c_name.as_ptr());
            if !value.is_null() {
                std::ptr::write_bytes(value, 0, libc::strlen(value));
            }
            std::env::remove_var(name);
        }
    }
}

/// Creates `$FORGE_HOME` (0700) if needed.
pub fn create_home(home: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(home)
}

/// Tightens an existing `$FORGE_HOME` that others can read: the directory
/// to 0700, and Forge's own files in it (the store, its WAL and delta log,
/// the lock and socket directory, `config.toml`, `logs/` and the logs) to
/// 0600, directories 0700. Nothing else a user keeps there is touched.
/// Returns what was changed, to log.
pub fn tighten_home(home: &Path) -> Vec<PathBuf> {
    let mut changed = Vec::new();
    tighten(home, &mut changed);
    for entry in std::fs::read_dir(home).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("forge") || name == "config.toml" || name == "logs" || name == "run") {
            continue;
        }
        let path = entry.path();
        tighten(&path, &mut changed);
        if name == "logs" || name == "run" {
            for inner in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                tighten(&inner.path(), &mut changed);
            }
        }
    }
    changed
}

/// Makes one file 0600 (keeping its owner's execute bit) or one directory
/// 0700 if others may read it. Links, sockets and fifos are left alone (a
/// socket is made 0600 when bound).
fn tighten(path: &Path, changed: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    let private = if meta.is_dir() {
        0o700
    } else if meta.is_file() {
        meta.permissions().mode() & 0o700
    } else {
        return;
    };
    if meta.permissions().mode() & 0o077 != 0
        && std::fs::set_permissions(path, std::fs::Permissions::from_mode(private)).is_ok()
    {
        changed.push(path.to_path_buf());
    }
}

/// The user's home directory: `$HOME`, else the password database's.
pub fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()) {
        return Some(h);
    }
    // SAFETY: getpwuid_r into a local buffer; the result points into it.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(libc::getuid(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) != 0 || out.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pw.pw_dir);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()))).filter(|h| h.is_absolute())
    }
}

/// Which totals of a command this machine bounds: the cgroup commands
/// get (the daemon may move itself into a leaf of its own cgroup so that
/// it can pass the controllers on), or why there is none.
pub fn command_totals() -> forge_core::tools::confine::Totals {
    use forge_core::tools::confine::{Totals, cgroup};
    let found = |tree: cgroup::Tree| Totals {
        pids: tree.pids(),
        memory: tree.memory(),
        how: tree.describe(),
        tree: Some(tree),
    };
    let why = match cgroup::prepare() {
        Ok(tree) => return found(tree),
        Err(why) => why,
    };
    // cgroup v2 outside a delegated unit (autostarted from a terminal):
    // a scope of its own, then the same again.
    if cgroup::unified() {
        match crate::scope::move_to_own_scope().and_then(|scope| cgroup::prepare().map_err(|e| format!("{scope}: {e}")))
        {
            Ok(tree) => {
                tracing::info!(cgroup = %tree.describe(), "moved into a delegated systemd scope of its own");
                return found(tree);
            }
            Err(e) => {
                return Totals {
                    pids: false,
                    memory: false,
                    how: format!("{why}; no scope of its own either: {e}"),
                    tree: None,
                };
            }
        }
    }
    Totals { pids: false, memory: false, how: why, tree: None }
}

/// Where the user's sockets live, to hide from commands: Landlock cannot
/// refuse connecting to a socket file before ABI 9, and the session bus or
/// systemd's would start processes outside any sandbox.
pub fn sockets_to_mask(daemon_socket: &Path) -> Vec<PathBuf> {
    // SAFETY: plain system call.
    let uid = unsafe { libc::getuid() };
    let mut places: Vec<PathBuf> = vec![
        PathBuf::from(format!("/run/user/{uid}")),
        PathBuf::from("/run/dbus"),
        PathBuf::from("/run/docker.sock"),
        PathBuf::from("/run/podman"),
        PathBuf::from("/tmp/.X11-unix"),
    ];
    for var in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        places.extend(std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute()));
    }
    let mut out: Vec<PathBuf> = places.into_iter().filter_map(|p| p.canonicalize().ok()).collect();
    // The daemon's own socket is bound only later: its directory is there.
    if let (Some(dir), Some(name)) = (daemon_socket.parent(), daemon_socket.file_name())
        && let Ok(dir) = dir.canonicalize()
    {
        out.push(dir.join(name));
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_private_file_mappings_without_private_pages_are_dropped() {
        let smaps = "\
5600-5700 r--p 00000000 fd:01 42 /usr/bin/forged
Rss:                 100 kB
Anonymous:             0 kB
5700-5900 r-xp 00100000 fd:01 42 /usr/bin/forged
Rss:                 800 kB
Anonymous:             0 kB
5900-5a00 r--p 00300000 fd:01 42 /usr/bin/forged
Rss:                  60 kB
Anonymous:            60 kB
5a00-5b00 rw-p 00400000 fd:01 42 /usr/bin/forged
Rss:                   8 kB
Anonymous:             8 kB
7000-7100 rw-p 00000000 00:00 0 [heap]
Rss:                  12 kB
Anonymous:            12 kB
";
        let maps = parse_smaps(smaps);
        let droppable: Vec<usize> = maps.iter().filter(|m| m.droppable()).map(|m| m.start).collect();
        assert_eq!(droppable, vec![0x5600, 0x5700], "the relocated and writable ones stay");
        assert_eq!(maps[1].rss_kib, 800);
        assert_eq!(maps[0].file, maps[2].file);
    }

    #[test]
    fn dropped_code_comes_back_on_use() {
        let released = release_code_pages();
        assert!(released > 0, "a running test binary has code pages mapped");
        // This runs code that was just unmapped: it faults back in.
        let maps = parse_smaps(&std::fs::read_to_string("/proc/self/smaps").unwrap_or_default());
        assert!(!maps.is_empty());
    }

    #[test]
    fn a_loose_home_is_made_private_and_what_changed_is_listed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("logs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.join("forge.db"), b"x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.join("logs/forged.log"), b"x").unwrap_or_else(|e| panic!("{e}"));
        for (p, m) in [("", 0o755), ("forge.db", 0o644), ("logs", 0o755), ("logs/forged.log", 0o644)] {
            std::fs::set_permissions(home.join(p), std::fs::Permissions::from_mode(m))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(home.join("notes.txt"), b"mine").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(home.join("notes.txt"), std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        let changed = tighten_home(&home);
        assert_eq!(changed.len(), 4, "{changed:?}");
        assert_eq!(
            std::fs::metadata(home.join("notes.txt")).map(|m| m.permissions().mode() & 0o777).unwrap_or(0),
            0o644,
            "what is not Forge's is left alone"
        );
        let mode = |p: &str| std::fs::metadata(home.join(p)).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!((mode(""), mode("forge.db"), mode("logs"), mode("logs/forged.log")), (0o700, 0o600, 0o700, 0o600));
        assert!(tighten_home(&home).is_empty(), "nothing left to change");
    }
}
