//! Sampling parameters as each provider and model takes them: what a user
//! asked for (`temperature`, `top_p`) becomes what a request may carry,
//! clamped into the provider's range or left out where the model refuses
//! it, with each change said in words.

use forge_proto::Sampling;

use crate::provider_kind::ProviderKind;

/// One parameter not sent as asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjustment {
    /// `temperature` or `top_p`.
    pub parameter: &'static str,
    pub asked: f64,
    /// What is sent instead; `None`: left out.
    pub sent: Option<f64>,
    pub reason: String,
}

/// What the request's model is, as far as sampling goes.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub provider: ProviderKind,
    pub model: &'a str,
    /// Anthropic's extended thinking is on for the request.
    pub thinking: bool,
}

impl Target<'_> {
    /// OpenAI's reasoning models (o-series, GPT-5) refuse sampling
    /// parameters.
    fn reasoning(&self) -> bool {
        let m = self.model.to_ascii_lowercase();
        self.provider == ProviderKind::OpenAi && ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p))
    }

    /// Anthropic's models since Claude 4 take temperature or top_p, not
    /// both.
    fn one_of_two(&self) -> bool {
        self.provider == ProviderKind::Claude && !self.model.starts_with("claude-3")
    }

    /// The highest temperature the provider takes.
    fn max_temperature(&self) -> f64 {
        match self.provider {
            ProviderKind::Claude => 1.0,
            ProviderKind::OpenAi | ProviderKind::Gemini => 2.0,
        }
    }
}

/// What `asked` becomes for `target`, and what changed.
pub fn fit(target: Target<'_>, asked: Sampling) -> (Sampling, Vec<Adjustment>) {
    let mut changes = Vec::new();
    let mut drop = |parameter: &'static str, value: Option<f64>, reason: &str| {
        if let Some(asked) = value {
            changes.push(Adjustment { parameter, asked, sent: None, reason: reason.to_string() });
        }
        None
    };
    let refusal = if target.reasoning() {
        Some(format!("{} is a reasoning model, which takes no temperature or top_p", target.model))
    } else if target.provider == ProviderKind::Claude && target.thinking {
        Some(
            "Anthropic takes no temperature or top_p with extended thinking ([anthropic] thinking_enabled)".to_string(),
        )
    } else {
        None
    };
    if let Some(reason) = refusal {
        let temperature = drop("temperature", asked.temperature, &reason);
        let top_p = drop("top_p", asked.top_p, &reason);
        return (Sampling { temperature, top_p }, changes);
    }
    let mut sent = asked;
    if target.one_of_two() && asked.temperature.is_some() {
        sent.top_p = drop(
            "top_p",
            asked.top_p,
            "Anthropic's current models take temperature or top_p, not both: temperature is sent",
        );
    }
    let max = target.max_temperature();
    if let Some(t) = sent.temperature.filter(|t| *t > max) {
        sent.temperature = Some(max);
        changes.push(Adjustment {
            parameter: "temperature",
            asked: t,
            sent: Some(max),
            reason: format!("{} takes a temperature from 0 to {max}", target.provider.display_name()),
        });
    }
    (sent, changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::{Claude, Gemini, OpenAi};

    fn both(temperature: f64, top_p: f64) -> Sampling {
        Sampling { temperature: Some(temperature), top_p: Some(top_p) }
    }

    fn at(provider: ProviderKind, model: &str) -> Target<'_> {
        Target { provider, model, thinking: false }
    }

    #[test]
    fn anthropic_clamps_to_one_and_sends_temperature_alone() {
        let (sent, changes) = fit(at(Claude, "claude-sonnet-4-6"), both(1.5, 0.9));
        assert_eq!(sent, Sampling { temperature: Some(1.0), top_p: None });
        assert_eq!(
            changes.iter().map(|c| (c.parameter, c.sent)).collect::<Vec<_>>(),
            [("top_p", None), ("temperature", Some(1.0))]
        );
        let (sent, _) = fit(at(Claude, "claude-3-opus-20240229"), both(0.5, 0.9));
        assert_eq!(sent, both(0.5, 0.9), "older models take both");
        let (sent, changes) = fit(Target { thinking: true, ..at(Claude, "claude-opus-4-7") }, both(0.5, 0.9));
        assert!(sent.is_empty() && changes.len() == 2, "none with thinking");
    }

    #[test]
    fn openai_reasoning_models_take_none_and_others_up_to_two() {
        let (sent, changes) = fit(at(OpenAi, "gpt-5.4"), both(0.2, 0.5));
        assert!(sent.is_empty());
        assert!(changes[0].reason.contains("reasoning model"), "{changes:?}");
        assert_eq!(fit(at(OpenAi, "gpt-4.1"), both(1.8, 0.5)), (both(1.8, 0.5), vec![]));
        assert_eq!(fit(at(OpenAi, "llama3.2"), both(2.0, 1.0)).0, both(2.0, 1.0), "a local model as asked");
        assert_eq!(fit(at(Gemini, "gemini-3.5-pro"), both(1.9, 0.95)).0, both(1.9, 0.95));
    }
}
