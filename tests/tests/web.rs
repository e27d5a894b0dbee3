//! The web client: `forgectl web` prints a pairing link (and a QR code);
//! the link, opened once, gives the browser a device cookie that stands
//! for the listener's token on the page's own origin; `forgectl web
//! revoke` signs it out. The page itself is served with headers that keep
//! it from being framed or from loading anything from elsewhere.

use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "test-token-0123456789abcdef";

/// One HTTP request (head lines after the request line, then a body) on
/// a fresh connection, with the `Host` a browser would send: the response.
async fn request(port: u16, line: &str, headers: &str, body: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let req = format!(
        "{line}\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"session.list"}"#;

async fn started() -> (MockServer, Forge, u16) {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let port = forge.listen_with_token(TOKEN, "");
    forge.start().await;
    (mock, forge, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_link_works_once_and_its_cookie_stands_for_the_token_until_revoked() {
    let (_mock, forge, port) = started().await;
    let printed = forge.ok(&["web"]).await;
    let url = printed
        .stdout
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("a URL: {}", printed.stdout))
        .to_string();
    assert!(url.starts_with(&format!("http://127.0.0.1:{port}/pair?code=")), "{url}");
    assert!(printed.stdout.contains('▀') || printed.stdout.contains('▄'), "a QR code is drawn: {}", printed.stdout);
    assert!(!printed.stdout.contains(TOKEN) && !printed.stderr.contains(TOKEN), "the token is never printed");
    let json = forge.ok(&["--json", "web"]).await.json_lines();
    let other_url = json[0]["url"].as_str().unwrap_or_default().to_string();
    assert!(other_url.contains("/pair?code=") && other_url != url, "{}", json[0]);

    // The page is served to anyone, inert and unframeable; its data is not.
    let page = request(port, "GET / HTTP/1.1", "", "").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let lower = page.to_ascii_lowercase();
    assert!(lower.contains("content-security-policy: default-src 'none'") && lower.contains("frame-ancestors 'none'"));
    assert!(lower.contains("cache-control: no-store") && !lower.contains("access-control-allow-origin"));
    let origin = format!("Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\n");
    let without = request(port, "POST / HTTP/1.1", &origin, LIST).await;
    assert!(without.starts_with("HTTP/1.1 401"), "no cookie, no data: {without}");

    // Pairing: the code once, a cookie back, and on to the page.
    let path = url.trim_start_matches(&format!("http://127.0.0.1:{port}"));
    let paired = request(port, &format!("GET {path} HTTP/1.1"), "User-Agent: TestBrowser/1\r\n", "").await;
    assert!(paired.starts_with("HTTP/1.1 303"), "{paired}");
    let cookie_line = paired
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("a cookie: {paired}"));
    assert!(cookie_line.contains("HttpOnly") && cookie_line.contains("SameSite=Strict"), "{cookie_line}");
    let cookie = cookie_line.split_once(':').map(|(_, v)| v).unwrap_or("").split(';').next().unwrap_or("").trim();
    let again = request(port, &format!("GET {path} HTTP/1.1"), "", "").await;
    assert!(again.starts_with("HTTP/1.1 403") && again.contains("forgectl web"), "single use: {again}");

    // The cookie on the page's own origin reads sessions; elsewhere not.
    let with = format!("{origin}Cookie: {cookie}\r\n");
    let listed = request(port, "POST / HTTP/1.1", &with, LIST).await;
    assert!(listed.starts_with("HTTP/1.1 200") && listed.contains("\"result\""), "{listed}");
    let evil = format!("Origin: http://evil.example\r\nContent-Type: application/json\r\nCookie: {cookie}\r\n");
    assert!(request(port, "POST / HTTP/1.1", &evil, LIST).await.starts_with("HTTP/1.1 403"));
    // A browser cannot pair others.
    let pair = r#"{"jsonrpc":"2.0","id":1,"method":"web.pair"}"#;
    let refused = request(port, "POST / HTTP/1.1", &with, pair).await;
    assert!(refused.contains("cannot pair others"), "{refused}");

    let devices = forge.ok(&["--json", "web", "devices"]).await.json_lines();
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert_eq!(devices[0]["name"], "TestBrowser/1");
    let stored = std::fs::read_to_string(forge.data_dir().join("web/devices.json")).unwrap_or_default();
    assert!(!stored.contains(cookie.trim_start_matches("forge_device=")), "only a digest is kept");
    forge.ok(&["web", "revoke", "--all"]).await;
    let after = request(port, "POST / HTTP/1.1", &with, LIST).await;
    assert!(after.starts_with("HTTP/1.1 401"), "signed out: {after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgectl_web_starts_a_loopback_listener_that_comes_back_with_the_daemon() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let json = forge.ok(&["--json", "web"]).await.json_lines();
    let url = json[0]["url"].as_str().unwrap_or_default().to_string();
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a loopback URL: {url}"));
    let path = url.trim_start_matches(&format!("http://127.0.0.1:{port}"));
    let paired = request(port, &format!("GET {path} HTTP/1.1"), "", "").await;
    let cookie = paired
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: ").or_else(|| l.strip_prefix("Set-Cookie: ")))
        .and_then(|v| v.split(';').next())
        .unwrap_or_else(|| panic!("paired: {paired}"))
        .to_string();
    // The token was made for it, private to the user.
    let token = forge.data_dir().join("web/listener.token");
    let mode = std::fs::metadata(&token).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.ok(), Some(0o600));
    // Again: the same listener, no second one.
    let again = forge.ok(&["--json", "web"]).await.json_lines();
    assert!(again[0]["url"].as_str().is_some_and(|u| u.starts_with(&format!("http://127.0.0.1:{port}/"))));
    // The daemon restarts: the same address, the browser still paired.
    forge.restart().await;
    let with = format!("Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\nCookie: {cookie}\r\n");
    let listed = request(port, "POST / HTTP/1.1", &with, LIST).await;
    assert!(listed.starts_with("HTTP/1.1 200") && listed.contains("\"result\""), "{listed}");
}
