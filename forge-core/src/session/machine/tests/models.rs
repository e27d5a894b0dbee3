//! The model a request goes to and how it samples: fallbacks, sampling
//! fitted to the provider, and usage Forge estimates when the provider
//! counts nothing.

use super::*;

fn with_model(entry: &str) -> ForgeConfig {
    let mut c: ForgeConfig = toml::from_str(entry).unwrap_or_else(|e| panic!("{e}"));
    c.api_keys.anthropic = Some("test-key".into());
    c
}

fn events_of<'a>(h: &'a Harness, name: &str) -> Vec<&'a EventKind> {
    h.published.iter().filter(|e| e.kind.name() == name).map(|e| &e.kind).collect()
}

#[test]
fn a_turns_temperature_is_clamped_for_anthropic_and_said_once() {
    let mut h = Harness::new();
    let params = SendParams {
        text: Some("hi".into()),
        sampling: forge_proto::Sampling { temperature: Some(1.5), top_p: Some(0.9) },
        ..Default::default()
    };
    drop(h.request::<forge_proto::SendResult>(SessionRequest::Send(params)));
    h.settle();
    let sent = h.requests[0].sampling;
    assert_eq!(sent, forge_proto::Sampling { temperature: Some(1.0), top_p: None });
    assert_eq!(events_of(&h, "sampling_adjusted").len(), 2, "top_p dropped, temperature clamped");
    h.provider(vec![text("ok"), ProviderEvent::Done]);
    h.settle();
    // The turn's own sampling ended with it.
    h.say("again");
    h.settle();
    assert!(h.requests[1].sampling.is_empty());
    let too_hot = SendParams {
        text: Some("x".into()),
        sampling: forge_proto::Sampling { temperature: Some(3.0), top_p: None },
        ..Default::default()
    };
    let refused = h.request::<forge_proto::SendResult>(SessionRequest::Send(too_hot));
    h.settle();
    assert!(answered(refused).is_err_and(|e| e.message.contains("between 0 and 2")));
}

#[test]
fn a_deprecated_model_is_answered_by_its_fallback_with_a_notice() {
    let config = with_model(
        "[[models]]\nname = \"claude-test\"\nprovider = \"claude\"\ndeprecated = true\nfallback = \"claude-next\"\ntemperature = 0.4\n",
    );
    let mut h = Harness::configured(config, Unfinished::Nothing, Vec::new());
    h.say("hi");
    h.settle();
    assert_eq!(h.requests[0].model, "claude-next");
    let fallback = events_of(&h, "model_fallback");
    assert!(
        matches!(fallback[..], [EventKind::ModelFallback { reason, .. }] if reason == "deprecated"),
        "{fallback:?}"
    );
    h.provider(vec![text("ok"), ProviderEvent::Done]);
    h.settle();
    h.say("again");
    h.settle();
    assert_eq!(events_of(&h, "model_fallback").len(), 1, "said once");
}

#[test]
fn a_model_the_provider_does_not_know_is_tried_again_with_its_fallback() {
    let config = with_model("[[models]]\nname = \"claude-test\"\nprovider = \"claude\"\nfallback = \"claude-next\"\n");
    let mut h = Harness::configured(config, Unfinished::Nothing, Vec::new());
    h.say("hi");
    h.settle();
    assert_eq!(h.requests[0].model, "claude-test");
    let mut gone = crate::provider::ProviderError::new(ErrorKind::ProviderError, "no such model: claude-test");
    gone.model_not_found = true;
    h.provider(vec![ProviderEvent::Error(gone)]);
    h.settle();
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.requests[1].model, "claude-next", "at once, with the fallback");
    h.provider(vec![text("ok"), ProviderEvent::Done]);
    h.settle();
    assert_eq!(h.state(), OperationStateKind::Idle);
    assert!(events_of(&h, "model_fallback").len() == 1);
}

#[test]
fn a_response_without_counts_is_counted_by_estimate_and_marked() {
    let mut h = Harness::new();
    h.say("hello there");
    h.settle();
    h.provider(vec![text("a fairly short answer"), ProviderEvent::Done]);
    h.settle();
    let usage = events_of(&h, "usage");
    let Some(EventKind::Usage { usage, session, .. }) = usage.first() else { panic!("no usage: {usage:?}") };
    assert!(usage.estimated && usage.input_tokens > 0 && usage.output_tokens > 0, "{usage:?}");
    assert_eq!(session.estimated, 1);
}
