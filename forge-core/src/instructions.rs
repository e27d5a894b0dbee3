//! Project instruction files (`AGENTS.md`, `CLAUDE.md`, or what
//! `[context] instruction_files` names) in a session's working directory
//! and its parents up to the repository root. They go at the end of the
//! system prompt, the nearest last (it has the last word), and are read
//! again when they change between turns.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::config::ForgeConfig;

/// The names looked for when `[context] instruction_files` is not set.
pub const DEFAULT_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md"];
/// Most of one file that is read; the rest is left out, with a note.
const MAX_FILE_BYTES: usize = 32 * 1024;
/// Most of all files together.
const MAX_TOTAL_BYTES: usize = 96 * 1024;

/// The instruction files found for a directory and what they say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectInstructions {
    /// Each file read, with its size and modification time when read.
    sources: Vec<(PathBuf, u64, Option<SystemTime>)>,
    /// The prompt section, empty when there are none.
    pub text: String,
}

impl ProjectInstructions {
    /// Finds and reads the instruction files for `cwd`.
    pub fn load(cwd: &Path, config: &ForgeConfig) -> Self {
        let mut sources = Vec::new();
        let mut text = String::new();
        let mut total = 0;
        for path in candidates(cwd, config) {
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            if !meta.is_file() {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else { continue };
            sources.push((path.clone(), meta.len(), meta.modified().ok()));
            let room = MAX_FILE_BYTES.min(MAX_TOTAL_BYTES.saturating_sub(total));
            let mut content = String::from_utf8_lossy(&bytes[..bytes.len().min(room)]).into_owned();
            total += content.len();
            if bytes.len() > room {
                content.push_str(&format!(
                    "\n[... the rest of this file ({} bytes) is left out: instruction files are read up to {} KiB each, {} KiB in all]",
                    bytes.len() - room,
                    MAX_FILE_BYTES / 1024,
                    MAX_TOTAL_BYTES / 1024
                ));
            }
            if text.is_empty() {
                text.push_str(
                    "\n# Project instructions\n\nThe project's own instruction files follow, the one nearest the working directory last; \
                     follow them (where they disagree, the nearer one wins).\n",
                );
            }
            text.push_str(&format!("\n## {}\n\n{}\n", path.display(), content.trim_end()));
        }
        ProjectInstructions { sources, text }
    }

    /// The files read, in prompt order.
    pub fn files(&self) -> Vec<String> {
        self.sources.iter().map(|(p, _, _)| p.display().to_string()).collect()
    }

    /// Whether the files for `cwd` are not the ones read, or changed since.
    pub fn changed(&self, cwd: &Path, config: &ForgeConfig) -> bool {
        let now: Vec<(PathBuf, u64, Option<SystemTime>)> = candidates(cwd, config)
            .into_iter()
            .filter_map(|p| {
                let meta = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
                Some((p, meta.len(), meta.modified().ok()))
            })
            .collect();
        now != self.sources
    }
}

/// Where instruction files may be, farthest first: each directory from the
/// repository root (the nearest parent with `.git`; without one, only
/// `cwd`) down to `cwd`, each configured name in order.
fn candidates(cwd: &Path, config: &ForgeConfig) -> Vec<PathBuf> {
    let names: Vec<String> = match &config.context.instruction_files {
        Some(names) => names.clone(),
        None => DEFAULT_FILES.iter().map(|n| n.to_string()).collect(),
    };
    if names.is_empty() {
        return Vec::new();
    }
    let mut dirs: Vec<&Path> = Vec::new();
    let mut found_root = false;
    for dir in cwd.ancestors() {
        dirs.push(dir);
        if dir.join(".git").exists() {
            found_root = true;
            break;
        }
    }
    if !found_root {
        dirs.truncate(1);
    }
    dirs.reverse();
    dirs.iter().flat_map(|d| names.iter().map(move |n| d.join(n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_from_the_repository_root_down_nearest_last_and_changes_are_seen() {
        let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sub = repo.path().join("crates/app");
        std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(repo.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(repo.path().join("AGENTS.md"), "Run cargo test.\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(sub.join("CLAUDE.md"), "Use tabs here.\n").unwrap_or_else(|e| panic!("{e}"));
        let config = ForgeConfig::default();
        let found = ProjectInstructions::load(&sub, &config);
        assert_eq!(found.files().len(), 2);
        let root_at = found.text.find("Run cargo test.").unwrap_or(usize::MAX);
        let near_at = found.text.find("Use tabs here.").unwrap_or(0);
        assert!(root_at < near_at, "nearest last: {}", found.text);
        assert!(!found.changed(&sub, &config));
        std::fs::write(sub.join("AGENTS.md"), "New rule.\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(found.changed(&sub, &config), "a new file is a change");

        // Outside a repository only the directory itself is read.
        let plain = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(ProjectInstructions::load(plain.path(), &config).text.is_empty());
    }

    #[test]
    fn a_huge_file_is_cut_with_a_note() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("AGENTS.md"), "x".repeat(100_000)).unwrap_or_else(|e| panic!("{e}"));
        let found = ProjectInstructions::load(dir.path(), &ForgeConfig::default());
        assert!(found.text.len() < 40_000 && found.text.contains("is left out"), "{}", found.text.len());
    }
}
