//! The kernel sandbox for every process Forge starts on the model's
//! behalf (`run_command`, the git tools, hooks, MCP stdio servers that ask
//! for it).
//!
//! The daemon computes a [`Policy`] per process: the trees it may read,
//! the trees it may write (the session's roots and a private temporary
//! directory), the `.git` directories kept read-only, the Unix sockets
//! and network it may reach, and its resource limits. The command's
//! supervisor (see [`crate::supervisor`]) applies it ([`spawn`]): a
//! cgroup of the command's own for its totals ([`cgroup`]); user, mount,
//! PID and IPC namespaces (and a network namespace for `deny`) whose init
//! builds the command's view of the files ([`mounts`]); then, in the
//! command, rlimits, no new privileges, capabilities dropped, Landlock,
//! and a seccomp filter whose `connect` calls the supervisor answers
//! ([`netfilter`], [`unix`]). The kernel, not Forge, then refuses what the
//! policy does not grant, to the command and to everything it starts.
//!
//! Landlock only adds rights to trees, it cannot take a subtree back out:
//! a tree with a hidden place under it (the home directory under `/`,
//! `~/.ssh` under `~`) is granted as its entries, recursively, around the
//! hidden place ([`Policy::build`]).

pub mod cgroup;
mod enter;
pub mod explain;
mod git_hooks;
mod hook_reach;
mod mounts;
mod netfilter;
mod new_root;
mod notif;
pub mod placeholder;
mod pool;
mod probe;
pub mod reap;
mod sends;
pub mod spawn;
mod support;
pub mod unix;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use crate::config::{NetworkAccess, SandboxMode};
pub use hook_reach::HookReach;
pub use netfilter::{Rules, serve_notifications};
pub use probe::{PROBE_ARG, probe_main};

/// The first argument that starts the supervisor mode (a command's leader,
/// see [`crate::supervisor`]); the sandbox knows it to tell its own.
pub const SUPERVISE_ARG: &str = "__forge-supervise";
pub use support::{LANDLOCK_CAP_ENV, Support, kernel_release, landlock_abi, userns_refusal};

/// Environment variable that carries the policy from the daemon to the
/// supervisor (removed before the command starts).
pub const POLICY_ENV: &str = "FORGE_SANDBOX_POLICY";

/// What one confined process may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Trees (or files) it may read and execute.
    pub read: Vec<PathBuf>,
    /// Trees it may write (and read).
    pub write: Vec<PathBuf>,
    /// Places inside `write` made read-only (a root's `.git` and
    /// `.claude`).
    pub read_only: Vec<PathBuf>,
    /// Places hidden behind an empty mount (see [`Host::masked`]).
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    pub network: NetworkAccess,
    pub limits: Limits,
    /// Its private temporary directory (also in `write`).
    pub tmpdir: PathBuf,
    /// Unix sockets outside `write` it may connect to (the user's
    /// `allow_unix_sockets`).
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    /// Where its cgroup goes (`None`: no totals on this machine).
    #[serde(default)]
    pub cgroup: Option<cgroup::Tree>,
    /// Read places mounted back (read-only) into the private places: the
    /// daemon's executable and the user's `read_roots`.
    #[serde(default)]
    pub shown: Vec<PathBuf>,
    /// Places a command may not create (a root's `.git`, `.claude`,
    /// `.forge`, where there is none): the supervisor holds an empty
    /// directory there while the command runs, read-only to it.
    #[serde(default)]
    pub absent: Vec<PathBuf>,
    /// Files a command may not create (a settings file of `~/.claude` or
    /// Forge's home, for a hook): held as empty files, as `absent` holds
    /// directories.
    #[serde(default)]
    pub absent_files: Vec<PathBuf>,
    /// The mount namespace carries the whole file boundary (a new root of
    /// the grants only, see `new_root`): where Landlock cannot (ABI < 3).
    #[serde(default)]
    pub mount_boundary: bool,
    /// The Landlock ABI whose rules are layered on, 0 for none (see
    /// [`Support::landlock_layer`]).
    #[serde(default)]
    pub landlock_abi: i32,
}

/// What a root may not gain from a command: what makes programs run later
/// outside the sandbox (git's configuration and hooks, Claude Code's and
/// Forge's project settings).
pub const GUARDED: &[&str] = &[".git", ".claude", ".forge"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory in MiB: of the whole command where a memory cgroup bounds
    /// it (`memory.max`), and of each process's data segment
    /// (RLIMIT_DATA).
    pub memory_mb: u64,
    /// Processes and threads of the whole command at once (`pids.max`, and
    /// RLIMIT_NPROC counted in the command's own user namespace).
    pub processes: u64,
    /// CPU seconds per process (RLIMIT_CPU).
    pub cpu_seconds: u64,
}

pub const DEFAULT_LIMITS: Limits = Limits { memory_mb: 8192, processes: 1024, cpu_seconds: 3600 };

/// Where no cgroup bounds the totals: few enough processes that all of
/// them at their memory limit still fit in the machine's memory.
pub const FALLBACK_PROCESSES: u64 = 64;

/// This machine's memory in MiB (0 if unknown).
pub fn machine_memory_mb() -> u64 {
    // SAFETY: sysinfo(2) into a zeroed struct.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return 0;
    }
    (info.totalram as u64).saturating_mul(info.mem_unit as u64) / (1024 * 1024)
}

/// The limits commands get when the configuration sets none: with
/// cgroups, [`DEFAULT_LIMITS`] as totals; without a memory cgroup, per
/// process, so few processes and so little memory each that together
/// they stay under the machine's memory.
pub fn default_limits(totals: &Totals) -> Limits {
    if totals.memory {
        return DEFAULT_LIMITS;
    }
    let processes = if totals.pids { DEFAULT_LIMITS.processes } else { FALLBACK_PROCESSES };
    let share = machine_memory_mb() / FALLBACK_PROCESSES.max(1);
    Limits { memory_mb: share.clamp(256, DEFAULT_LIMITS.memory_mb), processes, cpu_seconds: DEFAULT_LIMITS.cpu_seconds }
}

/// Which totals of a command this machine bounds, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Totals {
    /// All its processes and threads together (`pids.max`).
    pub pids: bool,
    /// All its memory together (`memory.max`).
    pub memory: bool,
    /// Where (a cgroup), or why not.
    pub how: String,
    #[serde(skip)]
    pub tree: Option<cgroup::Tree>,
}

/// Places under the home directory never readable by commands, whatever
/// `read_roots` says.
pub const NEVER_READ_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".kube",
];

/// Toolchains and tool settings under the home directory that commands
/// may read by default (where they exist).
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".sdkman",
    ".rbenv",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    "go",
    ".m2",
    ".gradle",
    ".gitconfig",
    ".config/git",
];

/// The toolchains of [`HOME_TOOLCHAINS`] that exist under `home` and may
/// be granted: never one that resolves to the home itself or above it
/// (`~/.cargo -> ~` would open the whole home).
pub fn home_toolchains(home: &Path) -> Vec<PathBuf> {
    let real_home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    HOME_TOOLCHAINS
        .iter()
        .map(|t| home.join(t))
        .filter(|p| p.canonicalize().is_ok_and(|real| !real_home.starts_with(&real)))
        .collect()
}

/// The toolchain entries under `home` that lead to the home or above it,
/// and so are not granted (`doctor` names them).
pub fn refused_toolchains(home: &Path) -> Vec<PathBuf> {
    let granted = home_toolchains(home);
    HOME_TOOLCHAINS.iter().map(|t| home.join(t)).filter(|p| p.exists() && !granted.contains(p)).collect()
}

/// Facts about the machine the daemon learns once at start.
#[derive(Debug, Clone)]
pub struct Host {
    pub home: Option<PathBuf>,
    /// `$FORGE_HOME`: never readable by commands.
    pub forge_home: Option<PathBuf>,
    /// Other places never readable (the daemon socket's directory).
    pub private: Vec<PathBuf>,
    /// Places hidden from commands behind an empty mount: where the
    /// user's sockets live (`$XDG_RUNTIME_DIR`: the session bus, systemd,
    /// agents, this daemon), the system bus, Docker's and X11's sockets,
    /// `$SSH_AUTH_SOCK`.
    pub masked: Vec<PathBuf>,
    /// The daemon's executable (the probes of `forgectl sandbox test` run it).
    pub exe: Option<PathBuf>,
    pub support: Support,
    /// Which totals commands' cgroups bound.
    pub totals: Totals,
}

static HOST: OnceLock<Host> = OnceLock::new();

/// Called once by the daemon at start.
pub fn init(host: Host) {
    let _ = HOST.set(host);
}

/// The host facts, if the daemon gave them (not in unit tests).
pub fn host() -> Option<&'static Host> {
    HOST.get()
}

/// What this machine offers (nothing before [`init`]).
pub fn support() -> Support {
    host().map(|h| h.support).unwrap_or(Support { landlock_abi: 0, user_namespaces: false, fresh_proc: false })
}

/// Which totals this machine bounds (none before [`init`]).
pub fn totals() -> Totals {
    host()
        .map(|h| h.totals.clone())
        .unwrap_or_else(|| Totals { how: "no cgroup (unit tests)".into(), ..Default::default() })
}

/// `[tools.sandbox]` settings that shape commands' confinement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub mode: SandboxMode,
    pub read_roots: Option<Vec<String>>,
    pub write_roots: Vec<String>,
    pub network: NetworkAccess,
    pub limits: Option<Limits>,
    pub pass_env: Vec<String>,
    /// Unix sockets outside the roots commands may connect to.
    pub allow_unix_sockets: Vec<String>,
    /// The project's hooks directory (core.hooksPath, relative to a
    /// root), kept read-only for the git tools when they run hooks.
    pub git_hooks_dir: Option<String>,
    /// Read-only places a session needs beside its roots: a git
    /// session's repository git directory, which its worktree's `.git`
    /// file points into (so `git status` works there).
    pub read_also: Vec<PathBuf>,
    /// A confined hook of the user's: what it reaches beyond a command.
    pub hook: Option<HookReach>,
}

impl Settings {
    pub fn from_config(c: Option<&crate::config::ToolSandboxConfig>) -> Self {
        let Some(c) = c else { return Self::default() };
        let given = c.max_memory_mb.is_some() || c.max_processes.is_some() || c.max_cpu_seconds.is_some();
        Self {
            mode: c.mode.unwrap_or_default(),
            read_roots: c.read_roots.clone(),
            write_roots: c.write_roots.clone().unwrap_or_default(),
            network: c.network.unwrap_or_default(),
            // Unset values take this machine's defaults (see `limits`).
            limits: given.then(|| {
                let d = default_limits(&totals());
                Limits {
                    memory_mb: c.max_memory_mb.unwrap_or(d.memory_mb),
                    processes: c.max_processes.unwrap_or(d.processes),
                    cpu_seconds: c.max_cpu_seconds.unwrap_or(d.cpu_seconds),
                }
            }),
            pass_env: c.pass_env.clone().unwrap_or_default(),
            allow_unix_sockets: c.allow_unix_sockets.clone().unwrap_or_default(),
            git_hooks_dir: None,
            read_also: Vec::new(),
            hook: None,
        }
    }

    /// The limits in force: the configured ones, else this machine's
    /// defaults.
    pub fn limits(&self) -> Limits {
        self.limits.unwrap_or_else(|| default_limits(&totals()))
    }

    /// Whether commands run confined by the kernel: asked for, and the
    /// kernel can.
    pub fn kernel_active(&self) -> bool {
        self.mode == SandboxMode::Kernel && support().kernel()
    }
}

/// `~` and `~/...` against the home directory.
fn expand_home(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    if p == "~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = p.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    let p = PathBuf::from(p);
    p.is_absolute().then_some(p)
}

impl Policy {
    /// The policy for a process working in `roots` (writable), with its
    /// private `tmpdir`; `git_writable` for the git tools, which must
    /// change `.git`.
    pub fn build(settings: &Settings, roots: &[PathBuf], tmpdir: &Path, git_writable: bool) -> Policy {
        let host = host();
        let home = host.and_then(|h| h.home.clone());
        let mut never: Vec<PathBuf> = Vec::new();
        if let Some(h) = &home {
            never.extend(NEVER_READ_IN_HOME.iter().map(|n| h.join(n)));
        }
        let forge_home = host.and_then(|h| h.forge_home.clone());
        if let Some(h) = host {
            // A hook may use Forge's home, its private files hidden (see
            // `hook_reach`); a command never.
            if settings.hook.is_none() {
                never.extend(forge_home.iter().cloned());
            }
            never.extend(h.private.iter().cloned());
        }
        // Other Forge homes (a second daemon's, a test's) where commands
        // could otherwise reach them: in the roots and the places the user
        // opened (the home directory is hidden, /tmp is private).
        let opened = settings.read_roots.iter().flatten().chain(&settings.write_roots);
        let searched: Vec<PathBuf> =
            roots.iter().cloned().chain(opened.filter_map(|r| expand_home(r, home.as_deref()))).collect();
        let stores = forge_homes(&searched);
        never.extend(stores.iter().cloned());
        let never: Vec<PathBuf> = never.into_iter().map(|p| p.canonicalize().unwrap_or(p)).collect();

        let mut read = Vec::new();
        match &settings.read_roots {
            Some(list) => {
                for r in list {
                    if let Some(p) = expand_home(r, home.as_deref()) {
                        grant_around(&p, &never, &mut read);
                    }
                }
            }
            None => {
                // The system, without the home directory; then the
                // toolchains in it.
                let mut hidden = never.clone();
                hidden.extend(home.iter().map(|h| h.canonicalize().unwrap_or_else(|_| h.clone())));
                grant_around(Path::new("/"), &hidden, &mut read);
                if let Some(h) = &home {
                    for p in home_toolchains(h) {
                        grant_around(&p, &never, &mut read);
                    }
                }
            }
        }
        // Read places a private /tmp (or /var/tmp, /dev/shm) must still
        // show: the daemon's executable (the probes run it) and what the
        // user opened by name.
        let mut shown: Vec<PathBuf> = settings
            .read_roots
            .iter()
            .flatten()
            .filter_map(|r| expand_home(r, home.as_deref()))
            .map(|p| p.canonicalize().unwrap_or(p))
            .filter(|p| p.as_path() != Path::new("/"))
            .collect();
        if let Some(exe) = host.and_then(|h| h.exe.as_ref()) {
            read.push(exe.clone());
            shown.push(exe.clone());
        }
        for p in &settings.read_also {
            let p = p.canonicalize().unwrap_or_else(|_| p.clone());
            grant_around(&p, &never, &mut read);
            shown.push(p);
        }

        let mut write = Vec::new();
        for r in roots {
            grant_around(r, &never, &mut write);
        }
        for w in &settings.write_roots {
            if let Some(p) = expand_home(w, home.as_deref()) {
                grant_around(&p, &never, &mut write);
            }
        }
        write.push(tmpdir.to_path_buf());

        // `.git` (a directory, or a worktree's file) and Claude's project
        // settings, which hold hooks: what runs later, outside. The git
        // tools change `.git`, but never its configuration or its hooks
        // (nor the hooks directory a project sets with core.hooksPath).
        let guarded: Vec<String> = if git_writable {
            let mut g: Vec<String> = [".claude", ".git/config", ".git/hooks"].map(String::from).to_vec();
            g.extend(settings.git_hooks_dir.iter().cloned());
            g
        } else {
            [".git", ".claude"].map(String::from).to_vec()
        };
        let mut read_only: Vec<PathBuf> = roots
            .iter()
            .flat_map(|r| guarded.iter().map(move |g| r.join(g)))
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect();
        let mut absent: Vec<PathBuf> = roots
            .iter()
            .flat_map(|r| GUARDED.iter().map(move |g| r.join(g)))
            .filter(|p| std::fs::symlink_metadata(p).is_err())
            .collect();
        // git's hooks directory, where the user's configuration puts it
        // inside the roots: read-only, as `.git` is.
        let (hooks_read_only, hooks_absent) = git_hooks::in_roots(&git_hooks::hooks_dirs(roots), roots);
        for h in hooks_read_only {
            if !read_only.iter().any(|r| h.starts_with(r)) {
                read_only.push(h);
            }
        }
        for h in hooks_absent {
            if !absent.contains(&h) {
                absent.push(h);
            }
        }
        let mut masked: Vec<PathBuf> =
            host.map(|h| h.masked.clone()).unwrap_or_default().into_iter().chain(stores).collect();
        let mut absent_files = Vec::new();
        if let Some(reach) = &settings.hook {
            let homes = hook_reach::settings_homes(home.as_deref(), forge_home.as_deref());
            let added = hook_reach::add(reach, &homes, home.as_deref(), &never);
            read.extend(added.read);
            write.extend(added.write);
            read_only.extend(added.read_only);
            masked.extend(added.masked);
            absent.extend(added.absent);
            absent_files = added.absent_files;
        }
        let unix_sockets = settings
            .allow_unix_sockets
            .iter()
            .filter_map(|s| expand_home(s, home.as_deref()))
            .map(|p| crate::lexical::lexical(&p))
            .collect();
        Policy {
            read,
            write,
            read_only,
            masked,
            network: support().network(settings.network),
            limits: settings.limits(),
            tmpdir: tmpdir.to_path_buf(),
            unix_sockets,
            cgroup: host.and_then(|h| h.totals.tree.clone()),
            shown,
            absent,
            absent_files,
            mount_boundary: support().mount_boundary(),
            landlock_abi: support().landlock_layer(),
        }
    }

    /// Whether a write to `path` (absolute) is granted.
    pub fn may_write(&self, path: &Path) -> bool {
        self.write.iter().any(|w| path.starts_with(w)) && !self.read_only.iter().any(|r| path.starts_with(r))
    }

    /// Whether a read of `path` (absolute) is granted.
    pub fn may_read(&self, path: &Path) -> bool {
        self.read.iter().chain(&self.write).any(|r| path.starts_with(r))
    }
}

/// How long a search for Forge homes under the same trees is reused:
/// every command, hook and git call builds a policy, often several in a
/// row.
const HOMES_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// Directories that hold a Forge store (`forge.db`) in `trees`, looked
/// for a few levels down (bounded: big trees are not walked whole); the
/// answer for the same trees is reused for a few seconds.
pub fn forge_homes(trees: &[PathBuf]) -> Vec<PathBuf> {
    type Found = (Vec<PathBuf>, std::time::Instant, Vec<PathBuf>);
    static LAST: std::sync::Mutex<Option<Found>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((t, at, found)) = last.as_ref()
        && t == trees
        && at.elapsed() < HOMES_FRESH_FOR
    {
        return found.clone();
    }
    let found = search_forge_homes(trees);
    *last = Some((trees.to_vec(), std::time::Instant::now(), found.clone()));
    found
}

fn search_forge_homes(trees: &[PathBuf]) -> Vec<PathBuf> {
    const DEPTH: usize = 4;
    const MAX_ENTRIES: usize = 20_000;
    const SKIP: &[&str] = &[".git", "node_modules", "target", ".venv", "venv", "__pycache__", "dist", "build"];
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut todo: Vec<(PathBuf, usize)> = trees.iter().map(|t| (t.clone(), 0)).collect();
    while let Some((dir, depth)) = todo.pop() {
        if dir.join("forge.db").is_file() {
            found.push(dir.clone());
            continue;
        }
        if depth >= DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return found;
            }
            let skip = e.file_name().to_str().is_none_or(|n| SKIP.contains(&n));
            if !skip && e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push((e.path(), depth + 1));
            }
        }
    }
    found
}

/// Adds `tree` to `out`, or, when a `hidden` place lies inside it, its
/// entries around that place (recursively). A tree inside a hidden place
/// is not added at all.
fn grant_around(tree: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
    if hidden.iter().any(|h| tree.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(&tree)) {
        if tree.exists() && !out.contains(&tree) {
            out.push(tree);
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(&tree) else { return };
    for e in entries.flatten() {
        let path = e.path();
        // The policy travels as JSON: a name that is not UTF-8 is not
        // granted (not readable), rather than failing every command.
        if path.to_str().is_none() {
            continue;
        }
        // A link in the listing is granted as where it leads, which may
        // be a hidden place: resolve it first.
        grant_around(&path, hidden, out);
    }
}

#[cfg(test)]
impl Policy {
    /// A policy of `read` and `write` trees only (`/tmp/forge-cmd-x` its
    /// temporary directory), as the daemon's executable in `/tmp` is
    /// shown: for tests.
    pub(crate) fn of(read: &[&str], write: &[&str]) -> Policy {
        Policy {
            read: read.iter().map(PathBuf::from).collect(),
            write: write.iter().map(PathBuf::from).collect(),
            read_only: Vec::new(),
            masked: Vec::new(),
            network: NetworkAccess::Deny,
            limits: DEFAULT_LIMITS,
            tmpdir: PathBuf::from("/tmp/forge-cmd-x"),
            unix_sockets: Vec::new(),
            cgroup: None,
            shown: vec![PathBuf::from("/tmp/build/forged")],
            absent: Vec::new(),
            absent_files: Vec::new(),
            mount_boundary: false,
            landlock_abi: 6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_with_a_hidden_place_is_granted_around_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        for p in ["a/.ssh", "a/src", "b"] {
            std::fs::create_dir_all(d.join(p)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(d.join("a/notes"), "x").unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        grant_around(&d, &[d.join("a/.ssh")], &mut out);
        out.sort();
        assert_eq!(out, vec![d.join("a/notes"), d.join("a/src"), d.join("b")]);
        let mut inside = Vec::new();
        grant_around(&d.join("a/.ssh"), &[d.join("a/.ssh")], &mut inside);
        assert!(inside.is_empty(), "a tree inside a hidden place is never granted");
    }

    #[test]
    fn forge_stores_in_the_roots_are_found_and_never_granted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        for p in ["proj/tests/forge-home", "proj/node_modules/x/store", "proj/src"] {
            std::fs::create_dir_all(d.join(p)).unwrap_or_else(|e| panic!("{e}"));
        }
        for p in ["proj/tests/forge-home/forge.db", "proj/node_modules/x/store/forge.db"] {
            std::fs::write(d.join(p), "SQLite").unwrap_or_else(|e| panic!("{e}"));
        }
        let root = d.join("proj");
        assert_eq!(forge_homes(std::slice::from_ref(&root)), vec![root.join("tests/forge-home")]);
        let p = Policy::build(&Settings::default(), std::slice::from_ref(&root), &d.join("tmp"), false);
        assert!(!p.may_write(&root.join("tests/forge-home/forge.db")) && !p.may_read(&root.join("tests/forge-home/x")));
        assert!(p.may_write(&root.join("src/main.rs")));
        assert!(p.masked.contains(&root.join("tests/forge-home")), "hidden behind an empty mount");
    }

    #[test]
    fn a_toolchain_link_to_the_home_or_above_is_never_granted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}")).join("home");
        std::fs::create_dir_all(home.join(".rustup")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&home, home.join(".cargo")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/", home.join("go")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(home_toolchains(&home), vec![home.join(".rustup")]);
        assert_eq!(refused_toolchains(&home), vec![home.join(".cargo"), home.join("go")]);
    }

    #[test]
    fn writes_stop_at_read_only_git() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(d.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        let tmp = d.join("tmp");
        let p = Policy::build(&Settings::default(), std::slice::from_ref(&d), &tmp, false);
        assert!(p.may_write(&d.join("src/main.rs")));
        assert!(!p.may_write(&d.join(".git/config")));
        assert!(p.may_write(&tmp.join("x")));
        assert!(!p.may_write(Path::new("/etc/passwd")));
        assert!(p.may_read(Path::new("/etc/passwd")));
        let g = Policy::build(&Settings::default(), std::slice::from_ref(&d), &tmp, true);
        assert!(g.may_write(&d.join(".git/config")), "the git tools may change .git");
    }
}
