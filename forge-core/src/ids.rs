//! Short, unique, sortable ids: 10 Crockford base32 characters of
//! millisecond time followed by a per-process counter, so ids made later
//! sort later, also within one millisecond.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

static LAST: Mutex<u64> = Mutex::new(0);

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A new id: `prefix` + 12 base32 characters. The low 12 bits of the value
/// count ids within one millisecond (4096 per ms before borrowing from the
/// next millisecond, which keeps order).
pub fn new_id(prefix: &str) -> String {
    let candidate = (now_ms().max(0) as u64) << 12;
    let value = {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        let next = if candidate > *last { candidate } else { *last + 1 };
        *last = next;
        next
    };
    // 12 chars * 5 bits = 60 bits: 48 bits of ms + 12 bits counter.
    let mut out = String::with_capacity(prefix.len() + 12);
    out.push_str(prefix);
    for i in (0..12).rev() {
        out.push(ALPHABET[((value >> (i * 5)) & 31) as usize] as char);
    }
    out
}

/// Where the session machine reads the time and takes new ids: the
/// system's in the daemon; a scripted one in tests, so that a session fed
/// the same events writes the same records, byte for byte.
#[derive(Debug, Clone, Default)]
pub struct Clock(Option<Arc<Scripted>>);

#[derive(Debug)]
struct Scripted {
    ms: AtomicI64,
    ids: AtomicU64,
}

impl Clock {
    /// The system's time and process-unique ids.
    pub fn system() -> Self {
        Clock(None)
    }

    /// Time that stands at `ms` until moved ([`Clock::advance`]); ids that
    /// count from 1 (`m000000000001`, ...), sorted as they are made.
    pub fn scripted(ms: i64) -> Self {
        Clock(Some(Arc::new(Scripted { ms: AtomicI64::new(ms), ids: AtomicU64::new(0) })))
    }

    /// Moves a scripted clock on (the system's moves by itself).
    pub fn advance(&self, ms: i64) {
        if let Some(s) = &self.0 {
            s.ms.fetch_add(ms, Ordering::Relaxed);
        }
    }

    pub fn now_ms(&self) -> i64 {
        match &self.0 {
            None => now_ms(),
            Some(s) => s.ms.load(Ordering::Relaxed),
        }
    }

    pub fn new_id(&self, prefix: &str) -> String {
        match &self.0 {
            None => new_id(prefix),
            Some(s) => format!("{prefix}{:012}", s.ids.fetch_add(1, Ordering::Relaxed) + 1),
        }
    }
}

/// A name a user gives (a session, a bookmark): up to `max` bytes of
/// letters, digits, `-`, `_` and `.`, not starting with `-` (it would read
/// as a flag).
pub fn is_valid_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_sorted_in_creation_order() {
        let ids: Vec<String> = (0..10_000).map(|_| new_id("s")).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
        assert_eq!(ids[0].len(), 13);
    }
}
