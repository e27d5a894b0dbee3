//! What a command of one's own grants the turn it starts: its front
//! matter's `model` answers that turn (of the session's provider), and the
//! calls its `allowed-tools` cover run without asking. The grants last
//! for that turn only; a queued command keeps them with its row until it
//! runs.

use forge_proto::ErrorKind;
use serde::{Deserialize, Serialize};

use super::Session;
use crate::error::EngineError;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TurnGrants {
    /// The command's name (for messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// The turn's own `temperature` and `top_p` (`session.send`).
    #[serde(default, skip_serializing_if = "forge_proto::Sampling::is_empty")]
    pub sampling: forge_proto::Sampling,
}

impl TurnGrants {
    /// What `command`'s front matter grants.
    pub(crate) fn of(command: &crate::slash_commands::SlashCommand) -> TurnGrants {
        TurnGrants {
            command: Some(command.info.name.clone()),
            model: command.info.model.clone(),
            allowed_tools: command.info.allowed_tools.clone(),
            sampling: Default::default(),
        }
    }

    fn is_empty(&self) -> bool {
        self.model.is_none() && self.allowed_tools.is_empty() && self.sampling.is_empty()
    }

    /// As a queued row keeps them.
    pub(super) fn to_json(&self) -> Option<String> {
        if self.is_empty() { None } else { serde_json::to_string(self).ok() }
    }

    pub(super) fn from_json(json: Option<&str>) -> TurnGrants {
        json.and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default()
    }
}

impl Session {
    /// A command's model must be one the session's provider serves.
    pub(super) fn check_grants(&self, grants: &TurnGrants) -> Result<(), EngineError> {
        let Some(model) = &grants.model else { return Ok(()) };
        let Ok(own) = self.provider_kind() else { return Ok(()) };
        match crate::catalog::provider_of(&self.config, model) {
            Some(other) if other != own => Err(EngineError::new(
                ErrorKind::InvalidParams,
                format!(
                    "/{} asks for model {model} of provider {}, but this session uses {}; switch the session's provider, \
                     or take `model:` out of the command's front matter",
                    grants.command.as_deref().unwrap_or("command"),
                    other.as_str(),
                    self.row.provider
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The model the running turn asks for: its command's, or the
    /// session's (`turn_model` is the one that answers).
    pub(super) fn asked_model(&self) -> String {
        self.grants.model.clone().unwrap_or_else(|| self.row.model.clone())
    }

    /// The running turn's tool grants, for the approval policy.
    pub(super) fn tool_grants(&self) -> Vec<crate::tools::grants::Grant> {
        crate::tools::grants::parse_all(&self.grants.allowed_tools)
    }
}
