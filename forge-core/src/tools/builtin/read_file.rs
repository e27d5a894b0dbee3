//! `read_file`: a file's text, whole or a line range, within the sandbox;
//! refuses binary files and cuts at a byte limit, saying so.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::{ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

pub struct ReadFile;

/// Bytes looked at to tell binary from text.
const SNIFF_BYTES: usize = 8192;
/// Largest file read at all.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    /// 1-based, inclusive.
    start_line: Option<usize>,
    /// 1-based, inclusive.
    end_line: Option<usize>,
}

impl ToolExecutor for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }
    fn description(&self) -> &'static str {
        "Read a text file in the working directory, optionally only lines start_line..=end_line (1-based)."
    }
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the working directory"},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args =
                serde_json::from_value(args).map_err(|e| ToolError::BadArgs { message: e.to_string() })?;
            let path = ctx.sandbox.resolve(&args.path).map_err(ToolError::SandboxViolation)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: "read_file".into(), message };
            let file = ctx.sandbox.open_checked(&path, &args.path).map_err(|e| match e {
                crate::tools::sandbox::OpenError::Denied(d) => ToolError::SandboxViolation(d),
                crate::tools::sandbox::OpenError::Io(e) => failed(format!("{}: {e}", args.path)),
            })?;
            let meta = file.metadata().map_err(|e| failed(format!("{}: {e}", args.path)))?;
            if !meta.is_file() {
                return Err(failed(format!("{} is not a file", args.path)));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(failed(format!("{} is {} bytes; read a line range instead", args.path, meta.len())));
            }
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            std::io::Read::read_to_end(&mut std::io::BufReader::new(file), &mut bytes)
                .map_err(|e| failed(format!("{}: {e}", args.path)))?;
            if let Ok(mut hashes) = ctx.file_hashes.lock() {
                hashes.insert(path.clone(), crate::tools::sha256(&bytes));
            }
            if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
                return Err(failed(format!("{} looks binary; not shown", args.path)));
            }
            let text = String::from_utf8_lossy(&bytes);
            let start = args.start_line.unwrap_or(1).max(1);
            let end = args.end_line.unwrap_or(usize::MAX);
            if end < start {
                return Err(ToolError::BadArgs { message: format!("end_line {end} is before start_line {start}") });
            }
            let selected: String = if args.start_line.is_none() && args.end_line.is_none() {
                text.into_owned()
            } else {
                text.split_inclusive('\n').skip(start - 1).take(end - start + 1).collect()
            };
            Ok(truncate_output(selected, ctx.max_output_bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &std::path::Path, args: Value) -> Result<String, ToolError> {
        crate::tools::run_blocking(&ReadFile, args, &ToolCtx::for_tests(dir, 64))
    }

    #[test]
    fn reads_ranges_refuses_binary_and_escapes_and_cuts_long_output() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("b.bin"), [1u8, 0, 2]).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("long.txt"), "x".repeat(1000)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(run(dir.path(), json!({"path": "a.txt"})), Ok("one\ntwo\nthree\n".into()));
        assert_eq!(run(dir.path(), json!({"path": "a.txt", "start_line": 2, "end_line": 2})), Ok("two\n".into()));
        assert!(matches!(run(dir.path(), json!({"path": "b.bin"})), Err(ToolError::ExecutionFailed { .. })));
        assert!(matches!(run(dir.path(), json!({"path": "../etc/passwd"})), Err(ToolError::SandboxViolation(_))));
        assert!(matches!(run(dir.path(), json!({"file": "a.txt"})), Err(ToolError::BadArgs { .. })));
        let long = run(dir.path(), json!({"path": "long.txt"})).unwrap_or_default();
        assert!(long.contains("truncated: 64 of 1000 bytes"), "{long}");
    }
}
