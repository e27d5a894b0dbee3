//! Provider failures, classified for users and scripts, with secrets
//! scrubbed from every message.

use std::time::Duration;

use forge_proto::ErrorKind;

use super::{ProviderKind, ProviderSettings};
use crate::redact::redact_secrets;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ErrorKind,
    pub message: String,
    /// Set when trying again may work (if nothing was streamed yet).
    pub retry: Option<RetryHint>,
    /// The provider does not know the model asked for (retired, or never
    /// there): a known fallback may answer instead.
    pub model_not_found: bool,
}

/// Why, and when, a failed request may be tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryHint {
    /// In a few words: `overloaded`, `rate limited`, ...
    pub reason: String,
    /// How long the provider asked to wait (`retry-after`).
    pub after: Option<Duration>,
}

impl RetryHint {
    fn new(reason: impl Into<String>, after: Option<Duration>) -> Option<Self> {
        Some(RetryHint { reason: reason.into(), after })
    }
}

/// A `retry-after` header: seconds, or an HTTP date.
pub(super) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry: None, model_not_found: false }
    }

    fn retrying(mut self, retry: Option<RetryHint>) -> Self {
        self.retry = retry;
        self
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    pub fn missing_key(kind: ProviderKind) -> Self {
        let settings_hint = format!(
            "No API key for {}: set {} in forged's environment or under [api_keys] in $FORGE_HOME/config.toml, then restart forged (`forgectl shutdown`).",
            kind.display_name(),
            kind.key_env()
        );
        Self::new(ErrorKind::ProviderAuth, settings_hint)
    }

    /// A failed HTTP response, turned into a message in the seed's format.
    pub(super) fn from_http(
        settings: &ProviderSettings,
        model: &str,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
    ) -> Self {
        let detail = extract_error_message(body);
        let detail = redact_secrets(&detail, &settings.secrets());
        // Our sentences end with their own full stop.
        let detail = detail.trim_end().trim_end_matches('.');
        let name = settings.kind.display_name();
        let kind = match status {
            401 | 403 => ErrorKind::ProviderAuth,
            // Gemini refuses a bad key with 400.
            400 if body.contains("API_KEY_INVALID") => ErrorKind::ProviderAuth,
            429 => ErrorKind::ProviderRateLimited,
            408 | 500..=599 => ErrorKind::ProviderUnavailable,
            _ => ErrorKind::ProviderError,
        };
        let message = match kind {
            ErrorKind::ProviderAuth => format!(
                "{name} authentication failed for model {model} (HTTP {status}: {detail}). Check the key: {}.",
                settings.config_hint()
            ),
            ErrorKind::ProviderRateLimited => {
                let when = match retry_after {
                    Some(after) => format!("Try again in {}s.", after.as_secs().max(1)),
                    None => "Try again shortly.".to_string(),
                };
                format!("{name} rate-limited the request for model {model} (HTTP {status}): {detail}. {when}")
            }
            ErrorKind::ProviderUnavailable => {
                format!("{name} is unavailable (HTTP {status}) for model {model}: {detail}. Try again shortly.")
            }
            _ => format!("{name} rejected the request for model {model} (HTTP {status}): {detail}"),
        };
        let retry = match status {
            429 => RetryHint::new("rate limited", retry_after),
            529 => RetryHint::new("overloaded", retry_after),
            _ if body.contains("overloaded_error") => RetryHint::new("overloaded", retry_after),
            500 | 502 | 503 | 504 => RetryHint::new(format!("unavailable (HTTP {status})"), retry_after),
            _ => None,
        };
        let mut error = Self::new(kind, message).retrying(retry);
        // Anthropic's and Gemini's 404, OpenAI's `model_not_found`, a
        // local server's "model ... not found".
        error.model_not_found =
            body.contains("model_not_found") || (status == 404 && body.to_ascii_lowercase().contains("model"));
        error
    }

    pub(super) fn connect(settings: &ProviderSettings, err: &reqwest::Error) -> Self {
        let text = redact_secrets(&error_chain(err), &settings.secrets());
        Self::new(
            ErrorKind::ProviderUnreachable,
            format!("cannot reach {} at {}: {text}", settings.kind.display_name(), settings.base_url),
        )
        .retrying(RetryHint::new("unreachable", None))
    }

    pub(super) fn stream_broken(settings: &ProviderSettings, what: &str) -> Self {
        let what = redact_secrets(what, &settings.secrets());
        Self::new(ErrorKind::ProviderError, format!("the {} stream broke off: {what}", settings.kind.display_name()))
    }

    /// An error the provider reported inside an otherwise good stream.
    pub(super) fn midstream(settings: &ProviderSettings, error_type: &str, message: &str) -> Self {
        let message = redact_secrets(message, &settings.secrets());
        // Anthropic and OpenAI error types, and Gemini's RPC statuses.
        let kind = match error_type {
            "overloaded_error" | "api_error" | "server_error" | "timeout_error" | "UNAVAILABLE" | "INTERNAL"
            | "DEADLINE_EXCEEDED" => ErrorKind::ProviderUnavailable,
            "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => ErrorKind::ProviderRateLimited,
            "authentication_error" | "permission_error" | "PERMISSION_DENIED" | "UNAUTHENTICATED" => {
                ErrorKind::ProviderAuth
            }
            _ => ErrorKind::ProviderError,
        };
        let retry = match error_type {
            "overloaded_error" | "UNAVAILABLE" => RetryHint::new("overloaded", None),
            "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => RetryHint::new("rate limited", None),
            "api_error" | "server_error" | "timeout_error" | "INTERNAL" | "DEADLINE_EXCEEDED" => {
                RetryHint::new("unavailable", None)
            }
            _ => None,
        };
        Self::new(
            kind,
            format!("{} reported an error mid-stream ({error_type}): {message}", settings.kind.display_name()),
        )
        .retrying(retry)
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut src = err.source();
    while let Some(s) = src {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        src = s.source();
    }
    out
}

/// The `error.message` of a provider's JSON error body, else the body's
/// start (error bodies from proxies are often not JSON).
fn extract_error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let err = v.get("error").unwrap_or(&v);
        if let Some(m) = err.get("message").and_then(|m| m.as_str()) {
            // Gemini names the kind in `status`.
            let ty = err.get("type").or_else(|| err.get("status")).and_then(|t| t.as_str());
            return match ty {
                Some(ty) => format!("{ty}: {m}"),
                None => m.to_string(),
            };
        }
        if let Some(s) = err.as_str() {
            return s.to_string();
        }
    }
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "no details in the response".to_string();
    }
    let mut end = trimmed.len().min(300);
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    trimmed[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_error_bodies_are_summarised() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        assert_eq!(extract_error_message(body), "rate_limit_error: slow down");
        assert_eq!(extract_error_message("<html>413</html>"), "<html>413</html>");
    }

    #[test]
    fn a_detail_ending_in_a_full_stop_does_not_double_it() {
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded."}}"#;
        let settings = ProviderSettings::for_tests();
        for status in [429, 503, 400, 401] {
            let e = ProviderError::from_http(&settings, "m", status, body, None);
            assert!(!e.message.contains("Overloaded.."), "{}", e.message);
        }
    }

    #[test]
    fn transient_statuses_may_be_retried_and_retry_after_is_read() {
        let settings = ProviderSettings::for_tests();
        let reason = |status: u16| ProviderError::from_http(&settings, "m", status, "{}", None).retry.map(|r| r.reason);
        assert_eq!(reason(529).as_deref(), Some("overloaded"));
        assert_eq!(reason(429).as_deref(), Some("rate limited"));
        assert_eq!(reason(503).as_deref(), Some("unavailable (HTTP 503)"));
        assert_eq!(reason(400), None);
        assert_eq!(reason(401), None);
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO), "a date past");
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
        assert!(parse_retry_after(&later).is_some_and(|d| d > Duration::from_secs(25)));
        assert_eq!(parse_retry_after("soon"), None);
    }
}
