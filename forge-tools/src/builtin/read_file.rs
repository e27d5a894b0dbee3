//! `read_file`: a file's text, whole or a line range, within the sandbox;
//! refuses binary files and cuts at a byte limit, saying so.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut, truncate_output};

pub struct ReadFile;

/// Bytes looked at to tell binary from text.
pub(crate) const SNIFF_BYTES: usize = 8192;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Path relative to the working directory
    path: String,
    // The lines are 1-based, both inclusive (the description says so).
    #[schemars(range(min = 1))]
    start_line: Option<usize>,
    #[schemars(range(min = 1))]
    end_line: Option<usize>,
}

impl ToolExecutor for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file in the working directory, optionally only lines start_line..=end_line (1-based)."
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
            let path = ctx.sandbox.resolve(&args.path).map_err(ToolError::SandboxViolation)?;
            let failed = |message: String| ToolError::ExecutionFailed { tool: "read_file".into(), message };
            let file = ctx
                .sandbox
                .open_checked(&path, &args.path)
                .map_err(|e| e.into_tool_error(|e| failed(format!("{}: {e}", args.path))))?;
            let meta = file.metadata().map_err(|e| failed(format!("{}: {e}", args.path)))?;
            if !meta.is_file() {
                return Err(failed(format!("{} is not a file", args.path)));
            }
            let start = args.start_line.unwrap_or(1).max(1);
            let end = args.end_line.unwrap_or(usize::MAX);
            if end < start {
                return Err(ToolError::BadArgs { message: format!("end_line {end} is before start_line {start}") });
            }
            let whole = args.start_line.is_none() && args.end_line.is_none();
            let scan = ctx.limits.scan_bytes;
            if whole && meta.len() > scan as u64 {
                return Err(failed(format!(
                    "{} is {} bytes, more than the {scan} read at once (tools.read_file.max_scan_bytes); \
                     read a line range (start_line, end_line) or search it instead",
                    args.path,
                    meta.len()
                )));
            }
            let Scanned { kept: bytes, size, sha256 } =
                scan_file(file, scan).map_err(|e| failed(format!("{}: {e}", args.path)))?;
            // The hash covers the whole file even when only its start is kept.
            if let Ok(mut hashes) = ctx.file_hashes.lock() {
                hashes.insert(path.clone(), sha256);
            }
            if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
                return Err(failed(format!("{} looks binary; not shown", args.path)));
            }
            let cut_short = (bytes.len() as u64) < size;
            let text = String::from_utf8_lossy(&bytes);
            let mut selected: String = if whole {
                text.into_owned()
            } else {
                let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
                // A line cut by the scan limit is not shown half.
                if cut_short && lines.last().is_some_and(|l| !l.ends_with('\n')) {
                    lines.pop();
                }
                let shown = lines.len();
                let mut s: String = lines.into_iter().skip(start - 1).take(end - start + 1).collect();
                if cut_short && end > shown {
                    s.push_str(&format!(
                        "\n[only the first {scan} bytes ({shown} lines) of {size} bytes were read (tools.read_file.max_scan_bytes)]"
                    ));
                }
                s
            };
            if selected.len() > ctx.limits.file_read_bytes {
                // Room for the hint, so the result stays within the limit.
                const HINT: &str = " (tools.read_file.max_file_read_bytes; read a line range for the rest)";
                selected = truncate_output(selected, ctx.limits.file_read_bytes.saturating_sub(HINT.len()));
                selected.push_str(HINT);
            }
            Ok(truncate_output(selected, ctx.limits.output_bytes))
        })
    }
}

/// A file read up to a limit: the bytes kept, and its whole size and hash.
struct Scanned {
    kept: Vec<u8>,
    size: u64,
    sha256: Vec<u8>,
}

/// Reads at most `keep` bytes of `file` while hashing all of it.
fn scan_file(file: std::fs::File, keep: usize) -> std::io::Result<Scanned> {
    use sha2::Digest;
    use std::io::Read;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut hasher = sha2::Sha256::new();
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        total += n as u64;
    }
    Ok(Scanned { kept, size: total, sha256: hasher.finalize().to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(dir: &std::path::Path, args: Value) -> Result<String, ToolError> {
        crate::run_blocking(&ReadFile, args, &ToolCtx::for_tests(dir, 64))
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
        assert!(long.len() <= 64 && long.contains("of 1000 bytes shown"), "{long}");
    }

    #[test]
    fn big_files_are_read_by_line_range_within_the_scan_limit() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("big.txt"), &text).unwrap_or_else(|e| panic!("{e}"));
        let mut ctx = ToolCtx::for_tests(dir.path(), 100_000);
        ctx.limits.scan_bytes = 100;
        let run = |args| crate::run_blocking(&ReadFile, args, &ctx);
        let whole = run(json!({"path": "big.txt"})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(whole.contains("max_scan_bytes") && whole.contains("line range"), "{whole}");
        assert_eq!(run(json!({"path": "big.txt", "start_line": 2, "end_line": 3})), Ok("line 2\nline 3\n".into()));
        let past = run(json!({"path": "big.txt", "start_line": 12, "end_line": 50})).unwrap_or_default();
        assert!(
            past.starts_with("line 12\nline 13\n\n[only")
                && !past.contains("line 50")
                && past.contains("only the first 100 bytes"),
            "{past}"
        );
        // The stale-file hash is of the whole file, not the part read.
        let hashes = ctx.file_hashes.lock().map(|h| h.values().next().cloned()).ok().flatten();
        assert_eq!(hashes, Some(crate::sha256(text.as_bytes())));
        ctx.limits.scan_bytes = 1 << 20;
        ctx.limits.file_read_bytes = 200;
        let cut = crate::run_blocking(&ReadFile, json!({"path": "big.txt"}), &ctx).unwrap_or_default();
        assert!(cut.starts_with("line 1\n") && cut.contains("max_file_read_bytes") && cut.len() <= 200, "{cut}");
    }
}
