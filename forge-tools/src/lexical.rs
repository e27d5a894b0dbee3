//! Paths as written, with `.` and `..` taken out without asking the
//! file system (what a name says, before the kernel resolves it).

use std::path::{Component, Path, PathBuf};

/// `path` with `.` and `..` taken out as written (for comparing with the
/// user's list; the tree check resolves in the kernel).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
