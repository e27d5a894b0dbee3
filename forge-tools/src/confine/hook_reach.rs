//! What a confined hook of the user's reaches beyond a command's grants:
//! its own program (the file its command names, wherever it lives), and
//! Claude Code's and Forge's homes (`~/.claude`, `$FORGE_HOME`), where it
//! may create and append files, such as the command log of Claude's
//! documented example. Never their configuration (settings files,
//! `config.toml`, the `hooks/`, `commands/` and `agents/` directories),
//! which would make the next hook or session run something unconfined,
//! and never the secrets list nor Forge's own store, tokens and trust
//! list.

use std::path::{Path, PathBuf};

use super::{expand_home, grant_around};

/// What the user's hook may reach besides a command's grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookReach {
    /// The files its command names as programs (read).
    pub programs: Vec<PathBuf>,
    /// The hook's own `write_roots` (as `[tools.sandbox] write_roots`).
    pub write_roots: Vec<String>,
}

/// Configuration in the settings homes: read-only to a hook, and made
/// impossible to create where it is missing (the settings files each
/// home's program reads, and in both the directories of hooks, commands
/// and agent types).
const CLAUDE_FILES: &[&str] = &["settings.json", "settings.local.json"];
const FORGE_FILES: &[&str] = &["config.toml"];
const CONFIG_DIRS: &[&str] = &["hooks", "commands", "agents"];

/// Entries of a settings home a hook never sees: Forge's store, lock,
/// tokens, sockets, trust list, logs and configuration (which may hold
/// API keys), and Claude Code's login.
fn private(name: &str) -> bool {
    name.starts_with("forge.db")
        || name.ends_with(".lock")
        || name.ends_with(".token")
        || name.ends_with(".sock")
        || ["trust.json", "config.toml", "logs", "run", ".credentials.json"].contains(&name)
}

/// Whether `name`, an entry of a settings home, is its configuration.
fn config(name: &str) -> bool {
    CONFIG_DIRS.contains(&name) || (name.starts_with("settings") && name.ends_with(".json"))
}

/// The grants a hook adds, to merge into its policy.
#[derive(Debug, Default)]
pub(super) struct Added {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub masked: Vec<PathBuf>,
    pub absent: Vec<PathBuf>,
    pub absent_files: Vec<PathBuf>,
}

/// A settings home a hook may write in, and the settings files its
/// program reads there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SettingsHome {
    pub dir: PathBuf,
    files: &'static [&'static str],
}

/// The settings homes a hook may write in: `~/.claude` and Forge's home,
/// where they exist.
pub(super) fn settings_homes(home: Option<&Path>, forge_home: Option<&Path>) -> Vec<SettingsHome> {
    let claude = home.map(|h| (h.join(".claude"), CLAUDE_FILES));
    let forge = forge_home.map(|f| (f.to_path_buf(), FORGE_FILES));
    claude
        .into_iter()
        .chain(forge)
        .filter(|(p, _)| p.is_dir())
        .map(|(p, files)| SettingsHome { dir: p.canonicalize().unwrap_or(p), files })
        .collect()
}

/// What `reach` adds, with `never` the places no grant may hold (the
/// secrets list; Forge's home is not among them here, its private
/// entries are masked instead).
pub(super) fn add(reach: &HookReach, homes: &[SettingsHome], home: Option<&Path>, never: &[PathBuf]) -> Added {
    let mut out = Added::default();
    for p in &reach.programs {
        grant_around(p, never, &mut out.read);
    }
    for w in &reach.write_roots {
        if let Some(p) = expand_home(w, home) {
            grant_around(&p, never, &mut out.write);
        }
    }
    for SettingsHome { dir, files } in homes {
        if never.iter().any(|n| dir.starts_with(n)) {
            continue;
        }
        // The directory itself, so that new files may be made at its top;
        // a secret inside it is hidden behind a mount instead.
        out.write.push(dir.clone());
        out.masked.extend(never.iter().filter(|n| n.starts_with(dir)).cloned());
        let entries: Vec<String> = std::fs::read_dir(dir)
            .map(|r| r.flatten().filter_map(|e| e.file_name().to_str().map(String::from)).collect())
            .unwrap_or_default();
        for name in &entries {
            let path = dir.join(name);
            if private(name) {
                out.masked.push(path);
            } else if config(name) {
                out.read_only.push(path);
            }
        }
        for name in CONFIG_DIRS {
            if !entries.iter().any(|e| e == name) {
                out.absent.push(dir.join(name));
            }
        }
        for name in *files {
            if !entries.iter().any(|e| e == name) {
                out.absent_files.push(dir.join(name));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_read_only_or_held_and_forges_own_files_are_hidden() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let claude = d.join(".claude");
        let forge = d.join(".forge");
        for p in [claude.join("hooks"), forge.join("logs")] {
            std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{e}"));
        }
        for f in [
            claude.join("settings.json"),
            claude.join("bash-command-log.txt"),
            claude.join(".credentials.json"),
            forge.join("forge.db"),
            forge.join("config.toml"),
            forge.join("listen.token"),
        ] {
            std::fs::write(f, "x").unwrap_or_else(|e| panic!("{e}"));
        }
        let homes = settings_homes(Some(&d), Some(&forge));
        let dirs: Vec<PathBuf> = homes.iter().map(|h| h.dir.clone()).collect();
        assert_eq!(dirs, vec![claude.clone(), forge.clone()]);
        let reach = HookReach { programs: vec![d.join("bin/guard.sh")], write_roots: Vec::new() };
        let added = add(&reach, &homes, Some(&d), &[d.join(".ssh")]);
        assert_eq!(added.write, dirs, "new files may be made at the top of each");
        for ro in [claude.join("settings.json"), claude.join("hooks")] {
            assert!(added.read_only.contains(&ro), "{ro:?} read-only: {added:?}");
        }
        for hidden in [claude.join(".credentials.json"), forge.join("forge.db"), forge.join("config.toml")] {
            assert!(added.masked.contains(&hidden), "{hidden:?} hidden: {added:?}");
        }
        assert!(added.masked.contains(&forge.join("listen.token")) && added.masked.contains(&forge.join("logs")));
        assert!(!added.masked.contains(&claude.join("bash-command-log.txt")));
        assert!(added.absent.contains(&claude.join("agents")) && added.absent.contains(&forge.join("hooks")));
        assert!(added.absent_files.contains(&claude.join("settings.local.json")));
        assert!(!added.absent_files.contains(&forge.join("settings.json")), "each home's own files only");
        assert!(!added.absent_files.contains(&forge.join("config.toml")), "there already: hidden, not held");
    }
}
