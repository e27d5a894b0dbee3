//! The providers Forge knows by name (their models are in `catalog.rs`).
//! A leaf module: the configuration and the provider clients both use it.

/// The providers Forge knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    Claude,
    OpenAi,
    Gemini,
}

impl ProviderKind {
    /// Parses a provider name as users type it: `claude` (alias
    /// `anthropic`), `openai`, `gemini` (alias `google`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "claude" | "anthropic" => Some(Self::Claude),
            "openai" => Some(Self::OpenAi),
            "gemini" | "google" => Some(Self::Gemini),
            _ => None,
        }
    }

    /// The canonical name stored with sessions.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::OpenAi => "openai",
            Self::Gemini => "gemini",
        }
    }

    pub fn display_name(self) -> &'static str {
        match self {
            Self::Claude => "Claude",
            Self::OpenAi => "OpenAI",
            Self::Gemini => "Gemini",
        }
    }

    pub fn default_model(self) -> &'static str {
        match self {
            Self::Claude => "claude-sonnet-4-6",
            Self::OpenAi => "gpt-5.4-mini",
            Self::Gemini => "gemini-3.5-flash",
        }
    }

    /// A small, cheap model of the provider, for background work
    /// (repository-map summaries).
    pub fn small_model(self) -> &'static str {
        match self {
            Self::Claude => "claude-haiku-4-5",
            Self::OpenAi => "gpt-5.4-mini",
            Self::Gemini => "gemini-3.5-flash",
        }
    }

    /// The environment variable that holds this provider's key.
    pub fn key_env(self) -> &'static str {
        match self {
            Self::Claude => "ANTHROPIC_API_KEY",
            Self::OpenAi => "OPENAI_API_KEY",
            Self::Gemini => "GEMINI_API_KEY",
        }
    }

    pub(crate) fn config_key_name(self) -> &'static str {
        match self {
            Self::Claude => "anthropic",
            Self::OpenAi => "openai",
            Self::Gemini => "google",
        }
    }
}
