//! Which directories are too broad to be a session's working directory:
//! confined commands write anywhere under the roots without asking, so a
//! root of `/`, the home directory or a system directory would let them
//! change everything there. The user may still choose one explicitly
//! (`--allow-broad-root`).

use std::path::Path;

/// System trees: neither they nor anything inside them is a project.
const SYSTEM_TREES: &[&str] =
    &["/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr"];

/// Directories that hold other people's or the system's things: too
/// broad themselves, though a project may live below them.
const SHARED_DIRS: &[&str] =
    &["/home", "/root", "/var", "/var/tmp", "/tmp", "/opt", "/srv", "/mnt", "/media", "/snap", "/nix", "/Users"];

/// Why `dir` (absolute) is too broad a root, or `None`. `home` is the
/// user's home directory.
pub fn too_broad(dir: &Path, home: Option<&Path>) -> Option<String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if dir == Path::new("/") {
        return Some("the whole file system".into());
    }
    if let Some(home) = home {
        let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
        if dir == home {
            return Some("your home directory itself".into());
        }
        if home.starts_with(&dir) {
            return Some(format!("it holds your home directory {}", home.display()));
        }
    }
    if let Some(t) = SYSTEM_TREES.iter().find(|t| dir.starts_with(t)) {
        return Some(format!("a system directory ({t})"));
    }
    if SHARED_DIRS.iter().any(|d| dir == Path::new(d)) {
        return Some("a directory shared by the whole system".into());
    }
    None
}

/// The error a client shows for a broad root, saying what to do.
pub fn refusal(dir: &str, why: &str) -> String {
    format!(
        "{dir} is too broad to work in ({why}): commands in a session may change anything under its directory without asking. \
         Start the session in a project directory, or pass --allow-broad-root if you mean it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_system_home_and_system_trees_are_too_broad() {
        let home = Path::new("/home/u");
        for dir in ["/", "/home/u", "/home", "/etc", "/usr/local/src", "/tmp", "/var"] {
            assert!(too_broad(Path::new(dir), Some(home)).is_some(), "{dir}");
        }
        for dir in ["/home/u/src/app", "/tmp/project", "/srv/www/site", "/opt/work"] {
            assert_eq!(too_broad(Path::new(dir), Some(home)), None, "{dir}");
        }
        assert!(refusal("/", "x").contains("--allow-broad-root"));
    }
}
