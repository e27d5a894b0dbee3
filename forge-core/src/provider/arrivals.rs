//! Benchmark support: when the bytes of a stamped chunk arrived.
//!
//! `forge-bench` measures delivery latency from a provider chunk's arrival
//! at forged. Its mock writes tokens `t<19 digits> ` (the Unix ns it wrote
//! them); with `FORGE_BENCH_ARRIVALS=FILE` in forged's environment, each
//! stream notes when such a token's bytes came out of the HTTP body and
//! appends `stamp arrival` lines (Unix ns) to FILE when the stream ends, off
//! the hot path. Nothing but these tokens is recorded; without the variable
//! this costs one check per chunk.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

const TOKEN: usize = 21; // `t` + 19 digits + ` `

fn target() -> Option<&'static PathBuf> {
    static TARGET: OnceLock<Option<PathBuf>> = OnceLock::new();
    TARGET.get_or_init(|| std::env::var_os("FORGE_BENCH_ARRIVALS").map(PathBuf::from)).as_ref()
}

/// One stream's notes; written out when dropped.
#[derive(Default)]
pub(super) struct Arrivals {
    seen: Vec<(u128, u128)>,
}

impl Arrivals {
    pub fn note(&mut self, bytes: &[u8]) {
        if target().is_none() || bytes.len() < TOKEN {
            return;
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        self.seen.extend(stamps_in(bytes).map(|stamp| (stamp, now)));
    }
}

/// The stamps of the `t<19 digits> ` tokens in `bytes`.
fn stamps_in(bytes: &[u8]) -> impl Iterator<Item = u128> + '_ {
    bytes.windows(TOKEN).filter_map(|w| {
        if w[0] != b't' || w[TOKEN - 1] != b' ' || !w[1..TOKEN - 1].iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(&w[1..TOKEN - 1]).ok()?.parse().ok()
    })
}

impl Drop for Arrivals {
    fn drop(&mut self) {
        let (Some(path), false) = (target(), self.seen.is_empty()) else { return };
        let text: String = self.seen.iter().map(|(stamp, at)| format!("{stamp} {at}\n")).collect();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the benchmark's arrival notes");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_whole_stamp_tokens_are_noted() {
        let chunk = b"data: {\"text\":\"t1795339298000000001 \"}\n\ndata: {\"text\":\"t123 t1795339298000000002\"}\n\n";
        assert_eq!(super::stamps_in(chunk).collect::<Vec<_>>(), vec![1795339298000000001]);
    }
}
