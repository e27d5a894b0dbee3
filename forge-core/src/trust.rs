//! Workspace trust: what a project brings that runs code (the hooks of
//! `.claude/settings.json` and `.claude/settings.local.json`, the MCP
//! servers of `.mcp.json`) is honoured only in a folder the user has
//! trusted (`forgectl trust DIR`), and only as it was when trusted: the
//! record keeps a digest of those files, so a freshly cloned repository,
//! or a file a command planted, waits for the user's word again. The
//! project's own slash commands (which may grant tools) and agent types
//! are honoured only in a trusted folder too, and listed with the rest.
//!
//! Records live in `$FORGE_HOME/trust.json` (private to the user, never
//! readable by commands).

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use sha2::Digest;

/// The project files that can make Forge run a program.
const PROJECT_FILES: &[&str] = &[".claude/settings.json", ".claude/settings.local.json", ".mcp.json"];

/// One trusted folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub dir: String,
    /// SHA-256 of the project files as they were when trusted.
    pub digest: String,
    pub trusted_ms: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    trusted: Vec<Record>,
}

/// What a folder provides that runs code, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// What runs code, in words (`hooks in .claude/settings.json`).
    pub provides: Vec<String>,
    pub digest: String,
}

/// A folder's trust, as Forge sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// The folder provides nothing that runs code.
    Nothing,
    Trusted(Project),
    /// Not trusted: what it provides is ignored.
    Untrusted(Project),
    /// Trusted once, but its files changed since: ignored until trusted
    /// again.
    Changed(Project),
}

impl State {
    pub fn trusted(&self) -> bool {
        matches!(self, State::Trusted(_))
    }

    pub fn word(&self) -> &'static str {
        match self {
            State::Nothing => "nothing",
            State::Trusted(_) => "trusted",
            State::Untrusted(_) => "untrusted",
            State::Changed(_) => "changed",
        }
    }
}

/// What `dir`'s project files provide that trust gates: hooks and MCP
/// servers (a file without them counts too: it may gain some), then the
/// project's slash commands (with what they grant) and agent types.
pub fn project(dir: &Path) -> Option<Project> {
    let (mut provides, digest) = project_files(dir);
    for c in crate::slash_commands::load(dir, true).iter().filter(|c| c.info.source == "project") {
        provides.push(match c.info.allowed_tools.is_empty() {
            true => format!("command /{}", c.info.name),
            false => format!("command /{} (allowed-tools: {})", c.info.name, c.info.allowed_tools.join(", ")),
        });
    }
    for a in crate::agents::load(dir, true).iter().filter(|a| a.info.source == "project") {
        provides.push(format!("agent {}", a.info.name));
    }
    (!provides.is_empty()).then_some(Project { provides, digest })
}

/// What `dir`'s files that run code provide, and their digest (empty
/// where there are none: folders trusted so recorded an empty one).
fn project_files(dir: &Path) -> (Vec<String>, String) {
    let mut hash = sha2::Sha256::new();
    let mut provides = Vec::new();
    let mut hashed = false;
    for name in PROJECT_FILES {
        let Ok(bytes) = std::fs::read(dir.join(name)) else { continue };
        hashed = true;
        hash.update(name.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let count = |key: &str| v.get(key).and_then(|h| h.as_object()).map(|o| o.len()).unwrap_or(0);
        provides.push(match *name {
            ".mcp.json" => format!("MCP servers in .mcp.json ({})", count("mcpServers")),
            _ => format!("hooks in {name} ({} event(s))", count("hooks")),
        });
    }
    let digest = if hashed { hash.finalize().iter().map(|b| format!("{b:02x}")).collect() } else { String::new() };
    (provides, digest)
}

/// The MCP servers of `dir`'s `.mcp.json` (Claude Code's format:
/// `{"mcpServers": {NAME: {command, args, env} | {type: "http", url,
/// headers}}}`); what cannot be read is skipped with a warning.
pub fn project_mcp_servers(dir: &Path) -> Vec<forge_proto::McpServerSpec> {
    let Ok(bytes) = std::fs::read(dir.join(".mcp.json")) else { return Vec::new() };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, ".mcp.json is not JSON; its servers are not started");
            return Vec::new();
        }
    };
    let strings = |v: Option<&serde_json::Value>| -> std::collections::BTreeMap<String, String> {
        v.and_then(|m| m.as_object())
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default()
    };
    let Some(servers) = v.get("mcpServers").and_then(|s| s.as_object()) else { return Vec::new() };
    servers
        .iter()
        .map(|(name, s)| forge_proto::McpServerSpec {
            name: name.clone(),
            command: s.get("command").and_then(|c| c.as_str()).map(str::to_string),
            args: s
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            env: strings(s.get("env")),
            url: s.get("url").and_then(|c| c.as_str()).map(str::to_string),
            headers: strings(s.get("headers")),
        })
        .collect()
}

/// The trusted folders, kept in a file of the daemon's home.
pub struct TrustStore {
    path: PathBuf,
    records: RwLock<Vec<Record>>,
}

/// The folder as recorded: its canonical path. A git session's worktree
/// (`<git dir>/forge/worktrees/<id>`) stands for the same place in the
/// user's repository: trusting the repository covers the sessions working
/// on its branches (their files are still the ones digested).
fn key(dir: &Path) -> String {
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    worktree_origin(&canon).unwrap_or(canon).display().to_string()
}

/// Where in the user's repository a place in a session's worktree is.
fn worktree_origin(dir: &Path) -> Option<PathBuf> {
    let top = forge_tools::repo_tools::project_top(dir);
    if !top.parent().is_some_and(|p| p.ends_with("forge/worktrees")) {
        return None;
    }
    let rel = dir.strip_prefix(&top).ok()?;
    let user = forge_git::user_top(&top)?;
    Some(if rel.as_os_str().is_empty() { user } else { user.join(rel) })
}

impl TrustStore {
    /// Reads `$FORGE_HOME/trust.json` (none yet: nothing is trusted; one
    /// that cannot be read: nothing is trusted, and a warning says why).
    pub fn open(home: &Path) -> TrustStore {
        let path = home.join("trust.json");
        let records = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(f) => f.trusted,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read the trusted folders; none is trusted");
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        TrustStore { path, records: RwLock::new(records) }
    }

    /// `dir`'s trust now.
    pub fn state(&self, dir: &Path) -> State {
        let Some(project) = project(dir) else { return State::Nothing };
        let k = key(dir);
        let records = self.records.read().unwrap_or_else(|p| p.into_inner());
        match records.iter().find(|r| r.dir == k) {
            Some(r) if r.digest == project.digest => State::Trusted(project),
            Some(_) => State::Changed(project),
            None => State::Untrusted(project),
        }
    }

    /// Whether the user trusts `dir`, for what it provides that runs no
    /// code (its own slash commands): trusted, even if it provides nothing
    /// that runs code (a changed folder is not).
    pub fn trusts(&self, dir: &Path) -> bool {
        // Asked before every message: the commands and agents are listed
        // only where the digest alone cannot tell.
        let k = key(dir);
        let recorded = {
            let records = self.records.read().unwrap_or_else(|p| p.into_inner());
            records.iter().find(|r| r.dir == k).map(|r| r.digest.clone())
        };
        let Some(recorded) = recorded else { return false };
        let (files, digest) = project_files(dir);
        recorded == digest || (files.is_empty() && project(dir).is_none())
    }

    pub fn list(&self) -> Vec<Record> {
        self.records.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Trusts `dir` as its project files are now.
    pub fn trust(&self, dir: &Path, now_ms: i64) -> std::io::Result<State> {
        if !dir.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not a directory", dir.display()),
            ));
        }
        let digest = project(dir).map(|p| p.digest).unwrap_or_default();
        let k = key(dir);
        {
            let mut records = self.records.write().unwrap_or_else(|p| p.into_inner());
            records.retain(|r| r.dir != k);
            records.push(Record { dir: k, digest, trusted_ms: now_ms });
            self.save(&records)?;
        }
        Ok(self.state(dir))
    }

    /// Forgets `dir`; whether it was trusted.
    pub fn revoke(&self, dir: &Path) -> std::io::Result<bool> {
        let k = key(dir);
        let mut records = self.records.write().unwrap_or_else(|p| p.into_inner());
        let before = records.len();
        records.retain(|r| r.dir != k && r.dir != dir.display().to_string());
        if records.len() == before {
            return Ok(false);
        }
        self.save(&records)?;
        Ok(true)
    }

    /// Writes the records whole, private to the user, replacing the file
    /// in one rename.
    fn save(&self, records: &[Record]) -> std::io::Result<()> {
        write_private_json(&self.path, &File { trusted: records.to_vec() })
    }
}

/// Writes `value` as JSON to `path`, private to the user, replacing the
/// file in one rename (a crash leaves the old file or the new one).
pub(crate) fn write_private_json(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(&text)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// The escape suite's row: a cloned project's hooks and servers wait for
/// the user's trust.
pub fn probe(store: &TrustStore) -> forge_proto::SandboxProbe {
    let row = |refused: bool, detail: String| forge_proto::SandboxProbe {
        probe: "a cloned project's hooks and MCP servers run before it is trusted".into(),
        expected: "refused".into(),
        outcome: if refused { "refused" } else { "allowed" }.into(),
        ok: refused,
        detail,
    };
    let Ok(dir) = tempfile::Builder::new().prefix("forge-trust-probe-").tempdir() else {
        return row(false, "cannot make a scratch project".into());
    };
    let write = std::fs::create_dir(dir.path().join(".claude"))
        .and_then(|()| std::fs::write(dir.path().join(".claude/settings.json"), r#"{"hooks":{"SessionStart":[]}}"#))
        .and_then(|()| std::fs::write(dir.path().join(".mcp.json"), r#"{"mcpServers":{"x":{"command":"x"}}}"#));
    if let Err(e) = write {
        return row(false, format!("cannot make a scratch project: {e}"));
    }
    match store.state(dir.path()) {
        State::Untrusted(p) => row(true, format!("ignored until trusted: {}", p.provides.join(", "))),
        other => row(false, format!("the folder is {}", other.word())),
    }
}

/// `dir`'s trust on the wire.
pub fn folder(store: &TrustStore, dir: &Path) -> forge_proto::FolderTrust {
    let state = store.state(dir);
    let k = key(dir);
    let trusted_ms = store.list().into_iter().find(|r| r.dir == k).map(|r| r.trusted_ms);
    let provides = match &state {
        State::Nothing => Vec::new(),
        State::Trusted(p) | State::Untrusted(p) | State::Changed(p) => p.provides.clone(),
    };
    // A folder trusted while it held nothing that runs code is trusted
    // still: its slash commands are honoured.
    let word = if matches!(state, State::Nothing) && trusted_ms.is_some() { "trusted" } else { state.word() };
    forge_proto::FolderTrust { dir: k, state: word.into(), provides, trusted_ms }
}

pub(crate) fn absolute(dir: &str) -> Result<PathBuf, crate::error::EngineError> {
    let p = PathBuf::from(dir);
    if !p.is_absolute() {
        return Err(crate::error::EngineError::new(
            forge_proto::ErrorKind::InvalidParams,
            format!("`{dir}` is not an absolute path"),
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_trusted_as_its_files_were_and_a_change_asks_again() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let project_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = project_dir.path();
        let store = TrustStore::open(home.path());
        assert_eq!(store.state(p), State::Nothing, "nothing to trust");
        std::fs::create_dir(p.join(".claude")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".claude/settings.json"), r#"{"hooks":{"Stop":[]}}"#).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p.join(".mcp.json"), r#"{"mcpServers":{"a":{},"b":{}}}"#).unwrap_or_else(|e| panic!("{e}"));
        let State::Untrusted(project) = store.state(p) else { panic!("a cloned project is not trusted") };
        assert_eq!(project.provides, ["hooks in .claude/settings.json (1 event(s))", "MCP servers in .mcp.json (2)"]);
        assert!(store.trust(p, 1).unwrap_or_else(|e| panic!("{e}")).trusted());
        assert!(TrustStore::open(home.path()).state(p).trusted(), "kept across restarts");
        // A planted file changes what the folder provides.
        std::fs::write(p.join(".claude/settings.local.json"), r#"{"hooks":{}}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(store.state(p), State::Changed(_)));
        assert!(store.revoke(p).unwrap_or_else(|e| panic!("{e}")));
        assert!(matches!(store.state(p), State::Untrusted(_)));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("trust.json")).map(|m| m.permissions().mode()).unwrap_or(0);
        assert_eq!(mode & 0o077, 0, "private to the user");
    }
}
