//! Rendering results for people (tables, transcripts) and for scripts
//! (JSON Lines).

use std::io::Write;

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
    outln!(
        "{:<14} {:<16} {:<18} {:<10} {:>7} {:>6} {:>5}  {:<28} UPDATED",
        "ID",
        "NAME",
        "STATE",
        "WAITING",
        "CLIENTS",
        "QUEUED",
        "MSGS",
        "PROVIDER/MODEL"
    );
    for s in sessions {
        outln!(
            "{:<14} {:<16} {:<18} {:<10} {:>7} {:>6} {:>5}  {:<28} {}",
            s.id,
            truncate(s.name.as_deref().unwrap_or("-"), 16),
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

pub fn session_details(s: &SessionInfo) {
    outln!("id:        {}", s.id);
    outln!("name:      {}", s.name.as_deref().unwrap_or("-"));
    outln!("state:     {} (waiting on {})", s.state.as_str(), s.waiting_on);
    outln!("provider:  {}", s.provider);
    outln!("model:     {}", s.model);
    outln!("cwd:       {}", s.cwd);
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
        let unpriced = if u.unpriced > 0 {
            format!(" ({} responses of models without a known price)", u.unpriced)
        } else {
            String::new()
        };
        outln!("cost:      {} estimated{unpriced}", forge_client::usd(u.cost_usd));
    }
}

/// The first line of `s`, at most `max` characters, marked when cut.
pub fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let cut = line.chars().count() > max || s.lines().nth(1).is_some();
    let mut out: String = line.chars().take(max).collect();
    if cut {
        out.push_str(" ...");
    }
    out
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('~');
    out
}

/// Writes one event as a transcript line (attach's human output).
pub struct Transcript {
    mid_text: bool,
    /// An answer of the running turn became a node: another request of
    /// iteration 0 is a sibling answer (`n` > 1).
    answered: bool,
}

impl Transcript {
    pub fn new() -> Self {
        Self { mid_text: false, answered: false }
    }

    fn end_text(&mut self, out: &mut impl Write) {
        if self.mid_text {
            stdout_result(writeln!(out));
            self.mid_text = false;
        }
    }

    pub fn event(&mut self, ev: &SessionEvent) {
        let mut out = stdout();
        let who = client_label(&ev.client);
        match &ev.kind {
            EventKind::SessionCreated { name, cwd, provider, model } => {
                self.end_text(&mut out);
                let name = name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
                stdout_result(writeln!(
                    out,
                    "[{}] session{name} created by {who}: {provider}/{model} in {cwd}",
                    ev.seq
                ));
            }
            EventKind::SessionRenamed { name } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] renamed to {} by {who}",
                    ev.seq,
                    name.as_deref().unwrap_or("(no name)")
                ));
            }
            EventKind::SessionConfigured { provider, model } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] now using {provider}/{model} (set by {who})", ev.seq));
            }
            EventKind::HistoryCleared {} => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] conversation cleared by {who}", ev.seq));
            }
            EventKind::HeadMoved { head, .. } => {
                self.end_text(&mut out);
                let at = head.as_deref().unwrap_or("(empty)");
                stdout_result(writeln!(out, "[{}] head moved to {at} by {who}", ev.seq));
            }
            EventKind::NodeEdited { node_id, new_node_id, in_place } => {
                self.end_text(&mut out);
                let how = if *in_place { "in place".to_string() } else { format!("as a new branch {new_node_id}") };
                stdout_result(writeln!(out, "[{}] {node_id} edited {how} by {who}", ev.seq));
            }
            EventKind::NodesDeleted { node_ids, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] {} node(s) deleted by {who}", ev.seq, node_ids.len()));
            }
            EventKind::NodeSplit { node_id, new_node_id, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] {node_id} split; the rest is {new_node_id}", ev.seq));
            }
            EventKind::BookmarkSet { name, node_id } => {
                self.end_text(&mut out);
                match node_id {
                    Some(n) => stdout_result(writeln!(out, "[{}] bookmark {name} -> {n} by {who}", ev.seq)),
                    None => stdout_result(writeln!(out, "[{}] bookmark {name} deleted by {who}", ev.seq)),
                }
            }
            EventKind::RewindStarted { node, files, .. } => {
                self.end_text(&mut out);
                let at = node.as_deref().unwrap_or("the start");
                stdout_result(writeln!(out, "[{}] putting {} file(s) back as at {at} ({who})", ev.seq, files.len()));
            }
            EventKind::FilesRestored { node, files, recovered } => {
                self.end_text(&mut out);
                let at = node.as_deref().unwrap_or("the start");
                let by = if *recovered {
                    "on restart (forged had stopped during the rewind)".to_string()
                } else {
                    format!("by {who}")
                };
                stdout_result(writeln!(out, "[{}] {} file(s) put back as at {at} {by}", ev.seq, files.len()));
            }
            EventKind::SessionForked { from, node } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] forked from {from} at {node}", ev.seq));
            }
            EventKind::MessageQueued { text, position, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] queued #{position} by {who}: {text}", ev.seq));
            }
            EventKind::TurnStarted { message_id, model, continued: true, .. } => {
                self.end_text(&mut out);
                self.answered = false;
                stdout_result(writeln!(out, "[{}] continuing after {message_id} ({who}); no new message", ev.seq));
                stdout_result(writeln!(out, "[{}] assistant ({model}):", ev.seq));
            }
            EventKind::TurnStarted { text, model, .. } => {
                self.end_text(&mut out);
                self.answered = false;
                stdout_result(writeln!(out, "[{}] user ({who}):", ev.seq));
                for line in text.lines() {
                    stdout_result(writeln!(out, "  {line}"));
                }
                stdout_result(writeln!(out, "[{}] assistant ({model}):", ev.seq));
            }
            EventKind::TextDelta { text } => {
                stdout_result(write!(out, "{text}"));
                self.mid_text = !text.ends_with('\n');
            }
            EventKind::ThinkingDelta { .. } | EventKind::ToolCallArgs { .. } => {}
            EventKind::ToolCallStarted { name, call_id, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] tool call {name} ({call_id})", ev.seq));
            }
            EventKind::ApprovalRequested { calls, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] approval needed for {} tool call(s):", ev.seq, calls.len()));
                for (i, c) in calls.iter().enumerate() {
                    stdout_result(writeln!(
                        out,
                        "  #{} {} (risk {}): {}",
                        i + 1,
                        c.name,
                        c.risk,
                        first_line(&c.summary, 100)
                    ));
                }
            }
            EventKind::ApprovalRulesChanged { mode, always_allow } => {
                self.end_text(&mut out);
                let mode = mode.as_deref().unwrap_or("as configured");
                let always = if always_allow.is_empty() { "none".to_string() } else { always_allow.join(", ") };
                stdout_result(writeln!(
                    out,
                    "[{}] approval rules set by {who}: mode {mode}; always allowed: {always}",
                    ev.seq
                ));
            }
            EventKind::HookRan { event, command, tool, decision, reason, .. } => {
                self.end_text(&mut out);
                let tool = tool.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
                let reason = reason.as_deref().map(|r| format!(": {}", first_line(r, 160))).unwrap_or_default();
                stdout_result(writeln!(
                    out,
                    "[{}] {event} hook{tool} `{}`: {decision}{reason}",
                    ev.seq,
                    first_line(command, 80)
                ));
            }
            EventKind::ApprovalResolved { approved, denied, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] approval answered by {who}: {} approved, {} denied",
                    ev.seq,
                    approved.len(),
                    denied.len()
                ));
            }
            EventKind::AwaitingToolResults { calls } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] waiting for {} tool result(s) (parse-only mode):",
                    ev.seq,
                    calls.len()
                ));
                for c in calls {
                    stdout_result(writeln!(out, "  {} {}({})", c.id, c.name, c.arguments));
                }
                stdout_result(writeln!(
                    out,
                    "  answer with: forgectl tool-result {} CALL_ID [--error] OUTPUT",
                    ev.session_id
                ));
            }
            EventKind::ToolRecovery { calls } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] forged stopped during this turn's tool calls; {} unfinished:",
                    ev.seq,
                    calls.len()
                ));
                for c in calls {
                    let how = match (c.interrupted, c.name.as_str()) {
                        (true, "run_command") => "was running; its processes were stopped with forged",
                        (true, _) => "was running",
                        (false, _) => "had not started",
                    };
                    let what = match c.name.as_str() {
                        "run_command" => serde_json::from_str::<serde_json::Value>(&c.arguments)
                            .ok()
                            .and_then(|a| a["command"].as_str().map(|cmd| format!(" `{cmd}`")))
                            .unwrap_or_default(),
                        _ => String::new(),
                    };
                    stdout_result(writeln!(out, "  {}{what} ({how})", c.name));
                }
                stdout_result(writeln!(out, "  decide with: forgectl recover {} --resume | --discard", ev.session_id));
            }
            EventKind::ToolOutput { text, .. } => {
                stdout_result(write!(out, "{text}"));
                self.mid_text = !text.ends_with('\n');
            }
            EventKind::ToolRunning { name, call_id } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] running {name} ({call_id})", ev.seq));
            }
            EventKind::ToolResult { name, is_error, output, .. } => {
                self.end_text(&mut out);
                let verdict = if *is_error { "failed" } else { "done" };
                stdout_result(writeln!(out, "[{}] {name} {verdict}: {}", ev.seq, first_line(output, 120)));
            }
            EventKind::StreamResumed { .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] assistant (continuing with tool results):", ev.seq));
            }
            EventKind::Retrying { attempt, max_attempts, delay_ms, reason, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] {}",
                    ev.seq,
                    forge_client::retrying_line(*attempt, *max_attempts, *delay_ms, reason)
                ));
            }
            EventKind::CancelRequested {} => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] cancel requested by {who}", ev.seq));
            }
            EventKind::SummarizationStarted { messages, tokens_before, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] summarizing the {messages} oldest messages (about {tokens_before} tokens) to make room",
                    ev.seq
                ));
            }
            EventKind::SummarizationRetry { attempt, max_attempts, delay_ms, error } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] summary failed ({error}); attempt {attempt}/{max_attempts} in {:.1}s",
                    ev.seq,
                    *delay_ms as f64 / 1000.0
                ));
            }
            EventKind::SummarizationDone { summary_id, span } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] summarized {} messages ({} tokens -> {}) as {summary_id}",
                    ev.seq, span.messages, span.tokens_before, span.tokens_after
                ));
            }
            EventKind::ContextRestored { messages_restored, .. } => {
                self.end_text(&mut out);
                stdout_result(writeln!(
                    out,
                    "[{}] the larger window takes {messages_restored} summarized messages back as they were",
                    ev.seq
                ));
            }
            EventKind::SummarizationFailed { error } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] summarization failed: {error}", ev.seq));
            }
            EventKind::Usage { usage, cost_usd, session, .. } => {
                self.end_text(&mut out);
                let cost = cost_usd.map(forge_client::usd).unwrap_or_else(|| "cost unknown".into());
                stdout_result(writeln!(
                    out,
                    "[{}] usage: {} in, {} out tokens, {cost}; session {}",
                    ev.seq,
                    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
                    usage.output_tokens,
                    forge_client::cost_words(session)
                ));
            }
            EventKind::TurnFinished { status, error, usage, recovered, .. } => {
                self.end_text(&mut out);
                if let Some(r) = recovered {
                    stdout_result(writeln!(out, "[{}] recovered by forged after a stop ({r:?})", ev.seq));
                }
                let usage = usage
                    .as_ref()
                    .map(|u| format!(" ({} in / {} out tokens)", u.input_tokens, u.output_tokens))
                    .unwrap_or_default();
                match error {
                    Some(e) => {
                        stdout_result(writeln!(out, "[{}] turn {}: {e}", ev.seq, status.as_str()));
                    }
                    None => {
                        stdout_result(writeln!(out, "[{}] turn {}{usage}", ev.seq, status.as_str()));
                    }
                }
            }
            EventKind::QueueCleared { dropped } => {
                self.end_text(&mut out);
                stdout_result(writeln!(out, "[{}] {dropped} queued message(s) dropped by {who}", ev.seq));
            }
            EventKind::AssistantNode { .. } => self.answered = true,
            EventKind::ProviderRequest { iteration: 0, attempt: 1, model, .. } if self.answered => {
                self.end_text(&mut out);
                self.answered = false;
                stdout_result(writeln!(out, "[{}] another answer, a sibling of the last ({model}):", ev.seq));
            }
            // The generation's own bookkeeping: `turn_finished` and the
            // streamed text already say it (`--json` shows them).
            EventKind::ProviderRequest { .. }
            | EventKind::ProviderResponse { .. }
            | EventKind::ToolResultNode { .. }
            | EventKind::Done { .. }
            | EventKind::Error { .. }
            | EventKind::Unknown => {}
        }
        stdout_result(out.flush());
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
    let mut text = format!("session {session} waits for approval of {} tool call(s):\n", calls.len());
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
