//! A session's record of its roots between commands: scanned once, then
//! kept up to date from the kernel's notes (or, where there are none, by
//! scanning again around each command).

use std::path::{Path, PathBuf};

use super::git_index::{self, IndexView, Repo};
use super::ignores::Ignores;
use super::refresh::{Changed, Lost, Refreshed, refresh};
use super::scan::{Rules, record, walk};
use super::watch::{Watcher, user_limit};
use super::{Content, Entry, Keep, Manifest, Skip, changed};
use crate::rewind::{FileState, Unrecorded};
use forge_tools::git_guard::{Guard, Spot, Undone};

/// A file a command changed: its record before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub before: FileState,
    pub after: FileState,
}

/// With this set to 1 in the daemon's environment, commands are recorded
/// by scanning the roots, as where the kernel cannot watch them.
pub const SCAN_ENV: &str = "FORGE_REWIND_SCAN";

pub struct Tracker {
    /// Names the ref that keeps git's blobs reachable.
    session: String,
    /// The session's directory: its repository holds the ref even if no
    /// command ran since the daemon started.
    cwd: PathBuf,
    roots: Vec<PathBuf>,
    pub(super) manifest: Option<Manifest>,
    watcher: Option<Watcher>,
    ignores: Ignores,
    /// The watcher could not be made or lost its watches: scans only.
    scan_only: bool,
    /// Bytes a scan may keep (`[store] max_blob_mb`).
    budget: u64,
    /// The nested repositories' settings and hooks, as the user left them.
    guard: Guard,
    /// What the last command left that git would have run, undone.
    undone: Vec<Undone>,
}

impl Tracker {
    pub fn new(session: &str, cwd: &Path) -> Tracker {
        // Benchmarks and tests of the fallback: scan around every command.
        let scan_only = std::env::var_os(SCAN_ENV).is_some_and(|v| v == "1");
        Tracker {
            session: session.into(),
            cwd: cwd.to_path_buf(),
            roots: Vec::new(),
            manifest: None,
            watcher: None,
            ignores: Ignores::default(),
            scan_only,
            budget: u64::MAX,
            guard: Guard::new(&[]),
            undone: Vec::new(),
        }
    }

    /// At most `bytes` of content kept by a scan (the store's bound).
    pub fn with_budget(self, bytes: u64) -> Tracker {
        Tracker { budget: bytes, ..self }
    }

    /// A tracker that scans around every command, as where the kernel
    /// cannot watch the tree.
    pub fn scanning_only(session: &str, cwd: &Path) -> Tracker {
        Tracker { scan_only: true, ..Tracker::new(session, cwd) }
    }

    /// Whether the kernel's notes are used (false: every command scans).
    pub fn watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// The repositories whose git objects stand for some files' content.
    pub fn repos(&self) -> &[PathBuf] {
        self.manifest.as_ref().map(|m| m.repos.as_slice()).unwrap_or_default()
    }

    /// Brings the record of `roots` up to date before a command (a scan
    /// the first time): every content read is handed to `keep` before
    /// this returns, so it can be stored before the command runs.
    pub fn before(&mut self, roots: &[PathBuf], skip: Skip, keep: Keep) {
        if self.manifest.is_none() || self.roots != roots {
            self.roots = roots.to_vec();
            self.watcher = None;
            self.guard = Guard::new(roots);
            let (m, looks) = self.rescan(&Manifest::default(), skip, keep);
            self.manifest = Some(m);
            let spots = self.spots(&looks);
            self.guard.learn(spots);
            return;
        }
        // Changes made since by others (an editor, Forge's file tools)
        // are the command's "before"; they are not its changes.
        let (_, looks) = self.update(skip, keep);
        let spots = self.spots(&looks);
        self.guard.learn(spots);
    }

    /// The guard's record, saved before a command so that a crash during
    /// it still has the command's plants undone (see `crash_guard.rs`).
    pub fn guard_saved(&self) -> Option<Vec<u8>> {
        self.guard.saved()
    }

    /// What the last command left in the repositories under the roots
    /// that git would have run (outside the sandbox), and what became of it.
    pub fn take_undone(&mut self) -> Vec<Undone> {
        std::mem::take(&mut self.undone)
    }

    /// The repositories `looks` belong to; those in a `.git` directory
    /// are watched inside (its settings and hooks, not its data).
    fn spots(&mut self, looks: &[PathBuf]) -> Vec<Spot> {
        let mut spots: Vec<Spot> = looks.iter().flat_map(|p| self.guard.spots_of(p)).collect();
        spots.sort();
        spots.dedup();
        if let Some(w) = self.watcher.as_mut() {
            for spot in &spots {
                if let Spot::Dir(dir) = spot
                    && dir.components().any(|c| c.as_os_str() == ".git")
                {
                    for d in Guard::dirs_to_watch(dir) {
                        let _ = w.watch(&d);
                    }
                }
            }
        }
        spots
    }

    /// What changed under the roots since [`Tracker::before`], each
    /// file's content before and after the command kept (git's blob read).
    /// Settings and hooks it left in nested repositories that git would
    /// run are undone ([`Tracker::take_undone`] says which).
    pub fn after(&mut self, skip: Skip, keep: Keep) -> Vec<Found> {
        let (changes, looks) = self.update(skip, keep);
        let spots = self.spots(&looks);
        self.undone = self.guard.check(spots);
        let repos = self.repos().to_vec();
        changes
            .into_iter()
            .map(|c| Found {
                before: c.before.and_then(|e| state_of(&e, &c.path, &repos, keep)),
                after: c.after.and_then(|e| state_of(&e, &c.path, &repos, keep)),
                path: c.path,
            })
            .collect()
    }

    /// Removes the refs that kept git's blobs for this session (it is
    /// being removed).
    pub fn drop_refs(&self) {
        git_index::forget_refs(self.repos().iter().chain(&self.roots).chain([&self.cwd]), &self.session);
    }

    /// Whether the roots hold more ignored files than are watched.
    pub fn ignored_unwatched(&self) -> bool {
        self.manifest.as_ref().is_some_and(|m| m.ignored_unwatched)
    }

    /// A file tool of Forge may have changed `path`. With the kernel's
    /// notes nothing is to be done (a write is noted); a scan must read
    /// it again, whatever its stats say (a same-size write in the same
    /// timestamp tick leaves them equal).
    pub fn forget(&mut self, path: &Path) {
        if self.watcher.is_none()
            && let Some(m) = &mut self.manifest
        {
            m.forget(path);
        }
    }

    /// What changed since the last look, and the paths worth a look for
    /// the guard (all of them, after a scan).
    fn update(&mut self, skip: Skip, keep: Keep) -> (Vec<Changed>, Vec<PathBuf>) {
        let Some(manifest) = self.manifest.as_mut() else { return Default::default() };
        if let Some(w) = self.watcher.as_mut() {
            let dirty = w.drain();
            let mut rules = Rules { ignores: &mut self.ignores, indexes: &[], skip, budget: u64::MAX };
            match refresh(manifest, dirty, &self.roots, w, &mut rules, keep) {
                Ok(Refreshed { changes, looks }) => return (changes, looks),
                Err(Lost) => tracing::info!("the notes of file changes were incomplete; scanning the roots"),
            }
        }
        let before = self.manifest.take().unwrap_or_default();
        let (after, looks) = self.rescan(&before, skip, keep);
        let changes = changed(&before, &after)
            .into_iter()
            .map(|path| Changed { before: before.get(&path).copied(), after: after.get(&path).copied(), path })
            .collect();
        self.manifest = Some(after);
        (changes, looks)
    }

    /// Scans the roots, watching every directory (when it can), reusing
    /// `known`'s records of files whose stats are unchanged; the first
    /// time (nothing known), with git's index for unchanged files.
    fn rescan(&mut self, known: &Manifest, skip: Skip, keep: Keep) -> (Manifest, Vec<PathBuf>) {
        let taken_ns = super::now_ns();
        if self.watcher.is_none() && !self.scan_only {
            self.watcher = Watcher::new()
                .map_err(|e| tracing::info!(error = %e, "no kernel notes of file changes; commands scan the roots"))
                .ok();
        }
        // Some directories are left for the user's other programs.
        let budget = user_limit() * 3 / 4;
        let failed = std::sync::atomic::AtomicBool::new(false);
        let mut walked = {
            let watcher = std::sync::Mutex::new(self.watcher.as_mut());
            walk(&self.roots, &|dir| {
                let mut w = watcher.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(w) = w.as_mut()
                    && (w.count() >= budget || w.watch(dir).is_err())
                {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        if failed.into_inner() && self.watcher.take().is_some() {
            tracing::warn!(
                "too many directories to watch under {:?} (fs.inotify.max_user_watches is {}): each command scans the roots",
                self.roots,
                user_limit()
            );
            self.scan_only = true;
        }
        let repos: Vec<Repo> = self.roots.iter().filter_map(|r| Repo::find(r)).collect();
        let indexes: Vec<IndexView> = match known.is_empty() {
            true => repos.iter().filter_map(|r| git_index::load(r, &self.session, &walked.attributes)).collect(),
            false => Vec::new(),
        };
        let excludes: Vec<(PathBuf, PathBuf)> = repos.iter().map(|r| (r.top.clone(), r.exclude.clone())).collect();
        self.ignores = Ignores::new(&self.roots, &walked.gitignores, &excludes);
        let mut rules = Rules { ignores: &mut self.ignores, indexes: &indexes, skip, budget: self.budget };
        let base = self.roots.first().cloned().unwrap_or_default();
        let looks = std::mem::take(&mut walked.looks);
        let mut m = record(walked, &base, known, &mut rules, keep, taken_ns);
        m.repos = known.repos.clone();
        for i in &indexes {
            if !m.repos.contains(&i.top) {
                m.repos.push(i.top.clone());
            }
        }
        (m, looks)
    }
}

/// A record as a change's state: git's blob is read and kept (a change
/// must not depend on the repository), or marked if it is gone.
fn state_of(e: &Entry, path: &Path, repos: &[PathBuf], keep: Keep) -> FileState {
    let Content::Git(id) = e.content else { return Some((e.content.text(), e.stat.mode)) };
    let top = repos.iter().filter(|t| path.starts_with(t)).max_by_key(|t| t.as_os_str().len());
    match top.and_then(|t| git_index::content(t, &id)) {
        Some(data) => {
            let content = Content::sha(&data);
            keep(content.text(), data);
            Some((content.text(), e.stat.mode))
        }
        None => Some((Unrecorded::Missing.mark().into(), e.stat.mode)),
    }
}

/// Every live session's tracker, so that collecting the store keeps the
/// contents their records name (a file's "before" for its next change).
#[derive(Default, Clone)]
pub struct Trackers(std::sync::Arc<std::sync::Mutex<Vec<std::sync::Weak<std::sync::Mutex<Tracker>>>>>);

impl Trackers {
    pub fn register(&self, tracker: &std::sync::Arc<std::sync::Mutex<Tracker>>) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(std::sync::Arc::downgrade(tracker));
    }

    /// The content hashes the live trackers' records name.
    pub fn held(&self) -> Vec<String> {
        let live: Vec<_> =
            self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(|w| w.upgrade()).collect();
        let mut out = Vec::new();
        for t in live {
            let t = t.lock().unwrap_or_else(|p| p.into_inner());
            let Some(m) = &t.manifest else { continue };
            out.extend(m.entries().filter(|e| matches!(e.content, Content::Sha(_))).map(|e| e.content.text()));
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
