//! `[daemon] listen`: the token-guarded TCP listener. Without the token,
//! with a wrong one, or from an origin not allowed, nothing runs; with it
//! (as a bearer, or as the WebSocket subprotocol a browser can send) the
//! protocol is served. A listener configured without a token, or with a
//! token file others can read, never starts.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "test-token-0123456789abcdef";

use forge_tests::harness::free_port;

/// One HTTP request on a fresh TCP connection; the head and body back.
async fn request(port: u16, head: &str, body: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let req = format!("{head}\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

const STATUS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"#;

fn post(extra: &str) -> String {
    format!("POST / HTTP/1.1\r\nContent-Type: application/json{extra}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_serves_only_with_the_token_and_from_allowed_origins() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let port = forge.listen_with_token(TOKEN, "allowed_origins = [\"https://app.example\"]\n");
    forge.start().await;

    let none = request(port, &post(""), STATUS).await;
    assert!(none.starts_with("HTTP/1.1 401"), "no token: {none}");
    assert!(!none.contains("\"pid\""), "{none}");
    let wrong = request(port, &post("\r\nAuthorization: Bearer test-token-0123456789abcdeX"), STATUS).await;
    assert!(wrong.starts_with("HTTP/1.1 401"), "wrong token: {wrong}");
    let right = request(port, &post(&format!("\r\nAuthorization: Bearer {TOKEN}")), STATUS).await;
    assert!(right.starts_with("HTTP/1.1 200") && right.contains("\"pid\""), "right token: {right}");
    // A web page elsewhere holding the token still cannot drive it.
    let page = format!("\r\nAuthorization: Bearer {TOKEN}\r\nOrigin: https://evil.example");
    let evil = request(port, &post(&page), STATUS).await;
    assert!(evil.starts_with("HTTP/1.1 403"), "foreign origin: {evil}");
    let app = format!("\r\nAuthorization: Bearer {TOKEN}\r\nOrigin: https://app.example");
    assert!(request(port, &post(&app), STATUS).await.starts_with("HTTP/1.1 200"));

    // A browser's WebSocket: the token as a subprotocol, echoed back.
    let upgrade = |protocol: &str| {
        format!(
            "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: https://app.example\r\nSec-WebSocket-Protocol: {protocol}"
        )
    };
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap_or_else(|e| panic!("{e}"));
    let head = upgrade(&format!("forge-token.{TOKEN}"));
    s.write_all(format!("{head}\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap_or_else(|e| panic!("{e}"));
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("no handshake answer"))
        .unwrap_or_else(|e| panic!("{e}"));
    let answer = String::from_utf8_lossy(&buf[..n]).to_lowercase();
    assert!(answer.starts_with("http/1.1 101"), "{answer}");
    assert!(answer.contains(&format!("sec-websocket-protocol: forge-token.{}", TOKEN.to_lowercase())), "{answer}");
    let refused = request(port, &upgrade("forge-token.nope-nope-nope-nope"), "").await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    forge.ctl(&["shutdown"]).await;
}

/// forged's exit and stderr with `config` (it should not start).
async fn refused_start(forge: &Forge) -> (Option<i32>, String) {
    let child = forge.spawn_daemon();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("forged started although it should have refused"))
        .unwrap_or_else(|e| panic!("{e}"));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_without_a_private_token_never_starts() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let forge = Forge::new(&mock);
    let port = free_port();
    forge.write_config(&format!("[daemon]\nlisten = [\"ws://0.0.0.0:{port}\"]\n"));
    let (code, err) = refused_start(&forge).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("needs token_file"), "{err}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "nothing listens");

    let token_file = forge.data_dir().join("open.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap_or_else(|e| panic!("{e}"));
    forge.write_config(&format!(
        "[daemon]\nlisten = [\"ws://127.0.0.1:{port}\"]\ntoken_file = \"{}\"\n",
        token_file.display()
    ));
    let (code, err) = refused_start(&forge).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("chmod 600"), "{err}");

    // A missing token file is made, private, with a random token.
    let made = forge.data_dir().join("made.token");
    forge.write_config(&format!(
        "[daemon]\nlisten = [\"ws://127.0.0.1:{port}\"]\ntoken_file = \"{}\"\n",
        made.display()
    ));
    let mut forge = forge;
    forge.start().await;
    let mode = std::fs::metadata(&made).map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&made).unwrap_or_default();
    assert!(token.trim().len() >= 32, "a random token");
    let ok = request(port, &post(&format!("\r\nAuthorization: Bearer {}", token.trim())), STATUS).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    forge.ctl(&["shutdown"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_without_the_token_hold_few_slots_briefly_and_their_guesses_wait() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    let port = forge.listen_with_token(TOKEN, "");
    forge.start().await;
    // 64 half-open connections from one address: a few are held, the rest
    // closed at once, and the held ones closed within seconds.
    let mut idle = Vec::new();
    for _ in 0..64 {
        idle.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap_or_else(|e| panic!("{e}")));
    }
    let started = std::time::Instant::now();
    let mut closed = 0;
    for s in &mut idle {
        let mut b = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_secs(15), s.read(&mut b)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 64, "every idle connection was closed");
    assert!(started.elapsed() < Duration::from_secs(12), "within seconds, not half a minute: {:?}", started.elapsed());
    drop(idle);
    // A token holder is served right after.
    let right = request(port, &post(&format!("\r\nAuthorization: Bearer {TOKEN}")), STATUS).await;
    assert!(right.starts_with("HTTP/1.1 200"), "{right}");
    // Guesses: a few free, then each waits longer (429), the right token
    // included, until the wait is over.
    let mut statuses = Vec::new();
    for i in 0..6 {
        let guess = request(port, &post(&format!("\r\nAuthorization: Bearer guess-{i:020}")), STATUS).await;
        statuses.push(guess.get(9..12).unwrap_or("").to_string());
    }
    assert_eq!(&statuses[..3], ["401", "401", "401"], "{statuses:?}");
    assert!(statuses[3..].iter().any(|s| s == "429"), "later guesses wait: {statuses:?}");
    let held = request(port, &post(&format!("\r\nAuthorization: Bearer {TOKEN}")), STATUS).await;
    assert!(held.starts_with("HTTP/1.1 429"), "even the right token waits its turn: {held}");
}
