//! A call that ends otherwise than by finishing (cancelled by a client,
//! or by the daemon's shutdown) has ended all the same: once its command
//! has stopped, with all it started, what it changed is recorded for
//! rewind and what it left that git would run is undone and said, as
//! after a call that finished or timed out. A session asked to stop waits
//! for these records before it does.

use forge_proto::EventKind;

use super::call::{JobOutcome, RecordAfter};
use super::state::{CallStage, RunningCall};
use super::{Effect, FileAfter, Session};
use crate::journal::StoreOp;

/// A stopped call whose changes are being read (`job`).
pub(crate) struct Settling {
    job: u64,
    node_id: String,
    call_id: String,
    /// A command's (its roots scanned).
    scanned: bool,
}

impl Session {
    /// `running` was stopped before its end: read what it changed once it
    /// has stopped (or take in what is read already).
    pub(super) fn settle_stopped(&mut self, running: &mut RunningCall) {
        let stage = std::mem::replace(&mut running.stage, CallStage::Moving);
        let (node_id, call_id) = (running.node_id.clone(), running.id.clone());
        match stage {
            CallStage::Running { before, .. } if before.scanned || !before.touched.is_empty() => {
                let job = self.new_job();
                let scanned = before.scanned;
                self.out.push(Effect::RecordAfter(Box::new(RecordAfter {
                    job,
                    session_id: self.row.id.clone(),
                    node_id: node_id.clone(),
                    call_id: call_id.clone(),
                    before,
                    sandbox: super::tools::sandbox_for(&self.row, &self.config),
                    stopped: true,
                })));
                self.settling.push(Settling { job, node_id, call_id, scanned });
            }
            // Its records are being read already: they are taken in when
            // they come back.
            CallStage::RecordingAfter { job, scanned, .. } => {
                self.settling.push(Settling { job, node_id, call_id, scanned })
            }
            CallStage::PostHooks { changes, .. } => self.end_changes(&node_id, changes),
            _ => {}
        }
    }

    /// Whether any stopped call's records are still being read.
    pub(super) fn is_settling(&self) -> bool {
        !self.settling.is_empty()
    }

    /// Whether `job` reads a stopped call's records.
    pub(super) fn settles(&self, job: u64) -> bool {
        self.settling.iter().any(|s| s.job == job)
    }

    /// A stopped call's records came back: written as a finished call's are.
    pub(super) fn on_settled(&mut self, job: u64, outcome: JobOutcome) {
        let Some(i) = self.settling.iter().position(|s| s.job == job) else { return };
        let Settling { node_id, call_id, scanned, .. } = self.settling.remove(i);
        let JobOutcome::RecordedAfter { ops, changes, undone, unrecorded } = outcome else { return };
        for op in ops {
            self.pipeline.op(op);
        }
        if !scanned {
            self.note_run_later(&changes);
        }
        self.mark_unrecorded(&node_id, &call_id, unrecorded);
        self.end_changes(&node_id, changes);
        if !undone.is_empty() {
            self.pipeline.event(None, EventKind::GitSettingsUndone { call_id, undone });
        }
    }

    /// Commands a crash cut short: what they changed was never read (the
    /// record of the tree before them died with the daemon), so each root
    /// is marked for an undo past them to name, as a failed record is.
    pub(super) fn mark_cut_short(&mut self, calls: &[forge_proto::RecoveryCall]) {
        let roots = super::tools::sandbox_for(&self.row, &self.config).roots().to_vec();
        for c in calls.iter().filter(|c| c.interrupted) {
            if !self.tools.get(&c.name).is_some_and(|t| t.changes_files_anywhere()) {
                continue;
            }
            let node = match self.interrupted_changes.get(&c.call_id) {
                Some(node) => node.clone(),
                None => self.clock.new_id("m"),
            };
            self.interrupted_changes.insert(c.call_id.clone(), node.clone());
            let marks =
                roots.iter().map(|r| (crate::rewind::path_text(r), crate::rewind::Unrecorded::CutShort)).collect();
            self.mark_unrecorded(&node, &c.call_id, marks);
        }
    }

    /// A rewind past a call names what it cannot restore under each of
    /// `roots` (ignored files not watched there, or a record that failed),
    /// rather than pretend it restores everything.
    pub(super) fn mark_unrecorded(
        &mut self,
        node_id: &str,
        call_id: &str,
        roots: Vec<(String, crate::rewind::Unrecorded)>,
    ) {
        for (root, mark) in roots {
            self.pipeline.op(StoreOp::RecordChange {
                session_id: self.row.id.clone(),
                node_id: node_id.to_string(),
                call_id: call_id.to_string(),
                path: root,
                before: Some((mark.mark().into(), 0)),
                after: Some((mark.mark().into(), 0)),
                created_ms: self.clock.now_ms(),
            });
        }
    }

    /// What a call left in the files it changed, written against its node.
    pub(super) fn end_changes(&mut self, node_id: &str, changes: Vec<FileAfter>) {
        for change in changes {
            if let (Some((hash, _)), Some(data)) = (&change.after, change.data)
                && let Some(blob) = StoreOp::blob(hash.clone(), data)
            {
                self.pipeline.op(blob);
            }
            self.pipeline.op(StoreOp::EndChange {
                node_id: node_id.to_string(),
                path: change.path,
                after: change.after,
            });
        }
    }
}
