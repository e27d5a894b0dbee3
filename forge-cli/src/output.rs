//! Rendering results for people (tables, transcripts) and for scripts
//! (JSON Lines).

use std::io::Write;

use forge_client::fold::{Fold, Seen};
use forge_proto::{ClientRef, EventKind, SessionEvent, SessionInfo};

static RAW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--raw`: model and tool text goes out byte for byte.
pub fn set_raw(raw: bool) {
    RAW.store(raw, std::sync::atomic::Ordering::Relaxed);
}

/// Stdout for people: control sequences in what it writes (model and tool
/// text) are shown as text unless `--raw` (forgectl adds none of its own).
pub fn stdout() -> forge_client::terminal::SafeWriter<std::io::StdoutLock<'static>> {
    forge_client::terminal::SafeWriter::new(std::io::stdout().lock(), RAW.load(std::sync::atomic::Ordering::Relaxed))
}

/// `text` as [`stdout`] would show it, for what goes to stderr.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if RAW.load(std::sync::atomic::Ordering::Relaxed) {
        std::borrow::Cow::Borrowed(text)
    } else {
        forge_client::terminal::safe(text)
    }
}

/// Stdin and stderr are a terminal: a person is there to be asked.
pub fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks a yes/no question on stderr; only `y` or `yes` is a yes.
pub fn ask(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok()
        && matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

pub fn json_line<T: serde::Serialize>(value: &T) {
    if let Ok(s) = serde_json::to_string(value) {
        let mut out = std::io::stdout().lock();
        stdout_result(writeln!(out, "{s}"));
        stdout_result(out.flush());
    }
}

pub fn client_label(c: &Option<ClientRef>) -> String {
    match c {
        Some(c) if c.id == 0 => "forged".to_string(),
        Some(c) => format!("{}#{}", c.name, c.id),
        None => "-".to_string(),
    }
}

pub fn session_table(sessions: &[SessionInfo]) {
    if sessions.is_empty() {
        outln!("no sessions (start one with `forgectl send \"...\"`)");
        return;
    }
    let rows = helpers_under_parents(sessions);
    let id_width = rows.iter().map(|(depth, s)| s.id.len() + 2 * depth).max().unwrap_or(0).max(14);
    outln!(
        "{:<id_width$} {:<16} {:<18} {:<10} {:>7} {:>6} {:>5}  {:<28} UPDATED",
        "ID",
        "NAME",
        "STATE",
        "WAITING",
        "CLIENTS",
        "QUEUED",
        "MSGS",
        "PROVIDER/MODEL"
    );
    for (depth, s) in rows {
        // A helper agent: under its parent, named by its task.
        let id = if depth == 0 { s.id.clone() } else { format!("{}└ {}", "  ".repeat(depth - 1), s.id) };
        let name = match (&s.name, &s.helper) {
            (Some(n), _) => n.clone(),
            // Its task says what it is (`session show` has its agent type).
            (None, Some(h)) => h.description.clone(),
            (None, None) => "-".into(),
        };
        outln!(
            "{:<id_width$} {:<16} {:<18} {:<10} {:>7} {:>6} {:>5}  {:<28} {}",
            id,
            truncate(&name, 16),
            s.state.as_str(),
            s.waiting_on,
            s.attached_clients,
            s.queued_messages,
            s.message_count,
            truncate(&format!("{}/{}", s.provider, s.model), 28),
            format_ms(s.updated_ms),
        );
    }
}

/// Sessions in list order, each helper agent's right under its parent
/// (with its depth); a helper whose parent is gone is listed as a top one.
fn helpers_under_parents(sessions: &[SessionInfo]) -> Vec<(usize, &SessionInfo)> {
    let has_parent = |s: &SessionInfo| s.helper.as_ref().is_some_and(|h| sessions.iter().any(|p| p.id == h.parent));
    let mut out = Vec::with_capacity(sessions.len());
    let mut stack: Vec<(usize, &SessionInfo)> =
        sessions.iter().rev().filter(|s| !has_parent(s)).map(|s| (0, s)).collect();
    while let Some((depth, s)) = stack.pop() {
        out.push((depth, s));
        let children = sessions.iter().rev().filter(|c| c.helper.as_ref().is_some_and(|h| h.parent == s.id));
        // A cycle cannot be made, but a list is never walked forever.
        if out.len() <= sessions.len() {
            stack.extend(children.map(|c| (depth + 1, c)));
        }
    }
    out
}

pub fn session_details(s: &SessionInfo) {
    outln!("id:        {}", s.id);
    outln!("name:      {}", s.name.as_deref().unwrap_or("-"));
    outln!("state:     {} (waiting on {})", s.state.as_str(), s.waiting_on);
    outln!("provider:  {}", s.provider);
    outln!("model:     {}", s.model);
    if let Some(words) = forge_client::sampling_words(&s.sampling) {
        outln!("sampling:  {words} (the session's own)");
    }
    outln!("cwd:       {}", s.cwd);
    if let Some(g) = &s.git {
        outln!("git:       branch {} of {} (from {})", g.branch, g.repo, g.base.get(..10).unwrap_or(&g.base));
    }
    if let Some(h) = &s.helper {
        outln!("helper:    of session {} (call {}): {} ({})", h.parent, h.call_id, h.description, h.agent);
    }
    outln!("created:   {}", format_ms(s.created_ms));
    outln!("updated:   {}", format_ms(s.updated_ms));
    outln!("messages:  {}", s.message_count);
    outln!("queued:    {}", s.queued_messages);
    outln!("clients:   {}", s.attached_clients);
    outln!("last seq:  {}", s.last_seq);
    if let Some(u) = &s.usage {
        let t = &u.tokens;
        outln!(
            "tokens:    {} in ({} from cache, {} written to it), {} out ({} reasoning), {} responses",
            t.input_tokens + t.cache_read_tokens + t.cache_write_tokens,
            t.cache_read_tokens,
            t.cache_write_tokens,
            t.output_tokens,
            t.reasoning_tokens,
            u.responses
        );
        if u.estimated > 0 {
            outln!("           ({} responses estimated by Forge: their provider sent no counts)", u.estimated);
        }
        let unpriced = if u.unpriced > 0 {
            format!(" ({} responses of models without a known price)", u.unpriced)
        } else {
            String::new()
        };
        outln!("cost:      {} estimated{unpriced}", forge_client::usd(u.cost_usd));
    }
}

pub use forge_client::fold::first_line;

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('~');
    out
}

/// Writes one event as a transcript line (attach's human output): the
/// shared fold words the notices, this draws the conversation.
pub struct Transcript {
    pub fold: Fold,
    mid_text: bool,
}

impl Transcript {
    pub fn new(fold: Fold) -> Self {
        Self { fold, mid_text: false }
    }

    fn end_text(&mut self, out: &mut impl Write) {
        if self.mid_text {
            stdout_result(writeln!(out));
            self.mid_text = false;
        }
    }

    /// A line of its own, `[seq] text`.
    fn say(&mut self, out: &mut impl Write, seq: u64, text: std::fmt::Arguments) {
        self.end_text(out);
        stdout_result(writeln!(out, "[{seq}] {text}"));
    }

    /// Applies the event; what it meant (None: an older one, skipped).
    pub fn event(&mut self, ev: &SessionEvent) -> Option<Seen> {
        let seen = self.fold.apply(ev)?;
        let mut out = stdout();
        let who = client_label(&ev.client);
        let seq = ev.seq;
        if let Some(n) = &seen.notice {
            self.say(&mut out, seq, format_args!("{}", n.text));
        }
        match &ev.kind {
            EventKind::SessionCreated { name, cwd, provider, model, .. } => {
                let name = name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
                self.say(&mut out, seq, format_args!("session{name} created by {who}: {provider}/{model} in {cwd}"));
            }
            EventKind::MessageQueued { text, position, .. } => {
                self.say(&mut out, seq, format_args!("queued #{position} by {who}: {text}"))
            }
            EventKind::SteerQueued { text, .. } => self.say(&mut out, seq, format_args!("steer by {who}: {text}")),
            EventKind::SteerApplied { text, .. } => {
                self.say(&mut out, seq, format_args!("user ({who}, steering the turn):"));
                for l in text.lines() {
                    stdout_result(writeln!(out, "  {l}"));
                }
            }
            EventKind::TurnStarted { model, continued: true, .. } => {
                self.say(&mut out, seq, format_args!("assistant ({model}):"))
            }
            EventKind::TurnStarted { text, model, images, .. } => {
                self.say(&mut out, seq, format_args!("user ({who}):"));
                for image in images {
                    stdout_result(writeln!(out, "  {}", image.placeholder()));
                }
                for l in text.lines() {
                    stdout_result(writeln!(out, "  {l}"));
                }
                self.say(&mut out, seq, format_args!("assistant ({model}):"));
            }
            EventKind::TextDelta { text } | EventKind::ToolOutput { text, .. } => {
                stdout_result(write!(out, "{text}"));
                self.mid_text = !text.ends_with('\n');
            }
            EventKind::ToolCallStarted { name, call_id, .. } => {
                self.say(&mut out, seq, format_args!("tool call {name} ({call_id})"))
            }
            EventKind::ApprovalRequested { calls, .. } => {
                let subject = forge_proto::approval_subject(calls);
                self.say(&mut out, seq, format_args!("approval needed for {subject}:"));
                for (i, c) in calls.iter().enumerate() {
                    let summary = first_line(&c.summary, 100);
                    stdout_result(writeln!(out, "  #{} {} (risk {}): {summary}", i + 1, c.name, c.risk));
                }
            }
            EventKind::AwaitingToolResults { calls } => {
                self.say(&mut out, seq, format_args!("waiting for {} tool result(s) (parse-only mode):", calls.len()));
                for c in calls {
                    stdout_result(writeln!(out, "  {} {}({})", c.id, c.name, c.arguments));
                }
                let session = &ev.session_id;
                stdout_result(writeln!(out, "  answer with: forgectl tool-result {session} CALL_ID [--error] OUTPUT"));
            }
            EventKind::ToolRecovery { calls } => {
                self.say(
                    &mut out,
                    seq,
                    format_args!("forged stopped during this turn's tool calls; {} unfinished:", calls.len()),
                );
                for c in calls {
                    stdout_result(writeln!(out, "  {}", forge_client::fold::recovery_line(c)));
                }
                let session = &ev.session_id;
                stdout_result(writeln!(out, "  decide with: forgectl recover {session} --resume | --discard"));
            }
            EventKind::ToolRunning { name, call_id } => {
                self.say(&mut out, seq, format_args!("running {name} ({call_id})"))
            }
            EventKind::ToolResult { name, is_error, output, .. } => {
                let verdict = if *is_error { "failed" } else { "done" };
                self.say(&mut out, seq, format_args!("{name} {verdict}: {}", first_line(output, 120)));
            }
            EventKind::StreamResumed { .. } => {
                self.say(&mut out, seq, format_args!("assistant (continuing with tool results):"))
            }
            EventKind::TurnFinished { status, error, usage, recovered, .. } => {
                if let Some(r) = recovered {
                    self.say(&mut out, seq, format_args!("recovered by forged after a stop ({r:?})"));
                }
                match (error, usage) {
                    (Some(e), _) => self.say(&mut out, seq, format_args!("turn {}: {e}", status.as_str())),
                    (None, Some(u)) => self.say(
                        &mut out,
                        seq,
                        format_args!(
                            "turn {} ({} in / {} out tokens)",
                            status.as_str(),
                            u.input_tokens,
                            u.output_tokens
                        ),
                    ),
                    (None, None) => self.say(&mut out, seq, format_args!("turn {}", status.as_str())),
                }
            }
            _ => {}
        }
        stdout_result(out.flush());
        Some(seen)
    }

    pub fn finish(&mut self) {
        let mut out = stdout();
        self.end_text(&mut out);
        stdout_result(out.flush());
    }
}

/// UTC timestamps without a date-time dependency.
pub use chrono_lite::{format_ms, parse_since};

mod chrono_lite {
    /// `--since`: a UTC date (`2026-11-01`), date and time
    /// (`2026-11-01T09:30[:15][Z]`), or an age before `now_ms` (`30m`,
    /// `24h`, `7d`, `2w`), as Unix ms.
    pub fn parse_since(s: &str, now_ms: i64) -> Option<i64> {
        let s = s.trim();
        if let Some(unit) = s.chars().last().filter(|c| c.is_ascii_alphabetic())
            && s.len() > 1
            && s[..s.len() - 1].chars().all(|c| c.is_ascii_digit())
        {
            let n: i64 = s[..s.len() - 1].parse().ok()?;
            let secs = match unit {
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                'w' => 7 * 86_400,
                _ => return None,
            };
            return Some(now_ms - n.checked_mul(secs * 1000)?);
        }
        let s = s.trim_end_matches('Z');
        let (date, time) = match s.split_once(['T', ' ']) {
            Some((d, t)) => (d, Some(t)),
            None => (s, None),
        };
        let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
        let (y, m, day) = (d.next()??, d.next()??, d.next()??);
        if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
            return None;
        }
        let mut secs = days_from_civil(y, m, day) * 86_400;
        if let Some(t) = time {
            let parts: Vec<i64> = t.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
            let (h, min, sec) = match parts.as_slice() {
                [h, m] => (*h, *m, 0),
                [h, m, s] => (*h, *m, *s),
                _ => return None,
            };
            if h > 23 || min > 59 || sec > 60 {
                return None;
            }
            secs += h * 3600 + min * 60 + sec;
        }
        Some(secs * 1000)
    }

    /// Howard Hinnant's days-from-civil algorithm (the inverse of
    /// `civil_from_days`).
    fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    pub fn format_ms(ms: i64) -> String {
        let secs = ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
    }

    /// Howard Hinnant's days-to-civil algorithm.
    fn civil_from_days(z: i64) -> (i64, u32, u32) {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let y = yoe + era * 400;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        (if m <= 2 { y + 1 } else { y }, m, d)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn formats_utc() {
            assert_eq!(super::format_ms(0), "1970-01-01 00:00:00Z");
            assert_eq!(super::format_ms(1_795_321_771_979), "2026-11-22 04:29:31Z");
        }

        #[test]
        fn since_takes_dates_times_and_ages() {
            let now = 1_795_321_771_979;
            assert_eq!(super::parse_since("2026-11-22", now), Some(1_795_305_600_000));
            assert_eq!(super::parse_since("2026-11-22T04:29:31Z", now), Some(1_795_321_771_000));
            assert_eq!(super::parse_since("2026-11-22T04:29", now), Some(1_795_321_740_000));
            assert_eq!(super::parse_since("1970-01-01", now), Some(0));
            assert_eq!(super::parse_since("7d", now), Some(now - 7 * 86_400_000));
            assert_eq!(super::parse_since("30m", now), Some(now - 1_800_000));
            for bad in ["yesterday", "2026-13-01", "7y", "2026-11-22T25:00", "", "d"] {
                assert_eq!(super::parse_since(bad, now), None, "{bad}");
            }
        }
    }
}

/// A pending approval with the commands that answer it: on stderr while
/// `send` streams (stdout is the answer), on stdout for `approvals`.
pub fn approval_prompt(session: &str, calls: &[forge_proto::ApprovalCall], to_stdout: bool) {
    let mut text = format!("session {session} waits for approval of {}:\n", forge_proto::approval_subject(calls));
    for (i, c) in calls.iter().enumerate() {
        text.push_str(&format!("  #{} {} (risk {})\n", i + 1, c.name, c.risk));
        for line in c.summary.lines().take(12) {
            text.push_str(&format!("      {line}\n"));
        }
    }
    let numbers: Vec<String> = (1..=calls.len()).map(|i| i.to_string()).collect();
    text.push_str(&format!(
        "  answer from any client: forgectl approve {session} --all | forgectl approve {session} {} | forgectl deny {session}",
        numbers.join(" ")
    ));
    if to_stdout {
        outln!("{text}");
    } else {
        eprintln!("forgectl: {}", shown(&text));
    }
}

/// What a write to stdout came to: a reader that went away (`| head`)
/// ends forgectl quietly, as it would with nothing more to say.
pub fn stdout_result(r: std::io::Result<()>) {
    if let Err(e) = r
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}
