//! The web client, served by the TCP listener: the page and its script
//! and style (embedded in the binary), the pairing URL that turns a
//! one-time code into a device cookie, and the check that lets that
//! cookie stand for the listener's token on the page's own origin. The
//! page speaks the same JSON-RPC as every client (see `page/app.js`).

pub(crate) mod pairing;
pub(crate) mod render;

use std::net::IpAddr;

use http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE, USER_AGENT};
use http::{HeaderMap, Method, Response, StatusCode};
use jsonrpsee::server::HttpBody;

pub(crate) use pairing::Devices;

/// The TCP listeners that serve the web client: where, and who is paired.
pub(crate) struct Listening {
    pub devices: std::sync::Arc<Devices>,
    /// Each listener's address as bound (`HOST:PORT`).
    pub addresses: std::sync::Mutex<Vec<String>>,
}

/// Makes sure a listener runs for `forgectl web` (on the address given,
/// or any): set up by the listener when the daemon serves.
pub(crate) type Starter = Box<
    dyn Fn(Option<String>) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<std::sync::Arc<Listening>>> + Send>>
        + Send
        + Sync,
>;

/// The cookie that carries a device's credential.
const COOKIE_NAME: &str = "forge_device";
/// How long a browser keeps it (it is revoked sooner with `forgectl web revoke`).
const COOKIE_DAYS: u64 = 30;

/// No inline script, nothing from elsewhere, never in a frame.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The page's files: path, content type, bytes.
const FILES: [(&str, &str, &str); 10] = [
    ("/", "text/html; charset=utf-8", include_str!("page/index.html")),
    ("/app.js", "text/javascript; charset=utf-8", include_str!("page/app.js")),
    ("/rpc.js", "text/javascript; charset=utf-8", include_str!("page/rpc.js")),
    ("/session.js", "text/javascript; charset=utf-8", include_str!("page/session.js")),
    ("/tree.js", "text/javascript; charset=utf-8", include_str!("page/tree.js")),
    ("/git.js", "text/javascript; charset=utf-8", include_str!("page/git.js")),
    ("/transcript.js", "text/javascript; charset=utf-8", include_str!("page/transcript.js")),
    ("/compose.js", "text/javascript; charset=utf-8", include_str!("page/compose.js")),
    ("/files.js", "text/javascript; charset=utf-8", include_str!("page/files.js")),
    ("/app.css", "text/css; charset=utf-8", include_str!("page/app.css")),
];

fn response(status: StatusCode, kind: &str, body: impl Into<HttpBody>) -> http::Response<HttpBody> {
    let built = Response::builder()
        .status(status)
        .header(CONTENT_TYPE, kind)
        .header(CACHE_CONTROL, "no-store")
        .header("content-security-policy", CSP)
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .header("cross-origin-opener-policy", "same-origin")
        .body(body.into());
    built.unwrap_or_else(|_| Response::new(HttpBody::from("")))
}

/// A page's answer to a GET that is not a WebSocket upgrade, if it is
/// one of the page's paths; `None` leaves the request to the token check.
pub(crate) fn serve(
    devices: &Devices,
    method: &Method,
    uri: &http::Uri,
    headers: &HeaderMap,
    peer: IpAddr,
) -> Option<http::Response<HttpBody>> {
    if method != Method::GET || headers.contains_key(http::header::UPGRADE) {
        return None;
    }
    if uri.path() == "/pair" {
        return Some(pair(devices, uri, headers, peer));
    }
    if uri.path() == "/hl.css" {
        return Some(response(StatusCode::OK, "text/css; charset=utf-8", render::highlight_css()));
    }
    let (_, kind, body) = FILES.iter().find(|(path, _, _)| *path == uri.path())?;
    Some(response(StatusCode::OK, kind, *body))
}

/// `GET /pair?code=…`: the code exchanged for a device cookie, then on
/// to the sessions (no further click).
fn pair(devices: &Devices, uri: &http::Uri, headers: &HeaderMap, peer: IpAddr) -> http::Response<HttpBody> {
    // A browser that asks again (a repeated load, a prefetch) is paired
    // already: on to the sessions, the code left as it is.
    if credential(headers).is_some_and(|c| devices.admit(c, peer).is_some()) {
        let mut r = response(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "paired\n");
        r.headers_mut().insert(LOCATION, http::HeaderValue::from_static("/"));
        return r;
    }
    let code = uri.query().unwrap_or("").split('&').find_map(|kv| kv.strip_prefix("code=")).unwrap_or("");
    let agent = headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    match devices.exchange(code, peer, agent) {
        Ok((device, credential)) => {
            tracing::info!(device = %device.id, %peer, "a browser was paired");
            let secure = if forwarded_https(headers) { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE_NAME}={credential}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
                COOKIE_DAYS * 24 * 3600
            );
            let mut r = response(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "paired\n");
            r.headers_mut().insert(LOCATION, http::HeaderValue::from_static("/"));
            if let Ok(v) = http::HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(SET_COOKIE, v);
            }
            r
        }
        Err(pairing::Refused::TooMany) => response(
            StatusCode::TOO_MANY_REQUESTS,
            "text/plain; charset=utf-8",
            "too many pairing attempts from this address; wait a minute, then run `forgectl web` for a new link\n",
        ),
        Err(pairing::Refused::Invalid) => response(
            StatusCode::FORBIDDEN,
            "text/plain; charset=utf-8",
            "this pairing link was used already or has expired (links last 5 minutes, once): run `forgectl web` for a new one\n",
        ),
    }
}

/// Whether a TLS proxy in front says the browser came over HTTPS.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// The request comes from the listener's own page: its `Origin` is the
/// address it was sent to (`Host`).
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let (Some(origin), Some(host)) = (headers.get(ORIGIN), headers.get(HOST)) else { return false };
    let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else { return false };
    origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host)
}

/// The device a request's cookie names, on the page's own origin.
pub(crate) fn device(devices: &Devices, headers: &HeaderMap, peer: IpAddr) -> Option<pairing::Device> {
    if !same_origin(headers) {
        return None;
    }
    devices.admit(credential(headers)?, peer)
}

/// The device credential a request's cookie carries.
fn credential(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(devices: &Devices, path: &str, headers: &[(&str, &str)]) -> http::Response<HttpBody> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (http::HeaderName::from_bytes(k.as_bytes()), http::HeaderValue::from_str(v)) {
                map.insert(k, v);
            }
        }
        let uri: http::Uri = path.parse().unwrap_or_else(|e| panic!("{e}"));
        let peer = IpAddr::from([127, 0, 0, 1]);
        serve(devices, &Method::GET, &uri, &map, peer).unwrap_or_else(|| panic!("{path} is the page's"))
    }

    fn header(r: &http::Response<HttpBody>, name: http::header::HeaderName) -> &str {
        r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    #[test]
    fn the_device_cookie_is_http_only_strict_and_secure_behind_tls() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Devices::open(home.path(), "token-one-0123456789");
        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        let plain = get(&devices, &format!("/pair?code={code}"), &[]);
        assert_eq!(plain.status(), StatusCode::SEE_OTHER);
        let cookie = header(&plain, SET_COOKIE).to_string();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        assert!(!cookie.contains("Secure"), "plain HTTP on loopback: {cookie}");
        assert_eq!(header(&plain, CACHE_CONTROL), "no-store");

        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        let proxied = get(&devices, &format!("/pair?code={code}"), &[("x-forwarded-proto", "https")]);
        assert!(header(&proxied, SET_COOKIE).contains("; Secure"), "behind a TLS proxy");
    }

    #[test]
    fn a_paired_browser_loading_the_link_again_goes_on_and_leaves_the_code() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Devices::open(home.path(), "token-one-0123456789");
        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        let first = get(&devices, &format!("/pair?code={code}"), &[]);
        let cookie = header(&first, SET_COOKIE).split(';').next().unwrap_or("").to_string();
        let again = get(&devices, &format!("/pair?code={code}"), &[("cookie", &cookie)]);
        assert_eq!(again.status(), StatusCode::SEE_OTHER, "on to the sessions");
        assert!(header(&again, SET_COOKIE).is_empty(), "no second device");
        assert_eq!(devices.list().len(), 1);
        // Another browser, without the cookie, finds the code spent.
        let other = get(&devices, &format!("/pair?code={code}"), &[]);
        assert_eq!(other.status(), StatusCode::FORBIDDEN);
        // The page's files carry the policy that allows no inline script.
        let page = get(&devices, "/", &[]);
        assert!(
            header(&page, http::header::HeaderName::from_static("content-security-policy"))
                .contains("script-src 'self'")
        );
        let css = get(&devices, "/hl.css", &[]);
        assert_eq!(header(&css, CONTENT_TYPE), "text/css; charset=utf-8");
    }
}
