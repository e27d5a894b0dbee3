//! The model a request goes to and how it samples. A deprecated model is
//! answered by its fallback, and so is one its provider said it does not
//! know; `temperature` and `top_p` come from the turn, the session, the
//! model's `[[models]]` entry and `[app]`, in that order, fitted to the
//! provider and model (`crate::sampling`). Each change is said once per
//! session.

use std::collections::{HashMap, HashSet};

use forge_proto::{EventKind, Sampling};

use super::Session;
use crate::catalog::ModelInfo;
use crate::provider::ProviderError;

/// Fallbacks taken and notices given, for the session's lifetime.
#[derive(Default)]
pub(super) struct ModelChoice {
    /// Models the provider said it does not know, to the one answering in
    /// their place.
    not_found: HashMap<String, String>,
    /// Keys of the notices already given.
    said: HashSet<String>,
}

/// Most fallbacks followed from one model (a chain, never a loop).
const MAX_FALLBACKS: usize = 4;

impl Session {
    /// The model that answers the running turn: the one asked for, or
    /// what stands in for it.
    pub(super) fn turn_model(&self) -> String {
        self.answering(self.asked_model())
    }

    /// The model that answers for `model`: itself, or what stands in for
    /// it (its fallback, and that one's, ...).
    pub(super) fn answering(&self, mut model: String) -> String {
        let Ok(kind) = self.provider_kind() else { return model };
        for _ in 0..MAX_FALLBACKS {
            let next = match self.models.not_found.get(&model) {
                Some(f) => Some(f.clone()),
                None => {
                    let info = crate::catalog::lookup(&self.config, kind, &model);
                    info.fallback.filter(|_| info.deprecated)
                }
            };
            match next {
                Some(n) if n != model => model = n,
                _ => break,
            }
        }
        model
    }

    /// True the first time `key` is asked about in this session.
    fn first_time(&mut self, key: String) -> bool {
        self.models.said.insert(key)
    }

    /// Before a request: says that a deprecated model is answered by its
    /// fallback, or still answers for want of one.
    pub(super) fn announce_model(&mut self) {
        let asked = self.asked_model();
        let Ok(kind) = self.provider_kind() else { return };
        if !crate::catalog::lookup(&self.config, kind, &asked).deprecated {
            return;
        }
        let answering = self.turn_model();
        if !self.first_time(format!("deprecated:{asked}")) {
            return;
        }
        let event = match answering != asked {
            true => {
                EventKind::ModelFallback { model: asked, fallback: answering, reason: "deprecated".into(), error: None }
            }
            false => EventKind::ModelDeprecated { model: asked },
        };
        self.pipeline.event(None, event);
    }

    /// `temperature` and `top_p` for a request to `model` (`thinking`:
    /// Anthropic's extended thinking is on), each change said once.
    pub(super) fn request_sampling(&mut self, model: &ModelInfo, thinking: bool) -> Sampling {
        let app = Sampling { temperature: self.config.app.temperature, top_p: self.config.app.top_p };
        let asked = self.grants.sampling.or(self.row.sampling).or(model.sampling).or(app);
        let target = crate::sampling::Target { provider: model.provider, model: &model.name, thinking };
        let (sent, changes) = crate::sampling::fit(target, asked);
        for c in changes {
            if self.first_time(format!("sampling:{}:{}:{}", model.name, c.parameter, c.sent.is_some())) {
                let event = EventKind::SamplingAdjusted {
                    model: model.name.clone(),
                    parameter: c.parameter.to_string(),
                    asked: c.asked,
                    sent: c.sent,
                    reason: c.reason,
                };
                self.pipeline.event(None, event);
            }
        }
        sent
    }

    /// The provider does not know the model that was to answer: its
    /// fallback answers from now on, if it has one not tried yet (true;
    /// the caller makes the request again).
    pub(super) fn fall_back(&mut self, error: &ProviderError) -> bool {
        if !error.model_not_found {
            return false;
        }
        let Ok(kind) = self.provider_kind() else { return false };
        let model = self.turn_model();
        let Some(fallback) = crate::catalog::lookup(&self.config, kind, &model).fallback else { return false };
        if fallback == model || self.models.not_found.contains_key(&fallback) || fallback == self.asked_model() {
            return false;
        }
        self.models.not_found.insert(model.clone(), fallback.clone());
        if self.first_time(format!("not_found:{model}")) {
            let error = Some(error.message.clone());
            let event = EventKind::ModelFallback { model, fallback, reason: "not_found".into(), error };
            self.pipeline.event(None, event);
        }
        true
    }
}
