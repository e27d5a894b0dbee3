//! The guard of a TCP listener: every request's token (`Authorization:
//! Bearer TOKEN`, or the WebSocket subprotocol `forge-token.TOKEN` a
//! browser can send, echoed back as the handshake requires) and `Origin`
//! checked before jsonrpsee's service sees it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{AUTHORIZATION, ORIGIN, SEC_WEBSOCKET_PROTOCOL};
use http::{HeaderMap, HeaderValue, StatusCode};
use jsonrpsee::server::HttpBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The subprotocol that carries the token for browsers.
const TOKEN_PROTOCOL: &str = "forge-token.";

/// The token and the origins a listener admits.
pub(crate) struct Guard {
    token: String,
    origins: Vec<String>,
}

impl Guard {
    pub(crate) fn new(token: String, origins: Vec<String>) -> Guard {
        Guard { token, origins }
    }
}

/// Equal without saying how much matched (no early exit on a byte).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Guard {
    /// The request's token and origin, checked: the subprotocol to echo
    /// when the token came as one, or the refusal.
    fn check(&self, headers: &HeaderMap) -> Result<Option<HeaderValue>, (StatusCode, &'static str)> {
        if let Some(origin) = headers.get(ORIGIN)
            && !self.origins.iter().any(|o| o.as_bytes() == origin.as_bytes())
        {
            return Err((StatusCode::FORBIDDEN, "this origin is not in [daemon] allowed_origins\n"));
        }
        // A bearer decides; another scheme (a proxy's Basic) leaves the
        // subprotocol to.
        let bearer = headers.get_all(AUTHORIZATION).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
        if let Some(given) = bearer {
            return if same(given.as_bytes(), self.token.as_bytes()) {
                Ok(None)
            } else {
                Err((StatusCode::UNAUTHORIZED, "wrong token\n"))
            };
        }
        let offered = headers.get_all(SEC_WEBSOCKET_PROTOCOL).iter().filter_map(|v| v.to_str().ok());
        for p in offered.flat_map(|v| v.split(',')).map(str::trim) {
            if let Some(given) = p.strip_prefix(TOKEN_PROTOCOL) {
                if !same(given.as_bytes(), self.token.as_bytes()) {
                    return Err((StatusCode::UNAUTHORIZED, "wrong token\n"));
                }
                return Ok(HeaderValue::from_str(p).ok());
            }
        }
        Err((
            StatusCode::UNAUTHORIZED,
            "this listener requires the token: `Authorization: Bearer TOKEN`, or the WebSocket subprotocol forge-token.TOKEN\n",
        ))
    }
}

/// Says a refusal in the log, at most once a second (a flood of bad
/// requests must not flood the log), with how many came since.
fn refused_log(status: StatusCode, why: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_SECOND: AtomicU64 = AtomicU64::new(0);
    static SINCE: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let n = SINCE.fetch_add(1, Ordering::Relaxed) + 1;
    if LAST_SECOND.swap(now, Ordering::Relaxed) != now {
        SINCE.store(0, Ordering::Relaxed);
        tracing::warn!(%status, why = why.trim(), refused = n, "refused requests on a TCP listener");
    }
}

/// jsonrpsee's service behind the [`Guard`].
#[derive(Clone)]
pub(crate) struct Guarded<S> {
    pub inner: S,
    pub guard: Arc<Guard>,
}

impl<S, B> tower::Service<http::Request<B>> for Guarded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<HttpBody>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<HttpBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        match self.guard.check(req.headers()) {
            Err((status, why)) => {
                refused_log(status, why);
                let refused = http::Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(HttpBody::from(why));
                Box::pin(async move { refused.map_err(Into::into) })
            }
            Ok(protocol) => {
                let answer = self.inner.call(req);
                Box::pin(async move {
                    let mut r = answer.await?;
                    if let Some(p) = protocol {
                        r.headers_mut().insert(SEC_WEBSOCKET_PROTOCOL, p);
                    }
                    Ok(r)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard { token: "0123456789abcdef0123".into(), origins: vec!["https://app.example".into()] }
    }

    fn headers(pairs: &[(http::header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap_or_else(|e| panic!("{e}")));
        }
        h
    }

    #[test]
    fn the_token_comes_as_a_bearer_or_a_subprotocol_and_origins_are_checked() {
        let g = guard();
        assert!(g.check(&headers(&[])).is_err(), "no token");
        assert!(g.check(&headers(&[(AUTHORIZATION, "Bearer 0123456789abcdef0123")])).is_ok_and(|p| p.is_none()));
        assert!(g.check(&headers(&[(AUTHORIZATION, "Bearer 0123456789abcdef0124")])).is_err());
        assert!(g.check(&headers(&[(AUTHORIZATION, "bearer 0123456789abcdef0123")])).is_ok());
        let basic = headers(&[
            (AUTHORIZATION, "Basic dXNlcjpwdw=="),
            (SEC_WEBSOCKET_PROTOCOL, "forge-token.0123456789abcdef0123"),
        ]);
        assert!(g.check(&basic).is_ok_and(|p| p.is_some()), "a proxy's Basic leaves the subprotocol to decide");
        let proto = g.check(&headers(&[(SEC_WEBSOCKET_PROTOCOL, "jsonrpc, forge-token.0123456789abcdef0123")]));
        assert_eq!(
            proto.ok().flatten().as_ref().and_then(|v| v.to_str().ok()),
            Some("forge-token.0123456789abcdef0123")
        );
        let page = headers(&[(ORIGIN, "https://evil.example"), (AUTHORIZATION, "Bearer 0123456789abcdef0123")]);
        assert_eq!(g.check(&page).err().map(|e| e.0), Some(StatusCode::FORBIDDEN));
        let app = headers(&[(ORIGIN, "https://app.example"), (AUTHORIZATION, "Bearer 0123456789abcdef0123")]);
        assert!(g.check(&app).is_ok());
    }
}
