//! The guard of a TCP listener: every request's token (`Authorization:
//! Bearer TOKEN`, or the WebSocket subprotocol `forge-token.TOKEN` a
//! browser can send, echoed back as the handshake requires) and `Origin`
//! checked before jsonrpsee's service sees it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::header::{AUTHORIZATION, ORIGIN, SEC_WEBSOCKET_PROTOCOL};
use http::{HeaderMap, HeaderValue, StatusCode};
use jsonrpsee::server::HttpBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The subprotocol that carries the token for browsers.
const TOKEN_PROTOCOL: &str = "forge-token.";

/// The token and the origins a listener admits, and the addresses whose
/// wrong tokens must wait before another guess.
pub(crate) struct Guard {
    token: String,
    origins: Vec<String>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    /// The browsers paired with the web client, whose cookie stands for
    /// the token on the listener's own origin.
    pub devices: Arc<crate::web::Devices>,
}

/// The longest wait after wrong tokens, and how many addresses are
/// remembered (the oldest are forgotten past it).
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const REMEMBERED: usize = 4096;
/// Wrong tokens an address may send before it has to wait.
const FREE_GUESSES: u32 = 3;

impl Guard {
    pub(crate) fn new(token: String, origins: Vec<String>, devices: Arc<crate::web::Devices>) -> Guard {
        Guard { token, origins, failures: Mutex::new(HashMap::new()), devices }
    }

    /// How long `ip` must still wait before its next token is looked at.
    fn waiting(&self, ip: IpAddr) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let (_, until) = failures.get(&ip)?;
        until.checked_duration_since(Instant::now())
    }

    /// A wrong token from `ip`: past the first few (a typo), its next
    /// guess waits 0.1 s, doubling with each wrong one up to 30 s; a right
    /// one forgets them.
    fn note(&self, ip: IpAddr, right: bool) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if right {
            failures.remove(&ip);
            return;
        }
        if failures.len() >= REMEMBERED {
            let now = Instant::now();
            failures.retain(|_, (_, until)| *until > now);
        }
        let n = failures.get(&ip).map_or(0, |(n, _)| *n) + 1;
        let wait = match n.checked_sub(FREE_GUESSES) {
            None | Some(0) => Duration::ZERO,
            Some(k) => Duration::from_millis(100).saturating_mul(1 << (k - 1).min(10)).min(MAX_BACKOFF),
        };
        failures.insert(ip, (n, Instant::now() + wait));
    }
}

/// Equal without saying how much matched (no early exit on a byte).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Guard {
    /// The request's token (or a paired browser's cookie) and origin,
    /// checked: who it is, or the refusal.
    fn check(&self, headers: &HeaderMap, peer: IpAddr) -> Result<Admitted, (StatusCode, &'static str)> {
        if let Some(origin) = headers.get(ORIGIN)
            && !self.origins.iter().any(|o| o.as_bytes() == origin.as_bytes())
            && !crate::web::same_origin(headers)
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
                Ok(Admitted::Token(None))
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
                return Ok(Admitted::Token(HeaderValue::from_str(p).ok()));
            }
        }
        if let Some(device) = crate::web::device(&self.devices, headers, peer) {
            return Ok(Admitted::Device(device.id));
        }
        Err((
            StatusCode::UNAUTHORIZED,
            "this listener requires the token: `Authorization: Bearer TOKEN`, or the WebSocket subprotocol forge-token.TOKEN\n",
        ))
    }
}

/// Who a request was admitted as.
enum Admitted {
    /// The token's holder; the subprotocol to echo when it came as one.
    Token(Option<HeaderValue>),
    /// A browser paired with the web client (its device id).
    Device(String),
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

/// Why a guess waits, in words.
fn throttled(wait: Duration) -> &'static str {
    if wait > Duration::from_secs(5) {
        "too many wrong tokens from this address; wait before trying again\n"
    } else {
        "wrong tokens from this address: wait a moment before trying again\n"
    }
}

/// jsonrpsee's service behind the [`Guard`], for one connection from
/// `peer`, holding its address's pending slot until a request is admitted.
#[derive(Clone)]
pub(crate) struct Guarded<S> {
    pub inner: S,
    pub guard: Arc<Guard>,
    pub peer: IpAddr,
    pub pending: Arc<Mutex<Option<Pending>>>,
    /// The connection, marked as a paired browser's when one is admitted
    /// (so that revoking the device closes it).
    pub conn: Arc<crate::conn::ConnState>,
}

/// One of an address's TCP connections that no request has been admitted
/// on yet (see `tcp.rs`): counted while it lives.
pub(crate) struct Pending {
    pub counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    pub ip: IpAddr,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
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
        // The web client's page and pairing link need no token.
        if let Some(page) = crate::web::serve(&self.guard.devices, req.method(), req.uri(), req.headers(), self.peer) {
            return Box::pin(async move { Ok(page) });
        }
        let checked = match self.guard.waiting(self.peer) {
            Some(wait) => Err((StatusCode::TOO_MANY_REQUESTS, throttled(wait))),
            None => {
                let checked = self.guard.check(req.headers(), self.peer);
                let wrong = matches!(&checked, Err((StatusCode::UNAUTHORIZED, _)));
                if wrong || checked.is_ok() {
                    self.guard.note(self.peer, checked.is_ok());
                }
                checked
            }
        };
        if checked.is_ok() {
            // Admitted: no longer one of its address's pending connections.
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        match checked {
            Err((status, why)) => {
                refused_log(status, why);
                let refused = http::Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(HttpBody::from(why));
                Box::pin(async move { refused.map_err(Into::into) })
            }
            Ok(admitted) => {
                let protocol = match admitted {
                    Admitted::Token(protocol) => protocol,
                    Admitted::Device(id) => {
                        self.conn.mark_device(&id);
                        self.guard.devices.watch(&id, self.conn.close.clone());
                        None
                    }
                };
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
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Arc::new(crate::web::Devices::open(home.path(), "0123456789abcdef0123"));
        Guard::new("0123456789abcdef0123".into(), vec!["https://app.example".into()], devices)
    }

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    /// The token's protocol to echo, for a request admitted by the token.
    fn token_of(checked: Result<Admitted, (StatusCode, &'static str)>) -> Result<Option<HeaderValue>, StatusCode> {
        match checked {
            Ok(Admitted::Token(p)) => Ok(p),
            Ok(Admitted::Device(_)) => Err(StatusCode::OK),
            Err((status, _)) => Err(status),
        }
    }

    #[test]
    fn wrong_tokens_make_their_address_wait_longer_each_time_and_a_right_one_forgets() {
        let g = guard();
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        assert_eq!(g.waiting(a), None);
        for _ in 0..FREE_GUESSES {
            g.note(a, false);
        }
        assert_eq!(g.waiting(a), None, "a typo or two costs nothing");
        g.note(a, false);
        let first = g.waiting(a).unwrap_or_default();
        g.note(a, false);
        g.note(a, false);
        let third = g.waiting(a).unwrap_or_default();
        assert!(first <= Duration::from_millis(100) && third > Duration::from_millis(300), "{first:?} {third:?}");
        assert_eq!(g.waiting(b), None, "another address is not held back");
        for _ in 0..40 {
            g.note(a, false);
        }
        assert!(g.waiting(a).is_some_and(|w| w <= MAX_BACKOFF));
        g.note(a, true);
        assert_eq!(g.waiting(a), None);
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
        assert!(g.check(&headers(&[]), HERE).is_err(), "no token");
        assert!(
            token_of(g.check(&headers(&[(AUTHORIZATION, "Bearer 0123456789abcdef0123")]), HERE))
                .is_ok_and(|p| p.is_none())
        );
        assert!(token_of(g.check(&headers(&[(AUTHORIZATION, "Bearer 0123456789abcdef0124")]), HERE)).is_err());
        assert!(token_of(g.check(&headers(&[(AUTHORIZATION, "bearer 0123456789abcdef0123")]), HERE)).is_ok());
        let basic = headers(&[
            (AUTHORIZATION, "Basic dXNlcjpwdw=="),
            (SEC_WEBSOCKET_PROTOCOL, "forge-token.0123456789abcdef0123"),
        ]);
        assert!(
            token_of(g.check(&basic, HERE)).is_ok_and(|p| p.is_some()),
            "a proxy's Basic leaves the subprotocol to decide"
        );
        let proto =
            token_of(g.check(&headers(&[(SEC_WEBSOCKET_PROTOCOL, "jsonrpc, forge-token.0123456789abcdef0123")]), HERE));
        assert_eq!(
            proto.ok().flatten().as_ref().and_then(|v| v.to_str().ok()),
            Some("forge-token.0123456789abcdef0123")
        );
        let page = headers(&[(ORIGIN, "https://evil.example"), (AUTHORIZATION, "Bearer 0123456789abcdef0123")]);
        assert_eq!(token_of(g.check(&page, HERE)).err(), Some(StatusCode::FORBIDDEN));
        let app = headers(&[(ORIGIN, "https://app.example"), (AUTHORIZATION, "Bearer 0123456789abcdef0123")]);
        assert!(token_of(g.check(&app, HERE)).is_ok());
    }

    #[test]
    fn a_paired_browsers_cookie_stands_for_the_token_on_the_pages_own_origin_only() {
        let g = guard();
        let code = g.devices.mint().unwrap_or_else(|e| panic!("{e}"));
        let (device, credential) = g.devices.exchange(&code, HERE, "test").unwrap_or_else(|e| panic!("{e:?}"));
        let cookie = format!("theme=dark; forge_device={credential}");
        let own = headers(&[
            (ORIGIN, "http://127.0.0.1:7000"),
            (http::header::HOST, "127.0.0.1:7000"),
            (http::header::COOKIE, &cookie),
        ]);
        assert!(matches!(g.check(&own, HERE), Ok(Admitted::Device(id)) if id == device.id));
        // Another site's page, even with the cookie (a browser would not
        // send it there; a script could not read it).
        let other = headers(&[
            (ORIGIN, "http://evil.example"),
            (http::header::HOST, "127.0.0.1:7000"),
            (http::header::COOKIE, &cookie),
        ]);
        assert_eq!(token_of(g.check(&other, HERE)), Err(StatusCode::FORBIDDEN));
        // Without an origin (not a browser): the token is needed.
        let bare = headers(&[(http::header::HOST, "127.0.0.1:7000"), (http::header::COOKIE, &cookie)]);
        assert_eq!(token_of(g.check(&bare, HERE)), Err(StatusCode::UNAUTHORIZED));
        // The own origin without a cookie: refused as any tokenless request.
        let none = headers(&[(ORIGIN, "http://127.0.0.1:7000"), (http::header::HOST, "127.0.0.1:7000")]);
        assert_eq!(token_of(g.check(&none, HERE)), Err(StatusCode::UNAUTHORIZED));
        g.devices.revoke(None);
        assert_eq!(token_of(g.check(&own, HERE)), Err(StatusCode::UNAUTHORIZED), "revoked");
    }
}
