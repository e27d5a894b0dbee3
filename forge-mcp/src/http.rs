//! The HTTP client streamable-HTTP servers share (below the hub and the
//! servers, which both take it).

use std::sync::Arc;

/// The HTTP client of streamable-HTTP servers, built when the first one
/// connects: a daemon whose servers all run on stdio never builds it (its
/// TLS set-up is code and memory an idle daemon does without).
#[derive(Clone)]
pub struct LazyHttp {
    client: Arc<std::sync::OnceLock<reqwest::Client>>,
    make: fn() -> reqwest::Client,
}

impl LazyHttp {
    pub fn new(make: fn() -> reqwest::Client) -> Self {
        LazyHttp { client: Arc::default(), make }
    }

    pub(crate) fn get(&self) -> reqwest::Client {
        self.client.get_or_init(self.make).clone()
    }
}
