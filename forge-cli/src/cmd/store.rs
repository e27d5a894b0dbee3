//! `forgectl store` and `forgectl store gc`: what the store weighs, and
//! collecting what no record needs.

use forge_client::ForgeClient;
use forge_proto::StoreStatus;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

#[derive(clap::Subcommand)]
pub enum StoreAction {
    /// Show the sizes (the default)
    Status,
    /// Collect the blobs no record needs (removed sessions', contents no
    /// command changed), then evict the oldest rewind content past
    /// [store] max_blob_mb
    Gc,
}

/// Bytes for a person: 1.5 MiB.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

pub async fn run(g: &Global, action: Option<StoreAction>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let status = match action.unwrap_or(StoreAction::Status) {
        StoreAction::Status => conn.client.store_status(()).await?,
        StoreAction::Gc => {
            let r = conn.client.store_gc(()).await?;
            if g.json {
                json_line(&r);
                return Ok(());
            }
            outln!("collected {} no record needed", size(r.collected_bytes));
            if r.evicted_blobs > 0 {
                outln!(
                    "evicted {} of the oldest rewind content ({} blobs) to stay under [store] max_blob_mb",
                    size(r.evicted_bytes),
                    r.evicted_blobs
                );
            }
            r.status
        }
    };
    if g.json {
        json_line(&status);
        return Ok(());
    }
    print_status(&status);
    Ok(())
}

fn print_status(s: &StoreStatus) {
    outln!("database:  {} ({}, WAL {})", s.path, size(s.db_bytes), size(s.wal_bytes));
    outln!(
        "blobs:     {} in {} blobs, at most {} ([store] max_blob_mb)",
        size(s.blob_bytes),
        s.blobs,
        size(s.max_blob_bytes)
    );
    outln!("  rewind:  {} (file contents undo and rewind restore)", size(s.rewind_bytes));
    outln!("  images:  {} (never evicted)", size(s.image_bytes));
    outln!(
        "  other:   {} (contents kept for files' next change; `forgectl store gc` collects what is no longer needed)",
        size(s.other_bytes)
    );
    if s.evicted > 0 {
        outln!("evicted:   {} blobs so far (undo names the files it can no longer restore)", s.evicted);
    }
    if s.sessions.is_empty() {
        return;
    }
    outln!("{:<28} {:>12} {:>12}", "SESSION", "REWIND", "IMAGES");
    for x in &s.sessions {
        let who = match &x.name {
            Some(n) => format!("{n} ({})", &x.id[..x.id.len().min(8)]),
            None => x.id.clone(),
        };
        outln!("{who:<28} {:>12} {:>12}", size(x.rewind_bytes), size(x.image_bytes));
    }
}
