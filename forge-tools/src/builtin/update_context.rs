//! `update_context`: the model keeps a list of active files, whose whole
//! text goes with every request of the session, adding and removing
//! several at once. This tool checks the files (within the sandbox, text,
//! under the read limit) and reports what it found; the session decides
//! what fits its context budget, keeps the list and says the outcome.
//! The same check serves a user's `forgectl context add`, and
//! [`read_block`] writes the files' text into a request.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::read_file::SNIFF_BYTES;
use crate::{Sandbox, ToolCtx, ToolError, ToolExecutor, ToolFut, ToolLimits};

pub struct UpdateContext;

/// Most paths one call names.
const MAX_PATHS: usize = 50;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Paths to keep in context
    #[serde(default)]
    add: Vec<String>,
    /// Paths to take out
    #[serde(default)]
    remove: Vec<String>,
}

/// What the tool found, for the session to decide on (its result text,
/// as JSON, until the session replaces it with words).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    /// Files that may be added: their path as given and their size.
    pub ok: Vec<(String, u64)>,
    /// Files that may not, and why.
    pub refused: Vec<(String, String)>,
    pub remove: Vec<String>,
}

/// The file `path` as an active file: its size, or why it cannot be one.
pub fn check(sandbox: &Sandbox, limits: &ToolLimits, path: &str) -> Result<u64, String> {
    let full = sandbox.resolve(path).map_err(|e| e.to_string())?;
    // A FIFO or a device would block the open: only regular files.
    match std::fs::symlink_metadata(&full) {
        Ok(m) if !m.is_file() => return Err("not a regular file".into()),
        Err(e) => return Err(e.to_string()),
        Ok(_) => {}
    }
    let file = sandbox.open_checked(&full, path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    let limit = limits.file_read_bytes as u64;
    if meta.len() > limit {
        return Err(format!(
            "{} bytes, over the read limit of {limit} (tools.read_file.max_file_read_bytes); read the parts you need with read_file instead",
            meta.len()
        ));
    }
    let mut head = vec![0u8; SNIFF_BYTES.min(meta.len() as usize)];
    std::io::Read::read_exact(&mut &file, &mut head).map_err(|e| e.to_string())?;
    // Binary: a NUL, or bytes that are not UTF-8 (a sequence cut at the
    // end of what was read is fine).
    let text = match std::str::from_utf8(&head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && head.len() == SNIFF_BYTES,
    };
    if head.contains(&0) || !text {
        return Err("binary (or not UTF-8); only text files can be active".into());
    }
    Ok(meta.len())
}

fn bad(message: String) -> ToolError {
    ToolError::ExecutionFailed { tool: "update_context".into(), message }
}

/// The text of the active files `paths`, as one block a request carries.
/// A file that cannot be read now is said so in its place.
pub fn read_block(sandbox: &Sandbox, limits: &ToolLimits, paths: &[String]) -> String {
    let mut out = String::from(
        "<active-files>\nThe current text of the files kept in context (update_context); they are read again for every request.\n",
    );
    for path in paths {
        let text = check(sandbox, limits, path).and_then(|_| {
            let full = sandbox.resolve(path).map_err(|e| e.to_string())?;
            let mut file = sandbox.open_checked(&full, path).map_err(|_| "cannot be opened".to_string())?;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        });
        match text {
            Ok(text) => out.push_str(&format!("<file path=\"{path}\">\n{text}\n</file>\n")),
            Err(e) => out.push_str(&format!("<file path=\"{path}\" unavailable=\"{e}\"/>\n")),
        }
    }
    out.push_str("</active-files>");
    out
}

/// Bytes a file of `bytes` adds to the block [`read_block`] writes.
pub fn block_bytes(path: &str, bytes: u64) -> u64 {
    bytes + path.len() as u64 + 30
}

impl ToolExecutor for UpdateContext {
    fn name(&self) -> &str {
        "update_context"
    }
    fn description(&self) -> &str {
        "Keep files' whole current text in every request (several paths at once); remove them when done."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            if args.add.is_empty() && args.remove.is_empty() {
                return Err(ToolError::BadArgs { message: "give files to `add` or `remove`".into() });
            }
            if args.add.len() + args.remove.len() > MAX_PATHS {
                return Err(ToolError::BadArgs { message: format!("at most {MAX_PATHS} paths at once") });
            }
            let mut checked = Checked { remove: args.remove, ..Default::default() };
            for path in args.add {
                match check(&ctx.sandbox, &ctx.limits, &path) {
                    Ok(bytes) => checked.ok.push((path, bytes)),
                    Err(reason) => checked.refused.push((path, reason)),
                }
            }
            serde_json::to_string(&checked).map_err(|e| bad(e.to_string()))
        })
    }
}
