//! The sandbox every path a tool touches goes through: allowed roots
//! (default: the session's working directory), no `..`, no symbolic links
//! anywhere on the path (absolute paths are fine inside the roots), and
//! deny patterns (the user's plus defaults for secrets).

use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::DenialReason;

/// Denied even if the user lists nothing: secrets and keys, and
/// dependency sources (`node_modules`: a search or glob there drowns the
/// project's own files). `[tools.sandbox] lift_default_denies` names any
/// the user wants back.
pub const DEFAULT_DENIES: &[&str] = &[
    "**/.ssh/**",
    "**/.gnupg/**",
    "**/id_rsa*",
    "**/*.pem",
    "**/*.key",
    "**/.env*",
    "**/secrets/**",
    "**/node_modules/**",
];

/// The working directory resolved, the roots under it (absolute; the
/// directory itself when none is given), and the paths a client may give
/// for them when they differ (a symlinked directory).
fn resolve_roots(given_cwd: &Path, roots: &[String]) -> (PathBuf, Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
    let cwd = given_cwd.canonicalize().unwrap_or_else(|_| given_cwd.to_path_buf());
    let mut aliases: Vec<(PathBuf, PathBuf)> = roots
        .iter()
        .filter_map(|r| Some((given_cwd.join(r), cwd.join(r).canonicalize().ok()?)))
        .filter(|(given, real)| given != real)
        .collect();
    if given_cwd != cwd {
        aliases.push((given_cwd.to_path_buf(), cwd.clone()));
    }
    let mut root_paths: Vec<PathBuf> =
        roots.iter().map(|r| cwd.join(r)).filter_map(|r| r.canonicalize().ok()).collect();
    if root_paths.is_empty() {
        root_paths.push(cwd.clone());
    }
    (cwd, root_paths, aliases)
}

/// `[tools.sandbox]` with its defaults filled in.
struct Settings {
    roots: Vec<String>,
    denied: Vec<String>,
    defaults: bool,
    /// Default patterns that do not apply.
    lifted: Vec<String>,
    absolute: bool,
}

impl From<Option<&crate::config::ToolSandboxConfig>> for Settings {
    fn from(config: Option<&crate::config::ToolSandboxConfig>) -> Self {
        Settings {
            roots: config.and_then(|s| s.allowed_roots.clone()).unwrap_or_default(),
            denied: config.and_then(|s| s.denied_patterns.clone()).unwrap_or_default(),
            defaults: config.and_then(|s| s.include_default_denies).unwrap_or(true),
            lifted: config.and_then(|s| s.lift_default_denies.clone()).unwrap_or_default(),
            absolute: config.and_then(|s| s.allow_absolute).unwrap_or(false),
        }
    }
}

/// The configured deny patterns, then the defaults if they are on (but
/// those `lifted`).
fn pattern_list(denied: &[String], include_defaults: bool, lifted: &[String]) -> Vec<String> {
    let mut patterns: Vec<String> = denied.to_vec();
    if include_defaults {
        patterns.extend(DEFAULT_DENIES.iter().filter(|d| !lifted.iter().any(|l| l == *d)).map(|s| s.to_string()));
    }
    patterns
}

#[derive(Debug, Clone)]
pub struct Sandbox {
    cwd: PathBuf,
    roots: Vec<PathBuf>,
    /// (as given, canonical) for roots whose given path is not canonical.
    aliases: Vec<(PathBuf, PathBuf)>,
    patterns: Vec<String>,
    denied: GlobSet,
    allow_absolute: bool,
    /// How commands are confined (`[tools.sandbox]` mode, network, limits).
    commands: crate::confine::Settings,
    /// `[tools.git] run_hooks`.
    git_hooks: bool,
}

impl Sandbox {
    /// `roots` relative to `cwd`; empty means `cwd` alone.
    pub fn new(cwd: &Path, roots: &[String], denied: &[String], include_defaults: bool, allow_absolute: bool) -> Self {
        Self::with_patterns(cwd, roots, pattern_list(denied, include_defaults, &[]), allow_absolute)
    }

    fn with_patterns(cwd: &Path, roots: &[String], patterns: Vec<String>, allow_absolute: bool) -> Self {
        let (cwd, root_paths, aliases) = resolve_roots(cwd, roots);
        let mut builder = GlobSetBuilder::new();
        let mut kept = Vec::new();
        for p in patterns {
            if let Ok(g) = Glob::new(&p) {
                builder.add(g);
                kept.push(p);
            } else {
                tracing::warn!(pattern = %p, "ignoring an invalid deny pattern");
            }
        }
        let denied = builder.build().unwrap_or_else(|_| GlobSet::empty());
        Self {
            cwd,
            roots: root_paths,
            aliases,
            patterns: kept,
            denied,
            allow_absolute,
            commands: Default::default(),
            git_hooks: false,
        }
    }

    /// The sandbox of a session working in `cwd`, as `[tools.sandbox]`
    /// (and `[tools.git]`) say.
    pub fn for_session(cwd: &Path, tools: &crate::config::ToolsConfig) -> Self {
        let config = tools.sandbox.as_ref();
        let s = Settings::from(config);
        let patterns = pattern_list(&s.denied, s.defaults, &s.lifted);
        let mut sandbox = Sandbox::with_patterns(cwd, &s.roots, patterns, s.absolute);
        sandbox.commands = crate::confine::Settings::from_config(config);
        sandbox.git_hooks = tools.git.as_ref().and_then(|g| g.run_hooks).unwrap_or(false);
        sandbox
    }

    /// Lets commands read `dir` too (a git session's repository git
    /// directory), never write it.
    pub fn read_also(&mut self, dir: PathBuf) {
        self.commands.read_also.push(dir);
    }

    /// Confines commands as `settings` say (the escape suite's probes).
    pub fn set_command_settings(&mut self, settings: crate::confine::Settings) {
        self.commands = settings;
    }

    /// How commands are confined.
    pub fn command_settings(&self) -> &crate::confine::Settings {
        &self.commands
    }

    /// The kernel sandbox for a process started in this session (with its
    /// private `tmpdir`), or `None` where commands are not confined
    /// (`paths-only`, a kernel without Landlock, no supervisor).
    pub fn confinement(&self, tmpdir: &Path, git_writable: bool) -> Option<crate::supervisor::Confinement> {
        if !self.commands.kernel_active() || !crate::supervisor::enabled() {
            return None;
        }
        let policy = crate::confine::Policy::build(&self.commands, &self.roots, tmpdir, git_writable);
        Some(crate::supervisor::Confinement::new(policy))
    }

    /// The kernel sandbox for a hook of the user's: a command's, plus
    /// what `reach` says the hook needs of its own (see
    /// [`crate::confine::HookReach`]).
    pub fn hook_confinement(
        &self,
        tmpdir: &Path,
        reach: crate::confine::HookReach,
    ) -> Option<crate::supervisor::Confinement> {
        if !self.commands.kernel_active() || !crate::supervisor::enabled() {
            return None;
        }
        let settings = crate::confine::Settings { hook: Some(reach), ..self.commands.clone() };
        let policy = crate::confine::Policy::build(&settings, &self.roots, tmpdir, false);
        Some(crate::supervisor::Confinement::new(policy))
    }

    /// The kernel sandbox for the git tools: `.git` writable but for its
    /// configuration and hooks (and `hooks_dir`, the project's
    /// core.hooksPath, when hooks run).
    pub fn git_confinement(&self, tmpdir: &Path, hooks_dir: Option<String>) -> Option<crate::supervisor::Confinement> {
        if !self.commands.kernel_active() || !crate::supervisor::enabled() {
            return None;
        }
        let settings = crate::confine::Settings { git_hooks_dir: hooks_dir, ..self.commands.clone() };
        let policy = crate::confine::Policy::build(&settings, &self.roots, tmpdir, true);
        Some(crate::supervisor::Confinement::new(policy))
    }

    /// Whether the git tools run the repository's hooks
    /// (`[tools.git] run_hooks`).
    pub fn git_hooks(&self) -> bool {
        self.git_hooks
    }

    /// The roots (absolute) and deny patterns a session's sandbox has, to
    /// describe them: without compiling the patterns, which costs memory.
    pub fn outline(cwd: &Path, config: Option<&crate::config::ToolSandboxConfig>) -> (Vec<PathBuf>, Vec<String>) {
        let s = Settings::from(config);
        let (_, roots, _) = resolve_roots(cwd, &s.roots);
        (roots, pattern_list(&s.denied, s.defaults, &s.lifted))
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The directories the session may work in (absolute).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The sandbox's rules, for `introspect` and error messages.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "roots": self.roots,
            "denied_patterns": self.patterns,
            "allow_absolute": self.allow_absolute,
            "absolute_paths": "accepted inside the roots, as their relative form",
            "symlinks": "denied in every component of a path",
            "parent_dir": "`..` is denied",
            "commands": {
                "confined": self.commands.kernel_active(),
                "mode": match self.commands.mode {
                    crate::config::SandboxMode::Kernel => "kernel",
                    crate::config::SandboxMode::PathsOnly => "paths-only",
                },
                "writable": "the roots and $TMPDIR (.git read-only)",
                "network": self.commands.network.word(),
                "outside": "run_command with \"sandbox\": false asks the user first",
            },
        })
    }

    /// Resolves `path` for writing: as [`Sandbox::resolve`], and never
    /// inside a `.git` directory or a bare repository's (its configuration
    /// and hooks run programs later, outside any sandbox).
    pub fn resolve_write(&self, path: &str) -> Result<PathBuf, DenialReason> {
        let full = self.resolve(path)?;
        let inside = self.roots.iter().find_map(|r| full.strip_prefix(r).ok()).unwrap_or(&full);
        if inside.components().any(|c| c.as_os_str() == ".git") || crate::git_guard::in_bare_git_dir(&full) {
            return Err(DenialReason::GitInternals(path.to_string()));
        }
        Ok(full)
    }

    /// Resolves `path` for reading or writing, or says which rule denies it.
    /// Every existing component is checked not to be a symbolic link, so a
    /// link cannot lead outside the roots.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, DenialReason> {
        let p = Path::new(path);
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(DenialReason::ParentComponent(path.to_string()));
        }
        // An absolute path inside the roots is the same as its relative
        // form (models trained on other agents send them); one outside is
        // refused below, naming the roots so the model can correct itself.
        let full = if p.is_absolute() {
            match self.aliases.iter().find_map(|(given, real)| Some(real.join(p.strip_prefix(given).ok()?))) {
                Some(real) => real,
                None => p.to_path_buf(),
            }
        } else {
            self.cwd.join(p)
        };
        let Some(root) = self.roots.iter().find(|r| full.starts_with(r)) else {
            return Err(self.outside_roots(path));
        };
        // No symbolic link from the root down, the last component included.
        let mut walk = root.clone();
        if let Ok(rest) = full.strip_prefix(root) {
            for c in rest.components() {
                walk.push(c);
                if let Ok(meta) = std::fs::symlink_metadata(&walk)
                    && meta.file_type().is_symlink()
                {
                    return Err(DenialReason::Symlink { path: path.to_string(), link: walk.display().to_string() });
                }
            }
        }
        let relative = full.strip_prefix(root).unwrap_or(&full);
        for candidate in [full.as_path(), relative] {
            let matches = self.denied.matches(candidate);
            if let Some(i) = matches.first() {
                return Err(DenialReason::Denied { path: path.to_string(), pattern: self.patterns[*i].clone() });
            }
        }
        Ok(full)
    }
}

impl Sandbox {
    /// Whether a path found by walking a resolved directory (links not
    /// followed) matches a deny pattern: the cheap check for walkers.
    pub fn is_denied(&self, full: &Path) -> bool {
        let root = self.roots.iter().find(|r| full.starts_with(r));
        let relative = root.and_then(|r| full.strip_prefix(r).ok()).unwrap_or(full);
        !self.denied.matches(full).is_empty() || !self.denied.matches(relative).is_empty()
    }

    /// Opens a resolved path for reading without following a symbolic link
    /// at its end, then checks what was actually opened: still under a root
    /// (a link swapped in after `resolve` is caught here) and not a hard
    /// link, whose other names may lie outside the roots.
    pub fn open_checked(&self, path: &Path, shown: &str) -> Result<std::fs::File, OpenError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                OpenError::Denied(DenialReason::Symlink { path: shown.to_string(), link: path.display().to_string() })
            } else {
                OpenError::Io(e)
            }
        })?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if meta.is_file() && meta.nlink() > 1 {
            return Err(OpenError::Denied(DenialReason::HardLink { path: shown.to_string() }));
        }
        self.check_real_location(&file, shown)?;
        Ok(file)
    }

    /// Where an opened file or directory really is (as the kernel sees its
    /// descriptor) must be under a root: a link swapped in after `resolve`
    /// is caught here.
    fn check_real_location(&self, file: &std::fs::File, shown: &str) -> Result<(), OpenError> {
        use std::os::fd::AsRawFd;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(OpenError::Io)?;
        if !self.roots.iter().any(|r| real.starts_with(r)) {
            return Err(OpenError::Denied(self.outside_roots(shown)));
        }
        Ok(())
    }

    fn outside_roots(&self, shown: &str) -> DenialReason {
        let roots = self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ");
        DenialReason::OutsideRoots { path: shown.to_string(), roots }
    }

    /// Opens the directory a file is to be written in, without following a
    /// link at its end, and checks where it really is, as `open_checked`
    /// does for files. Files are then created and renamed through it, so a
    /// directory swapped for a link meanwhile cannot redirect the write.
    pub fn open_dir_checked(&self, dir: &Path, shown: &str) -> Result<CheckedDir, OpenError> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir)
            .map_err(|e| dir_open_error(e, shown, dir))?;
        self.check_real_location(&file, shown)?;
        Ok(CheckedDir { dir: file })
    }

    /// Like `std::fs::create_dir_all` for a resolved directory, but walking
    /// down from its root one component at a time without following links,
    /// so a directory swapped for a link meanwhile cannot make it create
    /// anything outside the roots. Returns the directory, checked.
    pub fn create_dir_all_checked(&self, dir: &Path, shown: &str) -> Result<CheckedDir, OpenError> {
        let Some(root) = self.roots.iter().find(|r| dir.starts_with(r)) else {
            return Err(OpenError::Denied(self.outside_roots(shown)));
        };
        let mut current = self.open_dir_checked(root, shown)?;
        let rest = dir.strip_prefix(root).unwrap_or(Path::new(""));
        for part in rest.components() {
            let Component::Normal(name) = part else {
                return Err(OpenError::Denied(DenialReason::ParentComponent(shown.to_string())));
            };
            current = current.subdir(name, true).map_err(|e| dir_open_error(e, shown, dir))?;
        }
        Ok(current)
    }
}

/// A directory that could not be opened: a link where a directory was
/// expected is a sandbox denial, anything else an I/O error.
fn dir_open_error(e: std::io::Error, shown: &str, dir: &Path) -> OpenError {
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
        OpenError::Denied(DenialReason::Symlink { path: shown.to_string(), link: dir.display().to_string() })
    } else {
        OpenError::Io(e)
    }
}

/// A directory checked to lie under a root; names are single components.
pub struct CheckedDir {
    dir: std::fs::File,
}

fn c_name(name: &std::ffi::OsStr) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'/') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"));
    }
    std::ffi::CString::new(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))
}

impl CheckedDir {
    fn fd(&self) -> libc::c_int {
        use std::os::fd::AsRawFd;
        self.dir.as_raw_fd()
    }

    /// The directory `name` in this one (created first if `create`), not
    /// following a link.
    pub fn subdir(&self, name: &std::ffi::OsStr, create: bool) -> std::io::Result<CheckedDir> {
        use std::os::fd::FromRawFd;
        let name = c_name(name)?;
        // SAFETY: a valid directory fd and a NUL-terminated name.
        let mut made = false;
        if create {
            if unsafe { libc::mkdirat(self.fd(), name.as_ptr(), 0o777) } == 0 {
                made = true;
            } else {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: as above; the new fd is owned by the returned File alone.
        let fd = unsafe { libc::openat(self.fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let dir = unsafe { std::fs::File::from_raw_fd(fd) };
        if made {
            // The daemon's own umask is 077; the project's directories get
            // the user's.
            use std::os::unix::fs::PermissionsExt;
            dir.set_permissions(std::fs::Permissions::from_mode(crate::user_mode(0o777)))?;
        }
        Ok(CheckedDir { dir })
    }

    /// Creates `name` here for writing; fails if anything has that name.
    pub fn create_new(&self, name: &std::ffi::OsStr, mode: u32) -> std::io::Result<std::fs::File> {
        use std::os::fd::FromRawFd;
        let name = c_name(name)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid directory fd and a NUL-terminated name; the new
        // fd is owned by the returned File alone.
        let fd = unsafe { libc::openat(self.fd(), name.as_ptr(), flags, mode as libc::c_uint) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    }

    /// Renames `from` to `to`, both in this directory.
    pub fn rename(&self, from: &std::ffi::OsStr, to: &std::ffi::OsStr) -> std::io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // SAFETY: valid fds and NUL-terminated names.
        if unsafe { libc::renameat(self.fd(), from.as_ptr(), self.fd(), to.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The permission bits of `name` here (not following a link).
    pub fn mode_of(&self, name: &std::ffi::OsStr) -> Option<u32> {
        let name = c_name(name).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid fd, a NUL-terminated name, and room for the result.
        let rc = unsafe { libc::fstatat(self.fd(), name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            return None;
        }
        // SAFETY: fstatat succeeded, so it filled `st`.
        Some(unsafe { st.assume_init() }.st_mode & 0o7777)
    }

    /// Writes `content` to a new file `tmp` here with `mode`, then renames
    /// it over `name`: readers see the old file or the new, never half.
    pub fn replace(
        &self,
        name: &std::ffi::OsStr,
        tmp: &std::ffi::OsStr,
        content: &[u8],
        mode: u32,
    ) -> std::io::Result<()> {
        self.stage(tmp, content, mode)?;
        self.rename(tmp, name).inspect_err(|_| {
            let _ = self.remove(tmp);
        })
    }

    /// Writes `content` to a new file `tmp` here with exactly `mode`.
    pub fn stage(&self, tmp: &std::ffi::OsStr, content: &[u8], mode: u32) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        // A leftover of an earlier run would make the create fail.
        let _ = self.remove(tmp);
        let written = self.create_new(tmp, mode).and_then(|mut f| {
            f.write_all(content)?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))
        });
        written.inspect_err(|_| {
            let _ = self.remove(tmp);
        })
    }

    /// Removes the file `name` from this directory.
    pub fn remove(&self, name: &std::ffi::OsStr) -> std::io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a valid fd and a NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd(), name.as_ptr(), 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Denied(DenialReason),
    #[error("{0}")]
    Io(std::io::Error),
}

impl OpenError {
    /// A denial stays a sandbox violation; an I/O error becomes what `io`
    /// makes of it (each tool words its own).
    pub fn into_tool_error(self, io: impl FnOnce(std::io::Error) -> super::ToolError) -> super::ToolError {
        match self {
            OpenError::Denied(d) => super::ToolError::SandboxViolation(d),
            OpenError::Io(e) => io(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(dir: &Path) -> Sandbox {
        Sandbox::new(dir, &[], &[], true, false)
    }

    #[test]
    fn an_absolute_path_inside_the_roots_is_its_relative_form_even_through_a_linked_cwd() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&real, dir.path().join("linked")).unwrap_or_else(|e| panic!("{e}"));
        let canonical = real.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        for cwd in [real.clone(), dir.path().join("linked")] {
            let s = Sandbox::new(&cwd, &[], &[], true, false);
            let want = s.resolve("src/main.rs").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(want, canonical.join("src/main.rs"));
            for abs in [canonical.join("src/main.rs"), cwd.join("src/main.rs")] {
                assert_eq!(s.resolve(&abs.display().to_string()).ok(), Some(want.clone()), "{}", abs.display());
            }
            assert!(matches!(
                s.resolve(&canonical.join(".env").display().to_string()),
                Err(DenialReason::Denied { .. })
            ));
        }
    }

    #[test]
    fn dependency_sources_are_denied_by_default_and_can_be_lifted_alone() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let tools = |sandbox: &str| -> crate::config::ToolsConfig {
            toml::from_str(&format!("[sandbox]\n{sandbox}")).unwrap_or_else(|e| panic!("{e}"))
        };
        let s = Sandbox::for_session(dir.path(), &tools(""));
        assert!(matches!(s.resolve("web/node_modules/left-pad/index.js"), Err(DenialReason::Denied { .. })));
        assert!(s.is_denied(&dir.path().join("node_modules/x.js")), "glob and search skip them too");
        let lifted = Sandbox::for_session(dir.path(), &tools("lift_default_denies = [\"**/node_modules/**\"]"));
        assert!(lifted.resolve("web/node_modules/left-pad/index.js").is_ok());
        assert!(matches!(lifted.resolve(".env"), Err(DenialReason::Denied { .. })), "the other defaults stay");
    }

    #[test]
    fn escapes_are_denied_with_the_rule_that_denied_them() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("sub")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub/link")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("last"))
            .unwrap_or_else(|e| panic!("{e}"));
        let s = sandbox(dir.path());
        assert!(matches!(s.resolve("../x"), Err(DenialReason::ParentComponent(_))));
        assert!(matches!(s.resolve("sub/../../x"), Err(DenialReason::ParentComponent(_))));
        let outside_msg = s.resolve("/etc/passwd").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            outside_msg.contains("outside the allowed roots")
                && outside_msg
                    .contains(&dir.path().canonicalize().map(|p| p.display().to_string()).unwrap_or_default()),
            "{outside_msg}"
        );
        assert!(matches!(s.resolve("sub/link/secret.txt"), Err(DenialReason::Symlink { .. })), "link in the middle");
        assert!(matches!(s.resolve("last"), Err(DenialReason::Symlink { .. })), "link as the last component");
        assert!(matches!(s.resolve(".env"), Err(DenialReason::Denied { .. })));
        assert!(matches!(s.resolve("keys/server.pem"), Err(DenialReason::Denied { .. })));
        assert!(s.resolve("sub/ok.txt").is_ok());
        let with_abs = Sandbox::new(dir.path(), &[], &[], true, true);
        assert!(matches!(with_abs.resolve("/proc/self/root/etc/passwd"), Err(DenialReason::OutsideRoots { .. })));
        let msg = s.resolve("secrets/a").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("**/secrets/**"), "{msg}");
    }

    #[test]
    fn what_is_opened_is_checked_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "s").unwrap_or_else(|e| panic!("{e}"));
        let s = sandbox(dir.path());
        // Resolved while it was a plain file, then swapped for a link.
        std::fs::write(dir.path().join("f"), "ok").unwrap_or_else(|e| panic!("{e}"));
        let resolved = s.resolve("f").unwrap_or_else(|e| panic!("{e}"));
        assert!(s.open_checked(&resolved, "f").is_ok());
        std::fs::remove_file(&resolved).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&secret, &resolved).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(s.open_checked(&resolved, "f"), Err(OpenError::Denied(DenialReason::Symlink { .. }))));
        // A hard link to a file elsewhere.
        let hard = dir.path().join("hard");
        if std::fs::hard_link(&secret, &hard).is_ok() {
            assert!(matches!(s.open_checked(&hard, "hard"), Err(OpenError::Denied(DenialReason::HardLink { .. }))));
        }
        // Opened for real outside the roots (as through /proc/self/root).
        let other = outside.path().join("other");
        std::fs::write(&other, "o").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(s.open_checked(&other, "x"), Err(OpenError::Denied(DenialReason::OutsideRoots { .. }))));
    }

    #[test]
    fn a_checked_directory_keeps_writes_where_it_was_checked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let s = sandbox(dir.path());
        std::fs::create_dir(dir.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
        let checked = s.open_dir_checked(&dir.path().join("d"), "d").unwrap_or_else(|e| panic!("{e}"));
        // The directory is swapped for a link outside after the check.
        std::fs::rename(dir.path().join("d"), dir.path().join("moved")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), dir.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
        checked.replace("f".as_ref(), ".f.tmp".as_ref(), b"x", 0o640).unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.path().join("moved/f").exists(), "written in the directory that was checked");
        assert_eq!(std::fs::read_dir(outside.path()).map(|d| d.count()).unwrap_or(0), 0, "nothing outside");
        assert_eq!(checked.mode_of("f".as_ref()), Some(0o640));
        // Opening through the link is refused.
        assert!(matches!(s.open_dir_checked(&dir.path().join("d"), "d"), Err(OpenError::Denied(_))));
    }

    #[test]
    fn missing_directories_are_made_inside_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let s = sandbox(dir.path());
        let made = s.create_dir_all_checked(&s.resolve("a/b/c").unwrap_or_else(|e| panic!("{e}")), "a/b/c");
        assert!(made.is_ok() && dir.path().join("a/b/c").is_dir());
        let target = s.resolve("l/x").unwrap_or_else(|e| panic!("{e}"));
        // `l` becomes a link outside after the path was resolved.
        std::os::unix::fs::symlink(outside.path(), dir.path().join("l")).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(s.create_dir_all_checked(&target, "l/x"), Err(OpenError::Denied(_))));
        assert_eq!(std::fs::read_dir(outside.path()).map(|d| d.count()).unwrap_or(0), 0, "nothing made outside");
    }
}
