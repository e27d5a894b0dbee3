//! The guard of the repositories under a session's roots. A command may
//! set one up anywhere there (`git init sub`, a bare layout, a `.git`
//! file that sends git elsewhere); the user's own `git status` in it, or
//! a shell prompt that runs git, would then run whatever its
//! configuration names, outside the sandbox. Directories made later
//! cannot be mounted read-only in advance, so the guard looks after each
//! command at the repositories it touched and takes out what it added
//! that runs a program: settings that name one, hooks, and pointers that
//! send git outside the roots. What was there before stays (it is the
//! user's); what was taken out is said.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::lexical::lexical;

use super::repair::{check_hooks, check_path_hooks, put_back, repair_config};
use super::seen::{CONFIGS, Held, Program, Seen};

/// Names worth a look: a repository's own files and directories.
const NAMES: [&str; 8] = [".git", "HEAD", "config", "config.worktree", "commondir", "objects", "refs", "hooks"];
/// Parts of a git dir that hold data, not settings or programs: not
/// walked for the repositories (submodules, worktrees) inside it.
const DATA: [&str; 5] = ["objects", "refs", "logs", "lfs", "info"];
/// Pointers followed from one to the next at most this deep.
const MAX_HOPS: usize = 4;

/// Where git could find something to run, after a path changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Spot {
    /// A git dir: `.git`, a bare layout, a submodule's directory.
    Dir(PathBuf),
    /// A `.git` file or link that tells git where its git dir is.
    Pointer(PathBuf),
}

/// What a command left that git would have run, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    pub path: PathBuf,
    pub what: String,
}

impl std::fmt::Display for Undone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

/// Whether a walk should hand `path` to [`Guard::spots_of`]: a
/// repository's own name, or a file in a `hooks` directory.
pub fn worth_a_look(path: &Path) -> bool {
    let named = |p: &Path, names: &[&str]| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| names.contains(&n));
    named(path, &NAMES) || path.parent().is_some_and(|p| named(p, &["hooks"]))
}

/// The git dir whose own file `path` is (its config, `HEAD`, a hook), if
/// git may take it for one.
fn own_file_of(path: &Path) -> Option<&Path> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let parent = path.parent()?;
    if NAMES[1..].contains(&name) && looks_like_git_dir(parent) {
        return Some(parent);
    }
    parent.file_name().filter(|n| *n == "hooks").and(parent.parent()).filter(|d| looks_like_git_dir(d))
}

/// Whether `path` is a bare layout's own file (its config, `HEAD`, a
/// hook): the file tools write none, as they write nothing in `.git`.
pub fn in_bare_git_dir(path: &Path) -> bool {
    own_file_of(path).is_some()
}

/// Whether git may take `dir` for a git dir: `HEAD`, and objects of its
/// own or another's through `commondir`. Looser than git's discovery (an
/// executable file passes for `objects` there), never stricter.
fn looks_like_git_dir(dir: &Path) -> bool {
    let has = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    has("HEAD") && (has("objects") || has("commondir"))
}

/// The path a `.git` file (`gitdir: PATH`) or a `commondir` names, read as
/// git reads it: all of the file but the prefix and the line ends at its
/// end. `None` where git would not follow it; an error for a path with
/// control characters, which the guard does not try to mirror.
fn pointed(data: &[u8], gitfile: bool) -> Result<Option<PathBuf>, String> {
    use std::os::unix::ffi::OsStrExt;
    let rest = match gitfile {
        true => match data.strip_prefix(b"gitdir: ") {
            Some(rest) => rest,
            None => return Ok(None),
        },
        false => data,
    };
    let end = rest.iter().rposition(|b| *b != b'\n' && *b != b'\r').map_or(0, |i| i + 1);
    let path = &rest[..end];
    if path.is_empty() {
        return Ok(None);
    }
    if path.iter().any(|b| b.is_ascii_control()) {
        return Err("names a path with control characters".into());
    }
    Ok(Some(PathBuf::from(std::ffi::OsStr::from_bytes(path))))
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Guard {
    /// The roots without links (what the guard compares and walks), each
    /// with its name as given (what the tracker's notes start with).
    roots: Vec<PathBuf>,
    given: Vec<PathBuf>,
    /// What each git dir held when last looked at.
    known: BTreeMap<PathBuf, Seen>,
    /// What each `.git` file or link said when last looked at.
    pointers: BTreeMap<PathBuf, Held>,
}

impl Guard {
    pub fn new(roots: &[PathBuf]) -> Guard {
        let given = roots.to_vec();
        let roots = roots.iter().map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone())).collect();
        Guard { roots, given, known: BTreeMap::new(), pointers: BTreeMap::new() }
    }

    /// What the guard knows, to be read back by [`Guard::restored`] after a
    /// crash cut a command short (`None`: a path JSON cannot hold).
    pub fn saved(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(self).ok()
    }

    /// A guard as [`Guard::saved`] left it: the next [`Guard::check`]
    /// undoes what was added since, as after any command.
    pub fn restored(saved: &[u8]) -> Option<Guard> {
        serde_json::from_slice(saved).ok()
    }

    /// The roots as given (what undone paths are shown relative to).
    pub fn given_roots(&self) -> &[PathBuf] {
        &self.given
    }

    /// A root's own `.git` (or what lies in it): read-only to commands,
    /// and the user's; the guard leaves it alone.
    pub fn is_roots_own(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r.join(".git")))
    }

    /// Where to look after `path` (a file or directory under the roots)
    /// was made, changed or removed.
    pub fn spots_of(&self, path: &Path) -> Vec<Spot> {
        // A root named through a link: the same path under its real name.
        let renamed = self.given.iter().zip(&self.roots).find_map(|(g, r)| Some(r.join(path.strip_prefix(g).ok()?)));
        let path = renamed.as_deref().unwrap_or(path);
        let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) else { return Vec::new() };
        if self.is_roots_own(path) {
            return Vec::new();
        }
        let mut at = root.clone();
        for c in path.strip_prefix(root).unwrap_or(path).components() {
            at.push(c);
            if c.as_os_str() == ".git" {
                return match std::fs::symlink_metadata(&at) {
                    Ok(m) if m.is_dir() => vec![Spot::Dir(at)],
                    Ok(_) => vec![Spot::Pointer(at)],
                    // Gone: what was known under it is forgotten.
                    Err(_) => vec![Spot::Dir(at)],
                };
            }
        }
        own_file_of(path)
            .filter(|dir| dir.starts_with(root))
            .map(|dir| Spot::Dir(dir.to_path_buf()))
            .into_iter()
            .collect()
    }

    /// Every spot under the roots (a walk of them all: for the sandbox's
    /// own test, and where no record of the tree is kept).
    pub fn find(&self) -> Vec<Spot> {
        let found = std::sync::Mutex::new(Vec::new());
        for root in &self.roots {
            ignore::WalkBuilder::new(root)
                .standard_filters(false)
                .hidden(false)
                .follow_links(false)
                .build_parallel()
                .run(|| {
                    Box::new(|entry| {
                        let Ok(entry) = entry else { return ignore::WalkState::Continue };
                        if worth_a_look(entry.path()) {
                            found.lock().unwrap_or_else(|p| p.into_inner()).push(entry.path().to_path_buf());
                        }
                        // What lies in a `.git` is looked at by the spot.
                        match entry.file_name() == ".git" {
                            true => ignore::WalkState::Skip,
                            false => ignore::WalkState::Continue,
                        }
                    })
                });
        }
        let paths = found.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut spots: Vec<Spot> = paths.iter().flat_map(|p| self.spots_of(p)).collect();
        spots.sort();
        spots.dedup();
        spots
    }

    /// The directories of a `.git` directory to watch for changes (its
    /// own, `hooks`, and those of the repositories inside it), data left out.
    pub fn dirs_to_watch(dir: &Path) -> Vec<PathBuf> {
        let mut out = vec![dir.to_path_buf()];
        let mut i = 0;
        while i < out.len() && out.len() < 1024 {
            let Ok(entries) = std::fs::read_dir(&out[i]) else {
                i += 1;
                continue;
            };
            for e in entries.flatten() {
                let data = e.file_name().to_str().is_some_and(|n| DATA.contains(&n));
                if !data && e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
            i += 1;
        }
        out
    }

    /// Takes what `spots`, and every repository known, hold now as the
    /// user's (before a command: what changed since the last one was not
    /// its doing).
    pub fn learn(&mut self, spots: impl IntoIterator<Item = Spot>) {
        for spot in spots.into_iter().collect::<std::collections::BTreeSet<_>>() {
            match spot {
                Spot::Dir(dir) => self.learn_dir(&dir, 0),
                Spot::Pointer(p) => self.learn_pointer(&p, 0),
            }
        }
        for d in self.changed_known() {
            self.learn_dir(&d, 0);
        }
        for p in self.pointers.keys().cloned().collect::<Vec<_>>() {
            self.learn_pointer(&p, 0);
        }
    }

    /// The git dirs known whose files' stats are not as last read: the
    /// kernel's notes say where to look first, but a repository can change
    /// without one (a hard link to its config, a pointer's target in
    /// another's data).
    fn changed_known(&self) -> Vec<PathBuf> {
        self.known.iter().filter(|(d, seen)| !seen.unchanged(d)).map(|(d, _)| d.clone()).collect()
    }

    /// `path` if it is what it says: no link on the way (the guard runs
    /// outside the sandbox and must not be led elsewhere), under a root,
    /// not in a root's own `.git`.
    fn real(&self, path: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(path).ok()?;
        (real == path && self.roots.iter().any(|r| real.starts_with(r)) && !self.is_roots_own(&real)).then_some(real)
    }

    fn forget_under(&mut self, dir: &Path, keep: &[PathBuf]) {
        // What is still there stays known (a pointer's target may lie in
        // a git dir's data, where the walk of it does not go).
        for k in keys_under(&self.known, dir) {
            if !keep.contains(&k) && self.real(&k).is_none() {
                self.known.remove(&k);
            }
        }
        for k in keys_under(&self.pointers, dir) {
            if k.parent().is_none_or(|p| self.real(p).is_none()) {
                self.pointers.remove(&k);
            }
        }
    }

    fn learn_dir(&mut self, dir: &Path, hops: usize) {
        let dirs = self.real(dir).map(|d| git_dirs_in(&d)).unwrap_or_default();
        self.forget_under(dir, &dirs);
        for d in dirs {
            if self.known.get(&d).is_some_and(|seen| seen.unchanged(&d)) {
                continue;
            }
            let seen = Seen::read(&d, self.known.get(&d));
            if let Some(cd) = &seen.commondir
                && hops < MAX_HOPS
                && let Ok(Some(common)) = self.target(&d, cd, false)
            {
                self.learn_dir(&common, hops + 1);
            }
            self.known.insert(d, seen);
        }
    }

    fn learn_pointer(&mut self, p: &Path, hops: usize) {
        let held = p.parent().and_then(|dir| self.real(dir)).and_then(|_| Held::read(p));
        match held {
            // Its target is known, and looked at as such.
            Some(held) if self.pointers.get(p).is_some_and(|b| b.same(&held)) => {}
            Some(held) => {
                if hops < MAX_HOPS
                    && let Ok(Some(target)) = self.target(p.parent().unwrap_or(p), &held, true)
                {
                    self.learn_dir(&target, hops + 1);
                }
                self.pointers.insert(p.to_path_buf(), held);
            }
            None => {
                self.pointers.remove(p);
            }
        }
    }

    /// After a command: undoes what it added at `spots` (and in every
    /// repository known) that git would run, and says what.
    pub fn check(&mut self, spots: impl IntoIterator<Item = Spot>) -> Vec<Undone> {
        let mut out = Vec::new();
        for spot in spots.into_iter().collect::<std::collections::BTreeSet<_>>() {
            match spot {
                Spot::Dir(dir) => self.check_dir(&dir, 0, &mut out),
                Spot::Pointer(p) => self.check_pointer(&p, 0, &mut out),
            }
        }
        for d in self.changed_known() {
            if self.known.contains_key(&d) {
                self.check_dir(&d, 0, &mut out);
            }
        }
        for p in self.pointers.keys().cloned().collect::<Vec<_>>() {
            self.check_pointer(&p, 0, &mut out);
        }
        out.dedup();
        out
    }

    fn check_dir(&mut self, dir: &Path, hops: usize, out: &mut Vec<Undone>) {
        let dirs = self.real(dir).map(|d| git_dirs_in(&d)).unwrap_or_default();
        self.forget_under(dir, &dirs);
        for d in dirs {
            self.check_one(&d, hops, out);
        }
    }

    fn check_pointer(&mut self, p: &Path, hops: usize, out: &mut Vec<Undone>) {
        let Some(now) = p.parent().and_then(|dir| self.real(dir)).and_then(|_| Held::read(p)) else {
            self.pointers.remove(p);
            return;
        };
        let was = self.pointers.get(p).cloned();
        if was.as_ref().is_some_and(|b| b.same(&now)) {
            // Unchanged; what it leads to is known, and looked at as such.
            return;
        }
        match self.target(p.parent().unwrap_or(p), &now, true) {
            Ok(Some(target)) if hops < MAX_HOPS => self.check_dir(&target, hops + 1, out),
            Ok(_) => {}
            Err(why) => {
                let (what, done) = put_back(p, was.as_ref(), &why);
                out.push(Undone { path: p.to_path_buf(), what });
                if !done {
                    // Looked at again after the next command.
                    return;
                }
            }
        }
        self.learn_pointer(p, MAX_HOPS);
    }

    fn check_one(&mut self, d: &Path, hops: usize, out: &mut Vec<Undone>) {
        if self.known.get(d).is_some_and(|seen| seen.unchanged(d)) {
            return;
        }
        let was = self.known.get(d).cloned().unwrap_or_default();
        let now = Seen::read(d, Some(&was));
        if now == was {
            return;
        }
        let mut all_done = true;
        let mut say = |path: PathBuf, (what, done): (String, bool)| {
            all_done &= done;
            out.push(Undone { path, what });
        };
        for name in CONFIGS {
            let Some(cfg) = now.configs.get(name) else { continue };
            let before = was.configs.get(name);
            if before.is_some_and(|b| b.held.same(&cfg.held)) {
                continue;
            }
            let allowed = before.map(|b| b.programs.clone()).unwrap_or_default();
            let added: Vec<&Program> = cfg.programs.difference(&allowed).collect();
            if !added.is_empty() || cfg.held.link.is_some() {
                let path = d.join(name);
                for said in repair_config(&path, cfg, before, &added) {
                    say(path.clone(), said);
                }
            }
        }
        for (path, said) in check_hooks(d, &was, &now) {
            say(path, said);
        }
        for (path, said) in check_path_hooks(&was, &now) {
            say(path, said);
        }
        if let Some(cd) = &now.commondir
            && was.commondir.as_ref().is_none_or(|b| !b.same(cd))
            && let Err(why) = self.target(d, cd, false)
        {
            say(d.join("commondir"), put_back(&d.join("commondir"), was.commondir.as_ref(), &why));
        }
        // What could not be undone stays a change, looked at again.
        let after = if all_done { Seen::read(d, Some(&now)) } else { was };
        if let Some(Ok(Some(common))) = after.commondir.as_ref().map(|cd| self.target(d, cd, false))
            && hops < MAX_HOPS
        {
            self.check_dir(&common, hops + 1, out);
        }
        self.known.insert(d.to_path_buf(), after);
    }

    /// Where a `.git` file or link (`gitfile`) or a `commondir` sends git:
    /// `None` if nowhere or into a root's own `.git`; an error saying why
    /// if outside the roots, through a link, or to nothing (a command may
    /// make it later, out of the guard's sight).
    fn target(&self, base: &Path, held: &Held, gitfile: bool) -> Result<Option<PathBuf>, String> {
        let raw = match (&held.link, &held.data) {
            (Some(link), _) => link.clone(),
            (None, Some(data)) => match pointed(data, gitfile)? {
                Some(p) => p,
                // Not a pointer git follows.
                None => return Ok(None),
            },
            (None, None) => return Err("too large to be a pointer git follows".into()),
        };
        let joined = lexical(&base.join(&raw));
        let Ok(real) = std::fs::canonicalize(&joined) else {
            return Err(format!("sends git to {}, which does not exist", joined.display()));
        };
        if real != joined {
            return Err(format!("sends git through a link (to {})", real.display()));
        }
        if !self.roots.iter().any(|r| real.starts_with(r)) {
            return Err(format!("sends git outside the session's directories (to {})", real.display()));
        }
        Ok((!self.is_roots_own(&real)).then_some(real))
    }
}

/// The keys of `map` at or under `dir` (ordered: one range).
fn keys_under<V>(map: &BTreeMap<PathBuf, V>, dir: &Path) -> Vec<PathBuf> {
    map.range(dir.to_path_buf()..).map(|(k, _)| k).take_while(|k| k.starts_with(dir)).cloned().collect()
}

/// `dir` and the git dirs inside it (submodules', worktrees'), data left out.
fn git_dirs_in(dir: &Path) -> Vec<PathBuf> {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    let mut out = vec![dir.to_path_buf()];
    out.extend(
        Guard::dirs_to_watch(dir)
            .into_iter()
            .skip(1)
            .filter(|d| d.file_name().is_some_and(|n| n != "hooks") && looks_like_git_dir(d)),
    );
    out
}
