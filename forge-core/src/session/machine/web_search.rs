//! The provider's own web search (`[tools.web_search]`): offered to a
//! turn's requests when enabled, where Forge speaks the provider's search
//! (Claude's `web_search` tool, OpenAI's Responses `web_search`, Gemini's
//! Google Search grounding), and where the approval policy lets
//! `web_search` run (it runs at the provider: nothing can wait for a
//! user's answer halfway through an answer). What it finds comes back as
//! the answer's citations, kept with its node.

use super::Session;
use crate::tools::config::{ToolApprovalConfig, WebSearchConfig};

impl Session {
    /// What the turn's requests offer, if anything.
    pub(super) fn web_search(&self) -> Option<WebSearchConfig> {
        let config = self.config.tools.web_search.as_ref().filter(|c| c.enabled == Some(true))?;
        let settings = self.provider_settings().ok()?;
        use crate::provider::Wire;
        match Wire::of(&settings) {
            Wire::Anthropic | Wire::OpenAiResponses => {}
            // Google Search grounding takes no domain lists: with one
            // configured it is not offered rather than ignoring it.
            Wire::Gemini
                if config.allowed_domains.is_empty()
                    && config.blocked_domains.is_empty()
                    && combines_search_and_functions(&self.row.model) => {}
            _ => return None,
        }
        let approval = self.config.tools.approval.as_ref();
        let mode = self.row.approval.mode.clone().or_else(|| approval.and_then(|a| a.mode.clone()));
        (!refused(approval, mode.as_deref(), &self.row.approval.always)).then(|| config.clone())
    }
}

/// Gemini 3 and later take Google Search beside function declarations
/// (older models refuse the combination, and Forge always offers tools).
fn combines_search_and_functions(model: &str) -> bool {
    let major = model.strip_prefix("gemini-").and_then(|rest| rest.split(['.', '-']).next());
    major.and_then(|m| m.parse::<u32>().ok()).is_some_and(|m| m >= 3)
}

/// Whether the policy refuses `web_search`: on the denylist, or strict
/// mode without it allowed.
fn refused(approval: Option<&ToolApprovalConfig>, mode: Option<&str>, always: &[String]) -> bool {
    let listed = |list: Option<&Vec<String>>| list.is_some_and(|l| l.iter().any(|t| t == "web_search"));
    if listed(approval.and_then(|a| a.denylist.as_ref())) {
        return true;
    }
    let strict = matches!(mode, Some("strict" | "deny"));
    strict && !listed(approval.and_then(|a| a.allowlist.as_ref())) && !always.iter().any(|t| t == "web_search")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_search_is_offered_beside_functions_from_gemini_3_on() {
        assert!(combines_search_and_functions("gemini-3.5-flash"));
        assert!(combines_search_and_functions("gemini-3-pro-preview"));
        assert!(!combines_search_and_functions("gemini-2.5-pro"));
        assert!(!combines_search_and_functions("my-local-model"));
    }

    #[test]
    fn the_denylist_and_strict_mode_keep_the_search_off() {
        let deny = ToolApprovalConfig { denylist: Some(vec!["web_search".into()]), ..Default::default() };
        assert!(refused(Some(&deny), None, &[]));
        assert!(refused(None, Some("strict"), &[]));
        assert!(!refused(None, Some("strict"), &["web_search".into()]));
        let allow = ToolApprovalConfig { allowlist: Some(vec!["web_search".into()]), ..Default::default() };
        assert!(!refused(Some(&allow), Some("strict"), &[]));
        assert!(!refused(None, None, &[]));
    }
}
