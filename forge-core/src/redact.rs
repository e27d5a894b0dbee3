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
//!   `github_pat_`), GitLab (`glpat-`), npm (`npm_`) and Hugging Face
//!   (`hf_`) tokens, AWS access key ids and secret access keys, Stripe
//!   secret keys, Slack tokens and webhook URLs, Azure connection strings'
//!   keys (`AccountKey=`), `Authorization:` header values (`Bearer`,
//!   `token`, `Basic`), JWTs, passwords in URLs
//!   (`scheme://user:password@host`), `password=` / `api_key="..."`
//!   assignments, private-key blocks. A prefixed token is taken by its
//!   prefix: the whole run of its characters goes, however long.
//!
//! Placeholders are not secrets: a value like `YOUR_KEY`, `<token>`,
//! `${VAR}`, `xxxx`, `****` or shorter than 8 characters is left as it is,
//! and so is ordinary text (a precision test runs the scrubber over other
//! projects' READMEs and lock files).
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
            // The names an assignment of a secret goes by (`DB_PASSWORD`,
            // `api_key`, `"clientSecret"`).
            const KEY: &str = r"\b(?:[a-z0-9]+[_\-])*(?:password|passwd|api[_\-]?key|apikey|secret[_\-]?key|client[_\-]?secret|access[_\-]?token|auth[_\-]?token)[\x22']?\s*[:=]\s*";
            let pattern = [
                r"(?s)-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(-----END[A-Z ]*PRIVATE KEY( BLOCK)?-----|\z)",
                r"(?i:(?P<authz>\bauthorization[\x22']?\s*[:=]\s*[\x22']?(?:bearer|token|basic)\s+))(?P<authv>[A-Za-z0-9._~+/=\-]{8,})",
                r"\b(?P<keep>sk-ant-|sk-|sk_live_|sk_test_|rk_live_|rk_test_|AIza|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|xox[abprs]-)[A-Za-z0-9_\-]{8,}",
                // By prefix: the whole run of the token's characters, at any
                // length from the classic one up (newer tokens are longer).
                r"\b(?P<tok>glpat-[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]+)*|npm_[A-Za-z0-9]{36,}|hf_[A-Za-z0-9]{34,})",
                r"(?P<slack>\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]{8,}",
                r"(?P<azure>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=)[A-Za-z0-9+/=%&\-]{16,}",
                r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
                r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
                r"(?P<url>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]+:)[^@/\s]+@",
                r"(?i:(?P<aws>(aws_?)?secret_?access_?key[\x22']?\s*[:=]\s*[\x22']?))[A-Za-z0-9/+]{40}",
                // A quoted value (spaces and all), then a bare one.
                &format!(r"(?i:(?P<qlabel>{KEY}(?P<q>[\x22'])))(?P<qval>[^\x22'\n]{{8,200}})(?P<qend>[\x22'])"),
                &format!(r"(?i:(?P<assign>{KEY}))(?P<val>[^\s\x22'`,;&()\[\]{{}}<>]{{8,}})"),
                r"(?m:(?P<pre>^|[\s=:\x22'(\[{<,`])(?P<b64>[A-Za-z0-9/+]{40})(?P<post>$|[\s\x22',;)\]}>.`]))",
            ]
            .join("|");
            // The pattern is fixed: the tests would fail first.
            regex::Regex::new(&pattern).ok()
        })
        .as_ref()
}

/// Whether `value` only stands for a secret (`YOUR_KEY`, `<token>`,
/// `${VAR}`, `xxxx`, `****`, `example`): documentation, not a leak.
fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let first = value.chars().next().unwrap_or(' ');
    value.len() < MIN_SECRET_LEN
        || value.chars().all(|c| c == first || c == '-' || c == '_')
        || [
            "your",
            "xxx",
            "***",
            "...",
            "<",
            ">",
            "$",
            "{{",
            "%s",
            "example",
            "placeholder",
            "changeme",
            "redacted",
            "dummy",
        ]
        .iter()
        .any(|p| lower.contains(p))
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
        let replaced = shapes.replace_all(&out, |c: &regex::Captures<'_>| replacement(&out, c));
        // Matches that were not secrets after all leave the text as it was.
        if let Cow::Owned(replaced) = replaced
            && replaced != *out
        {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// What one match of [`shapes`] in `text` becomes (itself, where it is
/// not a secret after all).
fn replacement(text: &str, c: &regex::Captures<'_>) -> String {
    let whole = c.get(0).map_or("", |m| m.as_str());
    if let (Some(label), Some(value)) = (c.name("authz"), c.name("authv")) {
        return match placeholder(value.as_str()) {
            true => whole.to_string(),
            false => format!("{}{REDACTED}", label.as_str()),
        };
    }
    if let Some(prefix) = c.name("keep") {
        return format!("{}***", prefix.as_str());
    }
    if let Some(tok) = c.name("tok") {
        let t = tok.as_str();
        let cut = t.find(['-', '_']).map_or(0, |i| i + 1);
        return format!("{}***", &t[..cut]);
    }
    for label in ["slack", "azure", "aws"] {
        if let Some(label) = c.name(label) {
            return format!("{}{REDACTED}", label.as_str());
        }
    }
    if let Some(url) = c.name("url") {
        return format!("{}{REDACTED}@", url.as_str());
    }
    if let (Some(label), Some(value)) = (c.name("qlabel"), c.name("qval")) {
        // A string literal, closed by its own quote.
        let closed = c.name("q").map(|q| q.as_str()) == c.name("qend").map(|q| q.as_str());
        // Words between quotes are words (`"My API Key"`) unless a digit
        // or a sign says otherwise.
        let v = value.as_str();
        let worded = v.contains(' ') && v.chars().all(|ch| ch.is_alphabetic() || ch == ' ');
        return match closed && !worded && !placeholder(v) {
            true => format!("{}{REDACTED}{}", label.as_str(), c.name("qend").map_or("", |q| q.as_str())),
            false => whole.to_string(),
        };
    }
    if let (Some(label), Some(value)) = (c.name("assign"), c.name("val")) {
        // Bare: a value with a digit and a letter, not a call
        // (`password = hash_v2(p)`) or a name (`os.environ`).
        let v = value.as_str();
        let after = &text[value.end()..];
        let secret = v.bytes().any(|b| b.is_ascii_digit())
            && v.bytes().any(|b| b.is_ascii_alphabetic())
            && !after.starts_with(['(', '['])
            && !placeholder(v);
        return match secret {
            true => format!("{}{REDACTED}", label.as_str()),
            false => whole.to_string(),
        };
    }
    if let Some(m) = c.name("b64") {
        // Forty characters of base64 standing alone are an AWS secret
        // access key when they look random: both cases, a digit and a `/`
        // or `+` (never a commit hash, a word, a path or a URL's).
        let t = m.as_str();
        let random = t.bytes().any(|b| b.is_ascii_uppercase())
            && t.bytes().any(|b| b.is_ascii_lowercase())
            && t.bytes().any(|b| b.is_ascii_digit())
            && t.bytes().any(|b| b == b'/' || b == b'+')
            && !t.starts_with('/')
            && !t.ends_with('/')
            && !t.contains("//");
        let (pre, post) = (c.name("pre").map_or("", |p| p.as_str()), c.name("post").map_or("", |p| p.as_str()));
        return match random {
            true => format!("{pre}{REDACTED}{post}"),
            false => whole.to_string(),
        };
    }
    REDACTED.to_string()
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
    fn tokens_headers_webhooks_connection_strings_and_assignments_go() {
        let cases = [
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJDREVGR0g=;EndpointSuffix=core.windows.net",
                "Zm9vYmFyYmF6",
                "AccountKey=[REDACTED];EndpointSuffix",
            ),
            ("curl -H 'Authorization: Bearer abc123DEF456ghi789' https://api", "abc123DEF456", "Bearer [REDACTED]'"),
            ("Authorization: token 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef", "token [REDACTED]"),
            ("GITLAB_TOKEN glpat-Abc123Def456Ghi789Jk-_", "Abc123Def456", "glpat-***"),
            ("//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIj", "npm_***"),
            ("HF token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 ok", "AbCdEfGhIj", "hf_*** ok"),
            (
                "SLACK_URL=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
                "T00000000",
                "https://hooks.slack.com/services/[REDACTED]",
            ),
            ("db password=hunter2hunter2 user=app", "hunter2hunter2", "password=[REDACTED] user"),
            ("api_key=\"a8f5f167f44f4964e6c998dee827110c\"", "a8f5f167", "api_key=\"[REDACTED]\""),
            ("{\"password\": \"c0rrect horse\", \"x\": 1}", "c0rrect", "\"password\": \"[REDACTED]\", \"x\""),
            ("DB_PASSWORD: s3cr3tPa55w0rd", "s3cr3tPa55", "DB_PASSWORD: [REDACTED]"),
        ];
        for (text, secret, shown) in cases {
            let s = scrub(text);
            assert!(!s.contains(secret), "{secret} in {s}");
            assert!(s.contains(shown), "{shown} not in {s}");
        }
    }

    #[test]
    fn prefixed_tokens_go_whole_at_any_length_from_their_shortest() {
        let run = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ98765";
        for (prefix, shortest) in [
            ("glpat-", 20),
            ("npm_", 36),
            ("hf_", 34),
            ("ghp_", 8),
            ("github_pat_", 8),
            ("xoxb-", 8),
            ("sk_live_", 8),
            ("sk-proj-", 8),
            ("sk-ant-api03-", 8),
            ("AIza", 8),
        ] {
            for extra in [0, 1, 2, 5, 13, 30] {
                let token = format!("{prefix}{}", &run[..shortest + extra]);
                let text = format!("token {token} end");
                let s = scrub(&text);
                assert!(!s.contains(&run[2..shortest]), "{token} leaked: {s}");
                assert!(s.ends_with(" end") && s.contains("***"), "{s}");
                assert!(!s.contains(&run[shortest - 2..shortest + extra]), "the tail of {token} leaked: {s}");
            }
        }
        let routable = "glpat-AbCdEfGhIjKlMnOpQrStUv.01.1a2b3c4d5";
        assert_eq!(scrub(&format!("x {routable} y")), "x glpat-*** y");
        for plain in ["hf_hub_download(repo)", "npm_config_cache", "glpat-short", "hf_transfer"] {
            assert_eq!(scrub(plain), plain, "left as it was");
        }
    }

    #[test]
    fn placeholders_and_code_are_not_secrets() {
        for plain in [
            "api_key=\"YOUR_API_KEY\"",
            "password: <your password>",
            "export PASSWORD=${DB_PASSWORD}",
            "Authorization: Bearer $TOKEN",
            "Authorization: Bearer <token>",
            "Authorization: Bearer YOUR_TOKEN_HERE",
            "password = \"********\"",
            "api_key = \"xxxxxxxxxxxxxxxx\"",
            "password=abc",
            "password = get_password()",
            "password = hash_v2(password)",
            "api_key = os.environ[\"OPENAI_API_KEY\"]",
            "client = OpenAI(api_key=os.environ.get(\"OPENAI_API_KEY\"))",
            "POSTGRES_PASSWORD=mysecretpassword",
            "from huggingface_hub import hf_hub_download",
            "password: String,",
            "OPENAI_API_KEY=\"My API Key\"",
            "https://github.com/BurntSushi/ripgrep/releases/download/14.1.0/ripgrep_14.1.0-1_amd64.deb",
            "see https://github.com/ScoopInstaller/Main/blob/master/bucket/ripgrep.json here",
            "\"integrity\": \"sha512-a4UGQaWPH59mOXUYnAG2ewncQS4i4F43Tv3JoAM+yspwiyUiGl9ZyadHRSql1HZh5ogRd8W8w6YM6EQ/==\"",
        ] {
            assert_eq!(scrub(plain), plain, "left as it was");
            assert!(!holds_secret(plain.as_bytes()), "{plain}");
        }
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
