//! What a change between two trees brings into a working tree, file by
//! file, as far as a user must know before taking it: a symbolic link and
//! where it points, a file's size and whether it is binary. Which of them
//! need the user's word is decided by the caller (forge-core), which
//! knows which files run code later.

use crate::GitError;

/// One file a change adds or changes (deletions bring nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brought {
    /// Its path in the repository, as git stores it (lossy where it is
    /// not UTF-8).
    pub path: String,
    /// Where it points, for a symbolic link.
    pub link: Option<String>,
    pub size: u64,
    /// Its content looks binary (git's own test: a NUL early on).
    pub binary: bool,
}

impl Brought {
    /// A symbolic link that leads out of the repository: an absolute
    /// target, or one that climbs above the repository's top.
    pub fn link_leaves_repository(&self) -> bool {
        let Some(target) = &self.link else { return false };
        if target.starts_with('/') || target.starts_with('~') {
            return true;
        }
        // Depth below the top while walking from the link's directory.
        let mut depth = self.path.split('/').count() as i64 - 1;
        for part in target.split('/') {
            match part {
                ".." => depth -= 1,
                "" | "." => {}
                _ => depth += 1,
            }
            if depth < 0 {
                return true;
            }
        }
        false
    }
}

/// The files the change from `from` to `to` adds or changes.
pub fn brought(repo: &git2::Repository, from: &git2::Tree, to: &git2::Tree) -> Result<Vec<Brought>, GitError> {
    let diff = repo.diff_tree_to_tree(Some(from), Some(to), None)?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        if d.status() == git2::Delta::Deleted {
            continue;
        }
        let file = d.new_file();
        let path = String::from_utf8_lossy(file.path_bytes().unwrap_or_default()).into_owned();
        let Ok(blob) = repo.find_blob(file.id()) else { continue };
        let link = (file.mode() == git2::FileMode::Link).then(|| String::from_utf8_lossy(blob.content()).into_owned());
        out.push(Brought { path, link, size: blob.size() as u64, binary: blob.is_binary() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str, target: &str) -> Brought {
        Brought { path: path.into(), link: Some(target.into()), size: 0, binary: false }
    }

    #[test]
    fn a_link_leaves_the_repository_when_absolute_or_climbing_above_its_top() {
        assert!(link("keylink", "/home/u/.ssh/id_ed25519").link_leaves_repository());
        assert!(link("keylink", "~/.ssh/id_ed25519").link_leaves_repository());
        assert!(link("a/b", "../../x").link_leaves_repository());
        assert!(link("a/b", "../c/../../../x").link_leaves_repository());
        assert!(!link("a/b", "../c").link_leaves_repository());
        assert!(!link("a/b", "c/d").link_leaves_repository());
        let file = Brought { path: "x".into(), link: None, size: 1, binary: false };
        assert!(!file.link_leaves_repository());
    }
}
