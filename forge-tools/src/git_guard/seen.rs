//! What one repository directory (a "git dir": `.git`, a bare layout,
//! a submodule's or a worktree's directory) holds that makes git run a
//! program: the settings of its config files that name one, its hooks,
//! and where its `commondir` sends git for more of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Config files git reads from a git dir (`config.worktree` with
/// `extensions.worktreeConfig`).
pub(super) const CONFIGS: [&str; 2] = ["config", "config.worktree"];
/// Content kept to put a file back as it was; larger ones are only told
/// apart by digest (and removed, not restored, if a command changes them).
const KEEP_BYTES: u64 = 256 * 1024;
/// A config file past this is not parsed: git's own parser would be slow
/// on it, and no real one is this big.
pub(super) const MAX_CONFIG: u64 = 4 * 1024 * 1024;

/// A key (section and name lower-cased, as git lists it) and its value.
pub(super) type Program = (String, String);

/// A file's content as far as the guard needs it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Held {
    pub digest: [u8; 32],
    /// The content, if small enough to write back.
    pub data: Option<Vec<u8>>,
    /// A symbolic link's target (the file is that link).
    pub link: Option<PathBuf>,
    pub mode: u32,
}

impl Held {
    /// Reads `path` without following a final link (`None`: nothing there).
    pub(super) fn read(path: &Path) -> Option<Held> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).ok()?;
            let digest = Sha256::digest(target.as_os_str().as_encoded_bytes()).into();
            return Some(Held { digest, data: None, link: Some(target), mode: 0 });
        }
        if !meta.is_file() {
            return None;
        }
        let mode = meta.permissions().mode() & 0o7777;
        let mut hasher = Sha256::new();
        let mut data = Vec::new();
        let mut file = std::fs::File::open(path).ok()?;
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = std::io::Read::read(&mut file, &mut buf).ok()?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            if (data.len() + n) as u64 <= KEEP_BYTES {
                data.extend_from_slice(&buf[..n]);
            } else {
                data = Vec::new();
            }
        }
        let kept = meta.len() <= KEEP_BYTES;
        Some(Held { digest: hasher.finalize().into(), data: kept.then_some(data), link: None, mode })
    }

    /// Same content and kind (a link to the same place, or the same bytes
    /// with the same executable bits).
    pub(super) fn same(&self, other: &Held) -> bool {
        self.digest == other.digest && self.link == other.link && (self.mode & 0o111) == (other.mode & 0o111)
    }
}

/// One config file: its content and the settings in it that run programs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Config {
    pub held: Held,
    pub programs: BTreeSet<Program>,
}

/// What a git dir held that runs programs, when last looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Seen {
    #[serde(with = "config_names")]
    pub configs: BTreeMap<&'static str, Config>,
    /// `hooks` itself when it is a link.
    pub hooks_link: Option<PathBuf>,
    /// Each hook by name (`*.sample` left out: git never runs those).
    pub hooks: BTreeMap<String, Held>,
    pub commondir: Option<Held>,
    /// The hooks directory the configuration names (core.hooksPath,
    /// relative to the repository's top), and each hook in it.
    pub path_hooks: Option<(PathBuf, BTreeMap<String, Held>)>,
    /// The stats of all that, when read: equal stats later mean nothing
    /// changed (any write moves a file's change time), so nothing is read.
    pub stamp: Stamp,
}

/// Config files by name, saved as text and read back as [`CONFIGS`]'
/// own names (a name that is not one of them is dropped).
mod config_names {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{CONFIGS, Config};

    pub fn serialize<S: Serializer>(m: &BTreeMap<&'static str, Config>, s: S) -> Result<S::Ok, S::Error> {
        m.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<&'static str, Config>, D::Error> {
        let read = BTreeMap::<String, Config>::deserialize(d)?;
        Ok(read.into_iter().filter_map(|(k, v)| Some((*CONFIGS.iter().find(|c| **c == k)?, v))).collect())
    }
}

/// Each file's (or the hooks directory's) change and modify times, inode
/// and size; zeros where there is none.
pub(super) type Stamp = Vec<(i64, i64, u64, u64)>;

/// The stats of what [`Seen`] reads in `dir`, `hooks` named as last read.
pub(super) fn stamp<'a>(dir: &Path, hooks: impl Iterator<Item = &'a String>) -> Stamp {
    let mut out = own_stamp(dir);
    out.extend(hook_stamps(dir, hooks));
    out
}

fn stat_of(path: &Path) -> (i64, i64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            (m.ctime() * 1_000_000_000 + m.ctime_nsec(), m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.ino(), m.size())
        }
        Err(_) => (0, 0, 0, 0),
    }
}

/// The config files', `commondir`'s and the hooks directory's stats.
fn own_stamp(dir: &Path) -> Stamp {
    CONFIGS.iter().chain(&["commondir", "hooks"]).map(|n| stat_of(&dir.join(n))).collect()
}

fn hook_stamps<'a>(dir: &Path, hooks: impl Iterator<Item = &'a String>) -> impl Iterator<Item = (i64, i64, u64, u64)> {
    let hooks_dir = dir.join("hooks");
    hooks.map(move |h| stat_of(&hooks_dir.join(h)))
}

impl Seen {
    /// What `dir` holds now; a config file unchanged since `known` is not
    /// parsed again.
    pub(super) fn read(dir: &Path, known: Option<&Seen>) -> Seen {
        let mut seen = Seen::default();
        // Taken first: a change while reading shows as a stamp unlike the
        // next one.
        let mut stamp = own_stamp(dir);
        for name in CONFIGS {
            let path = dir.join(name);
            if let Some(held) = Held::read(&path) {
                let same = known.and_then(|k| k.configs.get(name)).filter(|c| c.held.same(&held));
                let programs = match same {
                    Some(c) => c.programs.clone(),
                    None => programs_in(&path),
                };
                seen.configs.insert(name, Config { held, programs });
            }
        }
        let hooks = dir.join("hooks");
        seen.hooks_link = std::fs::read_link(&hooks).ok();
        if seen.hooks_link.is_none()
            && let Ok(entries) = std::fs::read_dir(&hooks)
        {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".sample") {
                    continue;
                }
                if let Some(held) = Held::read(&entry.path()) {
                    seen.hooks.insert(name, held);
                }
            }
        }
        seen.commondir = Held::read(&dir.join("commondir"));
        stamp.extend(hook_stamps(dir, seen.hooks.keys()));
        seen.path_hooks = hooks_path_of(dir, &seen).map(|p| {
            let hooks = hooks_in(&p);
            (p, hooks)
        });
        stamp.extend(path_hook_stamps(seen.path_hooks.as_ref()));
        seen.stamp = stamp;
        seen
    }

    /// Whether `dir` still holds what was read (its stats unchanged).
    pub(super) fn unchanged(&self, dir: &Path) -> bool {
        let mut now = stamp(dir, self.hooks.keys());
        now.extend(path_hook_stamps(self.path_hooks.as_ref()));
        now == self.stamp
    }
}

/// The hooks directory `seen`'s configuration names with core.hooksPath,
/// where it is a relative path inside the repository's top (the
/// directory holding `dir` for a `.git`, else `dir` itself).
fn hooks_path_of(dir: &Path, seen: &Seen) -> Option<PathBuf> {
    let value = seen.configs.values().flat_map(|c| &c.programs).find(|(k, _)| k == "core.hookspath")?.1.clone();
    let p = Path::new(value.trim());
    if p.as_os_str().is_empty() || !p.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
        return None;
    }
    let top = match dir.file_name().is_some_and(|n| n == ".git") {
        true => dir.parent()?,
        false => dir,
    };
    Some(top.join(p))
}

/// The hooks in `dir` by name (`*.sample` left out).
pub(super) fn hooks_in(dir: &Path) -> BTreeMap<String, Held> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".sample")
            && let Some(held) = Held::read(&entry.path())
        {
            out.insert(name, held);
        }
    }
    out
}

/// The stats of a hooks directory named by core.hooksPath and its hooks.
fn path_hook_stamps(path_hooks: Option<&(PathBuf, BTreeMap<String, Held>)>) -> Stamp {
    let Some((dir, hooks)) = path_hooks else { return Vec::new() };
    std::iter::once(stat_of(dir)).chain(hooks.keys().map(|h| stat_of(&dir.join(h)))).collect()
}

/// The settings of the config file at `path` that run programs, as git
/// itself reads them (its own parser, so that no spelling of a key slips
/// past), or as [`super::settings`] reads them where git cannot be run.
pub(super) fn programs_in(path: &Path) -> BTreeSet<Program> {
    let Ok(meta) = std::fs::metadata(path) else { return BTreeSet::new() };
    if meta.len() > MAX_CONFIG {
        // Not parsed: taken as running something, so it goes back.
        return BTreeSet::from([("(config too large to read)".to_string(), String::new())]);
    }
    match git_list(path) {
        Some(list) => list.into_iter().filter(|(k, v)| super::runs_program(k, v)).collect(),
        None => {
            let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            super::programs(&text).into_iter().map(|s| (lower_key(&s.key), value_of(&s.value))).collect()
        }
    }
}

/// Every key and value of a config file as git parses it; `None` where
/// git cannot be run or cannot parse the file.
fn git_list(path: &Path) -> Option<Vec<Program>> {
    let out = std::process::Command::new("git")
        .args(["config", "--no-includes", "--null", "--list", "--file"])
        .arg(path)
        .current_dir("/")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.split('\0')
            .filter(|e| !e.is_empty())
            .map(|e| match e.split_once('\n') {
                Some((k, v)) => (lower_key(k), v.to_string()),
                None => (lower_key(e), String::new()),
            })
            .collect(),
    )
}

/// A key as git lists it: section and name lower-cased, a subsection as
/// written.
pub(super) fn lower_key(key: &str) -> String {
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) if first != last => {
            format!("{}{}{}", key[..first].to_ascii_lowercase(), &key[first..last], key[last..].to_ascii_lowercase())
        }
        _ => key.to_ascii_lowercase(),
    }
}

/// A value as written in a config file, as git reads it: quotes taken
/// off, escapes applied, a comment outside quotes cut, spaces at the
/// ends trimmed.
pub(super) fn value_of(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut kept_len = 0;
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => out.push('\u{8}'),
                Some(other) => out.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
        if quoted || !c.is_whitespace() {
            kept_len = out.len();
        }
    }
    out.truncate(kept_len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_git_reads_them() {
        assert_eq!(value_of(" \"touch /tmp/x\"  # why"), "touch /tmp/x");
        assert_eq!(value_of("a\\\"b ; c"), "a\"b");
        assert_eq!(value_of("\" spaced \""), " spaced ");
        assert_eq!(lower_key("Filter.LFS.Smudge"), "filter.LFS.smudge");
        assert_eq!(lower_key("Core.FSMonitor"), "core.fsmonitor");
    }

    #[test]
    fn a_git_dir_is_read_for_what_runs() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::write(d.join("config"), "[core]\n\tfsmonitor = \"./x\"\n[user]\n\tname = A\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(d.join("hooks")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("hooks/pre-commit.sample"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        let seen = Seen::read(d, None);
        let programs: Vec<_> = seen.configs["config"].programs.iter().cloned().collect();
        assert_eq!(programs, [("core.fsmonitor".to_string(), "./x".to_string())]);
        assert_eq!(seen.hooks.keys().collect::<Vec<_>>(), ["pre-commit"]);
    }
}
