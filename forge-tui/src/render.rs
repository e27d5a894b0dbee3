//! Drawing the state: conversation, approval or recovery panel, input box,
//! status line and the model picker. Drawing reads the state only; what it
//! learns about sizes comes back as [`Drawn`].
//!
//! The conversation is drawn from [`BlockCache`]: blocks of lines with
//! known heights, of which only those in view are wrapped and drawn.

use forge_proto::{JournalHealth, OperationStateKind};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

use crate::app::{App, Connection, ScrollState};
use crate::blocks::{BlockCache, assistant_foot, assistant_head, mark_spans};
use crate::input::{InputMode, InputState};
use crate::markdown;
use crate::theme::{Part, Theme};
use crate::transcript::{DisplayItem, Level, ToolItem};

/// Lines of live tool output shown (the result has it all).
const TOOL_OUTPUT_TAIL: usize = 8;
/// Lines of a tool result shown.
const TOOL_RESULT_LINES: usize = 6;
const MAX_INPUT_LINES: usize = 8;

/// What drawing learned: sizes for scrolling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drawn {
    pub total_lines: usize,
    pub page_lines: usize,
    /// Where the view was scrolled to show `App::focus`.
    pub focused: Option<usize>,
}

pub type RenderCache = BlockCache;

pub fn draw(frame: &mut Frame, app: &App, cache: &mut RenderCache) -> Drawn {
    let theme = Theme::new(&app.options);
    let area = frame.area();
    let input_h = input_height(app, area.width) as u16;
    let panel = panel_lines(app, &theme);
    let panel_h = if panel.is_empty() { 0 } else { (panel.len() as u16 + 2).min(area.height / 2) };
    let [conv, panel_area, input_area, status_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(panel_h),
        Constraint::Length(input_h),
        Constraint::Length(1),
    ])
    .areas(area);
    let drawn = draw_conversation(frame, app, cache, &theme, conv);
    if panel_h > 0 {
        let title = panel_title(app);
        let block = theme.block().border_style(theme.style(Part::Warn)).title(title);
        frame.render_widget(Paragraph::new(panel).block(block).wrap(Wrap { trim: false }), panel_area);
    }
    draw_input(frame, app, &theme, input_area);
    draw_status(frame, app, &theme, status_area);
    match &app.input {
        InputState::ModelSelect { selected, .. } => draw_model_picker(frame, app, &theme, *selected),
        InputState::Tree { cursor, .. } => draw_tree_view(frame, app, &theme, *cursor),
        InputState::Rewind { cursor, .. } => draw_rewind_picker(frame, app, &theme, *cursor),
        _ => {}
    }
    drawn
}

/// A large box in the middle of the screen, cleared, with a title.
fn overlay(frame: &mut Frame, app: &App, theme: &Theme, title: &str, lines: Vec<Line<'static>>) {
    let area = frame.area();
    if area.height == 0 || area.width == 0 {
        return;
    }
    let w = (area.width.saturating_mul(9) / 10).max(10).min(area.width);
    let h = (area.height.saturating_mul(8) / 10).max(3).min(area.height);
    let y = area.y + (area.height - h) / 2;
    // SlideUp: rises from the bottom edge while the effect runs.
    let p = app.modal.filter(|m| m.kind() == crate::app::ModalEffectKind::SlideUp).map_or(1.0, |m| m.progress());
    let below = (area.y + area.height).saturating_sub(y);
    let y = y + ((1.0 - p) * below as f32) as u16;
    let h = h.min((area.y + area.height).saturating_sub(y)).max(1);
    let rect = Rect::new(area.x + (area.width - w) / 2, y.min((area.y + area.height).saturating_sub(1)), w, h);
    frame.render_widget(Clear, rect);
    let block = theme.block().border_style(theme.style(Part::Tool)).title(title.to_string());
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// The rows around `cursor` that fit `height`, the cursor's marked.
fn window(rows: Vec<String>, cursor: usize, height: usize, theme: &Theme) -> Vec<Line<'static>> {
    let first = cursor.saturating_sub(height.saturating_sub(1) / 2).min(rows.len().saturating_sub(height));
    rows.into_iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, row)| {
            if i == cursor {
                Line::from(Span::styled(format!("{} {row}", theme.glyphs.pointer), theme.style(Part::Selected)))
            } else {
                Line::from(format!("  {row}"))
            }
        })
        .collect()
}

/// `/tree`: every branch, the head and the path marked.
fn draw_tree_view(frame: &mut Frame, app: &App, theme: &Theme, cursor: usize) {
    let Some(tree) = &app.tree else { return };
    let rows: Vec<String> = forge_client::tree::rows(tree).into_iter().map(|(_, line)| line).collect();
    let height = (frame.area().height.saturating_mul(8) / 10).saturating_sub(2) as usize;
    let lines = window(rows, cursor, height, theme);
    overlay(frame, app, theme, " tree (* the path to the head) ", lines);
}

/// `/rewind`: the turns, newest first, with the files each changed.
fn draw_rewind_picker(frame: &mut Frame, app: &App, theme: &Theme, cursor: usize) {
    let Some(tree) = &app.tree else { return };
    let rows: Vec<String> = crate::branches::rewind_rows(tree)
        .into_iter()
        .map(|r| {
            let files = match r.files.len() {
                0 => "no file changes".to_string(),
                n => {
                    // Paths in the session's directory are shown from there.
                    let cwd = format!("{}/", app.transcript.fold.cwd.trim_end_matches('/'));
                    let names: Vec<&str> =
                        r.files.iter().take(4).map(|f| f.strip_prefix(cwd.as_str()).unwrap_or(f)).collect();
                    let more = if n > 4 { format!(" and {} more", n - 4) } else { String::new() };
                    format!("{n} file(s): {}{more}", names.join(", "))
                }
            };
            format!("{}  {}  ({files})", r.message, r.preview)
        })
        .collect();
    let height = (frame.area().height.saturating_mul(8) / 10).saturating_sub(2) as usize;
    let lines = window(rows, cursor, height, theme);
    overlay(frame, app, theme, " rewind to before a turn: it and every later one are undone, files included ", lines);
}

fn draw_conversation(frame: &mut Frame, app: &App, cache: &mut RenderCache, theme: &Theme, area: Rect) -> Drawn {
    let width = area.width.max(1);
    let page = area.height as usize;
    let items = &app.transcript.items;
    cache.sync(app.transcript.generation);
    cache.truncate(items.len());
    for (i, item) in items.iter().enumerate() {
        cache.update(i, item, width, theme, |it| item_lines(it, theme));
    }
    // Every item's blocks, then one blank line.
    let spacer = Line::default();
    let heights: Vec<usize> = (0..items.len()).map(|i| cache.height(i) + 1).collect();
    let total: usize = heights.iter().sum();
    let max_offset = total.saturating_sub(page);
    let mut offset = match app.scroll {
        ScrollState::AutoBottom => max_offset,
        ScrollState::Manual { offset_from_top } => offset_from_top.min(max_offset),
    };
    // The selected message comes into view (its start, if it is taller).
    let mut focused = None;
    if let Some(i) = app.focus.filter(|i| *i < items.len()) {
        let start: usize = heights[..i].iter().sum();
        let end = start + heights[i];
        if start < offset || end > offset + page {
            offset = if heights[i] > page { start } else { end.saturating_sub(page).max(start.min(max_offset)) };
            offset = offset.min(max_offset);
        }
        focused = Some(offset);
    }
    // Only the blocks in view are drawn.
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut start = 0;
    let mut skip = None;
    for (i, h) in heights.iter().enumerate() {
        if start + h <= offset || start >= offset + page {
            start += h;
            continue;
        }
        let blocks = cache.blocks(i);
        let parts = blocks.iter().map(|b| (b.height, Some(*b))).chain([(1, None)]);
        for (h, b) in parts {
            let end = start + h;
            if end > offset && start < offset + page {
                skip.get_or_insert_with(|| offset.saturating_sub(start));
                match b {
                    Some(b) => lines.extend(b.lines.iter().cloned()),
                    None => lines.push(spacer.clone()),
                }
            }
            start = end;
        }
    }
    if items.is_empty() {
        let hint = if app.replaying {
            "loading the session..."
        } else {
            "i to type a message, : for commands, /help for help, q to leave"
        };
        lines.push(Line::from(Span::styled(hint, theme.style(Part::Dim))));
    }
    let skip = skip.unwrap_or(0).min(u16::MAX as usize) as u16;
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((skip, 0)), area);
    Drawn { total_lines: total, page_lines: page, focused }
}

fn item_lines(item: &DisplayItem, theme: &Theme) -> Vec<Line<'static>> {
    let g = theme.glyphs;
    match item {
        DisplayItem::User { text, from, queued, mark } => {
            let mut head = mark_spans(mark, theme);
            head.push(Span::styled(format!("{} you", g.user), theme.style(Part::User)));
            if let Some(f) = from.as_deref().filter(|f| *f != "forge") {
                head.push(Span::styled(format!(" (via {f})"), theme.style(Part::Dim)));
            }
            if *queued {
                head.push(Span::styled(" queued", theme.style(Part::Warn)));
            }
            let mut lines = vec![Line::from(head)];
            lines.extend(text.lines().map(|l| Line::from(l.to_string())));
            lines
        }
        DisplayItem::Assistant(a) => {
            let mut lines = assistant_head(a, theme);
            lines.extend(markdown::render(&a.text, theme));
            lines.extend(assistant_foot(a, theme));
            lines
        }
        DisplayItem::Tool(t) => tool_lines(t, theme),
        DisplayItem::Notice { level, text } => {
            let part = match level {
                Level::Info => Part::Info,
                Level::Warn => Part::Warn,
                Level::Error => Part::Error,
            };
            text.lines()
                .enumerate()
                .map(|(i, l)| {
                    let lead = if i == 0 { format!("{} ", g.notice) } else { "  ".into() };
                    Line::from(Span::styled(format!("{lead}{l}"), theme.style(part)))
                })
                .collect()
        }
    }
}

fn tool_lines(t: &ToolItem, theme: &Theme) -> Vec<Line<'static>> {
    let g = theme.glyphs;
    let args = one_line(&t.args, 160, g.ellipsis);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{} {}", g.tool, t.name), theme.style(Part::Tool)),
        Span::styled(format!(" {args}"), theme.style(Part::Dim)),
    ])];
    if t.result.is_none() && !t.output.is_empty() {
        let out: Vec<&str> = t.output.lines().collect();
        for l in &out[out.len().saturating_sub(TOOL_OUTPUT_TAIL)..] {
            lines.push(Line::from(Span::styled(format!("  {l}"), theme.style(Part::ToolOutput))));
        }
    }
    match &t.result {
        None if t.running => {
            lines.push(Line::from(Span::styled(format!("  {} running", g.running), theme.style(Part::Dim))))
        }
        None => {}
        Some(r) => {
            let (mark, part) = if r.is_error { (g.failed, Part::Error) } else { (g.ok, Part::ToolOutput) };
            let out: Vec<&str> = r.output.lines().collect();
            for (i, l) in out.iter().take(TOOL_RESULT_LINES).enumerate() {
                let lead = if i == 0 { format!("  {mark} ") } else { "    ".into() };
                lines.push(Line::from(Span::styled(format!("{lead}{l}"), theme.style(part))));
            }
            if out.is_empty() {
                lines.push(Line::from(Span::styled(format!("  {mark}"), theme.style(part))));
            }
            if out.len() > TOOL_RESULT_LINES {
                lines.push(Line::from(Span::styled(
                    format!("    ({} more lines)", out.len() - TOOL_RESULT_LINES),
                    theme.style(Part::Dim),
                )));
            }
        }
    }
    lines
}

/// `text` on one line, cut to `max` characters.
fn one_line(text: &str, max: usize, ellipsis: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut}{ellipsis}")
}

fn panel_title(app: &App) -> String {
    if app.transcript.approval.is_some() {
        let esc = if app.mode() == InputMode::Normal { "" } else { "Esc, then " };
        format!(" approval needed: {esc}y approve all, n deny all, space pick, a approve picked ")
    } else if app.transcript.fold.recovery.is_some() {
        " forged stopped during these tool calls: /recover resume or /recover discard ".into()
    } else if app.transcript.fold.awaiting_results.is_some() {
        " tool results wanted: /tool ID RESULT or /tool error ID MESSAGE ".into()
    } else {
        let steps = &app.transcript.fold.plan;
        let done = steps.iter().filter(|s| s.status == "completed").count();
        format!(" plan: {done} of {} done ", steps.len())
    }
}

fn panel_lines(app: &App, theme: &Theme) -> Vec<Line<'static>> {
    let g = theme.glyphs;
    let t = &app.transcript;
    let mut lines = Vec::new();
    if let Some(a) = &t.approval {
        for (i, c) in a.calls.iter().enumerate() {
            let pointer = if i == a.cursor { g.pointer } else { " " };
            let mark = if a.picked.get(i).copied().unwrap_or(false) { g.picked } else { g.unpicked };
            let first = c.summary.lines().next().unwrap_or_default();
            let style = if i == a.cursor { theme.style(Part::Tool) } else { Style::default() };
            lines.push(Line::from(vec![
                Span::raw(format!("{pointer} {mark} {}. ", i + 1)),
                Span::styled(c.name.clone(), style),
                Span::styled(format!(" ({} risk) ", c.risk), risk_style(&c.risk, theme)),
                Span::raw(one_line(first, 120, g.ellipsis)),
            ]));
        }
        // The selected call in full (a patch shows its diff).
        if let Some(c) = a.calls.get(a.cursor) {
            let rest: Vec<&str> = c.summary.lines().skip(1).collect();
            for l in rest.iter().take(12) {
                let part = if l.starts_with('+') {
                    Part::Code
                } else if l.starts_with('-') {
                    Part::Error
                } else {
                    Part::Dim
                };
                lines.push(Line::from(Span::styled(format!("    {l}"), theme.style(part))));
            }
        }
    } else if let Some(calls) = &t.fold.recovery {
        for c in calls {
            let what = match (c.interrupted, c.name.as_str()) {
                (true, "run_command") => {
                    "was running (its effect may be partial; its processes were stopped with forged)"
                }
                (true, _) => "was running (its effect may be partial)",
                (false, _) => "had not started",
            };
            lines.push(Line::from(format!(
                "{} {} {}: {what}",
                g.bullet,
                c.name,
                one_line(&c.arguments, 80, g.ellipsis)
            )));
        }
    } else if let Some(calls) = &t.fold.awaiting_results {
        for c in calls {
            lines.push(Line::from(format!(
                "{} {} {} {}",
                g.bullet,
                c.id,
                c.name,
                one_line(&c.arguments, 80, g.ellipsis)
            )));
        }
    } else if t.fold.plan.iter().any(|s| s.status != "completed") {
        // The model's plan, while it has steps left.
        for s in &t.fold.plan {
            let (mark, part) = match s.status.as_str() {
                "completed" => (g.ok, Part::Dim),
                "in_progress" => (g.running, Part::Tool),
                _ => (g.unpicked, Part::Info),
            };
            lines.push(Line::from(Span::styled(
                format!("{mark} {}", one_line(&s.step, 120, g.ellipsis)),
                theme.style(part),
            )));
        }
        if let Some(note) = &t.fold.plan_note {
            lines.push(Line::from(Span::styled(one_line(note, 120, g.ellipsis), theme.style(Part::Dim))));
        }
    }
    lines
}

use ratatui::style::Style;

fn risk_style(risk: &str, theme: &Theme) -> Style {
    match risk {
        "high" => theme.style(Part::Error),
        "medium" => theme.style(Part::Warn),
        _ => theme.style(Part::Dim),
    }
}

/// The draft (or command line) hard-wrapped to the box's inner width, and
/// where the cursor is in it.
fn input_layout(app: &App, width: u16) -> (Vec<String>, (usize, usize)) {
    let inner = width.saturating_sub(2).max(1) as usize;
    let (text, cursor_byte) = match &app.input {
        InputState::Command { command, .. } => (format!(":{}", command.text()), command.cursor_byte() + 1),
        other => (other.draft().text().to_string(), other.draft().cursor_byte()),
    };
    let mut rows: Vec<String> = vec![String::new()];
    let mut col = 0;
    let mut cursor = (0, 0);
    let mut byte = 0;
    for g in text.graphemes(true) {
        if byte == cursor_byte {
            cursor = (rows.len() - 1, col);
        }
        byte += g.len();
        if g == "\n" || g == "\r\n" {
            rows.push(String::new());
            col = 0;
            continue;
        }
        let w = g.width();
        if col + w > inner {
            rows.push(String::new());
            col = 0;
        }
        if let Some(r) = rows.last_mut() {
            r.push_str(g);
        }
        col += w;
    }
    if byte <= cursor_byte {
        if col >= inner {
            rows.push(String::new());
            col = 0;
        }
        cursor = (rows.len() - 1, col);
    }
    (rows, cursor)
}

fn input_height(app: &App, width: u16) -> usize {
    let (rows, _) = input_layout(app, width);
    rows.len().clamp(1, MAX_INPUT_LINES) + 2
}

fn draw_input(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let (rows, (row, col)) = input_layout(app, area.width);
    let visible = area.height.saturating_sub(2) as usize;
    let first = (row + 1).saturating_sub(visible);
    let title = match app.mode() {
        InputMode::Normal => " i: type, :: command, Tab: model, q: leave ",
        InputMode::Insert if app.turn_running() && !app.queue_next => {
            " Enter: steer the running turn (Ctrl-T: queue instead), Alt+Enter: new line, Esc: done "
        }
        InputMode::Insert if app.turn_running() => {
            " Enter: queue after the turn (Ctrl-T: steer instead), Alt+Enter: new line, Esc: done "
        }
        InputMode::Insert => " Enter: send, Alt+Enter: new line, Esc: done ",
        InputMode::Command => " Enter: run, Esc: cancel ",
        InputMode::ModelSelect => " j/k: choose, Enter: switch, Esc: cancel ",
        InputMode::Tree => " j/k h/l [/]: move, Enter: check out, f: with its files, F: fork there, Esc: close ",
        InputMode::Rewind => " j/k: choose a turn, Enter: rewind to before it, Esc: cancel ",
    };
    // Images wait for the next message: said before the keys.
    let title = match crate::attach::summary(&app.attached) {
        Some(images) => format!(" {images} ·{title}"),
        None => title.to_string(),
    };
    let border = if app.mode() == InputMode::Normal { Part::Border } else { Part::Tool };
    let block = theme.block().border_style(theme.style(border)).title(Span::styled(title, theme.style(Part::Dim)));
    let lines: Vec<Line> = rows.into_iter().skip(first).map(Line::from).collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
    if matches!(app.mode(), InputMode::Insert | InputMode::Command) {
        let x = area.x + 1 + col as u16;
        let y = area.y + 1 + (row - first) as u16;
        frame.set_cursor_position(Position::new(x.min(area.right().saturating_sub(2)), y));
    }
}

fn draw_status(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let g = theme.glyphs;
    let mode = match app.mode() {
        InputMode::Normal => " NORMAL ",
        InputMode::Insert => " INSERT ",
        InputMode::Command => " COMMAND ",
        InputMode::ModelSelect => " MODEL ",
        InputMode::Tree => " TREE ",
        InputMode::Rewind => " REWIND ",
    };
    let t = &app.transcript;
    let name = t.fold.name.clone().unwrap_or_else(|| app.session_id.clone());
    let parts = [name, format!("{}/{}", t.fold.provider, t.fold.model), state_word(app.state()).to_string()];
    let mut spans = vec![Span::styled(mode, theme.style(Part::ModeBadge)), Span::raw(" ")];
    spans.push(Span::raw(parts.join(g.separator)));
    match app.journal.0 {
        JournalHealth::Healthy | JournalHealth::Unknown => {}
        JournalHealth::Degraded => {
            spans.push(Span::styled(format!("{}journal degraded", g.separator), theme.style(Part::Warn)))
        }
        JournalHealth::Blocked => spans.push(Span::styled(
            format!("{}journal BLOCKED: {}", g.separator, app.journal.1.clone().unwrap_or_default()),
            theme.style(Part::Error),
        )),
    }
    match &app.connection {
        Connection::Connected => {}
        Connection::Lost { reason } => {
            spans.push(Span::styled(format!("{}{reason}; draft kept", g.separator), theme.style(Part::Error)))
        }
        Connection::Gone => {
            spans.push(Span::styled(format!("{}session removed", g.separator), theme.style(Part::Error)))
        }
    }
    if let Some(retrying) = &t.fold.retrying {
        spans.push(Span::styled(format!("{}{retrying}", g.separator), theme.style(Part::Warn)));
    }
    if matches!(app.scroll, ScrollState::Manual { .. }) {
        spans.push(Span::styled(format!("{}scrolled (G: follow)", g.separator), theme.style(Part::Dim)));
    }
    // Last, so that a narrow terminal cuts it before any warning: the
    // session's cost when the daemon reported it, else the last turn's tokens.
    let spent = match (&t.fold.spent, &t.fold.last_usage) {
        (Some(s), _) => Some(forge_client::cost_words(s)),
        (None, Some(u)) => Some(format!("{} in / {} out tokens", u.input_tokens, u.output_tokens)),
        (None, None) => None,
    };
    if let Some(spent) = spent {
        spans.push(Span::raw(format!("{}{spent}", g.separator)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn state_word(s: OperationStateKind) -> &'static str {
    match s {
        OperationStateKind::Idle => "idle",
        OperationStateKind::Streaming => "streaming",
        OperationStateKind::AwaitingApproval => "waiting for approval",
        OperationStateKind::ExecutingTools => "running tools",
        OperationStateKind::AwaitingToolResults => "waiting for tool results",
        OperationStateKind::ToolRecovery => "recovery decision needed",
        OperationStateKind::Summarizing | OperationStateKind::SummarizationRetry => "summarizing",
        OperationStateKind::SummarizingWithQueued | OperationStateKind::SummarizationRetryWithQueued => {
            "summarizing (messages queued)"
        }
        OperationStateKind::PersistenceBlocked => "persistence blocked",
        OperationStateKind::Rewinding => "rewinding files",
        OperationStateKind::Unknown => "unknown",
    }
}

fn draw_model_picker(frame: &mut Frame, app: &App, theme: &Theme, selected: usize) {
    let area = frame.area();
    let full_w = 48.min(area.width.saturating_sub(4)).max(10);
    let full_h = (app.models.len() as u16 + 2).min(area.height.saturating_sub(2)).max(3);
    // PopScale: grows from the centre while the effect runs.
    let p = app.modal.filter(|m| m.kind() == crate::app::ModalEffectKind::PopScale).map_or(1.0, |m| m.progress());
    let w = ((full_w as f32 * (0.3 + 0.7 * p)) as u16).max(4);
    let h = ((full_h as f32 * (0.3 + 0.7 * p)) as u16).max(3);
    let rect =
        Rect::new(area.x + (area.width.saturating_sub(w)) / 2, area.y + (area.height.saturating_sub(h)) / 2, w, h);
    let lines: Vec<Line> = app
        .models
        .iter()
        .enumerate()
        .map(|(i, (provider, model))| {
            let current = *model == app.transcript.fold.model;
            let text = format!(
                "{} {model} ({provider}){}",
                if i == selected { theme.glyphs.pointer } else { " " },
                if current { " current" } else { "" }
            );
            if i == selected { Line::from(Span::styled(text, theme.style(Part::Selected))) } else { Line::from(text) }
        })
        .collect();
    frame.render_widget(Clear, rect);
    let block = theme.block().border_style(theme.style(Part::Tool)).title(" model ");
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

#[cfg(test)]
mod tests;
