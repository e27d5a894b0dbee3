//! The git guard across a crash. Before each command the guard's record
//! of the nested repositories (their settings and hooks as the user left
//! them) is saved beside the store, durable before the command runs, and
//! removed once the command's end has been checked. A file still there
//! when the session loads means the daemon died while a command ran (a
//! kill -9, a crash, a power cut): the guard is read back and checks the
//! roots as after any command, so a setting the command planted is
//! undone before the user's next `git status` can run it.

use std::io::Write;
use std::path::{Path, PathBuf};

use forge_proto::GitUndone;

/// Where session `session`'s guard is saved (`guards/` beside the store).
pub(super) fn path(db: &Path, session: &str) -> PathBuf {
    db.with_file_name("guards").join(format!("{session}.json"))
}

/// Saves `guard` for call `call_id`, private to the user and synced.
pub(super) fn save(file: &Path, call_id: &str, guard: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let Some(dir) = file.parent() else { return Ok(()) };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = file.with_extension("tmp");
    let mut out = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    out.write_all(call_id.as_bytes())?;
    out.write_all(b"\n")?;
    out.write_all(guard)?;
    out.sync_all()?;
    std::fs::rename(&tmp, file)?;
    std::fs::File::open(dir)?.sync_all()
}

/// The command's end was checked: nothing is left to do after a crash.
pub(super) fn clear(file: &Path) {
    if let Err(e) = std::fs::remove_file(file)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(file = %file.display(), error = %e, "the saved git guard could not be removed");
    }
}

/// After a crash: the call that was running, and what it left in the
/// repositories under the roots that git would run, undone. `None` when
/// no command was running (or the saved guard is stale: its call has a
/// result, it was stopped before it ran).
pub(super) async fn after_crash(
    shared: &crate::shared::Shared,
    session: &str,
) -> Result<Option<(String, Vec<GitUndone>)>, crate::error::EngineError> {
    let file = path(&shared.db, session);
    let Ok(data) = tokio::fs::read(&file).await else { return Ok(None) };
    let Some(at) = data.iter().position(|b| *b == b'\n') else {
        clear(&file);
        return Ok(None);
    };
    let call_id = String::from_utf8_lossy(&data[..at]).into_owned();
    if shared.store.call_answered(session, &call_id).await? {
        clear(&file);
        return Ok(None);
    }
    let guard = data[at + 1..].to_vec();
    let checked = tokio::task::spawn_blocking(move || {
        let undone = check(&guard);
        if undone.is_none() {
            tracing::warn!(file = %file.display(), "the saved git guard could not be read; nothing was checked");
        }
        clear(&file);
        undone
    });
    Ok(checked.await.ok().flatten().map(|undone| (call_id, undone)))
}

/// Checks the roots against a saved guard: what was undone.
fn check(saved: &[u8]) -> Option<Vec<GitUndone>> {
    let mut guard = forge_tools::git_guard::Guard::restored(saved)?;
    let spots = guard.find();
    let base = guard.given_roots().first().cloned().unwrap_or_default();
    let undone = guard.check(spots);
    Some(
        undone
            .into_iter()
            .map(|u| GitUndone {
                path: u.path.strip_prefix(&base).unwrap_or(&u.path).display().to_string(),
                what: u.what,
            })
            .collect(),
    )
}
