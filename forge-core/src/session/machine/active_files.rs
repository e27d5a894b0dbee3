//! The session's active files: files whose whole text goes with every
//! request, kept by the model (`update_context`) and by clients
//! (`session.context_files`). The shell checks a file (within the
//! sandbox, text, under the read limit: `Effect::CheckFiles`, or the tool
//! itself); the machine decides what fits the context budget, keeps the
//! list in the session's row and journals each change
//! (`active_files_changed`). A file that no longer exists leaves the list
//! with a notice. The shell reads their text into each request
//! (`ChatRequest::active_files`), just before the turn's last message.

use std::path::Path;

use forge_proto::params::ContextFilesParams;
use forge_proto::{ActiveFile, ClientRef, ContextFilesResult, EventKind, RefusedFile};

use super::{Effect, Session};
use crate::journal::StoreOp;
use crate::session::Reply;
use crate::tools::builtin::update_context::{Checked, block_bytes};
use crate::tools::{Sandbox, ToolError, ToolLimits};

/// Most paths one `session.context_files` names.
const MAX_PATHS: usize = 50;

/// Files to check for `session.context_files`; back as
/// `JobOutcome::FilesChecked` with `then`.
pub(crate) struct CheckJob {
    pub job: u64,
    pub sandbox: Sandbox,
    pub limits: ToolLimits,
    pub paths: Vec<String>,
    pub then: Box<Pending>,
}

/// The command waiting for its files' check.
pub(crate) struct Pending {
    remove: Vec<String>,
    client: ClientRef,
    reply: Reply<ContextFilesResult>,
}

impl CheckJob {
    /// The check, as the shell runs it.
    pub(crate) fn run(self) -> (Checked, Box<Pending>) {
        let mut checked = Checked::default();
        for path in self.paths {
            match crate::tools::builtin::update_context::check(&self.sandbox, &self.limits, &path) {
                Ok(bytes) => checked.ok.push((path, bytes)),
                Err(reason) => checked.refused.push((path, reason)),
            }
        }
        (checked, self.then)
    }
}

/// `path` as the list keeps it: relative to `cwd` when it is in it,
/// without a leading `./`.
fn normal(cwd: &str, path: &str) -> String {
    let p = Path::new(path);
    let p = p.strip_prefix(cwd).unwrap_or(p);
    let p = p.strip_prefix(".").unwrap_or(p);
    p.display().to_string()
}

impl Session {
    pub(super) fn on_context_files(
        &mut self,
        params: ContextFilesParams,
        client: ClientRef,
        reply: Reply<ContextFilesResult>,
    ) {
        if params.add.len() + params.remove.len() > MAX_PATHS {
            let e = crate::error::EngineError::new(
                forge_proto::ErrorKind::InvalidParams,
                format!("at most {MAX_PATHS} paths at once"),
            );
            return self.out.push(Effect::Reply(super::ReadyReply::now(reply, Err(e))));
        }
        let then = Box::new(Pending { remove: params.remove, client, reply });
        if params.add.is_empty() {
            return self.on_files_checked(Checked::default(), *then);
        }
        let job = self.new_job();
        let (sandbox, limits) = (super::tools::sandbox_for(&self.row, &self.config), self.tool_limits());
        self.out.push(Effect::CheckFiles(Box::new(CheckJob { job, sandbox, limits, paths: params.add, then })));
    }

    /// The files of a `session.context_files` are checked: the change is
    /// made and answered once durable.
    pub(super) fn on_files_checked(&mut self, mut checked: Checked, then: Pending) {
        let Pending { remove, client, reply } = then;
        checked.remove = remove;
        let result = self.apply_files(checked, Some(client));
        self.reply_when_durable(reply, Ok(result));
    }

    /// `update_context`'s result: what the tool found, applied, in words.
    pub(super) fn on_update_context(&mut self, result: Result<String, ToolError>) -> Result<String, ToolError> {
        let checked: Checked = match result.map(|text| serde_json::from_str(&text)) {
            Ok(Ok(checked)) => checked,
            Ok(Err(e)) => {
                return Err(ToolError::ExecutionFailed { tool: "update_context".into(), message: e.to_string() });
            }
            Err(e) => return Err(e),
        };
        let r = self.apply_files(checked, None);
        let mut words = Vec::new();
        if !r.added.is_empty() {
            words.push(format!("Added: {}.", r.added.join(", ")));
        }
        if !r.removed.is_empty() {
            words.push(format!("Removed: {}.", r.removed.join(", ")));
        }
        for f in &r.refused {
            words.push(format!("Not added: {} ({}).", f.path, f.reason));
        }
        let list: Vec<String> = r.files.iter().map(|f| format!("{} ({} bytes)", f.path, f.bytes)).collect();
        words.push(match list.is_empty() {
            true => "No file is active now.".to_string(),
            false => format!("Active now, their text in every request: {}.", list.join(", ")),
        });
        let text = words.join("\n");
        match r.added.is_empty() && r.removed.is_empty() && !r.refused.is_empty() {
            true => Err(ToolError::ExecutionFailed { tool: "update_context".into(), message: text }),
            false => Ok(text),
        }
    }

    /// Removals first, then additions while they fit the budget: half of
    /// what the model's window leaves for input after the system prompt
    /// and tools, so the conversation keeps the rest.
    fn apply_files(&mut self, checked: Checked, client: Option<ClientRef>) -> ContextFilesResult {
        let cwd = self.row.cwd.clone();
        let mut files = std::mem::take(&mut self.row.active_files);
        let mut removed = Vec::new();
        for path in checked.remove {
            let path = normal(&cwd, &path);
            if let Some(at) = files.iter().position(|f| f.path == path) {
                removed.push(files.remove(at).path);
            }
        }
        let room = self.active_files_room();
        let mut refused: Vec<RefusedFile> =
            checked.refused.into_iter().map(|(path, reason)| RefusedFile { path, reason }).collect();
        let mut added = Vec::new();
        for (path, bytes) in checked.ok {
            let path = normal(&cwd, &path);
            let others: u64 = files.iter().filter(|f| f.path != path).map(|f| block_bytes(&f.path, f.bytes)).sum();
            let tokens = |b: u64| self.estimator.tokens(b as usize);
            if let Some(room) = room.filter(|room| tokens(others + block_bytes(&path, bytes)) > *room) {
                let reason = format!(
                    "{bytes} bytes, about {} tokens, would not fit: active files may take about {room} tokens of this model's window, and the others take about {}",
                    tokens(block_bytes(&path, bytes)),
                    tokens(others)
                );
                refused.push(RefusedFile { path, reason });
                continue;
            }
            match files.iter_mut().find(|f| f.path == path) {
                Some(f) => f.bytes = bytes,
                None => {
                    files.push(ActiveFile { path: path.clone(), bytes });
                    added.push(path);
                }
            }
        }
        if let Some(event) = self.set_active_files(files, added.clone(), removed.clone(), Vec::new(), Vec::new()) {
            self.pipeline.event(client, event);
        }
        ContextFilesResult {
            session_id: self.row.id.clone(),
            files: self.row.active_files.clone(),
            added,
            removed,
            refused,
        }
    }

    /// The tokens active files may take, when the model's window is known.
    fn active_files_room(&self) -> Option<u64> {
        let budget = self.context_budget()?;
        let fixed = self.estimator.tokens(self.system_prompt.len() + self.tools_bytes);
        Some(budget.input_limit().saturating_sub(fixed) / 2)
    }

    /// Keeps `files` as the list (its store op written), and the event
    /// that says so when it changed.
    fn set_active_files(
        &mut self,
        files: Vec<ActiveFile>,
        added: Vec<String>,
        removed: Vec<String>,
        gone: Vec<String>,
        too_large: Vec<String>,
    ) -> Option<EventKind> {
        let changed = files != self.row.active_files
            || !(added.is_empty() && removed.is_empty() && gone.is_empty() && too_large.is_empty());
        self.row.active_files = files;
        if !changed {
            return None;
        }
        self.pipeline.op(StoreOp::set_active_files(&self.row.id, &self.row.active_files));
        let files = self.row.active_files.clone();
        Some(EventKind::ActiveFilesChanged { files, added, removed, gone, too_large })
    }

    /// Active files found gone (deleted by a call, or outside Forge)
    /// leave the list at once; the notice is the event returned.
    pub(super) fn take_gone(&mut self, gone: &[String]) -> Option<EventKind> {
        let cwd = self.row.cwd.clone();
        let gone: Vec<String> = gone.iter().map(|p| normal(&cwd, p)).collect();
        let (left, kept): (Vec<ActiveFile>, Vec<ActiveFile>) =
            self.row.active_files.clone().into_iter().partition(|f| gone.contains(&f.path));
        if left.is_empty() {
            return None;
        }
        let gone = left.into_iter().map(|f| f.path).collect();
        self.set_active_files(kept, Vec::new(), Vec::new(), gone, Vec::new())
    }

    /// Before a message: the active files' sizes as they are now; those
    /// gone leave, and while they take more than their room the largest
    /// leave too (a file grown past it would make every request too long).
    pub(super) fn refresh_active_files(&mut self, now: &[(String, Option<u64>)]) -> Option<EventKind> {
        if now.is_empty() {
            return None;
        }
        let gone: Vec<String> = now.iter().filter(|(_, size)| size.is_none()).map(|(p, _)| p.clone()).collect();
        let mut files: Vec<ActiveFile> = self
            .row
            .active_files
            .iter()
            .filter(|f| !gone.contains(&f.path))
            .map(|f| {
                let bytes = now.iter().find(|(p, _)| *p == f.path).and_then(|(_, s)| *s).unwrap_or(f.bytes);
                ActiveFile { path: f.path.clone(), bytes }
            })
            .collect();
        let mut too_large = Vec::new();
        if let Some(room) = self.active_files_room() {
            let total = |files: &[ActiveFile]| -> u64 {
                files.iter().map(|f| self.estimator.tokens(block_bytes(&f.path, f.bytes) as usize)).sum()
            };
            while total(&files) > room {
                let Some(at) = files.iter().enumerate().max_by_key(|(_, f)| f.bytes).map(|(i, _)| i) else { break };
                too_large.push(files.remove(at).path);
            }
        }
        if gone.is_empty() && too_large.is_empty() {
            // Sizes alone: kept for the budget, nothing to say.
            if files != self.row.active_files {
                self.row.active_files = files;
                self.pipeline.op(StoreOp::set_active_files(&self.row.id, &self.row.active_files));
            }
            return None;
        }
        self.set_active_files(files, Vec::new(), Vec::new(), gone, too_large)
    }

    /// Bytes the active files add to every request.
    pub(super) fn active_bytes(&self) -> usize {
        self.row.active_files.iter().map(|f| block_bytes(&f.path, f.bytes) as usize).sum()
    }

    /// What the shell reads into the next request, if any file is active.
    pub(super) fn active_files_read(&self) -> Option<crate::provider::ActiveFilesRead> {
        (!self.row.active_files.is_empty()).then(|| crate::provider::ActiveFilesRead {
            sandbox: super::tools::sandbox_for(&self.row, &self.config),
            limits: self.tool_limits(),
            paths: self.row.active_files.iter().map(|f| f.path.clone()).collect(),
        })
    }
}

/// The size of each of `paths` in `cwd` now (`None`: gone), never through
/// a link: a file turned into one shows the link's own size (and is not
/// read: the sandbox refuses links), not that of what it names.
pub(crate) fn sizes(cwd: &str, paths: &[String]) -> Vec<(String, Option<u64>)> {
    let size = |p: &String| std::fs::symlink_metadata(Path::new(cwd).join(p)).ok().map(|m| m.len());
    paths.iter().map(|p| (p.clone(), size(p))).collect()
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn an_active_file_turned_into_a_link_is_sized_as_the_link() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 100_000]).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&big, dir.path().join("a.txt")).unwrap_or_else(|e| panic!("{e}"));
        let cwd = dir.path().display().to_string();
        let got = super::sizes(&cwd, &["a.txt".into(), "gone.txt".into()]);
        assert!(got[0].1.is_some_and(|n| n < 1000), "{got:?}");
        assert_eq!(got[1].1, None);
    }
}
