//! Images in messages: `forgectl send --image FILE` puts the picture in
//! each provider's own request format, keeps it once in the store (it is
//! still sent after a restart), shows a placeholder in history, and is
//! refused, saying why, by a model without vision or past a provider's
//! limits.

use base64::Engine as _;
use forge_tests::harness::Forge;
use forge_tests::mock::{MockOptions, MockServer};
use serde_json::Value;

/// A whole 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    path.display().to_string()
}

fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(PNG).unwrap_or_else(|e| panic!("{e}"))
}

/// The last request's last user message, as its wire format wrote it.
fn last_user(mock: &MockServer) -> Value {
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    let list = body.get("messages").or_else(|| body.get("contents")).cloned().unwrap_or(Value::Null);
    list.as_array().and_then(|l| l.iter().rev().find(|m| m["role"] == "user").cloned()).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_goes_to_each_provider_in_its_own_format_and_survives_a_restart() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shot = write(dir.path(), "shot.png", &png());

    let out = forge.ok(&["send", "--name", "pic", "--image", &shot, "what is wrong here"]).await;
    assert!(out.stdout.contains("what is wrong here"), "{}", out.stdout);
    let user = last_user(&mock);
    assert_eq!(user["content"][0]["type"], "image", "{user}");
    assert_eq!(
        user["content"][0]["source"],
        serde_json::json!({"type": "base64", "media_type": "image/png", "data": PNG})
    );
    assert_eq!(user["content"][1]["text"], "what is wrong here");

    let history = forge.ok(&["history", "pic"]).await.stdout;
    assert!(history.contains("[image shot.png, 1×1 PNG, 1 KiB]\nwhat is wrong here"), "{history}");

    // Kept once in the store: sent again after a restart.
    forge.restart().await;
    forge.ok(&["send", "-s", "pic", "and now?"]).await;
    let body: Value = serde_json::from_str(&mock.last_turn_request()).unwrap_or(Value::Null);
    assert_eq!(body["messages"][0]["content"][0]["source"]["data"], PNG, "{body}");

    for (provider, part) in [
        (
            "openai",
            serde_json::json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}),
        ),
        ("gemini", serde_json::json!({"inlineData": {"mimeType": "image/png", "data": PNG}})),
    ] {
        forge.ok(&["send", "--provider", provider, "--image", &shot, "look"]).await;
        let user = last_user(&mock);
        let parts = user.get("content").or_else(|| user.get("parts")).cloned().unwrap_or(Value::Null);
        assert_eq!(parts[0], part, "{provider}: {user}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_a_model_cannot_take_are_refused_saying_why() {
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    forge.start().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shot = write(dir.path(), "shot.png", &png());
    let before = mock.requests().len();

    // A model Forge knows nothing of reads no images.
    let r = forge.ctl(&["send", "--provider", "openai", "--model", "my-local-model", "--image", &shot, "x"]).await;
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("my-local-model does not read images"), "{}", r.stderr);

    // Gemini reads no GIF.
    let gif = [b"GIF89a".as_slice(), &[2, 0, 3, 0, 0, 0, 0], &[0x3b]].concat();
    let gif = write(dir.path(), "a.gif", &gif);
    let r = forge.ctl(&["send", "--provider", "gemini", "--image", &gif, "x"]).await;
    assert!(r.stderr.contains("a GIF, which Gemini does not read"), "{}", r.stderr);

    // Not an image at all.
    let text = write(dir.path(), "notes.png", b"just some text");
    let r = forge.ctl(&["send", "--image", &text, "x"]).await;
    assert!(r.stderr.contains("image notes.png is not an image Forge can read"), "{}", r.stderr);
    let missing = dir.path().join("nope.png").display().to_string();
    let r = forge.ctl(&["send", "--image", &missing, "x"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);

    assert_eq!(mock.requests().len(), before, "nothing reached a model");
}
