//! A scan of the whole tree: every file's stats, and a record of each
//! file (its content kept, or git's blob named, or why it is not kept).
//! The first command of a session scans; later ones scan only when the
//! kernel's notes cannot say what changed.

use std::path::{Path, PathBuf};

use super::git_index::IndexView;
use super::ignores::Ignores;
use super::{Content, Entry, Keep, MAX_FILE_BYTES, MAX_IGNORED, Manifest, RACY_NS, Skip, Stat};
use crate::rewind::Unrecorded;

/// What a walk of the roots found (what lies in `.git` left out).
#[derive(Default)]
pub(super) struct Walked {
    pub files: Vec<(PathBuf, Stat)>,
    /// Paths git may take for a repository's own (`.git`, `HEAD`, hooks):
    /// for the guard of nested repositories.
    pub looks: Vec<PathBuf>,
    pub gitignores: Vec<PathBuf>,
    pub attributes: Vec<PathBuf>,
}

/// Walks `roots` (in parallel), handing each directory to `on_dir` as it
/// is reached, before its entries are listed.
pub(super) fn walk(roots: &[PathBuf], on_dir: &(dyn Fn(&Path) + Sync)) -> Walked {
    let found: std::sync::Mutex<Walked> = Default::default();
    for root in roots {
        ignore::WalkBuilder::new(root).standard_filters(false).hidden(false).follow_links(false).build_parallel().run(
            || {
                Box::new(|entry| {
                    use ignore::WalkState;
                    let Ok(entry) = entry else { return WalkState::Continue };
                    let Some(kind) = entry.file_type() else { return WalkState::Continue };
                    if forge_tools::git_guard::worth_a_look(entry.path()) {
                        found.lock().unwrap_or_else(|p| p.into_inner()).looks.push(entry.path().to_path_buf());
                        if entry.file_name() == ".git" {
                            return WalkState::Skip;
                        }
                    }
                    if kind.is_dir() {
                        on_dir(entry.path());
                        return WalkState::Continue;
                    }
                    if !(kind.is_file() || kind.is_symlink()) {
                        return WalkState::Continue;
                    }
                    let Ok(meta) = entry.metadata() else { return WalkState::Continue };
                    let name = entry.file_name();
                    let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
                    if name == ".gitignore" {
                        found.gitignores.push(entry.path().to_path_buf());
                    } else if name == ".gitattributes" {
                        found.attributes.push(entry.path().to_path_buf());
                    }
                    found.files.push((entry.into_path(), Stat::of(&meta)));
                    WalkState::Continue
                })
            },
        );
    }
    found.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// How files are told apart: ignored by git, denied by the sandbox, in
/// git's index unchanged; and how much a scan may keep.
pub(super) struct Rules<'a> {
    pub ignores: &'a mut Ignores,
    pub indexes: &'a [IndexView],
    pub skip: Skip<'a>,
    /// Bytes a scan may read into the store (the store's bound): a tree
    /// holding more (a home directory) keeps what fits, the rest marked.
    pub budget: u64,
}

impl Rules<'_> {
    /// As [`Rules::unrecorded`], not asked when the record is reused.
    fn unrecorded_unless(&mut self, reused: bool, path: &Path, stat: &Stat) -> Option<Unrecorded> {
        if reused { None } else { self.unrecorded(path, stat) }
    }

    /// Why a file's content is not kept, if it is not.
    pub(super) fn unrecorded(&mut self, path: &Path, stat: &Stat) -> Option<Unrecorded> {
        if self.ignores.ignored(path, false) {
            Some(Unrecorded::Ignored)
        } else if stat.size > MAX_FILE_BYTES && stat.mode != crate::rewind::SYMLINK_MODE {
            Some(Unrecorded::TooBig)
        } else if (self.skip)(path) {
            Some(Unrecorded::Denied)
        } else {
            None
        }
    }
}

/// Reads a file and keeps its content: its entry (a mark if unreadable).
pub(super) fn read(path: &Path, stat: Stat, keep: Keep) -> Entry {
    let Ok(Some((data, _))) = crate::rewind::read_any(path) else {
        return Entry::marked(stat, Unrecorded::Unreadable);
    };
    kept(stat, data, keep)
}

/// The entry of content read, handed to `keep`.
pub(super) fn kept(stat: Stat, data: Vec<u8>, keep: Keep) -> Entry {
    let content = Content::sha(&data);
    keep(content.text(), data);
    Entry { stat, content }
}

/// Records what `walked` found, reusing `known`'s record of a file whose
/// stats are unchanged and git's blob for one its index has unchanged;
/// every other file is read and handed to `keep` before this returns.
pub(super) fn record(
    walked: Walked,
    base: &Path,
    known: &Manifest,
    rules: &mut Rules,
    keep: Keep,
    taken_ns: i64,
) -> Manifest {
    let mut m = Manifest { taken_ns, ..Manifest::under_base(base) };
    // A file unchanged keeps its record, marks included, unless the
    // rules that made a mark may have changed.
    let is_rule = |p: &Path| p.file_name().is_some_and(|n| n == ".gitignore");
    let rules_changed = known.rules().count() != walked.gitignores.len()
        || walked.files.iter().any(|(p, st)| is_rule(p) && known.get(p).map(|e| e.stat) != Some(*st));
    let mut ignored = 0usize;
    for (path, stat) in walked.files {
        let racy = stat.mtime_ns.max(stat.ctime_ns) + RACY_NS >= known.taken_ns;
        let reusable = |e: &&Entry| match e.content {
            Content::Mark(Unrecorded::Unreadable) => false,
            Content::Mark(_) => !rules_changed,
            _ => true,
        };
        let same = known.get(&path).filter(|e| e.stat == stat && !racy).filter(reusable);
        let entry = match (same, rules.unrecorded_unless(same.is_some(), &path, &stat)) {
            (Some(e), _) => *e,
            (None, Some(why)) => Entry::marked(stat, why),
            (None, None) => {
                match rules.indexes.iter().find(|i| path.starts_with(&i.top)).and_then(|i| i.blob_of(&path, &stat)) {
                    Some(blob) => Entry { stat, content: blob },
                    None if stat.size > rules.budget => Entry::marked(stat, Unrecorded::OverBound),
                    None => {
                        rules.budget -= stat.size;
                        read(&path, stat, keep)
                    }
                }
            }
        };
        if entry.content == Content::Mark(Unrecorded::Ignored) {
            ignored += 1;
            if ignored > MAX_IGNORED {
                m.ignored_unwatched = true;
                continue;
            }
        }
        m.insert(&path, entry);
    }
    m
}

/// Scans `roots` with no repository's help (the benchmark's and the
/// tests' way in): `known`'s records reused where stats are unchanged.
pub fn scan(roots: &[PathBuf], known: &Manifest, skip: Skip, keep: Keep) -> Manifest {
    let taken_ns = super::now_ns();
    let walked = walk(roots, &|_| {});
    let mut ignores = Ignores::new(roots, &walked.gitignores, &[]);
    let mut rules = Rules { ignores: &mut ignores, indexes: &[], skip, budget: u64::MAX };
    let base = roots.first().cloned().unwrap_or_default();
    record(walked, &base, known, &mut rules, keep, taken_ns)
}
