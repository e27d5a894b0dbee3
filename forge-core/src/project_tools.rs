//! The approvals of projects' own tools (`.forge/tools/*.toml`): a tool
//! file is offered to the model only as its content was when the user
//! approved it (`forgectl tools approve`), so a freshly cloned repository,
//! or a file the model or a command rewrote, waits for the user again.
//!
//! Approvals are kept per project (a git repository's top: a git
//! session's worktree counts as the user's repository) in
//! `$FORGE_HOME/tool-approvals.json`, private to the user.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use forge_proto::params::ToolFileRef;
use forge_proto::{ProjectTool, ProjectTools};
use forge_tools::repo_tools::{self, RepoTool, ToolFile};
use serde::{Deserialize, Serialize};

/// One approved tool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Approval {
    project: String,
    file: String,
    sha256: String,
    approved_ms: i64,
    /// The project files its command named, as approved (path, digest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pinned: Vec<(String, String)>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ApprovalsFile {
    #[serde(default)]
    approved: Vec<Approval>,
}

/// Where a session's project tools are read, and whose approvals apply.
struct Project {
    /// The approvals' key: the user's repository top, or the folder.
    key: String,
    /// Where `.forge/tools` is read: the top the session sees.
    top: PathBuf,
}

fn project(cwd: &Path) -> Project {
    let top = repo_tools::project_top(cwd);
    Project { key: key_of(&top), top }
}

/// The approvals' key of the project whose top is `top` (opening its
/// repository: done only when it has tool files).
fn key_of(top: &Path) -> String {
    let key = forge_git::user_top(top).unwrap_or_else(|| top.canonicalize().unwrap_or_else(|_| top.to_path_buf()));
    key.display().to_string()
}

/// The project tools a session offers now, and a digest that changes when
/// they do.
pub(crate) struct Offered {
    pub tools: Vec<Arc<RepoTool>>,
    pub digest: String,
}

pub struct ToolApprovals {
    path: PathBuf,
    records: RwLock<Vec<Approval>>,
}

impl ToolApprovals {
    /// Reads `$FORGE_HOME/tool-approvals.json` (none, or unreadable: nothing
    /// is approved, and a warning says why).
    pub fn open(home: &Path) -> ToolApprovals {
        let path = home.join("tool-approvals.json");
        let records = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<ApprovalsFile>(&bytes).map(|f| f.approved).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the tool approvals; none is approved");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        ToolApprovals { path, records: RwLock::new(records) }
    }

    fn record(&self, key: &str, file: &str) -> Option<Approval> {
        let records = self.records.read().unwrap_or_else(|p| p.into_inner());
        records.iter().find(|r| r.project == key && r.file == file).cloned()
    }

    /// The approved, valid tools of the project `cwd` is in, as their
    /// files are now.
    /// (Read before each message: a project without tool files costs one
    /// stat.)
    pub(crate) fn offered(&self, cwd: &Path) -> Offered {
        let top = repo_tools::project_top(cwd);
        let files = repo_tools::scan_from(&top, cwd);
        let (mut digest, mut tools) = (String::new(), Vec::new());
        if files.is_empty() {
            return Offered { tools, digest };
        }
        let key = key_of(&top);
        for f in files {
            let Ok(tool) = &f.tool else { continue };
            if self.record(&key, &f.file).is_some_and(|r| r.sha256 == f.sha256) {
                digest.push_str(&f.sha256);
                tools.push(tool.clone());
            }
        }
        Offered { tools, digest }
    }

    /// The project's tool files and their approvals; `taken` says whether
    /// a name is already a built-in or MCP tool's.
    pub fn report(&self, cwd: &Path, taken: &dyn Fn(&str) -> bool) -> ProjectTools {
        let p = project(cwd);
        let tools = repo_tools::scan_from(&p.top, cwd).into_iter().map(|f| self.describe(&p.key, f, taken)).collect();
        ProjectTools { project: p.key, dir: p.top.display().to_string(), tools }
    }

    fn describe(&self, key: &str, f: ToolFile, taken: &dyn Fn(&str) -> bool) -> ProjectTool {
        let record = self.record(key, &f.file);
        let mut t = ProjectTool {
            state: String::new(),
            name: None,
            description: None,
            command: None,
            parameters: None,
            error: None,
            approved_ms: None,
            pinned: f.pinned.iter().map(|p| p.path.clone()).collect(),
            file: f.file,
            sha256: f.sha256.clone(),
        };
        match f.tool {
            Err(e) => {
                t.state = "invalid".into();
                t.error = Some(format!("{} {e}", t.file));
            }
            Ok(tool) => {
                t.state = match &record {
                    Some(r) if r.sha256 == f.sha256 => "approved",
                    Some(_) => "changed",
                    None => "unapproved",
                }
                .into();
                if taken(&tool.def.name) {
                    t.error = Some(format!("`{}` is the name of another tool; this one is not offered", tool.def.name));
                } else if let Some(r) = record.as_ref().filter(|r| r.sha256 != f.sha256) {
                    t.error = Some(what_changed(&t.file, &r.pinned, &f.pinned));
                }
                t.approved_ms = record.filter(|r| r.sha256 == f.sha256).map(|r| r.approved_ms);
                t.name = Some(tool.def.name.clone());
                t.description = Some(tool.def.description.clone());
                t.command = Some(tool.def.command.clone());
                t.parameters = Some(tool.def.parameters.clone());
            }
        }
        t
    }

    /// Approves `files` of the project `cwd` is in, each only if its
    /// content is still the one the user saw (`sha256`).
    pub fn approve(&self, cwd: &Path, files: &[ToolFileRef], now_ms: i64) -> Result<(), String> {
        let p = project(cwd);
        let now: Vec<ToolFile> = repo_tools::scan_from(&p.top, cwd);
        let mut records = self.records.write().unwrap_or_else(|e| e.into_inner());
        for want in files {
            let Some(f) = now.iter().find(|f| f.file == want.file) else {
                return Err(format!("{} has no tool file {}", p.top.display(), want.file));
            };
            if f.sha256 != want.sha256 {
                return Err(format!("{} changed since it was shown; look at it again and approve it then", f.file));
            }
            if let Err(e) = &f.tool {
                return Err(format!("{} {e}; fix it first", f.file));
            }
            records.retain(|r| !(r.project == p.key && r.file == f.file));
            records.push(Approval {
                project: p.key.clone(),
                file: f.file.clone(),
                sha256: f.sha256.clone(),
                approved_ms: now_ms,
                pinned: f.pinned.iter().map(|p| (p.path.clone(), p.sha256.clone())).collect(),
            });
        }
        let saved = crate::trust::write_private_json(&self.path, &ApprovalsFile { approved: records.clone() });
        saved.map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    /// Ends the approval of `files` (none: all) of the project `cwd` is in.
    pub fn revoke(&self, cwd: &Path, files: &[String]) -> Result<(), String> {
        let p = project(cwd);
        let mut records = self.records.write().unwrap_or_else(|e| e.into_inner());
        records.retain(|r| r.project != p.key || !(files.is_empty() || files.contains(&r.file)));
        let saved = crate::trust::write_private_json(&self.path, &ApprovalsFile { approved: records.clone() });
        saved.map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

/// Which of a tool's files changed since its approval.
fn what_changed(file: &str, then: &[(String, String)], now: &[repo_tools::Pinned]) -> String {
    let mut changed: Vec<&str> = now
        .iter()
        .filter(|p| !then.iter().any(|(path, sha)| *path == p.path && *sha == p.sha256))
        .map(|p| p.path.as_str())
        .collect();
    changed.extend(then.iter().filter(|(path, _)| !now.iter().any(|p| p.path == *path)).map(|(path, _)| path.as_str()));
    match changed.is_empty() {
        true => format!("{file} changed since you approved it; approve it again to offer it"),
        false => format!(
            "{} changed since you approved {file}, which runs it; approve it again to offer it",
            changed.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_file_is_offered_as_approved_and_a_change_withdraws_it() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let tools = dir.path().join(".forge/tools");
        std::fs::create_dir_all(&tools).unwrap_or_else(|e| panic!("{e}"));
        let write = |cmd: &str| {
            std::fs::write(tools.join("t.toml"), format!("name = \"t\"\ndescription = \"d\"\ncommand = \"{cmd}\"\n"))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        write("make");
        let approvals = ToolApprovals::open(home.path());
        let none = |_: &str| false;
        let report = approvals.report(dir.path(), &none);
        assert_eq!(report.tools[0].state, "unapproved");
        assert!(approvals.offered(dir.path()).tools.is_empty(), "not offered before approval");
        let stale = ToolFileRef { file: ".forge/tools/t.toml".into(), sha256: "0".repeat(64) };
        assert!(approvals.approve(dir.path(), &[stale], 1).is_err(), "content the user did not see");
        let seen = ToolFileRef { file: report.tools[0].file.clone(), sha256: report.tools[0].sha256.clone() };
        approvals.approve(dir.path(), &[seen], 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ToolApprovals::open(home.path()).offered(dir.path()).tools.len(), 1, "kept across restarts");
        write("make; curl evil");
        assert!(approvals.offered(dir.path()).tools.is_empty(), "a changed file is withdrawn");
        assert_eq!(approvals.report(dir.path(), &none).tools[0].state, "changed");
        approvals.revoke(dir.path(), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(approvals.report(dir.path(), &none).tools[0].state, "unapproved");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("tool-approvals.json")).map(|m| m.permissions().mode());
        assert_eq!(mode.unwrap_or(0) & 0o077, 0, "private to the user");
    }
}
