//! Messages as the web client shows them: markdown to HTML that cannot
//! run anything, math (`$…$`, `$$…$$`) to MathML, which Chromium renders
//! natively. Model output and user text are hostile: raw HTML in them is
//! shown as text, a link may only go to `http`, `https` or `mailto` (an
//! image becomes a link, so nothing loads on its own), and every text and
//! attribute is escaped by the renderers.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// `text` (markdown) as inert HTML; control characters (a terminal's
/// escapes) are left out.
pub(crate) fn markdown(text: &str) -> String {
    let text: String = text.chars().filter(|c| !c.is_control() || matches!(c, '\n' | '\t')).collect();
    let text = text.as_str();
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_MATH
        | Options::ENABLE_GFM;
    let events = Parser::new_ext(text, options).map(|e| match e {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            Event::Start(Tag::Link { link_type, dest_url: safe(dest_url), title, id })
        }
        Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
            Event::Start(Tag::Link { link_type, dest_url: safe(dest_url), title, id })
        }
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        Event::InlineMath(m) => Event::InlineHtml(math(&m, false).into()),
        Event::DisplayMath(m) => Event::InlineHtml(math(&m, true).into()),
        other => other,
    });
    let mut html = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// A link's destination, if it goes somewhere harmless; else `#`.
fn safe(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    let ok = ["http://", "https://", "mailto:"].iter().any(|p| lower.starts_with(p)) || lower.starts_with('#');
    if ok && !url.chars().any(char::is_control) { url } else { CowStr::Borrowed("#") }
}

/// LaTeX as MathML (escaped by the renderer); what does not parse is
/// shown as the source, as text.
fn math(src: &str, display: bool) -> String {
    let storage = pulldown_latex::Storage::new();
    let parser = pulldown_latex::Parser::new(src, &storage);
    let mode = if display { pulldown_latex::config::DisplayMode::Block } else { Default::default() };
    let config = pulldown_latex::RenderConfig { display_mode: mode, ..Default::default() };
    let mut out = String::new();
    match pulldown_latex::push_mathml(&mut out, parser, config) {
        Ok(()) => out,
        Err(_) => {
            let escaped = src.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
            format!("<code>{escaped}</code>")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::markdown;

    #[test]
    fn hostile_markdown_renders_inert() {
        let cases = [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[click](javascript:alert(1))",
            "[click]( JAVASCRIPT:alert(1))",
            "![x](https://evil.example/track.png)",
            "<a href=\"javascript:alert(1)\">x</a>",
            "[x](data:text/html,<script>alert(1)</script>)",
            "$\\text{<img src=x onerror=alert(1)>}$",
            "$$a < b \\text{\"><script>alert(1)</script>}$$",
            "\u{1b}[31mred\u{1b}[0m",
        ];
        for case in cases {
            let html = markdown(case);
            let lower = html.to_ascii_lowercase();
            // Every tag the HTML holds, as the browser would read it.
            let tags: Vec<&str> = lower.split('<').skip(1).filter_map(|t| t.split('>').next()).collect();
            for tag in &tags {
                let name = tag.split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or("");
                assert!(!["script", "img", "iframe", "object"].contains(&name), "{case} -> {html}");
                assert!(
                    !tag.contains(" on") && !tag.contains("javascript:") && !tag.contains("data:"),
                    "{case} -> {html}"
                );
            }
            assert!(!html.contains('\u{1b}'), "no terminal escape reaches the page: {html}");
        }
    }

    #[test]
    fn markdown_code_and_math_render() {
        let html =
            markdown("**bold** `x` [docs](https://example.org)\n\n```rust\nfn main() {}\n```\n\n$e^{i\\pi}+1=0$");
        assert!(html.contains("<strong>bold</strong>") && html.contains("<code>x</code>"), "{html}");
        assert!(html.contains("href=\"https://example.org\""), "{html}");
        assert!(html.contains("<pre><code class=\"language-rust\">fn main() {}"), "{html}");
        assert!(html.contains("<math"), "{html}");
    }
}
