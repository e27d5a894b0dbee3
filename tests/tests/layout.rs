//! The code base's own rules, checked on every run: no production source
//! file grows past 700 lines (split it by area instead), so each stays
//! readable in one sitting.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 700;

/// Production Rust sources of the workspace: test code (`tests/`
/// directories, `tests.rs` modules, the test crate) and build output left
/// out.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "tests", ".git", "fuzz"].contains(&name.as_str()) && !name.starts_with('.') {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

#[test]
fn no_production_file_is_over_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 50, "the workspace's sources were not found under {}", root.display());
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.strip_prefix(&root).unwrap_or(f).display()))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "split these by area (at most {MAX_LINES} lines each): {}", long.join(", "));
}
