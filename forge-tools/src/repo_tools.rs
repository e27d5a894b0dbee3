//! Tools a project declares in `.forge/tools/*.toml`: a name, a
//! description, a JSON schema of the arguments and a command template.
//! Each file is offered to the model only once the user approved its exact
//! content (the daemon keeps the approvals); a call then runs the command
//! under the sandbox like `run_command`, without asking.
//!
//! ```toml
//! name = "test"
//! description = "Run the tests of one package"
//! command = "cargo test -p {package} -- {filter}"
//! timeout_seconds = 600          # optional
//! [parameters]                   # the arguments' JSON schema
//! type = "object"
//! required = ["package"]
//! properties.package = { type = "string" }
//! properties.filter = { type = "string" }
//! ```
//!
//! `{arg}` is replaced by the argument, quoted for the shell (an array by
//! its items, each quoted; a missing argument by nothing); `{{` and `}}`
//! are literal braces.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::{RiskLevel, ToolCtx, ToolError, ToolExecutor, ToolFut};

/// Where a project's tools live, relative to its top directory.
pub const TOOLS_DIR: &str = ".forge/tools";
/// More files than this in the folder are not looked at.
const MAX_FILES: usize = 64;
/// A tool file larger than this is refused.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// A tool file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub command: String,
    /// The arguments' JSON schema (an object schema).
    #[serde(default = "empty_schema")]
    pub parameters: Value,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// One `.forge/tools/*.toml` file: where, its content's digest, and the
/// tool it declares (or why it declares none).
#[derive(Clone)]
pub struct ToolFile {
    /// Relative to the project's top (`.forge/tools/test.toml`).
    pub file: String,
    /// SHA-256 in hex of the file's bytes and of the project files its
    /// command names (`pinned`): what an approval names.
    pub sha256: String,
    pub tool: Result<Arc<RepoTool>, String>,
    /// The project files the command template names (a script, an
    /// interpreter's script argument), with their digests: a change to
    /// one asks for the approval again.
    pub pinned: Vec<Pinned>,
}

/// A project file a tool's command names, and its content's digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    /// Relative to the project's top.
    pub path: String,
    pub sha256: String,
}

/// The tool files of the project whose top directory is `top`, in name
/// order, their commands' words resolved from `cwd` (where they run) and
/// from `top`. A file that cannot be read or parsed is listed with the
/// reason.
pub fn scan_from(top: &Path, cwd: &Path) -> Vec<ToolFile> {
    let mut files = scan(top);
    for f in &mut files {
        let Ok(tool) = &f.tool else { continue };
        f.pinned = pins(&tool.def.command, top, cwd);
        let pinned = Some((f.pinned.clone(), top.to_path_buf(), cwd.to_path_buf()));
        f.tool = Ok(Arc::new(RepoTool { def: tool.def.clone(), file: tool.file.clone(), pins: pinned }));
        if !f.pinned.is_empty() {
            let mut all = f.sha256.clone();
            for p in &f.pinned {
                all.push_str(&format!("\n{}\0{}", p.path, p.sha256));
            }
            f.sha256 = hex(&crate::sha256(all.as_bytes()));
        }
    }
    files
}

/// Files larger than this are not pinned (no script is).
const MAX_PINNED_BYTES: u64 = 16 * 1024 * 1024;

/// Every word of `template` (before its arguments are put in) that names
/// a regular file under `top`, from `cwd` or from `top`, with its digest.
pub fn pins(template: &str, top: &Path, cwd: &Path) -> Vec<Pinned> {
    let Ok(top) = top.canonicalize() else { return Vec::new() };
    let words = shlex::split(template).unwrap_or_else(|| template.split_whitespace().map(String::from).collect());
    let mut found: Vec<Pinned> = Vec::new();
    for word in words.iter().filter(|w| !w.is_empty() && !w.contains(['{', '}'])) {
        for base in [cwd, top.as_path()] {
            let Ok(real) = base.join(word).canonicalize() else { continue };
            let Ok(rel) = real.strip_prefix(&top) else { continue };
            let regular = std::fs::metadata(&real).is_ok_and(|m| m.is_file() && m.len() <= MAX_PINNED_BYTES);
            let path = rel.display().to_string();
            if !regular || found.iter().any(|p| p.path == path) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&real) {
                found.push(Pinned { path, sha256: hex(&crate::sha256(&bytes)) });
            }
        }
    }
    found
}

/// The tool files of the project whose top directory is `top`, in name
/// order, as files only (see [`scan_from`] for what an approval names).
pub fn scan(top: &Path) -> Vec<ToolFile> {
    let dir = top.join(TOOLS_DIR);
    // The folder itself must be a real one: a link could point anywhere.
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Vec::new(),
    }
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml") && !n.starts_with('.'))
        .collect();
    names.sort();
    names.truncate(MAX_FILES);
    names.into_iter().map(|name| read_one(&dir.join(&name), format!("{TOOLS_DIR}/{name}"))).collect()
}

fn read_one(path: &Path, file: String) -> ToolFile {
    let bytes = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err("is a symbolic link; a tool file must be a plain file".to_string()),
        Ok(m) if !m.is_file() => Err("is not a plain file".to_string()),
        Ok(m) if m.len() > MAX_FILE_BYTES => Err(format!("is larger than {} KiB", MAX_FILE_BYTES / 1024)),
        Ok(_) => std::fs::read(path).map_err(|e| format!("cannot be read: {e}")),
        Err(e) => Err(format!("cannot be read: {e}")),
    };
    let sha256 = bytes.as_ref().map(|b| hex(&crate::sha256(b))).unwrap_or_default();
    let tool = bytes.and_then(|b| parse(&b)).map(|def| Arc::new(RepoTool { def, file: file.clone(), pins: None }));
    ToolFile { file, sha256, tool, pinned: Vec::new() }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tool file's content as a tool, checked: a name providers take, a
/// schema that compiles, and placeholders that name its arguments.
pub fn parse(bytes: &[u8]) -> Result<ToolDef, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    let def: ToolDef = toml::from_str(text).map_err(|e| format!("is not a valid tool file: {}", e.message()))?;
    let name_ok = !def.name.is_empty()
        && def.name.len() <= 64
        && !def.name.contains("__")
        && def.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(format!(
            "names the tool `{}`: a name is 1 to 64 letters, digits, `_` or `-`, without `__`",
            def.name
        ));
    }
    if def.command.trim().is_empty() {
        return Err("has an empty `command`".into());
    }
    if def.parameters.get("type").and_then(Value::as_str) != Some("object") {
        return Err("has `parameters` that are not an object schema (`type = \"object\"`)".into());
    }
    jsonschema::validator_for(&def.parameters)
        .map_err(|e| format!("has `parameters` that are not a JSON schema: {e}"))?;
    let known = def.parameters.get("properties").and_then(Value::as_object);
    for name in placeholders(&def.command)? {
        if !known.is_some_and(|p| p.contains_key(&name)) {
            return Err(format!("uses `{{{name}}}` in `command`, which is not one of `parameters.properties`"));
        }
    }
    Ok(def)
}

/// The `{name}`s of a template, in order.
fn placeholders(template: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    render_with(template, |name| {
        names.push(name.to_string());
        Ok(String::new())
    })?;
    Ok(names)
}

/// `template` with each `{name}` replaced by `value(name)`.
fn render_with(template: &str, mut value: impl FnMut(&str) -> Result<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("has a `}` without its `{` in `command` (write `}}` for a brace)".into());
        }
        let Some(end) = tail.find('}') else {
            return Err("has a `{` without its `}` in `command` (write `{{` for a brace)".into());
        };
        out.push_str(&value(&tail[1..end])?);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `word` as one shell word.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// An argument as shell words.
fn words(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => shell_quote(s),
        Some(Value::Array(items)) => items.iter().map(|i| words(Some(i))).collect::<Vec<_>>().join(" "),
        Some(other) => shell_quote(&other.to_string()),
    }
}

/// A declared tool, ready to run.
pub struct RepoTool {
    pub def: ToolDef,
    /// The file it came from, relative to the project's top.
    pub file: String,
    /// The project files its command names, as they were when it was
    /// offered (and where to read them again: the top, the cwd).
    pub pins: Option<(Vec<Pinned>, PathBuf, PathBuf)>,
}

impl RepoTool {
    /// The command line a call with `args` runs (`args` checked against
    /// the schema first).
    pub fn command_for(&self, args: &Value) -> Result<String, ToolError> {
        let bad = |message: String| ToolError::BadArgs { message };
        let validator = jsonschema::validator_for(&self.def.parameters).map_err(|e| bad(e.to_string()))?;
        crate::check_args(&validator, args)?;
        render_with(&self.def.command, |name| Ok(words(args.get(name)))).map_err(bad)
    }
}

impl ToolExecutor for RepoTool {
    fn name(&self) -> &str {
        &self.def.name
    }
    fn description(&self) -> &str {
        &self.def.description
    }
    fn schema(&self) -> Value {
        self.def.parameters.clone()
    }
    fn is_side_effecting(&self) -> bool {
        true
    }
    fn risk_level(&self) -> RiskLevel {
        RiskLevel::High
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(300)
    }
    fn own_timeout(&self) -> Option<Duration> {
        self.def.timeout_seconds.map(Duration::from_secs)
    }
    fn runs_commands(&self) -> bool {
        true
    }
    fn approved_in_advance(&self) -> bool {
        true
    }
    fn stops_on_time(&self) -> bool {
        true
    }
    fn changes_files_anywhere(&self) -> bool {
        true
    }
    fn approval_summary(&self, args: &Value, _sandbox: &crate::Sandbox) -> String {
        let line = self.command_for(args).unwrap_or_else(|e| e.to_string());
        crate::short_summary(format!("run the project's tool `{}` ({}): {line}", self.def.name, self.file))
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let command = self.command_for(&args)?;
            // A file it runs changed since it was offered (in this turn):
            // the approval does not cover the new content.
            if let Some((then, top, cwd)) = &self.pins {
                let now = pins(&self.def.command, top, cwd);
                if let Some(p) =
                    then.iter().find(|p| !now.contains(p)).or_else(|| now.iter().find(|p| !then.contains(p)))
                {
                    return Err(ToolError::ExecutionFailed {
                        tool: self.def.name.clone(),
                        message: format!(
                            "{} changed since the user approved this tool, which runs it; it is not run until they approve it again (`forgectl tools approve`)",
                            p.path
                        ),
                    });
                }
            }
            let run = crate::builtin::run_command::RunCommand;
            run.execute(json!({"command": command}), ctx).await.map_err(|e| match e {
                ToolError::ExecutionFailed { message, .. } => {
                    ToolError::ExecutionFailed { tool: self.def.name.clone(), message }
                }
                ToolError::Timeout { elapsed, .. } => ToolError::Timeout { tool: self.def.name.clone(), elapsed },
                other => other,
            })
        })
    }
}

/// The top directory a session's project tools are read from: its git
/// repository's top (`.git` beside it), else `cwd` itself.
pub fn project_top(cwd: &Path) -> PathBuf {
    cwd.ancestors().find(|d| d.join(".git").exists()).unwrap_or(cwd).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(text: &str) -> Result<RepoTool, String> {
        parse(text.as_bytes()).map(|def| RepoTool { def, file: "t.toml".into(), pins: None })
    }

    #[test]
    fn arguments_are_quoted_for_the_shell_and_missing_ones_drop_out() {
        let t = tool(
            r#"
name = "test"
description = "run tests"
command = "cargo test -p {package} -- {filter} {{literal}}"
[parameters]
type = "object"
required = ["package"]
properties.package = { type = "string" }
properties.filter = { type = "array", items = { type = "string" } }
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let line = t.command_for(&json!({"package": "a; rm -rf ~", "filter": ["x", "it's"]})).unwrap_or_default();
        assert_eq!(line, r#"cargo test -p 'a; rm -rf ~' -- x 'it'\''s' {literal}"#);
        assert_eq!(t.command_for(&json!({"package": "core"})).unwrap_or_default(), "cargo test -p core --  {literal}");
        let missing = t.command_for(&json!({})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(missing.contains("package"), "{missing}");
        let wrong = t.command_for(&json!({"package": 3})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(wrong.contains("schema"), "{wrong}");
    }

    #[test]
    fn the_project_files_a_command_names_are_pinned() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = dir.path();
        std::fs::create_dir_all(top.join("scripts")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(top.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(top.join("scripts/t.sh"), "echo a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(top.join("sub/run.py"), "print(1)").unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::NamedTempFile::new().unwrap_or_else(|e| panic!("{e}"));
        let template = format!(
            "sh scripts/t.sh {{x}} && python3 './run.py' --flag {} && cat {{y}} /etc/hostname",
            outside.path().display()
        );
        let pinned: Vec<String> = pins(&template, top, &top.join("sub")).into_iter().map(|p| p.path).collect();
        assert_eq!(pinned, ["scripts/t.sh", "sub/run.py"], "files under the top only, from the cwd or the top");
        let before = pins("sh scripts/t.sh", top, top);
        std::fs::write(top.join("scripts/t.sh"), "echo b").unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(before, pins("sh scripts/t.sh", top, top), "a change shows in the digest");
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        let base = "description = \"d\"\n";
        for (text, says) in [
            (format!("name = \"a b\"\ncommand = \"x\"\n{base}"), "names the tool"),
            (format!("name = \"a__b\"\ncommand = \"x\"\n{base}"), "without `__`"),
            (format!("name = \"a\"\ncommand = \" \"\n{base}"), "empty `command`"),
            (format!("name = \"a\"\ncommand = \"x {{nope}}\"\n{base}"), "`{nope}`"),
            (format!("name = \"a\"\ncommand = \"x {{\"\n{base}"), "without its `}`"),
            (format!("name = \"a\"\ncommand = \"x\"\nrun = 1\n{base}"), "not a valid tool file"),
            (format!("name = \"a\"\ncommand = \"x\"\nparameters = {{ type = \"string\" }}\n{base}"), "object schema"),
        ] {
            let err = parse(text.as_bytes()).err().unwrap_or_default();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn scan_lists_each_file_with_its_digest_and_refuses_links() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let tools = dir.path().join(TOOLS_DIR);
        std::fs::create_dir_all(&tools).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(tools.join("a.toml"), "name = \"a\"\ndescription = \"d\"\ncommand = \"echo a\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(tools.join("notes.md"), "not a tool").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/etc/passwd", tools.join("b.toml")).unwrap_or_else(|e| panic!("{e}"));
        let files = scan(dir.path());
        assert_eq!(
            files.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(),
            [".forge/tools/a.toml", ".forge/tools/b.toml"]
        );
        assert_eq!(files[0].sha256.len(), 64);
        assert!(files[0].tool.is_ok());
        assert!(files[1].tool.as_ref().err().is_some_and(|e| e.contains("symbolic link")));
    }
}
