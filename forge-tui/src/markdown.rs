//! Markdown to styled lines (pulldown-cmark events to ratatui spans):
//! headings, emphasis, inline code, fenced and indented code blocks,
//! lists (nested, numbered), block quotes, links and rules. Half-streamed
//! markdown (an unclosed code fence, a lone `*`) renders as well as it can;
//! nothing is ever dropped.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::theme::{Part, Theme};

pub fn render(text: &str, theme: &Theme) -> Vec<Line<'static>> {
    let mut r = Renderer {
        theme,
        lines: Vec::new(),
        current: Vec::new(),
        styles: Vec::new(),
        prefix: Vec::new(),
        lists: Vec::new(),
        in_code: false,
        code_lang: None,
        code: String::new(),
        pending_item: None,
    };
    let opts = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, opts) {
        r.event(event);
    }
    r.flush_line();
    // No trailing blank lines.
    while r.lines.last().is_some_and(|l| l.spans.iter().all(|s| s.content.trim().is_empty())) {
        r.lines.pop();
    }
    r.lines
}

struct Renderer<'t> {
    theme: &'t Theme,
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Prefixes of enclosing blocks (quote bars, list indents).
    prefix: Vec<Span<'static>>,
    /// Enclosing lists: the next number, or None for bullets.
    lists: Vec<Option<u64>>,
    in_code: bool,
    /// The fenced block's language, when it names one a highlighter knows.
    code_lang: Option<String>,
    /// A highlighted block's text, collected until the block ends.
    code: String,
    /// The marker of a list item whose first line has not started yet.
    pending_item: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.iter().fold(Style::default(), |acc, s| acc.patch(*s))
    }

    fn start_line(&mut self) {
        if self.current.is_empty() {
            match self.pending_item.take() {
                // An item's first line: its marker stands where its indent
                // will be on the following lines.
                Some(marker) => {
                    let outer = self.prefix.len().saturating_sub(1);
                    self.current.extend(self.prefix[..outer].iter().cloned());
                    self.current.push(Span::styled(marker, self.theme.style(Part::Dim)));
                }
                None => self.current.extend(self.prefix.iter().cloned()),
            }
        }
    }

    fn push_text(&mut self, text: &str) {
        let style = self.style();
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                self.flush_line();
            }
            if piece.is_empty() {
                continue;
            }
            self.start_line();
            self.current.push(Span::styled(piece.to_string(), style));
        }
    }

    fn flush_line(&mut self) {
        if !self.current.is_empty() {
            self.lines.push(Line::from(std::mem::take(&mut self.current)));
        }
    }

    fn blank(&mut self) {
        self.flush_line();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            let prefix: Vec<Span<'static>> = self.prefix.iter().filter(|s| s.content.trim() != "").cloned().collect();
            self.lines.push(Line::from(prefix));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        let g = self.theme.glyphs;
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { level, .. } => {
                    self.blank();
                    let hashes = match level {
                        HeadingLevel::H1 => "# ",
                        HeadingLevel::H2 => "## ",
                        _ => "### ",
                    };
                    self.start_line();
                    self.current.push(Span::styled(hashes, self.theme.style(Part::Heading)));
                    self.styles.push(self.theme.style(Part::Heading));
                }
                Tag::BlockQuote(_) => {
                    self.flush_line();
                    self.prefix.push(Span::styled(format!("{} ", g.quote), self.theme.style(Part::Dim)));
                }
                Tag::CodeBlock(kind) => {
                    self.flush_line();
                    self.in_code = true;
                    let lang = match kind {
                        CodeBlockKind::Fenced(l) => l.split(',').next().unwrap_or("").trim().to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    if !lang.is_empty() {
                        self.start_line();
                        self.current.push(Span::styled(lang.clone(), self.theme.style(Part::Dim)));
                        self.flush_line();
                    }
                    self.code_lang = (self.theme.colors() && !lang.is_empty()).then_some(lang);
                    self.code.clear();
                    self.prefix.push(Span::styled(format!("{} ", g.code_bar), self.theme.style(Part::Dim)));
                    self.styles.push(self.theme.style(Part::Code));
                }
                Tag::List(start) => {
                    self.flush_line();
                    self.lists.push(start);
                }
                Tag::Item => {
                    self.flush_line();
                    let marker = match self.lists.last_mut() {
                        Some(Some(n)) => {
                            let m = format!("{n}. ");
                            *n += 1;
                            m
                        }
                        _ => format!("{} ", g.bullet),
                    };
                    let indent = " ".repeat(marker.chars().count());
                    self.pending_item = Some(marker);
                    self.prefix.push(Span::raw(indent));
                }
                Tag::Emphasis => self.styles.push(Style::default().add_modifier(Modifier::ITALIC)),
                Tag::Strong => self.styles.push(Style::default().add_modifier(Modifier::BOLD)),
                Tag::Strikethrough => self.styles.push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
                Tag::Link { .. } => self.styles.push(self.theme.style(Part::Link).add_modifier(Modifier::UNDERLINED)),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => self.blank(),
                TagEnd::Heading(_) => {
                    self.styles.pop();
                    self.blank();
                }
                TagEnd::BlockQuote(_) => {
                    self.flush_line();
                    // The quote's own trailing blank line goes; one outside follows.
                    let bar = self.prefix.pop().map(|s| s.content.trim().to_string()).unwrap_or_default();
                    if self
                        .lines
                        .last()
                        .is_some_and(|l| l.spans.iter().map(|s| s.content.trim()).collect::<String>() == bar)
                    {
                        self.lines.pop();
                    }
                    self.blank();
                }
                TagEnd::CodeBlock => {
                    if let Some(lang) = self.code_lang.take() {
                        let code = std::mem::take(&mut self.code);
                        self.highlighted(&lang, &code);
                    }
                    self.flush_line();
                    self.in_code = false;
                    self.prefix.pop();
                    self.styles.pop();
                    self.blank();
                }
                TagEnd::List(_) => {
                    self.flush_line();
                    self.lists.pop();
                    if self.lists.is_empty() {
                        self.blank();
                    }
                }
                TagEnd::Item => {
                    self.flush_line();
                    self.prefix.pop();
                    self.pending_item = None;
                }
                TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                    self.styles.pop();
                }
                _ => {}
            },
            Event::Text(t) => {
                if self.in_code && self.code_lang.is_some() {
                    self.code.push_str(&t);
                } else if self.in_code {
                    // Keep code exactly, line by line; the last newline ends the block.
                    self.plain_code(t.strip_suffix('\n').unwrap_or(&t));
                } else {
                    self.push_text(&t);
                }
            }
            Event::Code(t) => {
                self.start_line();
                self.current.push(Span::styled(t.to_string(), self.theme.style(Part::Code)));
            }
            Event::SoftBreak => self.push_text(" "),
            Event::HardBreak => self.flush_line(),
            Event::Rule => {
                self.blank();
                self.start_line();
                self.current.push(Span::styled(g.rule.repeat(24), self.theme.style(Part::Dim)));
                self.blank();
            }
            Event::TaskListMarker(done) => {
                self.start_line();
                self.current.push(Span::raw(if done { "[x] " } else { "[ ] " }));
            }
            Event::Html(t) | Event::InlineHtml(t) => self.push_text(&t),
            Event::FootnoteReference(t) => self.push_text(&format!("[{t}]")),
            _ => {}
        }
    }
}

impl Renderer<'_> {
    /// Code lines exactly as written, in the code style.
    fn plain_code(&mut self, code: &str) {
        for line in code.split('\n') {
            self.start_line();
            self.current.push(Span::styled(line.to_string(), self.style()));
            self.flush_line();
        }
    }

    /// A code block in the colours of its language (plain if unknown).
    fn highlighted(&mut self, lang: &str, code: &str) {
        use syntect::easy::HighlightLines;
        use syntect::util::LinesWithEndings;
        let (syntaxes, theme) = highlighter();
        let code = code.strip_suffix('\n').unwrap_or(code);
        let Some(syntax) = syntaxes.find_syntax_by_token(lang) else {
            self.plain_code(code);
            return;
        };
        let mut h = HighlightLines::new(syntax, theme);
        for line in LinesWithEndings::from(code) {
            self.start_line();
            match h.highlight_line(line, syntaxes) {
                Ok(ranges) => {
                    for (style, piece) in ranges {
                        let piece = piece.trim_end_matches('\n');
                        if piece.is_empty() {
                            continue;
                        }
                        let c = style.foreground;
                        self.current.push(Span::styled(
                            piece.to_string(),
                            Style::default().fg(ratatui::style::Color::Rgb(c.r, c.g, c.b)),
                        ));
                    }
                }
                Err(_) => self.current.push(Span::styled(line.trim_end_matches('\n').to_string(), self.style())),
            }
            self.flush_line();
        }
    }
}

/// Syntaxes and a theme, loaded once, on first use.
fn highlighter() -> &'static (syntect::parsing::SyntaxSet, syntect::highlighting::Theme) {
    static H: std::sync::OnceLock<(syntect::parsing::SyntaxSet, syntect::highlighting::Theme)> =
        std::sync::OnceLock::new();
    H.get_or_init(|| {
        let syntaxes = syntect::parsing::SyntaxSet::load_defaults_newlines();
        let mut themes = syntect::highlighting::ThemeSet::load_defaults().themes;
        let theme = themes.remove("base16-ocean.dark").or_else(|| themes.into_values().next()).unwrap_or_default();
        (syntaxes, theme)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::UiOptions;

    fn plain(text: &str, ascii: bool) -> Vec<String> {
        let theme = Theme::new(&UiOptions { ascii_only: ascii, ..Default::default() });
        render(text, &theme).iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect::<String>()).collect()
    }

    #[test]
    fn blocks_render_with_their_markers_and_code_stays_exact() {
        let md = "# Title\n\nSome *em* and **bold** and `code`.\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() {\n    x();\n}\n```\n\n> quoted\n";
        let lines = plain(md, false);
        assert_eq!(
            lines,
            vec![
                "# Title",
                "",
                "Some em and bold and code.",
                "",
                "• one",
                "• two",
                "  1. nested",
                "",
                "rust",
                "▎ fn main() {",
                "▎     x();",
                "▎ }",
                "",
                "│ quoted",
            ]
        );
    }

    #[test]
    fn code_in_a_known_language_is_coloured_and_keeps_its_text() {
        let theme = Theme::new(&UiOptions::default());
        let lines = render("```rust\nfn main() { let x = 1; }\n```\n", &theme);
        let code = &lines[1];
        let text: String = code.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "▎ fn main() { let x = 1; }");
        let colours: std::collections::HashSet<_> = code.spans.iter().filter_map(|s| s.style.fg).collect();
        assert!(colours.len() >= 3, "keywords, names and numbers differ: {colours:?}");
        // Without colours, no highlighting at all.
        let mono = Theme::new(&UiOptions { no_color: true, ..Default::default() });
        let lines = render("```rust\nfn main() {}\n```\n", &mono);
        assert!(lines.iter().flat_map(|l| l.spans.iter()).all(|s| s.style.fg.is_none()));
    }

    #[test]
    fn ascii_only_uses_no_other_glyphs_and_half_streamed_markdown_keeps_its_text() {
        let lines = plain("- a\n\n> b\n\n```\nunterminated", true);
        assert!(lines.iter().all(|l| l.is_ascii()), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("unterminated")));
        let lines = plain("a lone * and **half", false);
        assert_eq!(lines.concat(), "a lone * and **half");
    }
}
