//! What a rewind does to each file, decided from what the shell found
//! (`session/rewind_task.rs` reads the records, the files and the store;
//! it decides nothing): which files are left as they are and why, which
//! changed outside Forge (a conflict), what each file becomes, a dry
//! run's diff, and, when forced, the records that keep what is
//! overwritten.

use forge_proto::{RestoredFile, RewindResult, RewindStep};

use crate::journal::StoreOp;
use crate::rewind::{FileState, Step, Unrecorded};

/// What a rewind does to the files.
pub(crate) struct RewindPlan {
    /// The files as the answer reports them (and a dry run's diff).
    pub result: RewindResult,
    /// What to write, file by file.
    pub steps: Vec<RewindStep>,
    /// Files changed outside Forge since Forge changed them.
    pub conflicts: Vec<String>,
    /// With `force`: what keeps the content the rewind overwrites.
    pub keep: Vec<StoreOp>,
}

/// Why a file whose content the store let go is not restored.
const EVICTED: &str = "its recorded content was evicted to keep the store under [store] max_blob_mb \
     (raise it to keep more; `forgectl store` shows the sizes)";

/// What the shell found about one recorded file.
pub(crate) struct FileFacts {
    /// What Forge last left there and what the target holds, as recorded.
    pub step: Step,
    /// What the file holds now (`None`: absent), or why it cannot be read.
    pub now: Result<Option<(Vec<u8>, u32)>, String>,
    /// The target's content in the store.
    pub stored: Stored,
}

/// A target's content in the store.
pub(crate) enum Stored {
    /// Not looked for: the target is an absent file, a mark, or unknown.
    NotNeeded,
    /// There (its bytes when a dry run shows a diff).
    Present(Option<Vec<u8>>),
    /// Let go to keep the store under its bound.
    Evicted,
    /// Never stored: it held a secret.
    Withheld,
}

/// A rewind's decisions.
pub(crate) struct Decide<'a> {
    pub session_id: &'a str,
    /// The node the rewind leaves (what is overwritten is kept as a change
    /// after it).
    pub leaving: Option<&'a str>,
    pub dry_run: bool,
    pub force: bool,
    pub now_ms: i64,
    /// The session's directory: a dry run's diff names files from it.
    pub cwd: &'a str,
}

/// A mark instead of a hash: the change was seen, its content not kept.
fn marked(state: &Option<FileState>) -> Option<Unrecorded> {
    match state {
        Some(Some((hash, _))) => Unrecorded::of(hash),
        _ => None,
    }
}

impl Decide<'_> {
    pub(crate) fn plan(&self, facts: Vec<FileFacts>) -> Result<RewindPlan, String> {
        let mut plan = RewindPlan {
            result: RewindResult {
                session_id: self.session_id.to_string(),
                node: None,
                files: Vec::new(),
                unknown: Vec::new(),
                dry_run: self.dry_run,
                diff: None,
                conversation: false,
                files_omitted: 0,
            },
            steps: Vec::new(),
            conflicts: Vec::new(),
            keep: Vec::new(),
        };
        let mut unrecorded = Vec::new();
        let mut diff = String::new();
        for FileFacts { mut step, now, stored } in facts {
            if let Some(why) = marked(&step.target) {
                unrecorded.push(kept(&step.path, why.why()));
                continue;
            }
            // What Forge left there is not known in content: no conflict
            // can be told.
            if marked(&step.expected).is_some() {
                step.expected = None;
            }
            let shown = crate::rewind::shown_path(&step.path);
            let now = now.map_err(|e| format!("cannot read {shown}: {e}"))?;
            let now_state = now.as_ref().map(|(data, mode)| (crate::rewind::hash(data), *mode));
            let Some(target) = step.target.clone() else {
                plan.result.unknown.push(shown);
                continue;
            };
            if target == now_state {
                continue;
            }
            let conflict = step.expected.as_ref().is_some_and(|e| *e != now_state);
            if conflict {
                plan.conflicts.push(shown.clone());
            }
            let action = match (&now_state, &target) {
                (Some(_), None) => "delete",
                (None, Some(_)) => "create",
                _ => "restore",
            };
            let mut file =
                RestoredFile { path: shown.clone(), action: action.into(), conflict, overwritten: None, note: None };
            let target_data = match (&target, stored) {
                (None, _) => None,
                (Some(_), Stored::Present(data)) => data,
                // Content holding a secret is never stored; old content goes
                // past the store's bound.
                (Some(_), Stored::Evicted) => {
                    plan.result.files.push(RestoredFile { note: Some(EVICTED.into()), action: "kept".into(), ..file });
                    continue;
                }
                (Some(_), Stored::Withheld | Stored::NotNeeded) => {
                    let note = "its recorded content held a secret, which Forge does not store";
                    plan.result.files.push(RestoredFile { note: Some(note.into()), action: "kept".into(), ..file });
                    continue;
                }
            };
            if self.dry_run {
                // `a/src/x.rs`, not `a//home/me/project/src/x.rs`.
                let shown = crate::rewind::text_path(&step.path)
                    .strip_prefix(self.cwd)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| shown.trim_start_matches('/').to_string());
                diff.push_str(&crate::rewind::unified_diff(
                    &shown,
                    now.as_ref().map(|(d, _)| d.as_slice()),
                    target_data.as_deref(),
                ));
            }
            if conflict && self.force {
                file.overwritten = self.keep(&mut plan.keep, &step, now);
            }
            let (hash, mode) = match target {
                Some((hash, mode)) => (Some(hash), mode),
                None => (None, 0),
            };
            plan.steps.push(RewindStep { path: step.path, hash, mode });
            plan.result.files.push(file);
        }
        plan.result.files.extend(unrecorded);
        if self.dry_run {
            plan.result.diff = Some(diff);
        }
        Ok(plan)
    }

    /// What a forced rewind overwrites is kept, as a change made after
    /// the head it leaves, so going back there brings it back. (With no
    /// head, under the session's own id: on no path, but kept.) Returns
    /// the kept content's hash.
    fn keep(&self, ops: &mut Vec<StoreOp>, step: &Step, now: Option<(Vec<u8>, u32)>) -> Option<String> {
        let after = now.map(|(data, mode)| {
            let hash = crate::rewind::hash(&data);
            ops.extend(StoreOp::blob(hash.clone(), data));
            (hash, mode)
        });
        let overwritten = after.as_ref().map(|(hash, _)| hash.clone());
        ops.push(StoreOp::RecordChange {
            session_id: self.session_id.to_string(),
            node_id: self.leaving.unwrap_or(self.session_id).to_string(),
            call_id: "edited-by-hand".into(),
            path: step.path.clone(),
            before: step.expected.clone().flatten(),
            after,
            created_ms: self.now_ms,
        });
        overwritten
    }
}

fn kept(path: &str, why: &str) -> RestoredFile {
    RestoredFile {
        path: crate::rewind::shown_path(path),
        action: "kept".into(),
        conflict: false,
        overwritten: None,
        note: Some(why.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(path: &str, expected: Option<FileState>, target: Option<FileState>) -> Step {
        Step { path: path.into(), expected, target }
    }

    fn state(data: &[u8]) -> FileState {
        Some((crate::rewind::hash(data), 0o644))
    }

    #[test]
    fn a_file_changed_outside_forge_is_a_conflict_and_forcing_keeps_what_it_held() {
        let facts = || {
            vec![
                FileFacts {
                    step: step("a", Some(state(b"forge")), Some(state(b"old"))),
                    now: Ok(Some((b"by hand".to_vec(), 0o644))),
                    stored: Stored::Present(None),
                },
                FileFacts {
                    step: step("b", Some(state(b"forge")), Some(None)),
                    now: Ok(Some((b"forge".to_vec(), 0o644))),
                    stored: Stored::NotNeeded,
                },
                FileFacts {
                    step: step("c", Some(state(b"x")), Some(state(b"y"))),
                    now: Ok(Some((b"x".to_vec(), 0o644))),
                    stored: Stored::Evicted,
                },
            ]
        };
        let decide =
            Decide { session_id: "s", leaving: Some("n2"), dry_run: false, force: false, now_ms: 7, cwd: "/p" };
        let plan = decide.plan(facts()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.conflicts, ["a"]);
        let actions: Vec<(&str, &str)> =
            plan.result.files.iter().map(|f| (f.path.as_str(), f.action.as_str())).collect();
        assert_eq!(actions, [("a", "restore"), ("b", "delete"), ("c", "kept")]);
        assert!(plan.keep.is_empty(), "nothing is kept unless forced");
        let forced = Decide { force: true, ..decide }.plan(facts()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            forced.keep.iter().any(|op| matches!(op, StoreOp::RecordChange { node_id, .. } if node_id == "n2")),
            "what the user wrote is kept after the node left"
        );
        assert_eq!(forced.result.files[0].overwritten, Some(crate::rewind::hash(b"by hand")));
    }

    #[test]
    fn a_dry_runs_diff_names_files_from_the_sessions_directory() {
        let facts = vec![FileFacts {
            step: step("/p/src/a.txt", Some(state(b"new\n")), Some(state(b"old\n"))),
            now: Ok(Some((b"new\n".to_vec(), 0o644))),
            stored: Stored::Present(Some(b"old\n".to_vec())),
        }];
        let decide = Decide { session_id: "s", leaving: None, dry_run: true, force: false, now_ms: 0, cwd: "/p" };
        let diff = decide.plan(facts).unwrap_or_else(|e| panic!("{e}")).result.diff.unwrap_or_default();
        assert!(diff.contains("--- a/src/a.txt") && diff.contains("+++ b/src/a.txt"), "{diff}");
    }
}
