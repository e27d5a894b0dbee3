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

/// `web.pair`: a one-time code that pairs a browser with the daemon
/// (single use, valid 5 minutes), and where the page is served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebPairing {
    pub code: String,
    /// When the code stops working (ms since the epoch).
    pub expires_ms: u64,
    /// The TCP listeners' addresses (`HOST:PORT`), the page's URL being
    /// `http://ADDRESS/pair?code=CODE` on any of them.
    pub listeners: Vec<String>,
}

/// A paired browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebDevice {
    pub id: String,
    /// What the browser said it is (its `User-Agent`).
    pub name: String,
    pub first_seen_ms: u64,
    pub last_seen_ms: u64,
    /// The address it last came from.
    pub address: String,
}
