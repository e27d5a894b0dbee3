//! `forge-bench patch`: `apply_patch` on a large file.

use std::time::Instant;

/// `forge-bench patch`: `apply_patch` on a 10,000-line file (median of 20).
pub(crate) async fn patch_bench() -> anyhow::Result<()> {
    use forge_core::tools::ToolRegistry;
    let dir = tempfile::tempdir()?;
    let registry = ToolRegistry::builtin();
    let tool = registry.get("apply_patch").ok_or_else(|| anyhow::anyhow!("no apply_patch"))?;
    let ctx = super::search::tool_ctx(dir.path());
    let original: String = (0..10_000).map(|i| format!("    let value_{i} = compute({i});\n")).collect();
    let patch = "LP1\nF big.rs\nR\n    let value_9000 = compute(9000);\n.\n    let value_9000 = compute(9000) + 1;\n.\n\
I\n    let value_5000 = compute(5000);\n.\n    check(value_5000);\n.\nE\n    let value_10 = compute(10);\n.\nEND\n";
    let mut times = Vec::new();
    for _ in 0..21 {
        std::fs::write(dir.path().join("big.rs"), &original)?;
        let t = Instant::now();
        tool.execute(serde_json::json!({"patch": patch}), &ctx).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        times.push(t.elapsed().as_secs_f64());
        ctx.file_hashes.lock().map(|mut h| h.clear()).ok();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "apply_patch, 3 operations on a 10,000-line file: median {:.2} ms, max {:.2} ms",
        times[10] * 1000.0,
        times[20] * 1000.0
    );
    Ok(())
}
