//! Undoing what a command left that git would run: the settings taken
//! out of a config file (the rest kept), new or changed hooks removed or
//! put back, each write made even where the command took away the write
//! bit on the way.

use std::path::{Path, PathBuf};

use super::seen::{Config, Held, MAX_CONFIG, Program, Seen, lower_key, programs_in, value_of};

/// Takes out of the config file at `path` the settings `added` that run
/// programs (keeping what was there before); where git would still read
/// one (a spelling only git's parser knows), the file goes back as it was.
/// What was done, and whether it was.
pub(super) fn repair_config(
    path: &Path,
    now: &Config,
    before: Option<&Config>,
    added: &[&Program],
) -> Vec<(String, bool)> {
    let allowed = before.map(|b| b.programs.clone()).unwrap_or_default();
    let text = match std::fs::metadata(path) {
        Ok(m) if m.len() <= MAX_CONFIG => std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()),
        _ => Ok(String::new()),
    }
    .unwrap_or_default();
    let text = text.trim_start_matches('\u{feff}');
    let drop: Vec<std::ops::Range<usize>> = super::settings(text)
        .into_iter()
        .filter(|s| super::runs_program(&s.key, &s.value))
        .filter(|s| !allowed.contains(&(lower_key(&s.key), value_of(&s.value))))
        .map(|s| s.lines)
        .collect();
    let kept: String = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(i, _)| !drop.iter().any(|r| r.contains(i)))
        .map(|(_, l)| l)
        .collect();
    let mode = before.map(|b| b.held.mode).filter(|m| *m != 0).unwrap_or(0o644);
    let mut said = Vec::new();
    if let Some(link) = &now.held.link {
        said.push((format!("was a link to {}; replaced by a copy", link.display()), true));
    }
    let left = write(path, kept.as_bytes(), mode).map(|()| programs_in(path));
    match left {
        Ok(left) if left.is_subset(&allowed) => {
            said.extend(added.iter().map(|(k, v)| (format!("took out {k} = {v}"), true)));
        }
        _ => {
            let back = before.and_then(|b| b.held.data.clone()).unwrap_or_default();
            let keys: Vec<&str> = added.iter().map(|(k, _)| k.as_str()).collect();
            let keys = keys.join(", ");
            said.push(match write(path, &back, mode) {
                Ok(()) => (format!("put back as it was before the command: git would have run {keys}"), true),
                Err(e) => {
                    (format!("could not be undone ({e}): git would run {keys}; fix it before running git there"), false)
                }
            });
        }
    }
    said
}

/// Hooks the command added are removed, hooks it changed put back.
pub(super) fn check_hooks(d: &Path, was: &Seen, now: &Seen) -> Vec<(PathBuf, (String, bool))> {
    let hooks = d.join("hooks");
    let mut out = Vec::new();
    if now.hooks_link.is_some() && now.hooks_link != was.hooks_link {
        let to = now.hooks_link.as_deref().unwrap_or(Path::new("")).display().to_string();
        let why = format!("a link to {to}, where git would run hooks from");
        out.push((hooks.clone(), put_back(&hooks, None, &why)));
        if !was.hooks.is_empty() && std::fs::create_dir(&hooks).is_ok() {
            for (name, held) in &was.hooks {
                put_back(&hooks.join(name), Some(held), "");
            }
        }
        return out;
    }
    for (name, held) in &now.hooks {
        let before = was.hooks.get(name);
        if before.is_some_and(|b| b.same(held)) {
            continue;
        }
        let path = hooks.join(name);
        let why = if before.is_some() { "a changed hook" } else { "a new hook" };
        out.push((path.clone(), put_back(&path, before, why)));
    }
    out
}

/// In the hooks directory the user's core.hooksPath names (as it was
/// before the command): hooks the command added are removed, hooks it
/// changed put back.
pub(super) fn check_path_hooks(was: &Seen, now: &Seen) -> Vec<(PathBuf, (String, bool))> {
    let Some((dir, before)) = &was.path_hooks else { return Vec::new() };
    let current = match &now.path_hooks {
        Some((d, hooks)) if d == dir => hooks.clone(),
        // The setting changed (and is repaired above): its directory as
        // it is now.
        _ => super::seen::hooks_in(dir),
    };
    let mut out = Vec::new();
    for (name, held) in &current {
        let prior = before.get(name);
        if prior.is_some_and(|b| b.same(held)) {
            continue;
        }
        let path = dir.join(name);
        let why = if prior.is_some() { "a changed hook (core.hooksPath)" } else { "a new hook (core.hooksPath)" };
        out.push((path.clone(), put_back(&path, prior, why)));
    }
    out
}

/// Puts `path` back as `before` held it, or removes it: what was done,
/// after `why`, and whether it was.
pub(super) fn put_back(path: &Path, before: Option<&Held>, why: &str) -> (String, bool) {
    let sep = if why.is_empty() { "" } else { ": " };
    let restored = match before {
        Some(Held { link: Some(link), .. }) => with_writable_parent(path, || {
            let _ = std::fs::remove_file(path);
            std::os::unix::fs::symlink(link, path)
        })
        .is_ok(),
        Some(Held { data: Some(data), mode, .. }) => write(path, data, *mode).is_ok(),
        _ => false,
    };
    if restored {
        return (format!("{why}{sep}put back as it was before the command"), true);
    }
    match with_writable_parent(path, || std::fs::remove_file(path)) {
        Ok(()) => (format!("{why}{sep}removed"), true),
        Err(e) => (format!("{why}{sep}could not be removed ({e}); remove it before running git there"), false),
    }
}

/// Runs `f` with `path`'s directory writable by its owner (a command may
/// have taken that away to keep what it left), then as it was.
fn with_writable_parent<T>(path: &Path, f: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mode = std::fs::symlink_metadata(dir)?.permissions().mode() & 0o7777;
    let locked = mode & 0o300 != 0o300;
    if locked {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o300))?;
    }
    let out = f();
    if locked {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    }
    out
}

/// Writes `data` to `path` in place of whatever is there (a link is
/// replaced, not followed).
fn write(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    with_writable_parent(path, || {
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(data)?;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    })
}
