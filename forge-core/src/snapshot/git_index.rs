//! Git's index as the content of unchanged files. A file whose stats are
//! those its index entry recorded (and that is not racily clean) holds
//! the entry's blob, so the first scan of a repository copies only what
//! git does not already have: dirty and untracked files. Such a file is
//! recorded as `git:` and the blob's id; the day a command changes it,
//! the blob is read from the repository and stored like any other
//! content (`content`). Until then a ref of Forge's,
//! `refs/forge/rewind/<session>`, keeps the blobs reachable, so that
//! `git gc` cannot drop them.
//!
//! Not used where git's blob is not the file's bytes (filters, line-end
//! conversion, working-tree encodings), nor where blobs may be missing
//! (partial clones), nor for SHA-256 repositories.

use std::path::{Path, PathBuf};

use super::{Content, Stat};

/// How a file known by its git blob is recorded: this, then the blob id.
pub const GIT_PREFIX: &str = "git:";
/// The refs that keep a session's blobs reachable.
pub const REF_PREFIX: &str = "refs/forge/rewind/";

/// A repository that holds some root (or lies under one).
pub(super) struct Repo {
    pub top: PathBuf,
    /// Its `info/exclude`.
    pub exclude: PathBuf,
    git: git2::Repository,
}

impl Repo {
    /// The repository whose work tree holds `dir`.
    pub(super) fn find(dir: &Path) -> Option<Repo> {
        let git = git2::Repository::discover(dir).ok()?;
        let top = git.workdir()?.canonicalize().ok()?;
        let exclude = git.commondir().join("info").join("exclude");
        Some(Repo { top, exclude, git })
    }
}

/// An index entry's blob and the stats it was written with.
struct Known {
    blob: git2::Oid,
    mtime: (i32, u32),
    ctime: (i32, u32),
    ino: u32,
    size: u32,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// A repository's index, for matching files against it.
pub(super) struct IndexView {
    pub top: PathBuf,
    /// By path relative to `top`, sorted.
    entries: Vec<(Box<[u8]>, Known)>,
    /// When the index was written: an entry modified as late is racy.
    written_ns: i64,
    /// Directories whose `.gitattributes` may change what a checkout
    /// writes: their files are read, not taken from git.
    filtered: Vec<PathBuf>,
}

/// What in an attributes file may make a checkout write other bytes than
/// the blob's.
fn rewrites(attributes: &str) -> bool {
    attributes
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .any(|l| ["filter", "eol", "crlf", "ident", "working-tree-encoding"].iter().any(|w| l.contains(w)))
}

/// The index of `repo` for matching, if its blobs are the files' bytes
/// and a ref named for `session` now keeps them reachable.
pub(super) fn load(repo: &Repo, session: &str, attributes: &[PathBuf]) -> Option<IndexView> {
    let config = repo.git.config().ok()?;
    let flag = |k: &str| config.get_string(k).ok().map(|v| v.to_ascii_lowercase());
    if flag("core.autocrlf").as_deref() == Some("true")
        || flag("core.eol").as_deref() == Some("crlf")
        || flag("extensions.objectformat").is_some_and(|f| f != "sha1")
        || flag("extensions.partialclone").is_some()
    {
        return None;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let global = flag("core.attributesfile").map(PathBuf::from).or_else(|| {
        let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).or(home.map(|h| h.join(".config")));
        xdg.map(|x| x.join("git/attributes"))
    });
    let info = repo.git.commondir().join("info").join("attributes");
    for file in global.iter().chain([&info]) {
        if std::fs::read_to_string(file).is_ok_and(|t| rewrites(&t)) {
            return None;
        }
    }
    let filtered = attributes
        .iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| rewrites(&t)))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    let mut index = repo.git.index().ok()?;
    let written_ns = index.path().and_then(|p| std::fs::metadata(p).ok()).map(|m| Stat::of(&m).mtime_ns)?;
    keep_reachable(repo, &mut index, session)?;
    let mut entries = Vec::with_capacity(index.len());
    for e in index.iter() {
        // Conflicted, assumed unchanged, skipped in the work tree, added
        // with intent: git's own word on the file cannot be trusted.
        let stage = (e.flags >> 12) & 3;
        if stage != 0 || e.flags & 0x8000 != 0 || e.flags_extended & 0x6000 != 0 || e.id.is_zero() {
            continue;
        }
        if !matches!(e.mode, 0o100644 | 0o100755 | 0o120000) {
            continue;
        }
        entries.push((
            e.path.into_boxed_slice(),
            Known {
                blob: e.id,
                mtime: (e.mtime.seconds(), e.mtime.nanoseconds()),
                ctime: (e.ctime.seconds(), e.ctime.nanoseconds()),
                ino: e.ino,
                size: e.file_size,
                mode: e.mode,
                uid: e.uid,
                gid: e.gid,
            },
        ));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Some(IndexView { top: repo.top.clone(), entries, written_ns, filtered })
}

/// Makes `refs/forge/rewind/<session>` reach the index's blobs: a commit
/// of the index's tree, its parent the ref's previous commit (so that the
/// blobs of earlier scans stay reachable too).
fn keep_reachable(repo: &Repo, index: &mut git2::Index, session: &str) -> Option<()> {
    let name = format!("{REF_PREFIX}{session}");
    let made = (|| -> Result<(), git2::Error> {
        let tree = index.write_tree()?;
        let parent = repo.git.refname_to_id(&name).ok().and_then(|id| repo.git.find_commit(id).ok());
        if parent.as_ref().is_some_and(|p| p.tree_id() == tree) {
            return Ok(());
        }
        let tree = repo.git.find_tree(tree)?;
        let who = git2::Signature::now("Forge", "forge@localhost")?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let message = format!("Forge: the index as rewind found it (session {session})");
        let commit = repo.git.commit(None, &who, &who, &message, &tree, &parents)?;
        repo.git.reference(&name, commit, true, "forge: keep rewind's blobs")?;
        Ok(())
    })();
    match made {
        Ok(()) => Some(()),
        Err(e) => {
            tracing::info!(error = %e, repo = %repo.top.display(), "git's index is not used for rewind's records");
            None
        }
    }
}

impl IndexView {
    /// Git's blob if the file at `path` with `stat` is as git's index
    /// has it.
    pub(super) fn blob_of(&self, path: &Path, stat: &Stat) -> Option<Content> {
        use std::os::unix::ffi::OsStrExt;
        let rel = path.strip_prefix(&self.top).ok()?.as_os_str().as_bytes();
        let i = self.entries.binary_search_by(|(p, _)| (**p).cmp(rel)).ok()?;
        let k = &self.entries[i].1;
        let split = |ns: i64| ((ns.div_euclid(1_000_000_000)) as i32, ns.rem_euclid(1_000_000_000) as u32);
        let mode = match stat.mode {
            crate::rewind::SYMLINK_MODE => 0o120000,
            m if m & 0o100 != 0 => 0o100755,
            _ => 0o100644,
        };
        let same = k.mtime == split(stat.mtime_ns)
            && k.ctime == split(stat.ctime_ns)
            && k.ino == stat.ino as u32
            && k.size == stat.size as u32
            && k.mode == mode
            && (k.uid, k.gid) == (stat.uid, stat.gid)
            && stat.mtime_ns < self.written_ns
            && !self.filtered.iter().any(|d| path.starts_with(d));
        same.then(|| git_content(k.blob))
    }
}

fn git_content(id: git2::Oid) -> Content {
    let mut b = [0u8; 20];
    let bytes = id.as_bytes();
    let n = bytes.len().min(20);
    b[..n].copy_from_slice(&bytes[..n]);
    Content::Git(b)
}

/// Content as git would name it.
pub(super) fn name_of(data: &[u8]) -> Option<Content> {
    git2::Oid::hash_object(git2::ObjectType::Blob, data).ok().map(git_content)
}

/// The content of git's blob `id` in the repository at `top`.
pub(super) fn content(top: &Path, id: &[u8; 20]) -> Option<Vec<u8>> {
    let id = git2::Oid::from_bytes(id).ok()?;
    let repo = git2::Repository::open(top).ok()?;
    let blob = repo.find_blob(id).ok()?;
    Some(blob.content().to_vec())
}

/// Removes session `session`'s ref from the repositories holding `dirs`.
pub fn forget_refs<'a>(dirs: impl Iterator<Item = &'a PathBuf>, session: &str) {
    for dir in dirs {
        if let Ok(repo) = git2::Repository::discover(dir)
            && let Ok(mut r) = repo.find_reference(&format!("{REF_PREFIX}{session}"))
        {
            let _ = r.delete();
        }
    }
}
