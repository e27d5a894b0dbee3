//! Glyphs and colours, from the display options: `ascii_only` swaps every
//! non-ASCII glyph, `high_contrast` uses bold, bright colours, and
//! `NO_COLOR` keeps only bold, italic and reverse.

use ratatui::style::{Color, Modifier, Style};

use crate::app::UiOptions;

#[derive(Debug, Clone, Copy)]
pub struct Glyphs {
    pub user: &'static str,
    pub assistant: &'static str,
    pub tool: &'static str,
    pub notice: &'static str,
    pub bullet: &'static str,
    pub quote: &'static str,
    pub code_bar: &'static str,
    pub rule: &'static str,
    pub ok: &'static str,
    pub failed: &'static str,
    pub running: &'static str,
    pub picked: &'static str,
    pub unpicked: &'static str,
    pub pointer: &'static str,
    pub separator: &'static str,
    pub ellipsis: &'static str,
}

const UNICODE: Glyphs = Glyphs {
    user: "›",
    assistant: "◆",
    tool: "⚙",
    notice: "•",
    bullet: "•",
    quote: "│",
    code_bar: "▎",
    rule: "─",
    ok: "✓",
    failed: "✗",
    running: "…",
    picked: "[x]",
    unpicked: "[ ]",
    pointer: "▶",
    separator: " · ",
    ellipsis: "…",
};

const ASCII: Glyphs = Glyphs {
    user: ">",
    assistant: "*",
    tool: "#",
    notice: "-",
    bullet: "-",
    quote: "|",
    code_bar: "|",
    rule: "-",
    ok: "ok",
    failed: "x",
    running: "...",
    picked: "[x]",
    unpicked: "[ ]",
    pointer: ">",
    separator: " | ",
    ellipsis: "...",
};

/// What a piece of the screen is, for its style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    User,
    Assistant,
    Tool,
    ToolOutput,
    Thinking,
    Info,
    Warn,
    Error,
    Heading,
    Code,
    Link,
    Dim,
    StatusBar,
    ModeBadge,
    Selected,
    Border,
}

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub glyphs: Glyphs,
    high_contrast: bool,
    color: bool,
}

impl Theme {
    pub fn new(o: &UiOptions) -> Self {
        Self { glyphs: if o.ascii_only { ASCII } else { UNICODE }, high_contrast: o.high_contrast, color: !o.no_color }
    }

    /// Whether colours are on (not `NO_COLOR`).
    pub fn colors(&self) -> bool {
        self.color
    }

    /// Box borders: line drawing, or `+`, `-` and `|` with `ascii_only`.
    pub fn border(&self) -> ratatui::symbols::border::Set<'static> {
        if self.glyphs.user == ">" {
            ratatui::symbols::border::Set {
                top_left: "+",
                top_right: "+",
                bottom_left: "+",
                bottom_right: "+",
                vertical_left: "|",
                vertical_right: "|",
                horizontal_top: "-",
                horizontal_bottom: "-",
            }
        } else {
            ratatui::symbols::border::PLAIN
        }
    }

    /// A bordered box in this theme.
    pub fn block(&self) -> ratatui::widgets::Block<'static> {
        ratatui::widgets::Block::default().borders(ratatui::widgets::Borders::ALL).border_set(self.border())
    }

    pub fn style(&self, part: Part) -> Style {
        let base = Style::default();
        let modifiers = match part {
            Part::User | Part::Assistant | Part::Heading | Part::ModeBadge => Modifier::BOLD,
            Part::Thinking | Part::Dim => Modifier::ITALIC,
            Part::Selected | Part::StatusBar => Modifier::REVERSED,
            Part::Error => Modifier::BOLD,
            _ => Modifier::empty(),
        };
        let modifiers = if self.high_contrast && !matches!(part, Part::Selected | Part::StatusBar) {
            modifiers | Modifier::BOLD
        } else {
            modifiers
        };
        let style = base.add_modifier(modifiers);
        if !self.color {
            return style;
        }
        let hc = self.high_contrast;
        let fg = match part {
            Part::User => Some(if hc { Color::LightCyan } else { Color::Cyan }),
            Part::Assistant => Some(if hc { Color::LightMagenta } else { Color::Magenta }),
            Part::Tool => Some(if hc { Color::LightYellow } else { Color::Yellow }),
            Part::ToolOutput | Part::Thinking | Part::Dim | Part::Border => {
                Some(if hc { Color::White } else { Color::DarkGray })
            }
            Part::Info => Some(if hc { Color::LightBlue } else { Color::Blue }),
            Part::Warn => Some(if hc { Color::LightYellow } else { Color::Yellow }),
            Part::Error => Some(if hc { Color::LightRed } else { Color::Red }),
            Part::Heading => Some(if hc { Color::LightCyan } else { Color::Cyan }),
            Part::Code => Some(if hc { Color::LightGreen } else { Color::Green }),
            Part::Link => Some(if hc { Color::LightBlue } else { Color::Blue }),
            Part::ModeBadge => Some(Color::Black),
            Part::StatusBar | Part::Selected => None,
        };
        let style = match fg {
            Some(c) => style.fg(c),
            None => style,
        };
        if part == Part::ModeBadge {
            return style.bg(if hc { Color::LightYellow } else { Color::Yellow });
        }
        style
    }
}
