//! Messages as the web client shows them: markdown to HTML that cannot
//! run anything, math (`$…$`, `$$…$$`) to MathML, which Chromium renders
//! natively. Model output and user text are hostile: raw HTML in them is
//! shown as text, a link may only go to `http`, `https` or `mailto` (an
//! image becomes a link, so nothing loads on its own), and every text and
//! attribute is escaped by the renderers. Fenced code is highlighted
//! with class names only (the page's policy allows no inline style):
//! [`highlight_css`] is their style sheet, light and dark.

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
    let mut code: Option<(String, String)> = None;
    // After the raw HTML became text: the highlighter's HTML is its own.
    let events = events.filter_map(|e| match e {
        Event::Start(Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(lang))) if syntax(&lang).is_some() => {
            code = Some((lang.to_string(), String::new()));
            None
        }
        Event::Text(t) if code.is_some() => {
            if let Some((_, body)) = code.as_mut() {
                body.push_str(&t);
            }
            None
        }
        Event::End(TagEnd::CodeBlock) if code.is_some() => {
            let (lang, body) = code.take().unwrap_or_default();
            Some(Event::Html(highlighted(&lang, &body).into()))
        }
        e => Some(e),
    });
    let mut html = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// Class names get this prefix, so they cannot meet the page's own.
const CLASS_PREFIX: &str = "hl-";

fn syntaxes() -> &'static syntect::parsing::SyntaxSet {
    static SET: std::sync::OnceLock<syntect::parsing::SyntaxSet> = std::sync::OnceLock::new();
    SET.get_or_init(syntect::parsing::SyntaxSet::load_defaults_newlines)
}

/// The syntax a fence's language names (`rust`, `rs`, `py`, `diff`...).
fn syntax(lang: &str) -> Option<&'static syntect::parsing::SyntaxReference> {
    let token = lang.split([' ', ',', '{']).next().unwrap_or("").trim();
    if token.is_empty() {
        return None;
    }
    syntaxes().find_syntax_by_token(token)
}

/// A fenced block as `<pre><code>` whose spans carry class names; the
/// generator escapes every piece of text.
fn highlighted(lang: &str, code: &str) -> String {
    use syntect::html::{ClassStyle, ClassedHTMLGenerator};
    let Some(syntax) = syntax(lang) else { return String::new() };
    let style = ClassStyle::SpacedPrefixed { prefix: CLASS_PREFIX };
    let mut generator = ClassedHTMLGenerator::new_with_class_style(syntax, syntaxes(), style);
    for line in syntect::util::LinesWithEndings::from(code) {
        if generator.parse_html_for_line_which_includes_newline(line).is_err() {
            let escaped = escape(code);
            return format!("<pre><code>{escaped}</code></pre>\n");
        }
    }
    let class: String = lang.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).collect();
    format!("<pre class=\"hl\"><code class=\"language-{class}\">{}</code></pre>\n", generator.finalize())
}

/// The style sheet of the highlighted code's class names: a light theme,
/// and a dark one where the system asks for it. Made once.
pub(crate) fn highlight_css() -> &'static str {
    static CSS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSS.get_or_init(|| {
        use syntect::html::{ClassStyle, css_for_theme_with_class_style};
        let themes = syntect::highlighting::ThemeSet::load_defaults().themes;
        let style = ClassStyle::SpacedPrefixed { prefix: CLASS_PREFIX };
        let sheet = |name: &str| {
            themes.get(name).and_then(|t| css_for_theme_with_class_style(t, style).ok()).unwrap_or_default()
        };
        format!(
            "{}\n@media (prefers-color-scheme: dark) {{\n{}\n}}\n",
            sheet("InspiredGitHub"),
            sheet("base16-ocean.dark")
        )
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
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
        Err(_) => format!("<code>{}</code>", escape(src)),
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
            "```rust\nlet x = \"</code></pre><script>alert(1)</script>\";\n```",
            "```diff\n+<img src=x onerror=alert(1)>\n```",
            "```\\\"><script>alert(1)</script>\nx\n```",
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
        assert!(
            html.contains("<pre class=\"hl\"><code class=\"language-rust\"><span class=\"hl-source hl-rust\">"),
            "{html}"
        );
        assert!(html.contains("<span class=\"hl-storage hl-type hl-function hl-rust\">fn</span>"), "{html}");
        let plain = markdown("```nosuchlanguage\n<b>\n```");
        assert!(plain.contains("<code class=\"language-nosuchlanguage\">&lt;b&gt;"), "{plain}");
        let css = super::highlight_css();
        assert!(css.contains(".hl-keyword") && css.contains("prefers-color-scheme: dark"), "{css}");
        assert!(html.contains("<math"), "{html}");
    }
}
