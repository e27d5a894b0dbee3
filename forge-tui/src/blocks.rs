//! The conversation as blocks of wrapped lines with known heights, cached
//! per item, so drawing a frame costs what is new and what is visible.
//!
//! A streaming answer only grows: the part up to its last paragraph break
//! (outside code fences) is rendered once as markdown and kept; the tail
//! after it is rendered again each frame while small, and, when a flood
//! makes it huge (one endless paragraph), kept as plain text in fixed-size
//! pieces of which only the last is redone. When the answer ends it is
//! rendered once more, whole, as markdown.

use std::collections::HashMap;

use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::markdown;
use crate::theme::{Part, Theme};
use crate::transcript::{AssistantItem, DisplayItem};
use forge_proto::{MessageStatus, RecoveryBadge};

/// Lines per block: the unit drawn or skipped.
const BLOCK_LINES: usize = 48;
/// A tail longer than this is shown as plain text while it streams.
const TAIL_MARKDOWN_MAX: usize = 16 * 1024;
/// Piece size of a plain tail (and of any overlong line).
const PIECE: usize = 4096;

#[derive(Clone)]
pub struct RBlock {
    pub lines: Vec<Line<'static>>,
    pub height: usize,
}

fn block(lines: Vec<Line<'static>>, width: u16) -> RBlock {
    let height = Paragraph::new(lines.clone()).wrap(Wrap { trim: false }).line_count(width);
    RBlock { lines, height }
}

/// Splits lines into blocks, cutting overlong lines into pieces first so
/// that no single line costs more than a piece to wrap.
fn blocks_of(lines: Vec<Line<'static>>, width: u16) -> Vec<RBlock> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for line in lines {
        for piece in split_long(line) {
            cur.push(piece);
            if cur.len() >= BLOCK_LINES {
                out.push(block(std::mem::take(&mut cur), width));
            }
        }
    }
    if !cur.is_empty() {
        out.push(block(cur, width));
    }
    out
}

fn split_long(line: Line<'static>) -> Vec<Line<'static>> {
    let len: usize = line.spans.iter().map(|s| s.content.len()).sum();
    if len <= PIECE {
        return vec![line];
    }
    let mut out = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut cur_len = 0;
    for span in line.spans {
        let mut rest: &str = &span.content;
        while !rest.is_empty() {
            let room = PIECE - cur_len;
            let mut cut = rest.len().min(room);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            if cut == 0 && cur_len == 0 {
                // A single character wider than a piece cannot happen; guard anyway.
                cut = rest.chars().next().map(char::len_utf8).unwrap_or(rest.len());
            }
            if cut > 0 {
                cur.push(Span::styled(rest[..cut].to_string(), span.style));
                cur_len += cut;
                rest = &rest[cut..];
            }
            if cur_len >= PIECE || cut == 0 {
                out.push(Line::from(std::mem::take(&mut cur)));
                cur_len = 0;
            }
        }
    }
    if !cur.is_empty() {
        out.push(Line::from(cur));
    }
    out
}

/// An answer being streamed, as far as it was rendered.
#[derive(Default)]
struct Stream {
    /// `text[..done_end]` is rendered in `done`.
    done_end: usize,
    done: Vec<RBlock>,
    /// Scanning for paragraph breaks resumes here, with this fence state.
    scanned_to: usize,
    in_fence: bool,
    /// The last paragraph break found (outside fences) at or after done_end.
    split: usize,
    /// A huge tail as plain pieces: `text[done_end..plain_end]`.
    plain_end: usize,
    plain: Vec<RBlock>,
}

struct Cached {
    key: u64,
    width: u16,
    head: Vec<RBlock>,
    body: Vec<RBlock>,
    stream: Option<Stream>,
}

#[derive(Default)]
pub struct BlockCache {
    items: HashMap<usize, Cached>,
    generation: u64,
}

impl BlockCache {
    /// Starts over when the transcript's items moved (see
    /// `Transcript::generation`): positions no longer name the same items.
    pub fn sync(&mut self, generation: u64) {
        if generation != self.generation {
            self.items.clear();
            self.generation = generation;
        }
    }

    /// Brings the item's blocks up to date.
    pub fn update(
        &mut self,
        index: usize,
        item: &DisplayItem,
        width: u16,
        theme: &Theme,
        simple: impl Fn(&DisplayItem) -> Vec<Line<'static>>,
    ) {
        match item {
            DisplayItem::Assistant(a) => self.assistant(index, a, width, theme),
            other => {
                let key = simple_key(other);
                let fresh =
                    self.items.get(&index).is_some_and(|c| c.key == key && c.width == width && c.stream.is_none());
                if !fresh {
                    self.items.insert(
                        index,
                        Cached { key, width, head: blocks_of(simple(other), width), body: Vec::new(), stream: None },
                    );
                }
            }
        }
    }

    /// The item's blocks as last updated, in order.
    pub fn blocks(&self, index: usize) -> Vec<&RBlock> {
        let Some(c) = self.items.get(&index) else { return Vec::new() };
        let streamed = c.stream.iter().flat_map(|s| s.done.iter().chain(s.plain.iter()));
        c.head.iter().chain(streamed).chain(c.body.iter()).collect()
    }

    /// The item's height in lines at the width it was last updated for.
    pub fn height(&self, index: usize) -> usize {
        let Some(c) = self.items.get(&index) else { return 0 };
        let streamed = c.stream.iter().flat_map(|s| s.done.iter().chain(s.plain.iter()));
        c.head.iter().chain(streamed).chain(c.body.iter()).map(|b| b.height).sum()
    }

    /// Forgets items from `len` on (the transcript got shorter).
    pub fn truncate(&mut self, len: usize) {
        self.items.retain(|i, _| *i < len);
    }

    fn assistant(&mut self, index: usize, a: &AssistantItem, width: u16, theme: &Theme) {
        let head_key = head_key(a);
        let reuse = self.items.get(&index).is_some_and(|c| c.width == width);
        if !reuse {
            self.items.insert(index, Cached { key: u64::MAX, width, head: Vec::new(), body: Vec::new(), stream: None });
        }
        let Some(c) = self.items.get_mut(&index) else { return };
        if c.key != head_key || c.head.is_empty() {
            c.head = blocks_of(assistant_head(a, theme), width);
            c.key = head_key;
        }
        if a.status.is_some() {
            // Finished: rendered once, whole.
            if c.stream.is_some() || c.body.is_empty() {
                let mut lines = markdown::render(&a.text, theme);
                lines.extend(assistant_foot(a, theme));
                c.body = blocks_of(lines, width);
                c.stream = None;
            }
        } else {
            let st = c.stream.get_or_insert_with(Stream::default);
            if st.scanned_to > a.text.len() {
                // The text changed under us: start over.
                *st = Stream::default();
            }
            advance(st, &a.text, width, theme);
            c.body = tail_blocks(st, &a.text, width, theme);
        }
    }
}

fn simple_key(item: &DisplayItem) -> u64 {
    match item {
        DisplayItem::Tool(t) => t.version,
        DisplayItem::User { text, queued, mark, .. } => {
            (text.len() as u64 * 2 + u64::from(*queued)) ^ mark.key().rotate_left(17)
        }
        DisplayItem::Notice { text, .. } => text.len() as u64,
        DisplayItem::Assistant(a) => a.version,
    }
}

fn head_key(a: &AssistantItem) -> u64 {
    let status = a.status.map(|s| s as u64 + 1).unwrap_or(0);
    let recovered = a.recovered.map(|r| r as u64 + 1).unwrap_or(0);
    ((a.thinking.len() as u64) << 8 | status << 4 | recovered) ^ a.mark.key().rotate_left(29)
}

/// Finds paragraph breaks in the newly arrived text and renders what lies
/// before the last one, once.
fn advance(st: &mut Stream, text: &str, width: u16, theme: &Theme) {
    // Resume at the start of the last (possibly incomplete) line scanned.
    let mut pos = st.scanned_to;
    while let Some(nl) = text[pos..].find('\n') {
        let line = &text[pos..pos + nl];
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            st.in_fence = !st.in_fence;
        }
        let next = pos + nl + 1;
        // A blank line outside a fence ends a block.
        if !st.in_fence && line.trim().is_empty() && next > st.done_end {
            st.split = next;
        }
        pos = next;
    }
    st.scanned_to = pos;
    if st.split > st.done_end {
        let lines = markdown::render(&text[st.done_end..st.split], theme);
        let mut lines = lines;
        lines.push(Line::default());
        st.done.extend(blocks_of(lines, width));
        st.done_end = st.split;
        st.plain_end = st.done_end;
        st.plain.clear();
    }
}

/// The part after the last paragraph break: markdown while small, plain
/// pieces when huge (only the last piece is redone).
fn tail_blocks(st: &mut Stream, text: &str, width: u16, theme: &Theme) -> Vec<RBlock> {
    let tail = &text[st.done_end..];
    if tail.len() <= TAIL_MARKDOWN_MAX {
        st.plain_end = st.done_end;
        st.plain.clear();
        return blocks_of(markdown::render(tail, theme), width);
    }
    if st.plain_end < st.done_end {
        st.plain_end = st.done_end;
    }
    // Complete pieces become permanent plain blocks.
    while text.len() - st.plain_end > PIECE {
        let mut end = st.plain_end + PIECE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let lines: Vec<Line<'static>> =
            text[st.plain_end..end].split('\n').map(|l| Line::from(l.to_string())).collect();
        st.plain.extend(blocks_of(lines, width));
        st.plain_end = end;
    }
    let rest: Vec<Line<'static>> = text[st.plain_end..].split('\n').map(|l| Line::from(l.to_string())).collect();
    blocks_of(rest, width)
}

/// Before a message's first line: the selection pointer (`K`/`J`), and
/// which of its versions this is when it has others (`[`/`]` switch).
pub fn mark_spans(mark: &crate::transcript::NodeMark, theme: &Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    if mark.selected {
        spans.push(Span::styled(format!("{} ", theme.glyphs.pointer), theme.style(Part::Selected)));
    }
    if let Some((at, of)) = mark.branch {
        spans.push(Span::styled(format!("[{at}/{of}] "), theme.style(Part::Dim)));
    }
    spans
}

/// An answer's first lines: who, how it ended, its badge, its thinking.
pub fn assistant_head(a: &AssistantItem, theme: &Theme) -> Vec<Line<'static>> {
    let g = theme.glyphs;
    let mut head = mark_spans(&a.mark, theme);
    head.push(Span::styled(format!("{} {}", g.assistant, a.model), theme.style(Part::Assistant)));
    match a.status {
        None => head.push(Span::styled(format!(" {}", g.running), theme.style(Part::Dim))),
        Some(MessageStatus::Cancelled) => head.push(Span::styled(" cancelled", theme.style(Part::Warn))),
        Some(MessageStatus::Error) => head.push(Span::styled(" error", theme.style(Part::Error))),
        Some(MessageStatus::Interrupted) => head.push(Span::styled(" interrupted", theme.style(Part::Warn))),
        _ => {}
    }
    if let Some(badge) = a.recovered {
        let word = match badge {
            RecoveryBadge::Complete => "complete",
            RecoveryBadge::Incomplete => "incomplete",
            RecoveryBadge::Errored => "errored",
            RecoveryBadge::Unknown => "unknown",
        };
        head.push(Span::styled(format!(" [recovered: {word}]"), theme.style(Part::Warn)));
    }
    let mut lines = vec![Line::from(head)];
    if !a.thinking.is_empty() {
        // Collapsed: reasoning can be long; its size says it is there.
        lines.push(Line::from(Span::styled(
            format!("(thinking, {} chars)", a.thinking.chars().count()),
            theme.style(Part::Thinking),
        )));
    }
    lines
}

/// After the answer's text: its error, if it failed.
pub fn assistant_foot(a: &AssistantItem, theme: &Theme) -> Vec<Line<'static>> {
    let dim = |t: String| Line::from(Span::styled(t, theme.style(Part::Dim)));
    let mut lines: Vec<Line<'static>> = Vec::new();
    if !a.searched.is_empty() {
        lines.push(dim(format!("searched the web: {}", a.searched.join("; "))));
    }
    if !a.sources.is_empty() {
        lines.push(dim("sources:".into()));
        for (i, (url, title)) in a.sources.iter().enumerate() {
            let title = if title.is_empty() { String::new() } else { format!("{title} ") };
            lines.push(dim(format!("  [{}] {title}{url}", i + 1)));
        }
    }
    lines.extend(
        a.error
            .iter()
            .map(|e| Line::from(Span::styled(format!("{} {e}", theme.glyphs.failed), theme.style(Part::Error)))),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::UiOptions;

    fn text_of(blocks: &[&RBlock]) -> String {
        blocks
            .iter()
            .flat_map(|b| b.lines.iter())
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_growing_answer_keeps_every_character_and_ends_as_full_markdown() {
        let theme = Theme::new(&UiOptions::default());
        let mut cache = BlockCache::default();
        let mut a = AssistantItem { model: "m".into(), ..Default::default() };
        let simple = |_: &DisplayItem| Vec::new();
        let mut full = String::new();
        for i in 0..300 {
            let piece = if i % 50 == 49 { "\n\n".to_string() } else { format!("w{i} ") };
            full.push_str(&piece);
            a.text.push_str(&piece);
            a.version += 1;
            let item = DisplayItem::Assistant(a.clone());
            cache.update(0, &item, 60, &theme, simple);
            let shown = text_of(&cache.blocks(0));
            let words: Vec<&str> = shown.split_whitespace().filter(|w| w.starts_with('w')).collect();
            let expected: Vec<&str> = full.split_whitespace().collect();
            assert_eq!(words, expected, "after {i} deltas");
        }
        a.status = Some(forge_proto::MessageStatus::Complete);
        let item = DisplayItem::Assistant(a.clone());
        cache.update(0, &item, 60, &theme, simple);
        let shown = text_of(&cache.blocks(0));
        assert_eq!(shown.split_whitespace().filter(|w| w.starts_with('w')).count(), 294);
    }

    #[test]
    fn a_flood_without_paragraph_breaks_is_kept_in_pieces() {
        let theme = Theme::new(&UiOptions::default());
        let mut cache = BlockCache::default();
        let mut a = AssistantItem { model: "m".into(), ..Default::default() };
        let simple = |_: &DisplayItem| Vec::new();
        for i in 0..40_000 {
            a.text.push_str(&format!("t{i} "));
            if i % 1000 == 0 {
                let item = DisplayItem::Assistant(a.clone());
                cache.update(0, &item, 80, &theme, simple);
            }
        }
        let item = DisplayItem::Assistant(a.clone());
        cache.update(0, &item, 80, &theme, simple);
        let blocks = cache.blocks(0);
        let shown: String = text_of(&blocks).replace('\n', "");
        let header_free = shown.split_once("t0 ").map(|(_, r)| format!("t0 {r}")).unwrap_or_default();
        assert_eq!(header_free, a.text, "every byte, in order");
        assert!(
            blocks
                .iter()
                .all(|b| b.lines.iter().all(|l| l.spans.iter().map(|s| s.content.len()).sum::<usize>() <= PIECE))
        );
    }
}
