//! LP1 parser and applier on arbitrary input: no panic, and the applier is
//! deterministic and all-or-nothing per file (an error leaves no output).
//!
//! Input: file text, a NUL byte, patch text. Without a NUL the whole input
//! is the patch, applied to an empty file.
#![no_main]

use forge_core::tools::lp1::{apply_to_text, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (file, patch) = text.split_once('\0').unwrap_or(("", text));
    let Ok(patch) = parse(patch) else { return };
    for fp in &patch.files {
        let first = apply_to_text(file, fp);
        let second = apply_to_text(file, fp);
        assert_eq!(first, second, "applying the same patch twice gave different results");
    }
});
