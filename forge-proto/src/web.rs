//! The web, searched by the provider's own search (`[tools.web_search]`):
//! the sources an answer cites.

use serde::{Deserialize, Serialize};

/// A source an answer cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Citation {
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The words of the source the answer relies on, when the provider
    /// says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited_text: Option<String>,
}
