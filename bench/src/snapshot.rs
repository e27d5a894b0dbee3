//! `forge-bench snapshot [N]`: rewind's scans of a tree around a command.

use std::path::Path;

/// The scans around a command in a tree of `files` files (rewind's
/// records): the first (every file read), then one with nothing changed
/// and one with a few files changed (sizes and times compared only).
pub(crate) fn snapshot_bench(files: usize) -> anyhow::Result<()> {
    use forge_core::snapshot::{Manifest, changed, scan};
    let dir = tempfile::tempdir()?;
    for i in 0..files {
        let sub = dir.path().join(format!("d{}", i % 100));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(sub.join(format!("f{i}.rs")), format!("// file {i}\nfn f{i}() {{}}\n").repeat(20))?;
    }
    let roots = vec![dir.path().to_path_buf()];
    let skip = |_: &Path| false;
    let mut stored = 0usize;
    let t = std::time::Instant::now();
    let first = scan(&roots, &Manifest::default(), &skip, &mut |_, d| stored += d.len());
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    let mut times = Vec::new();
    for round in 0..21 {
        for k in 0..3 {
            std::fs::write(dir.path().join(format!("d{k}/f{k}.rs")), format!("changed {round}"))?;
        }
        let t = std::time::Instant::now();
        let before = scan(&roots, &first, &skip, &mut |_, _| {});
        let after = scan(&roots, &before, &skip, &mut |_, _| {});
        let _ = changed(&before, &after);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "snapshot of {files} files: first scan {first_ms:.0} ms ({} MiB read and stored); before+after scans around a command: median {:.1} ms, max {:.1} ms",
        stored / (1024 * 1024),
        times[times.len() / 2],
        times[times.len() - 1]
    );
    Ok(())
}
