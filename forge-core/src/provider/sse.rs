//! Shared streaming plumbing: SSE framing (eventsource-stream) over any
//! byte stream, handed event by event to a wire-format parser. Parsers are
//! pure, so tests feed them recorded streams split at any byte.

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::{ProviderError, ProviderEvent, ProviderSettings, emit};

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
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<ProviderEvent>) -> Result<Step, ParseError>;
    /// The stream ended without the end marker: fine for some servers
    /// (returns `Ok`), a truncation for others.
    fn on_eof(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ParseError>;
}

/// Parses `bytes` as SSE with `parser`, sending events to `tx` as they come.
pub(super) async fn drive<S, E>(
    bytes: S,
    settings: &ProviderSettings,
    parser: &mut impl WireParser,
    tx: &mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let into_error = |e: ParseError| match e {
        ParseError::Broken(what) => ProviderError::stream_broken(settings, &what),
        ParseError::Reported { error_type, message } => ProviderError::midstream(settings, &error_type, &message),
    };
    let mut arrivals = super::arrivals::Arrivals::default();
    let bytes = bytes.inspect(move |chunk| {
        if let Ok(chunk) = chunk {
            arrivals.note(chunk);
        }
    });
    let mut events = bytes.eventsource();
    let mut out = Vec::new();
    while let Some(item) = events.next().await {
        let ev = item.map_err(|e| ProviderError::stream_broken(settings, &e.to_string()))?;
        let step = parser.on_event(&ev.event, &ev.data, &mut out).map_err(into_error)?;
        for e in out.drain(..) {
            emit(tx, e).await?;
        }
        if step == Step::Finished {
            return Ok(());
        }
    }
    parser.on_eof(&mut out).map_err(into_error)?;
    for e in out.drain(..) {
        emit(tx, e).await?;
    }
    Ok(())
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
    /// returns every event and the final result.
    pub fn run(
        parser: &mut impl WireParser,
        body: &str,
        split: usize,
    ) -> (Vec<ProviderEvent>, Result<(), ProviderError>) {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> =
            body.as_bytes().chunks(split.max(1)).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
        let settings = ProviderSettings::for_tests();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let (tx, mut rx) = mpsc::channel(100_000);
            let result = drive(futures::stream::iter(chunks), &settings, parser, &tx).await;
            drop(tx);
            let mut events = Vec::new();
            while let Some(e) = rx.recv().await {
                events.push(e);
            }
            (events, result)
        })
    }
}
