//! A provider request's retries: after a transient failure before any
//! output, the same request again after a backoff (or the provider's
//! `retry-after`), each attempt told to every client; and at once to a
//! fallback model when the provider did not know the one asked for.

use std::time::Duration;

use forge_proto::EventKind;

use super::state::{ActiveStream, OperationState};
use super::{Effect, Session, Timer};
use crate::provider::{ProviderError, ProviderEvent};

const DEFAULT_MAX_RETRIES: u32 = 4;
/// The first retry's wait; it doubles for each one after, up to the cap.
const RETRY_BASE: Duration = Duration::from_secs(2);
const RETRY_CAP: Duration = Duration::from_secs(60);
/// A `retry-after` longer than this is not waited for: the error stands.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

impl Session {
    /// After a transient failure before any output: how long to wait
    /// before the next attempt, if there is one. Backoff doubles from
    /// [`RETRY_BASE`] with up to a quarter of jitter; a `retry-after` the
    /// provider sent is honoured instead (unless it asks for too long).
    pub(super) fn retry_delay(max_retries: u32, stream: &ActiveStream, error: &ProviderError) -> Option<Duration> {
        let hint = error.retry.as_ref()?;
        let max_attempts = max_retries + 1;
        if stream.output_seen || stream.attempt >= max_attempts {
            return None;
        }
        if let Some(after) = hint.after {
            return (after <= MAX_RETRY_AFTER).then_some(after);
        }
        let backoff = RETRY_BASE.saturating_mul(1 << (stream.attempt - 1).min(16)).min(RETRY_CAP);
        // Jitter from the stream's (random) id: sessions retrying at once
        // spread out, and a test can replay it.
        let seed = stream.stream_id.bytes().fold(u64::from(stream.attempt), |h, b| h.wrapping_mul(31) ^ u64::from(b));
        Some(backoff + backoff.mul_f64((seed % 1000) as f64 / 4000.0))
    }

    pub(super) fn max_retries(&self) -> u32 {
        self.config.app.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    /// A transient failure before any output: tell every client, and try
    /// again after `delay` (`Timer::Retry`).
    pub(super) fn schedule_retry(&mut self, error: ProviderError, delay: Duration) {
        let max_attempts = self.max_retries() + 1;
        let OperationState::Streaming(stream) = &mut self.state else { return };
        stream.attempt += 1;
        stream.waiting_to_retry = true;
        let reason = error.retry.map(|r| r.reason).unwrap_or_default();
        tracing::info!(session = %self.row.id, attempt = stream.attempt, ?delay, %reason, "retrying the provider request");
        self.pipeline.event(
            None,
            EventKind::Retrying {
                attempt: stream.attempt,
                max_attempts,
                delay_ms: delay.as_millis() as u64,
                reason,
                error: error.message,
            },
        );
        self.out.push(Effect::StopRequest);
        self.out.push(Effect::Arm(Timer::Retry, delay));
    }

    /// The provider did not know the model and a fallback takes over: the
    /// same request again, at once, to the fallback.
    pub(super) fn retry_with_fallback(&mut self) {
        let model = self.turn_model();
        let OperationState::Streaming(stream) = &mut self.state else { return };
        stream.model = model;
        stream.attempt += 1;
        stream.waiting_to_retry = true;
        self.out.push(Effect::StopRequest);
        self.retry_request();
    }

    /// `Timer::Retry`: the next attempt, unless the stream ended meanwhile
    /// (cancelled, or the session stopped).
    pub(super) fn retry_request(&mut self) {
        let OperationState::Streaming(stream) = &mut self.state else { return };
        if stream.sealed || !stream.waiting_to_retry {
            return;
        }
        stream.waiting_to_retry = false;
        let (message_id, iteration, attempt) = (stream.message_id.clone(), stream.iteration, stream.attempt);
        match self.start_request(&message_id, iteration, attempt) {
            Ok((estimated, anchor)) => {
                if let OperationState::Streaming(stream) = &mut self.state {
                    stream.estimated_input = estimated;
                    stream.sent = Some(anchor);
                }
            }
            Err(e) => self.on_provider(ProviderEvent::Error(e)),
        }
    }
}
