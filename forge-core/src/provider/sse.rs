//! Shared streaming plumbing: SSE framing (`SseFramer`) over any byte
//! stream, handed event by event to a wire-format parser. Parsers are
//! pure, so tests feed them recorded streams split at any byte.

use std::collections::VecDeque;

use futures::{Stream, StreamExt};

use super::{ProviderError, ProviderEvent, ProviderSettings};

/// What a parser makes of one SSE event.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Continue,
    /// The provider's end-of-stream marker: the answer is complete.
    Finished,
}

/// A failure the parser found, turned into a user-facing error by `drive`.
#[derive(Debug, PartialEq)]
pub(super) enum ParseError {
    /// The stream is not what the wire format promises.
    Broken(String),
    /// The provider reported an error inside the stream.
    Reported { error_type: String, message: String },
}

pub(super) trait WireParser {
    /// Whether the provider may write an error as bare JSON lines rather
    /// than as an SSE event (Gemini does, mid-stream): such lines are then
    /// framed as a `data:` event so the parser sees them.
    fn bare_json_lines(&self) -> bool {
        false
    }
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError>;
    /// The stream ended without the end marker: fine for some servers
    /// (returns `Ok`), a truncation for others.
    fn on_eof(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ParseError>;
}

/// The events `parser` makes of `bytes` (read as SSE) as they come, ending
/// with `Done` or `Error`.
pub(super) fn events<S, E>(
    bytes: S,
    settings: ProviderSettings,
    parser: impl WireParser + Send + 'static,
) -> impl Stream<Item = ProviderEvent> + Send + 'static
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let mut arrivals = super::arrivals::Arrivals::default();
    let bytes = bytes.inspect(move |chunk| {
        if let Ok(chunk) = chunk {
            arrivals.note(chunk);
        }
    });
    let bytes = if parser.bare_json_lines() {
        let mut framer = BareJsonLines::default();
        bytes.map(move |chunk| chunk.map(|c| bytes::Bytes::from(framer.feed(&c)))).boxed()
    } else {
        bytes.boxed()
    };
    let state = Parsing {
        bytes,
        framer: SseFramer::default(),
        parser,
        settings,
        ready: VecDeque::new(),
        out: Vec::new(),
        ended: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.ready.pop_front() {
                return Some((ev, st));
            }
            if st.ended {
                return None;
            }
            if let Some(end) = st.next_end().await {
                // The last event: the stream ends after it.
                st.ready.push_back(match end {
                    Ok(()) => ProviderEvent::Done,
                    Err(e) => ProviderEvent::Error(e),
                });
                st.ended = true;
            }
        }
    })
}

/// Frames JSON written bare into an SSE body (a line starting with `{`,
/// possibly running over several lines until its braces close) as one
/// `data:` event; every other byte passes unchanged.
#[derive(Debug)]
pub(super) struct BareJsonLines {
    at_line_start: bool,
    bare: Option<BareJson>,
}

#[derive(Debug, Default)]
struct BareJson {
    text: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
}

impl Default for BareJsonLines {
    fn default() -> Self {
        Self { at_line_start: true, bare: None }
    }
}

impl BareJsonLines {
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len());
        for &b in chunk {
            if let Some(json) = &mut self.bare {
                // Line breaks inside JSON are whitespace (or invalid).
                json.text.push(if b == b'\n' || b == b'\r' { b' ' } else { b });
                match (json.in_string, json.escaped, b) {
                    (true, true, _) => json.escaped = false,
                    (true, false, b'\\') => json.escaped = true,
                    (true, false, b'"') => json.in_string = false,
                    (true, false, _) => {}
                    (false, _, b'"') => json.in_string = true,
                    (false, _, b'{' | b'[') => json.depth += 1,
                    (false, _, b'}' | b']') => json.depth = json.depth.saturating_sub(1),
                    _ => {}
                }
                if json.depth == 0 {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(&json.text);
                    out.extend_from_slice(b"\n\n");
                    self.bare = None;
                    self.at_line_start = false;
                }
                continue;
            }
            if self.at_line_start && b == b'{' {
                self.bare = Some(BareJson { text: vec![b], depth: 1, ..Default::default() });
                continue;
            }
            out.push(b);
            self.at_line_start = b == b'\n' || b == b'\r';
        }
        out
    }
}

/// Server-sent events framed from bytes as the HTML standard reads them:
/// lines end with CRLF, LF or CR; `field: value` (one space after the colon
/// dropped; a line without a colon is a field with an empty value); lines
/// starting with a colon are comments; `data` lines are joined with LF;
/// a blank line dispatches the event (type `message` unless `event` named
/// one) if it has data; unknown fields, `id` and `retry` are ignored (no
/// client here reconnects); what is left at the end of the stream without
/// its blank line is dropped. It works in place on the bytes read: a line
/// is copied only when it is cut between two reads.
#[derive(Debug, Default)]
pub(super) struct SseFramer {
    /// The start of a line cut by the end of the last read.
    partial: Vec<u8>,
    /// The last read ended with CR: an LF first in the next ends that line.
    after_cr: bool,
    /// The first line was read (a byte-order mark before it is skipped).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

/// Text that is not UTF-8 in an SSE stream.
#[derive(Debug, PartialEq)]
pub(super) struct NotUtf8;

impl SseFramer {
    /// Frames `chunk`, calling `on_event(event, data)` for each event it
    /// completes; stops at the first `false` from it (the rest is ignored).
    pub(super) fn feed(
        &mut self,
        mut chunk: &[u8],
        mut on_event: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), NotUtf8> {
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr && chunk[0] == b'\n' {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let keep_going = if self.partial.is_empty() {
                self.line(&chunk[..end], &mut on_event)?
            } else {
                // The buffer goes back empty, keeping its capacity.
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&chunk[..end]);
                let keep_going = self.line(&line, &mut on_event);
                line.clear();
                self.partial = line;
                keep_going?
            };
            if !keep_going {
                return Ok(());
            }
            let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
            self.after_cr = chunk[end] == b'\r' && end + 1 == chunk.len();
            chunk = &chunk[end + 1 + usize::from(crlf)..];
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    fn line(&mut self, mut line: &[u8], on_event: &mut impl FnMut(&str, &str) -> bool) -> Result<bool, NotUtf8> {
        if !self.started {
            self.started = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            let go_on =
                !self.has_data || on_event(if self.event.is_empty() { "message" } else { &self.event }, &self.data);
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return Ok(go_on);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return Ok(true),
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = || std::str::from_utf8(value).map_err(|_| NotUtf8);
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value()?);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.push_str(value()?);
            }
            _ => {}
        }
        Ok(true)
    }
}

/// What one parser step leaves: its events move to `ready` (a failing
/// step's are not shown); `Some` once the stream ends there.
fn settle(
    step: Result<Step, ParseError>,
    out: &mut Vec<ProviderEvent>,
    ready: &mut VecDeque<ProviderEvent>,
) -> Option<Result<(), ParseError>> {
    match step {
        Ok(step) => {
            ready.extend(out.drain(..));
            (step == Step::Finished).then_some(Ok(()))
        }
        Err(e) => {
            out.clear();
            Some(Err(e))
        }
    }
}

/// A stream being parsed: what has been parsed and not yet yielded waits
/// in `ready`.
struct Parsing<B, P> {
    bytes: B,
    framer: SseFramer,
    parser: P,
    settings: ProviderSettings,
    ready: VecDeque<ProviderEvent>,
    out: Vec<ProviderEvent>,
    /// `Done` or `Error` is in `ready`: nothing more is read.
    ended: bool,
}

impl<B, E, P> Parsing<B, P>
where
    B: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
    P: WireParser,
{
    /// Parses the next read's events into `ready`; `Some` once the stream
    /// ends.
    async fn next_end(&mut self) -> Option<Result<(), ProviderError>> {
        let settings = &self.settings;
        let into_error = |e: ParseError| match e {
            ParseError::Broken(what) => ProviderError::stream_broken(settings, &what),
            ParseError::Reported { error_type, message } => ProviderError::midstream(settings, &error_type, &message),
        };
        let chunk = match self.bytes.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => return Some(Err(ProviderError::stream_broken(settings, &e.to_string()))),
            None => {
                let eof = self.parser.on_eof(&mut self.out).map(|()| Step::Finished);
                return settle(eof, &mut self.out, &mut self.ready).map(|end| end.map_err(into_error));
            }
        };
        let (parser, out, ready) = (&mut self.parser, &mut self.out, &mut self.ready);
        let mut end = None;
        let framed = self.framer.feed(&chunk, |event, data| {
            end = settle(parser.on_event(event, data, out), out, ready);
            end.is_none()
        });
        if framed.is_err() && end.is_none() {
            return Some(Err(ProviderError::stream_broken(settings, "the stream is not UTF-8 text")));
        }
        end.map(|end| end.map_err(into_error))
    }
}

#[cfg(test)]
mod framer_tests {
    use super::{NotUtf8, SseFramer};

    fn frame(pieces: &[&[u8]]) -> Result<Vec<(String, String)>, NotUtf8> {
        let mut framer = SseFramer::default();
        let mut out = Vec::new();
        for piece in pieces {
            framer.feed(piece, |event, data| {
                out.push((event.to_string(), data.to_string()));
                true
            })?;
        }
        Ok(out)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(e, d)| (e.to_string(), d.to_string())).collect()
    }

    #[test]
    fn events_are_read_as_the_standard_says_however_the_bytes_are_cut() {
        let body = "\u{feff}: a comment\r\nevent: delta\r\ndata: {\"a\": \"é\"}\r\n\r\n\
                    data:no space\rdata\r\rid: 7\nretry: 10\nunknown: x\ndata:  two spaces\n\n\
                    event: ignored\n\nevent: first\nevent: last\ndata: x\n\ndata: cut off at the end";
        let expected =
            pairs(&[("delta", "{\"a\": \"é\"}"), ("message", "no space\n"), ("message", " two spaces"), ("last", "x")]);
        assert_eq!(frame(&[body.as_bytes()]), Ok(expected.clone()));
        let bytes = body.as_bytes();
        for at in 0..=bytes.len() {
            assert_eq!(frame(&[&bytes[..at], &bytes[at..]]), Ok(expected.clone()), "cut at byte {at}");
        }
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(frame(&one_by_one), Ok(expected));
    }

    #[test]
    fn a_crlf_cut_between_its_two_bytes_ends_one_line_only() {
        let got = frame(&[b"data: a\r", b"", b"\ndata: b\r", b"\n\r\n"]);
        assert_eq!(got, Ok(pairs(&[("message", "a\nb")])));
    }

    #[test]
    fn text_that_is_not_utf8_is_an_error_and_the_consumer_can_stop() {
        assert_eq!(frame(&[b"data: \xff\n\n"]), Err(NotUtf8));
        let mut framer = SseFramer::default();
        let mut seen = 0;
        framer
            .feed(b"data: 1\n\ndata: 2\n\n", |_, _| {
                seen += 1;
                false
            })
            .unwrap_or_else(|_| panic!("valid"));
        assert_eq!(seen, 1, "nothing is framed after the consumer says stop");
    }
}

#[cfg(test)]
mod bare_json_tests {
    use super::BareJsonLines;

    #[test]
    fn bare_json_becomes_an_event_and_everything_else_passes() {
        let body = "data: {\"a\":1}\r\n\r\n{\"error\": {\"message\": \"over}loaded \\\" {\",\r\n  \"status\": \"UNAVAILABLE\"}}\r\n";
        let expected = "data: {\"a\":1}\r\n\r\ndata: {\"error\": {\"message\": \"over}loaded \\\" {\",    \"status\": \"UNAVAILABLE\"}}\n\n\r\n";
        for split in 1..body.len() {
            let mut f = BareJsonLines::default();
            let mut out = f.feed(&body.as_bytes()[..split]);
            out.extend(f.feed(&body.as_bytes()[split..]));
            assert_eq!(String::from_utf8_lossy(&out), expected, "split at {split}");
        }
    }
}

#[cfg(test)]
pub(super) mod testing {
    use super::*;

    /// The concatenated argument fragments of tool call `index`.
    pub fn tool_args(events: &[ProviderEvent], index: usize) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallArgs { index: i, fragment } if *i == index => Some(fragment.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Runs `parser` over `body` delivered in pieces of `split` bytes;
    /// returns every event before the last, and how the stream ended.
    pub fn run(
        parser: impl WireParser + Send + 'static,
        body: &str,
        split: usize,
    ) -> (Vec<ProviderEvent>, Result<(), ProviderError>) {
        let chunks: Vec<&[u8]> = body.as_bytes().chunks(split.max(1)).collect();
        run_chunks(parser, &chunks)
    }

    /// Asserts that `body` parses to the same events (after `normalize`)
    /// however it is cut in two: at every byte, inside UTF-8 sequences and
    /// between `\r` and `\n` included.
    pub fn assert_every_split<P: WireParser + Send + 'static>(
        make: impl Fn() -> P,
        body: &str,
        normalize: impl Fn(Vec<ProviderEvent>) -> Vec<ProviderEvent>,
    ) {
        let (whole, end) = run(make(), body, usize::MAX);
        let whole = normalize(whole);
        for at in 1..body.len() {
            let (events, split_end) = run_chunks(make(), &[&body.as_bytes()[..at], &body.as_bytes()[at..]]);
            assert_eq!(normalize(events), whole, "cut at byte {at}");
            assert_eq!(split_end.is_ok(), end.is_ok(), "cut at byte {at}");
        }
    }

    fn run_chunks(
        parser: impl WireParser + Send + 'static,
        pieces: &[&[u8]],
    ) -> (Vec<ProviderEvent>, Result<(), ProviderError>) {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> =
            pieces.iter().map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
        let settings = ProviderSettings::for_tests();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap_or_else(|e| panic!("{e}"));
        let mut events: Vec<ProviderEvent> =
            rt.block_on(events(futures::stream::iter(chunks), settings, parser).collect());
        let end = match events.pop() {
            Some(ProviderEvent::Done) => Ok(()),
            Some(ProviderEvent::Error(e)) => Err(e),
            other => panic!("a stream ends with Done or Error, not {other:?}"),
        };
        (events, end)
    }
}
