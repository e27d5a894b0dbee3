//! Model and tool text made safe for a terminal: what a model writes (or
//! a command it ran printed) must not drive the user's terminal. Control
//! characters become visible (`^[` for ESC, as `cat -v` shows them), so
//! an OSC 52 clipboard write, a clear-screen or a hidden hyperlink shows
//! as text; C1 controls and the bidirectional overrides that reorder what
//! is shown ("Trojan Source") become `<U+XXXX>`. Line feeds and tabs
//! stay; a carriage return stays only before a line feed.

use std::borrow::Cow;
use std::io::Write;

/// Whether `c` must not reach a terminal as it is.
pub fn unsafe_char(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}' => true,
        _ => false,
    }
}

/// `text` with every control sequence shown as text. Borrowed when there
/// was nothing to change.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => out.push('\r'),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push((c as u8 + b'@') as char);
            }
            '\u{7f}' => out.push_str("^?"),
            c if unsafe_char(c) => out.push_str(&format!("<U+{:04X}>", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A writer that passes everything through [`safe`] (unless `raw`),
/// keeping a character cut between two writes for the next one.
pub struct SafeWriter<W: Write> {
    inner: W,
    raw: bool,
    carry: Vec<u8>,
}

impl<W: Write> SafeWriter<W> {
    pub fn new(inner: W, raw: bool) -> Self {
        Self { inner, raw, carry: Vec::new() }
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.raw {
            return self.inner.write(buf);
        }
        self.carry.extend_from_slice(buf);
        let (text, rest) = match std::str::from_utf8(&self.carry) {
            Ok(t) => (Cow::Borrowed(t), Vec::new()),
            Err(e) if e.error_len().is_none() => {
                // An incomplete character at the end: keep it for later.
                let valid = e.valid_up_to();
                (String::from_utf8_lossy(&self.carry[..valid]), self.carry[valid..].to_vec())
            }
            Err(_) => (String::from_utf8_lossy(&self.carry), Vec::new()),
        };
        let shown = safe(&text).into_owned();
        self.inner.write_all(shown.as_bytes())?;
        self.carry = rest;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_show_as_text() {
        let osc52 = "copy \x1b]52;c;ZWNobyBwd25lZA==\x07 done";
        assert_eq!(safe(osc52), "copy ^[]52;c;ZWNobyBwd25lZA==^G done");
        assert_eq!(safe("\x1b[2J\x1b[H"), "^[[2J^[[H", "clear-screen");
        let link = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\";
        assert!(!safe(link).contains('\x1b'), "hidden hyperlink");
        assert_eq!(safe("a\u{202E}b"), "a<U+202E>b", "bidi override");
        assert_eq!(safe("a\u{9b}31m"), "a<U+009B>31m", "C1 CSI");
        assert_eq!(safe("line\r\nnext\rover"), "line\r\nnext^Mover");
        assert!(matches!(safe("plain text\twith tab\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_writer_cut_inside_a_character_loses_nothing() {
        let text = "é\x1b[31m€\n";
        for cut in 0..text.len() {
            let mut w = SafeWriter::new(Vec::new(), false);
            w.write_all(&text.as_bytes()[..cut]).unwrap_or_else(|e| panic!("{e}"));
            w.write_all(&text.as_bytes()[cut..]).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(String::from_utf8_lossy(&w.inner), "é^[[31m€\n", "cut at {cut}");
        }
        let mut raw = SafeWriter::new(Vec::new(), true);
        raw.write_all(b"\x1b[2J").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(raw.inner, b"\x1b[2J", "--raw passes bytes through");
    }
}
