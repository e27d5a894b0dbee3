//! Context budgets: how much of a model's window a request may fill (the
//! window less the output kept for the answer), a token estimate that the
//! usage providers report keeps calibrated, and whether the next request
//! fits. With Context Infinity off, a request that does not fit is refused
//! with a clear error before anything is sent.

use crate::catalog::{ModelInfo, estimate_tokens};
use crate::config::ForgeConfig;
use crate::provider::ChatMessage;

/// `FORGE_CONTEXT_INFINITY=0|1`: Context Infinity when config.toml says
/// nothing (the seed's precedence: config file, environment, default on).
pub const INFINITY_ENV: &str = "FORGE_CONTEXT_INFINITY";

/// Whether Context Infinity is on for this configuration.
pub fn infinity(config: &ForgeConfig) -> bool {
    if let Some(on) = config.context.infinity {
        return on;
    }
    match std::env::var(INFINITY_ENV).ok().as_deref().map(str::trim) {
        Some("0" | "false" | "off" | "no") => false,
        Some(_) | None => true,
    }
}

/// A request's room: the window, and the output kept free for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    pub window: u64,
    pub reserve: u64,
}

impl ContextBudget {
    /// `requested` output tokens (clamped to the model's limit) are kept
    /// free for the answer.
    pub fn for_model(model: &ModelInfo, requested: u32) -> Self {
        let reserve = u64::from(requested.min(model.max_output_tokens));
        // A window smaller than the reserve still leaves half for input.
        Self { window: model.context_window, reserve: reserve.min(model.context_window / 2) }
    }

    /// The most input a request may carry.
    pub fn input_limit(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }

    /// The input past which a summary is due: `summarize_at` of the
    /// window, never more than the limit.
    pub fn threshold(&self, summarize_at: f64) -> u64 {
        ((self.window as f64 * summarize_at) as u64).min(self.input_limit())
    }
}

/// Tokens from bytes: the catalog's cautious estimate times a ratio learnt
/// from what providers count (their reported input against the estimate
/// for the same request), so that the estimate converges on the model's
/// tokenizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimator {
    ratio: f64,
    /// The safety margin on every estimate (`[context]
    /// estimate_margin_percent`): 1.1 for 10%.
    margin: f64,
}

/// `[context] estimate_margin_percent` when not given.
pub const DEFAULT_ESTIMATE_MARGIN: u32 = 10;

impl Default for TokenEstimator {
    fn default() -> Self {
        Self { ratio: 1.0, margin: 1.0 }
    }
}

impl TokenEstimator {
    /// An estimator that counts `percent` more than its plain estimate, so
    /// that a provider counting differently does not overrun the window.
    pub fn with_margin(percent: u32) -> Self {
        Self { ratio: 1.0, margin: 1.0 + f64::from(percent.min(100)) / 100.0 }
    }

    pub fn tokens(&self, bytes: usize) -> u64 {
        (estimate_tokens(bytes) as f64 * self.ratio * self.margin).ceil() as u64
    }

    /// A provider counted `actual` input tokens for a request this
    /// estimated at `estimated` (both with the ratio and margin in force
    /// then). The margin stays: only the ratio learns.
    pub fn observe(&mut self, estimated: u64, actual: u64) {
        if estimated == 0 || actual == 0 {
            return;
        }
        let seen = self.ratio * self.margin * actual as f64 / estimated as f64;
        // Move halfway each time; never trust a wild single sample fully.
        self.ratio = (0.5 * self.ratio + 0.5 * seen).clamp(0.25, 4.0);
    }

    pub fn ratio(&self) -> f64 {
        self.ratio
    }
}

/// What the provider counted for a request, and what that request held.
/// A later request that only adds messages to it (same summary in force,
/// same messages up to the last one) is that exact count plus an estimate
/// of what it adds: the estimate's error stays in the few new messages
/// instead of growing with the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub summary_id: Option<String>,
    /// Messages in the request (the summary's included).
    pub messages: usize,
    /// The history node of its last message.
    pub last_node: Option<String>,
    /// Its bytes, fixed part included.
    pub bytes: usize,
    /// Input tokens as the provider counted them (cache reads and writes
    /// included).
    pub tokens: u64,
}

impl Anchor {
    /// The anchor of a request about to be sent (its count comes with the
    /// response's usage).
    pub fn of(summary_id: Option<&str>, view: &[ChatMessage], bytes: usize) -> Anchor {
        Anchor {
            summary_id: summary_id.map(str::to_string),
            messages: view.len(),
            last_node: view.last().and_then(|m| m.node.clone()),
            bytes,
            tokens: 0,
        }
    }
}

/// Bytes of a request: the fixed part and the messages.
pub fn request_bytes(fixed_bytes: usize, view: &[ChatMessage]) -> usize {
    fixed_bytes + view.iter().map(message_bytes).sum::<usize>()
}

impl TokenEstimator {
    /// Tokens of a request of `bytes` sending `view` (with `summary_id` in
    /// force): from the provider's count of the last request when this one
    /// extends it, else estimated.
    pub fn request(
        &self,
        anchor: Option<&Anchor>,
        summary_id: Option<&str>,
        view: &[ChatMessage],
        bytes: usize,
    ) -> u64 {
        let extends = |a: &Anchor| {
            a.summary_id.as_deref() == summary_id
                && a.messages > 0
                && a.last_node.is_some()
                && view.get(a.messages - 1).is_some_and(|m| m.node == a.last_node)
                && bytes >= a.bytes
        };
        match anchor {
            Some(a) if extends(a) => a.tokens + self.tokens(bytes - a.bytes),
            _ => self.tokens(bytes),
        }
    }
}

/// The bytes a message adds to a request (text, tool calls and their
/// arguments; the wire format's own framing is in the calibration).
pub fn message_bytes(m: &ChatMessage) -> usize {
    m.text.len()
        + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.len() + c.id.len()).sum::<usize>()
        + m.images.iter().map(|i| crate::images::budget_bytes(&i.info)).sum::<usize>()
}

/// Whether a request of `fixed_bytes` (system prompt, tool definitions)
/// and `messages` fits `budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Fits { tokens: u64 },
    TooLong { tokens: u64, limit: u64 },
}

pub fn fit(budget: &ContextBudget, tokens: u64) -> Fit {
    let limit = budget.input_limit();
    if tokens > limit { Fit::TooLong { tokens, limit } } else { Fit::Fits { tokens } }
}

/// A summary as requests use it: it replaces, in what is sent, every
/// message of the path up to and including `last`.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub id: String,
    pub first: String,
    pub last: String,
    pub text: String,
}

/// `[context] summarize_at` when not set: summarize once a request would
/// fill this share of the window.
pub const DEFAULT_SUMMARIZE_AT: f64 = 0.8;

/// What a request carries in place of the summarized span: the summary as
/// the user's message, and the model's acknowledgement (so the roles keep
/// alternating before the next user message).
pub fn summary_messages(text: &str) -> [ChatMessage; 2] {
    [
        ChatMessage::user(format!(
            "[The start of this conversation no longer fits the context window, so it is summarized here; \
             the original messages are kept in Forge's history.]\n\n{}",
            text.trim()
        )),
        ChatMessage::assistant(
            "Understood: I have the summary of our earlier conversation and continue from it.",
            Vec::new(),
        ),
    ]
}

/// Where the summary in force for `path` ends (the index after its last
/// node), with the summary: the one named `in_force` if it applies, else
/// the newest that does, unless `in_force` is `Some(None)` (originals).
pub fn applied<'a>(
    path: &[ChatMessage],
    summaries: &'a [Summary],
    in_force: Option<Option<&str>>,
) -> Option<(usize, &'a Summary)> {
    let end_of = |s: &Summary| path.iter().position(|m| m.node.as_deref() == Some(s.last.as_str())).map(|i| i + 1);
    match in_force {
        Some(None) => None,
        Some(Some(id)) => summaries.iter().find(|s| s.id == id).and_then(|s| Some((end_of(s)?, s))),
        None => summaries.iter().rev().find_map(|s| Some((end_of(s)?, s))),
    }
}

/// On a larger window: the least summarized view that fits, restoring the
/// most recent spans first. `None` (no summary) when the originals fit,
/// else the applicable summary covering the fewest messages that fits,
/// else the newest.
pub fn restore<'a>(
    path: &[ChatMessage],
    summaries: &'a [Summary],
    fits: impl Fn(&[ChatMessage]) -> bool,
) -> Option<(usize, &'a Summary)> {
    let mut applicable: Vec<(usize, &Summary)> = summaries
        .iter()
        .filter_map(|s| Some((path.iter().position(|m| m.node.as_deref() == Some(s.last.as_str()))? + 1, s)))
        .collect();
    applicable.sort_by_key(|(end, _)| *end);
    if applicable.is_empty() || fits(path) {
        return None;
    }
    applicable.iter().copied().find(|(end, s)| fits(&view_with(path, Some((*end, s))))).or(applicable.last().copied())
}

/// What the next request sends of `path`: the summary in force in place
/// of the messages it covers, then the rest.
pub fn view_with(path: &[ChatMessage], in_force: Option<(usize, &Summary)>) -> Vec<ChatMessage> {
    match in_force {
        Some((end, s)) => summary_messages(&s.text).into_iter().chain(path[end..].iter().cloned()).collect(),
        None => path.to_vec(),
    }
}

/// What summarizing needs to do before the next request.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The request fits (under `summarize_at` of the window, too).
    Send,
    /// Summarize `path[from..to]` (after the summary in force, if any) into
    /// a summary covering everything before `to`.
    Summarize { from: usize, to: usize, tokens_before: u64 },
    /// Even the newest messages alone do not fit.
    RecentMessagesTooLarge { tokens: u64, limit: u64 },
}

/// Whether the next request must wait for a summary, and of what. The
/// kept tail starts at a user message (so a tool call and its results
/// never part) and, with the summary, fills at most half of what the
/// model takes, leaving room for turns before the next summary.
/// `tokens` is the size of the request as it stands.
pub fn plan(
    budget: &ContextBudget,
    estimator: &TokenEstimator,
    fixed_bytes: usize,
    summarize_at: f64,
    path: &[ChatMessage],
    in_force: Option<(usize, &Summary)>,
    tokens: u64,
) -> Plan {
    let (start, current) = match in_force {
        Some((end, s)) => (end, Some(s)),
        None => (0, None),
    };
    let summary_bytes = current.map(|s| s.text.len() + 200).unwrap_or(0);
    let tail_bytes = |from: usize| path[from..].iter().map(message_bytes).sum::<usize>();
    let limit = budget.input_limit();
    if tokens <= budget.threshold(summarize_at) {
        return Plan::Send;
    }
    // After the summary, the summary and the kept tail take at most half
    // of what the fixed part (system prompt, tools) leaves.
    let fixed = estimator.tokens(fixed_bytes);
    let allowance = summary_allowance(budget, fixed);
    let target = fixed + limit.saturating_sub(fixed) / 2;
    let cut = (start + 1..path.len())
        .filter(|&k| path[k].role == crate::provider::ChatRole::User)
        .find(|&k| estimator.tokens(fixed_bytes + tail_bytes(k)) + allowance <= target);
    match cut {
        Some(to) => Plan::Summarize {
            from: start,
            to,
            tokens_before: estimator.tokens(summary_bytes + tail_bytes(start) - tail_bytes(to)),
        },
        None => Plan::RecentMessagesTooLarge { tokens, limit },
    }
}

/// The most tokens a summary may take: a fifth of what requests have
/// besides their fixed part (`fixed` tokens).
pub fn summary_allowance(budget: &ContextBudget, fixed: u64) -> u64 {
    (budget.input_limit().saturating_sub(fixed) / 5).clamp(64, 2048)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Source;
    use crate::provider_kind::ProviderKind;

    fn model(window: u64, max_out: u32) -> ModelInfo {
        ModelInfo {
            name: "m".into(),
            provider: ProviderKind::OpenAi,
            context_window: window,
            max_output_tokens: max_out,
            source: Source::Config,
            price: None,
            vision: false,
            deprecated: false,
            fallback: None,
            max_total_tokens: None,
            sampling: Default::default(),
        }
    }

    #[test]
    fn the_budget_keeps_the_answer_room_and_a_long_request_does_not_fit() {
        let b = ContextBudget::for_model(&model(8192, 1024), 8192);
        assert_eq!((b.reserve, b.input_limit()), (1024, 7168));
        let e = TokenEstimator::default();
        let size = |view: &[ChatMessage]| e.request(None, None, view, request_bytes(1000, view));
        let short = vec![ChatMessage::user("hello")];
        assert!(matches!(fit(&b, size(&short)), Fit::Fits { .. }));
        let long = vec![ChatMessage::user("x".repeat(30_000))];
        assert!(matches!(fit(&b, size(&long)), Fit::TooLong { limit: 7168, .. }));
    }

    #[test]
    fn a_request_extending_the_last_one_starts_from_the_providers_count() {
        let e = TokenEstimator::default();
        let mut view = conversation(3, 400);
        let bytes = request_bytes(2000, &view);
        let mut anchor = Anchor::of(None, &view, bytes);
        anchor.tokens = 1234;
        // The answer and the next question: the count plus their estimate.
        view.push(ChatMessage::assistant("b".repeat(350), Vec::new()).with_node("a-next"));
        view.push(ChatMessage::user("and then?").with_node("u-next"));
        let now = request_bytes(2000, &view);
        assert_eq!(e.request(Some(&anchor), None, &view, now), 1234 + e.tokens(now - bytes));
        // Another summary in force, or a different path: estimated afresh.
        assert_eq!(e.request(Some(&anchor), Some("s1"), &view, now), e.tokens(now));
        let other = conversation(5, 400);
        let b = request_bytes(2000, &other);
        assert_eq!(e.request(Some(&anchor), None, &other[..4], b), e.tokens(b));
    }

    #[test]
    fn the_estimate_learns_from_what_providers_count() {
        let mut e = TokenEstimator::default();
        let estimated = e.tokens(7000);
        assert_eq!(estimated, 2000);
        // The provider counted fewer: the estimate moves towards it.
        for _ in 0..8 {
            let est = e.tokens(7000);
            e.observe(est, 1500);
        }
        let now = e.tokens(7000);
        assert!((1500..=1520).contains(&now), "{now}");
        // A nonsense sample moves it only so far.
        e.observe(now, 1);
        assert!(e.ratio() >= 0.25);
    }

    #[test]
    fn infinity_follows_the_config_then_the_environment_then_defaults_on() {
        let mut c = ForgeConfig::default();
        c.context.infinity = Some(false);
        assert!(!infinity(&c), "the file decides when it says");
        c.context.infinity = None;
        // Without the variable set in this test process, the default holds.
        if std::env::var(INFINITY_ENV).is_err() {
            assert!(infinity(&c));
        }
    }

    fn conversation(turns: usize, answer_bytes: usize) -> Vec<ChatMessage> {
        let mut path = Vec::new();
        for i in 0..turns {
            path.push(ChatMessage::user(format!("question {i}")).with_node(format!("u{i}")));
            path.push(ChatMessage::assistant("a".repeat(answer_bytes), Vec::new()).with_node(format!("a{i}")));
        }
        path.push(ChatMessage::user("the newest question").with_node("now"));
        path
    }

    #[test]
    fn a_long_conversation_is_planned_for_a_summary_that_keeps_a_recent_tail() {
        let budget = ContextBudget { window: 4000, reserve: 300 };
        let e = TokenEstimator::default();
        let size = |path: &[ChatMessage], in_force: Option<(usize, &Summary)>| {
            e.tokens(request_bytes(2000, &view_with(path, in_force)))
        };
        let short = conversation(2, 700);
        assert_eq!(plan(&budget, &e, 2000, 0.8, &short, None, size(&short, None)), Plan::Send);
        let long = conversation(12, 1500);
        let Plan::Summarize { from, to, .. } = plan(&budget, &e, 2000, 0.8, &long, None, size(&long, None)) else {
            panic!("a summary is needed")
        };
        assert_eq!(from, 0);
        assert_eq!(long[to].role, crate::provider::ChatRole::User, "the tail starts at a user message");
        assert!(to > 0 && to < long.len());

        // With the summary in force, the request sends it, then the tail.
        let s = Summary {
            id: "s1".into(),
            first: "u0".into(),
            last: long[to - 1].node.clone().unwrap_or_default(),
            text: "earlier: things".into(),
        };
        let all = [s];
        let in_force = applied(&long, &all, None);
        let v = view_with(&long, in_force);
        assert_eq!(v.len(), 2 + long.len() - to);
        assert!(v[0].text.contains("earlier: things"));
        assert_eq!(plan(&budget, &e, 2000, 0.8, &long, in_force, size(&long, in_force)), Plan::Send);
        // On a window where the originals fit, they are sent again.
        assert_eq!(restore(&long, &all, |_| true), None);
        assert_eq!(restore(&long, &all, |m| m.len() < long.len()).map(|(_, s)| s.id.as_str()), Some("s1"));

        // The newest message alone too big: nothing to summarize helps.
        let mut huge = conversation(1, 10);
        huge.push(ChatMessage::user("x".repeat(20_000)));
        assert!(matches!(
            plan(&budget, &e, 2000, 0.8, &huge, None, size(&huge, None)),
            Plan::RecentMessagesTooLarge { .. }
        ));
    }
}
