//! Which files `.gitignore` keeps out of git, decided the same way for a
//! scan of the whole tree and for the few files a command touched: each
//! directory's `.gitignore` (and a repository's `info/exclude`), the
//! deepest match winning, and nothing under an ignored directory coming
//! back (git's own rules).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

#[derive(Default)]
pub(super) struct Ignores {
    /// Each directory's `.gitignore`.
    by_dir: HashMap<PathBuf, Gitignore>,
    /// Where the rules start (the repository tops and the roots), each
    /// with the repository's `info/exclude` if it has one.
    bases: Vec<(PathBuf, Option<Gitignore>)>,
    /// Directories already decided.
    dirs: HashMap<PathBuf, bool>,
}

impl Ignores {
    /// The rules of `gitignores` (found under the roots), of the
    /// `.gitignore` files above each root up to its repository's top, and
    /// of `excludes` (a top and its `info/exclude`).
    pub(super) fn new(roots: &[PathBuf], gitignores: &[PathBuf], excludes: &[(PathBuf, PathBuf)]) -> Ignores {
        let mut me = Ignores::default();
        for (top, file) in excludes {
            let mut b = GitignoreBuilder::new(top);
            let _ = b.add(file);
            me.bases.push((top.clone(), b.build().ok()));
            for root in roots.iter().filter(|r| r.starts_with(top) && *r != top) {
                for dir in root.ancestors().skip(1).take_while(|d| d.starts_with(top)) {
                    me.load(&dir.join(".gitignore"));
                }
            }
        }
        for root in roots {
            if !me.bases.iter().any(|(b, _)| root.starts_with(b)) {
                me.bases.push((root.clone(), None));
            }
        }
        // The shortest base first: the one a path is decided from.
        me.bases.sort_by_key(|(b, _)| b.as_os_str().len());
        for g in gitignores {
            me.load(g);
        }
        me
    }

    /// (Re)reads one `.gitignore` file; what it decided is forgotten.
    pub(super) fn load(&mut self, file: &Path) {
        let Some(dir) = file.parent() else { return };
        self.dirs.clear();
        if !file.is_file() {
            self.by_dir.remove(dir);
            return;
        }
        let (g, err) = Gitignore::new(file);
        if let Some(e) = err {
            tracing::debug!(error = %e, file = %file.display(), "part of a .gitignore is not understood");
        }
        self.by_dir.insert(dir.to_path_buf(), g);
    }

    /// Whether git would ignore `path`.
    pub(super) fn ignored(&mut self, path: &Path, is_dir: bool) -> bool {
        let Some(base) = self.bases.iter().map(|(b, _)| b.clone()).find(|b| path.starts_with(b)) else {
            return false;
        };
        if path == base {
            return false;
        }
        match path.parent() {
            Some(parent) if parent != base && self.dir_ignored(parent, &base) => true,
            _ => self.decide(path, is_dir, &base),
        }
    }

    fn dir_ignored(&mut self, dir: &Path, base: &Path) -> bool {
        if let Some(known) = self.dirs.get(dir) {
            return *known;
        }
        let ignored = match dir.parent() {
            Some(parent) if parent != base && parent.starts_with(base) && self.dir_ignored(parent, base) => true,
            _ => self.decide(dir, true, base),
        };
        self.dirs.insert(dir.to_path_buf(), ignored);
        ignored
    }

    /// The deepest rule that matches `path` itself.
    fn decide(&self, path: &Path, is_dir: bool, base: &Path) -> bool {
        for dir in path.ancestors().skip(1) {
            if let Some(g) = self.by_dir.get(dir) {
                match g.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            if dir == base {
                break;
            }
        }
        let exclude = self.bases.iter().find(|(b, _)| b == base).and_then(|(_, g)| g.as_ref());
        exclude.is_some_and(|g| g.matched(path, is_dir).is_ignore())
    }
}
