//! Keeping secrets out of what is shown, stored, logged or sent to the
//! model.
//!
//! Two kinds of secret are replaced:
//! - the values the daemon knows: the configured API keys, MCP bearer
//!   tokens, and the values of its environment variables whose names end
//!   in `_KEY`, `_TOKEN`, `_SECRET` or `_PASSWORD` (all read at start,
//!   [`remember`]);
//! - anything shaped like a credential: `sk-...`, `sk-ant-...`, `AIza...`,
//!   GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
//!   `github_pat_`), AWS access key ids and secret access keys, Stripe
//!   secret keys, Slack tokens, JWTs, passwords in URLs
//!   (`scheme://user:password@host`), private-key blocks.
//!
//! [`scrub`] is applied to everything that leaves a tool or a provider
//! (tool results and their live output, provider errors, hook reasons)
//! before it becomes an event, and to every log line.

use std::borrow::Cow;
use std::sync::{OnceLock, RwLock};

/// What a secret becomes.
pub const REDACTED: &str = "[REDACTED]";

/// Known secret values shorter than this are not replaced (they would
/// match ordinary words).
const MIN_SECRET_LEN: usize = 8;

static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Whether an environment variable's name says it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_PASSWORD"].iter().any(|s| upper.ends_with(s))
        || ["API_KEY", "APIKEY", "ACCESS_KEY", "SECRET", "TOKEN", "PASSWORD"].contains(&upper.as_str())
}

/// Adds secret values to replace from now on.
pub fn remember<I: IntoIterator<Item = String>>(values: I) {
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    for v in values {
        let v = v.trim().to_string();
        if v.len() >= MIN_SECRET_LEN && !known.contains(&v) {
            known.push(v);
        }
    }
    // Longest first: a secret containing another is replaced whole.
    known.sort_by_key(|v| std::cmp::Reverse(v.len()));
}

/// The values of the process environment's secret-named variables.
pub fn secret_env_values() -> Vec<String> {
    std::env::vars().filter(|(k, _)| is_secret_name(k)).map(|(_, v)| v).collect()
}

fn shapes() -> Option<&'static regex::Regex> {
    static SHAPES: OnceLock<Option<regex::Regex>> = OnceLock::new();
    SHAPES
        .get_or_init(|| {
            let pattern = concat!(
                r"(?s)-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(-----END[A-Z ]*PRIVATE KEY( BLOCK)?-----|\z)",
                r"|\b(?P<keep>sk-ant-|sk-|sk_live_|sk_test_|rk_live_|rk_test_|AIza|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|xox[abprs]-)[A-Za-z0-9_\-]{8,}",
                r"|\b(AKIA|ASIA)[0-9A-Z]{16}\b",
                r"|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
                r"|(?P<url>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]+:)[^@/\s]+@",
                r"|(?i:(?P<aws>(aws_?)?secret_?access_?key[\x22']?\s*[:=]\s*[\x22']?))[A-Za-z0-9/+]{40}",
                r"|(?P<b64>\b[A-Za-z0-9/+]{40}\b)",
            );
            // The pattern is fixed: the tests would fail first.
            regex::Regex::new(pattern).ok()
        })
        .as_ref()
}

/// `text` with every known secret and every credential-shaped string
/// replaced. Borrowed when nothing changed.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let known = KNOWN.read().unwrap_or_else(|p| p.into_inner());
        for s in known.iter() {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), REDACTED));
            }
        }
    }
    if let Some(shapes) = shapes()
        && shapes.is_match(&out)
    {
        let replaced = shapes
            .replace_all(&out, |c: &regex::Captures<'_>| {
                if let Some(prefix) = c.name("keep") {
                    return format!("{}***", prefix.as_str());
                }
                if let Some(url) = c.name("url") {
                    return format!("{}{REDACTED}@", url.as_str());
                }
                if let Some(label) = c.name("aws") {
                    return format!("{}{REDACTED}", label.as_str());
                }
                if let Some(m) = c.name("b64") {
                    // Forty characters of base64 are an AWS secret access
                    // key when they look random: both cases and a `/` or
                    // `+` (never a commit hash, never a word).
                    let t = m.as_str();
                    let random = t.bytes().any(|b| b.is_ascii_uppercase())
                        && t.bytes().any(|b| b.is_ascii_lowercase())
                        && t.bytes().any(|b| b == b'/' || b == b'+');
                    return if random { REDACTED.to_string() } else { t.to_string() };
                }
                REDACTED.to_string()
            })
            .into_owned();
        out = Cow::Owned(replaced);
    }
    out
}

/// Whether `data` holds a known secret or a credential-shaped string.
pub fn holds_secret(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    matches!(scrub(&text), Cow::Owned(_))
}

/// `text` with `secrets` (at least 4 characters) and everything [`scrub`]
/// replaces taken out.
pub fn redact_secrets(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= 4 {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    scrub(&out).into_owned()
}

/// Scrubs a stream that arrives in pieces (a command's live output): a
/// secret cut between two pieces must not slip through, nor the lines of
/// a private key whose block began in an earlier piece.
#[derive(Debug, Default)]
pub struct StreamScrubber {
    /// Text after the last line end, kept for the next piece.
    carry: String,
    /// Inside a private-key block.
    in_key: bool,
}

/// Most text held back waiting for a line end.
const MAX_CARRY: usize = 4096;

impl StreamScrubber {
    /// What of `piece` can be shown now, scrubbed.
    pub fn push(&mut self, piece: &str) -> String {
        self.carry.push_str(piece);
        let cut = match self.carry.rfind('\n') {
            Some(i) => i + 1,
            None if self.carry.len() > MAX_CARRY => self.carry.len(),
            None => return String::new(),
        };
        let rest = self.carry.split_off(cut);
        let ready = std::mem::replace(&mut self.carry, rest);
        self.lines(&ready)
    }

    /// The rest, at the end of the stream.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.carry);
        self.lines(&rest)
    }

    fn lines(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            if self.in_key {
                if line.contains("-----END") && line.contains("PRIVATE KEY") {
                    self.in_key = false;
                }
                continue;
            }
            if line.contains("-----BEGIN") && line.contains("PRIVATE KEY") && !line.contains("-----END") {
                self.in_key = true;
                out.push_str(REDACTED);
                out.push('\n');
                continue;
            }
            out.push_str(&scrub(line));
        }
        out
    }
}

/// A log writer that scrubs what it writes.
pub struct ScrubbingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for ScrubbingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(scrub(&text).as_bytes())?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_redacted() {
        let t = redact_secrets("bad key sk-ant-abcdef1234567890 and mysecretvalue", &["mysecretvalue".into()]);
        assert_eq!(t, "bad key sk-ant-*** and [REDACTED]");
        assert_eq!(redact_secrets("task-force sk-a", &[]), "task-force sk-a");
    }

    #[test]
    fn a_stream_cut_anywhere_leaks_nothing() {
        let text = "token ghp_0123456789abcdefghijABCDEFGHIJ012345 here\n-----BEGIN RSA PRIVATE KEY-----\n\
                    MIIEowIBAAKCAQEAsecret\nmorebits\n-----END RSA PRIVATE KEY-----\ndone\n";
        for cut in 1..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let mut s = StreamScrubber::default();
            let mut shown = s.push(&text[..cut]);
            shown.push_str(&s.push(&text[cut..]));
            shown.push_str(&s.finish());
            for leaked in ["0123456789abcdefghij", "MIIEow", "morebits"] {
                assert!(!shown.contains(leaked), "cut at {cut}: {shown}");
            }
            assert!(shown.ends_with("done\n"), "{shown}");
        }
    }

    #[test]
    fn every_token_shape_and_remembered_value_goes() {
        remember(["hunter2-but-longer".to_string(), "short".to_string()]);
        let text = "a=hunter2-but-longer b=short ghp_0123456789abcdefghijABCDEFGHIJ012345 \
                    github_pat_11ABCDEFG0123456789_abcdefghijklmnop AKIAIOSFODNN7EXAMPLE \
                    AIzaSyA-0123456789abcdefghijklmnopqrstu xoxb-123456789012-abcdefgh \
                    -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY----- end";
        let s = scrub(text);
        for leaked in [
            "hunter2-but-longer",
            "0123456789abcdefghijABCDEF",
            "11ABCDEFG",
            "IOSFODNN7",
            "SyA-0123",
            "123456789012",
            "b3BlbnNz",
        ] {
            assert!(!s.contains(leaked), "{leaked} in {s}");
        }
        assert!(s.contains("b=short"), "short values are left: {s}");
        assert!(s.contains("ghp_***") && s.contains("[REDACTED] end"), "{s}");
        assert!(matches!(scrub("nothing secret here"), Cow::Borrowed(_)));
        assert!(is_secret_name("DEPLOY_TOKEN") && is_secret_name("db_password") && !is_secret_name("PATH"));
        assert!(!is_secret_name("KEYBOARD_LAYOUT"));
    }

    #[test]
    fn aws_secrets_stripe_keys_jwts_and_url_passwords_go() {
        let cases = [
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
            ("AWS_SECRET_ACCESS_KEY=abcdEFGHijklMNOPqrstUVWXyz0123456789ABCD", "abcdEFGH"),
            ("\"SecretAccessKey\": \"Zm9vYmFyYmF6cXV4cXV1eHh5enp5MTIzNDU2Nzg5MA\"", "Zm9vYmFyYmF6"),
            ("key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in a log", "K7MDENG"),
            ("stripe sk_live_51H8abcdefghijklmnop and rk_test_4eC39HqLyjWDarjtT1zdp7dc", "51H8abcdef"),
            ("rk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39Hq"),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "dozjgNry",
            ),
            ("postgres://admin:s3cr3t-pa55@db.example.com:5432/app", "s3cr3t-pa55"),
            ("base_url = \"https://user:hunter22@proxy.local/v1\"", "hunter22"),
        ];
        for (text, secret) in cases {
            let s = scrub(text);
            assert!(!s.contains(secret), "{secret} in {s}");
        }
        let url = scrub("https://user:hunter22@proxy.local/v1");
        assert_eq!(url, "https://user:[REDACTED]@proxy.local/v1", "the rest of the URL stays");
        for plain in [
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
            "see https://example.com/a/b and git@github.com:o/r.git",
            "ThisIsJustAVeryLongIdentifierNameWithoutSlashes",
        ] {
            assert_eq!(scrub(plain), plain, "left as it was");
        }
    }
}
