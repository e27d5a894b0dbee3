//! `forge-bench search PATTERN DIR`: the built-in `search` tool against
//! ripgrep.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// `forge-bench search PATTERN DIR`: the `search` tool against ripgrep on
/// the same tree (median of 5 runs each, after a warm-up).
pub(crate) async fn search_bench(pattern: &str, dir: &Path) -> anyhow::Result<()> {
    use forge_core::tools::ToolRegistry;
    let registry = ToolRegistry::builtin();
    let search = registry.get("search").ok_or_else(|| anyhow::anyhow!("no search tool"))?;
    let ctx = tool_ctx(dir);
    let args = serde_json::json!({"pattern": pattern});
    let mut forge = Vec::new();
    let mut lines = 0;
    for i in 0..6 {
        let t = Instant::now();
        let out = search.execute(args.clone(), &ctx).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        if i > 0 {
            forge.push(t.elapsed().as_secs_f64());
        }
        lines = out.lines().count();
    }
    let mut rg = Vec::new();
    for i in 0..6 {
        let t = Instant::now();
        let status = std::process::Command::new("rg")
            .args(["--no-config", "-n", pattern])
            .current_dir(dir)
            .stdout(Stdio::null())
            .status();
        if status.is_err() {
            println!("(ripgrep is not installed: apt-get install ripgrep)");
            break;
        }
        if i > 0 {
            rg.push(t.elapsed().as_secs_f64());
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let (f, r) = (med(&mut forge), med(&mut rg));
    println!(
        "search `{pattern}` in {}: forge {:.1} ms ({lines} lines, capped at 1000 matches), rg {:.1} ms, ratio {:.2}x",
        dir.display(),
        f * 1000.0,
        r * 1000.0,
        f / r
    );
    Ok(())
}

/// What a tool called by a benchmark runs with: `dir` its one root.
pub(crate) fn tool_ctx(dir: &Path) -> forge_core::tools::ToolCtx {
    forge_core::tools::ToolCtx {
        sandbox: forge_core::tools::Sandbox::new(dir, &[], &[], true, false),
        call_id: "bench".into(),
        limits: forge_core::tools::ToolLimits { output_bytes: 1 << 20, ..Default::default() },
        about: None,
        library: None,
        timeout: None,
        output: None,
        file_hashes: Default::default(),
        images: None,
    }
}
