//! The web client in a real browser: Debian's headless Chromium, driven
//! through chromedriver. Pairing through the one-time link lands on the
//! sessions; a tool call's approval answered on the page lets `forgectl
//! send`, waiting in a terminal, run on and exit 0; hostile names render
//! inert; a phone-sized viewport does not scroll sideways; a revoked
//! browser is told it was signed out. Without Chromium or chromedriver
//! the test is counted as skipped, never passed.

use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use forge_tests::harness::{Forge, free_port, skipped};
use forge_tests::mock::{MockOptions, MockServer, tool_call};
use serde_json::json;

const TEST: &str = "web_browser::a_browser_paired_in_one_link_answers_an_approval_a_terminal_waits_for";

/// chromedriver on a free port, and a headless Chromium session of it
/// sized `w` × `h`.
async fn browser(w: u32, h: u32) -> Option<(tokio::process::Child, Client)> {
    let chromium =
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().find(|p| std::path::Path::new(p).exists())?;
    let port = free_port();
    let driver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut caps = serde_json::Map::new();
    let args = json!([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        // The TLS proxy's test certificate is its own.
        "--ignore-certificate-errors",
        format!("--window-size={w},{h}")
    ]);
    // A phone's viewport, whatever the smallest window headless allows.
    let phone = json!({"deviceMetrics": {"width": w, "height": h, "pixelRatio": 1.0}});
    caps.insert("goog:chromeOptions".into(), json!({"binary": chromium, "args": args, "mobileEmulation": phone}));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    for _ in 0..100 {
        if let Ok(c) = ClientBuilder::new(connector.clone())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            return Some((driver, c));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The daemon (against the mock, `prepare`d before it starts) and a
/// browser of `w` × `h`; `None` when `test` had to be counted as skipped.
async fn open(
    test: &str,
    w: u32,
    h: u32,
    prepare: impl FnOnce(&mut Forge),
) -> Option<(MockServer, Forge, tokio::process::Child, Client)> {
    if which("chromedriver").is_none() {
        skipped(test, "chromedriver is not installed (Debian: chromium chromium-driver)");
        return None;
    }
    let mock = MockServer::start(MockOptions::default()).await.unwrap_or_else(|e| panic!("mock: {e}"));
    let mut forge = Forge::new(&mock);
    prepare(&mut forge);
    forge.start().await;
    let Some((driver, c)) = browser(w, h).await else {
        skipped(test, "headless Chromium could not be started through chromedriver");
        return None;
    };
    Some((mock, forge, driver, c))
}

/// Pairs the browser through `forgectl web`'s link, then opens session
/// `id`.
async fn pair_and_open(c: &Client, forge: &Forge, id: &str) {
    let url = forge.ok(&["--json", "web"]).await.json_lines()[0]["url"].as_str().unwrap_or_default().to_string();
    c.goto(&url).await.unwrap_or_else(|e| panic!("{e}"));
    link_says(c, "live").await;
    open_session(c, &url, id).await;
    link_says(c, "live").await;
}

/// Waits until the page's `#link` says `text` (10 s).
async fn link_says(c: &Client, text: &str) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        if let Ok(e) = c.find(Locator::Id("link")).await {
            last = e.text().await.unwrap_or_default();
            if last.contains(text) {
                return last;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page never said \"{text}\"; it says \"{last}\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_paired_in_one_link_answers_an_approval_a_terminal_waits_for() {
    // Every command asks, so the terminal's `send` waits for an answer.
    let prompt = |f: &mut Forge| f.write_config("[tools.approval]\nmode = \"prompt\"\n");
    let Some((_mock, mut forge, _driver, c)) = open(TEST, 360, 740, prompt).await else { return };
    // A directory named to attack the page, shown as a session's folder.
    let parent = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let hostile = parent.path().join("<img src=x onerror=alert(1)><script>alert(2)");
    std::fs::create_dir_all(&hostile).unwrap_or_else(|e| panic!("{e}"));
    forge.new_session(&["--cwd", &hostile.display().to_string()]).await;
    // Every session works in a project of its own, never the test's cwd.
    let project = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let cwd = project.path().display().to_string();
    let id = forge.new_session(&["--name", "work", "--cwd", &cwd]).await;

    let url = forge.ok(&["--json", "web"]).await.json_lines()[0]["url"].as_str().unwrap_or_default().to_string();
    c.goto(&url).await.unwrap_or_else(|e| panic!("{e}"));
    link_says(&c, "live").await;
    let page = c.source().await.unwrap_or_default();
    assert!(page.contains("work"), "the sessions are listed");

    // A command's approval, asked of a terminal that waits for it.
    let call = tool_call("run_command", &json!({"command": "echo approved-on-the-page"}));
    let send = forge.ctl_cmd(&["send", "-s", &id, &format!("{call} go")]).stdout(Stdio::piped()).spawn();
    let send = send.unwrap_or_else(|e| panic!("forgectl send: {e}"));
    let mut approve = None;
    for _ in 0..100 {
        if let Ok(b) = c.find(Locator::XPath("//button[text()='Approve']")).await {
            approve = Some(b);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let approve = approve.unwrap_or_else(|| panic!("the inbox shows the approval with Approve"));
    assert!(c.find(Locator::XPath("//button[text()='Deny']")).await.is_ok());
    approve.click().await.unwrap_or_else(|e| panic!("{e}"));
    let done = tokio::time::timeout(Duration::from_secs(30), send.wait_with_output()).await;
    let out = done.unwrap_or_else(|_| panic!("send still waits")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));

    // One inbox for every session: two wait at once, both listed, each
    // answered from the list.
    let other = forge.new_session(&["--name", "other", "--cwd", &cwd]).await;
    let mut waiting = Vec::new();
    for s in [&id, &other] {
        let call = tool_call("run_command", &json!({"command": "echo two-at-once"}));
        let child = forge.ctl_cmd(&["send", "-s", s, &format!("{call} again")]).stdout(Stdio::null()).spawn();
        waiting.push(child.unwrap_or_else(|e| panic!("forgectl send: {e}")));
    }
    for _ in 0..100 {
        let n = c.execute("return document.querySelectorAll('#inbox > li').length", vec![]).await.ok();
        if n.as_ref().and_then(|v| v.as_u64()) == Some(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_text(&c, "other").await;
    let n = c.execute("return document.querySelectorAll('#inbox > li').length", vec![]).await.ok();
    assert_eq!(n.and_then(|v| v.as_u64()), Some(2), "both sessions' approvals in the one inbox");
    for left in [1u64, 0] {
        wait_button(&c, "Deny").await.click().await.unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..100 {
            let n = c.execute("return document.querySelectorAll('#inbox > li').length", vec![]).await.ok();
            if n.as_ref().and_then(|v| v.as_u64()) == Some(left) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for child in waiting {
        let done = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await;
        assert!(done.is_ok(), "each waiting send went on once denied from the page");
    }

    // Inert: the hostile name is text, no element of it exists.
    let counts = c
        .execute(
            "return [document.scripts.length, document.images.length, \
             document.documentElement.scrollWidth <= window.innerWidth, document.body.innerText, window.innerWidth]",
            vec![],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(counts[0], 1, "only the page's own script: {counts}");
    assert_eq!(counts[1], 0, "no image made of a name: {counts}");
    assert_eq!(counts[4], 360, "a phone's width: {counts}");
    assert_eq!(counts[2], true, "nothing scrolls sideways at 360 px: {counts}");
    assert!(counts[3].as_str().is_some_and(|t| t.contains("<script>alert(2)")), "shown as text: {counts}");
    let shot = c.screenshot().await.unwrap_or_default();
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-360x740.png"), shot).ok();

    // The session's own view: a file written in a turn, then sent from
    // the page (the answer streams in), then the turn undone after its
    // plan is shown, and the file is gone.
    let dir =
        forge.ok(&["--json", "session", "show", &id]).await.json_lines()[0]["cwd"].as_str().unwrap_or("").to_string();
    let write = tool_call("write_file", &json!({"path": "made-by-a-turn.txt", "content": "x\n"}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("{write} write it")]).await;
    let made = std::path::Path::new(&dir).join("made-by-a-turn.txt");
    assert!(made.exists());
    open_session(&c, &url, &id).await;
    link_says(&c, "live").await;
    wait_text(&c, "write it").await;
    let compose = by_id(&c, "compose").await;
    compose.send_keys("hello from the page").await.unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "send").await;
    wait_text(&c, "You said: “hello from the page”").await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    // Undo the page's own turn first (it changed no file), then the write.
    for _ in 0..2 {
        click_id(&c, "undo").await;
        let restore = wait_button(&c, "Restore").await;
        restore.click().await.unwrap_or_else(|e| panic!("{e}"));
        wait_text(&c, "Undone:").await;
        // The next undo's plan replaces this one's words.
        c.execute("document.getElementById('plan').replaceChildren()", vec![]).await.ok();
    }
    assert!(!made.exists(), "the file the undone turn wrote is gone");

    // Steer and cancel from the page, while an answer streams.
    let long = "stream on mock:tokens=3000 mock:delay=5";
    by_id(&c, "compose").await.send_keys(long).await.unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "send").await;
    wait_text(&c, " w50 ").await;
    by_id(&c, "compose").await.send_keys("and keep it short").await.unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "steer").await;
    click_id(&c, "cancel").await;
    // Cancelled; the steer, come too late for that turn, runs as the next.
    let mut kinds = Vec::new();
    for _ in 0..100 {
        let events = forge.rpc("session.events", json!({"session": id})).await;
        kinds = events["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["kind"] == "steer_queued" || e["kind"] == "turn_finished")
            .map(|e| format!("{} {}", e["kind"].as_str().unwrap_or(""), e["status"].as_str().unwrap_or("")))
            .collect();
        if kinds.iter().any(|k| k == "turn_finished cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(kinds.iter().any(|k| k == "steer_queued "), "the steer reached the session: {kinds:?}");
    assert!(kinds.iter().any(|k| k == "turn_finished cancelled"), "the page's cancel stopped the turn: {kinds:?}");
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;

    // The daemon killed mid-stream and started again: the page comes back
    // by itself and shows what the store holds, the cut answer included.
    let long = "a long one mock:tokens=2000 mock:delay=5";
    by_id(&c, "compose").await.send_keys(long).await.unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "send").await;
    wait_last_answer(&c, " w100 ").await;
    forge.kill9().await;
    link_says(&c, "reconnecting").await;
    forge.start().await;
    link_says(&c, "live").await;
    forge.wait_for_session(&id, "settled", |s| s["state"] != "streaming").await;
    let history = forge.ok(&["--json", "history", &id]).await.json_lines();
    let last = history.iter().rev().find(|m| m["role"] == "assistant").cloned().unwrap_or_default();
    let stored = last["text"].as_str().unwrap_or_default().to_string();
    assert!(stored.starts_with("w0 w1 ") && !stored.contains("w1999"), "cut short: {last}");
    let shown = c
        .execute(
            "const m = [...document.querySelectorAll('.msg.assistant')].pop(); \
             return (m.querySelector('.md') || m.querySelector('pre')).textContent.trim()",
            vec![],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(shown.as_str(), Some(stored.trim()), "the page shows the answer as stored");
    let shot = c.screenshot().await.unwrap_or_default();
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-session-360x740.png"), shot).ok();

    // Markdown and math as the daemon renders them, a hostile answer inert.
    let md = forge.new_session(&["--name", "md", "--cwd", &cwd]).await;
    let hostile = "**bold** <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) \
                   $e^{i\\pi}+1=0$ \u{1b}[31mred";
    forge.ok(&["send", "-s", &md, &format!("{hostile} mock:tokens=3")]).await;
    forge.ok(&["send", "-s", &md, hostile]).await;
    open_session(&c, &url, &md).await;
    wait_text(&c, "You said").await;
    // The daemon's rendering replaces the plain text once it comes back.
    for _ in 0..100 {
        let n = c.execute("return document.querySelectorAll('.md math').length", vec![]).await.ok();
        if n.as_ref().and_then(|v| v.as_u64()).is_some_and(|n| n > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = c
        .execute(
            "const md = document.querySelector('.msg.assistant:last-child .md') || document.querySelectorAll('.md')[document.querySelectorAll('.md').length - 1]; \
             return [document.scripts.length, document.images.length, document.querySelectorAll('.md math').length, \
             [...document.querySelectorAll('.md a')].map(a => a.getAttribute('href')), \
             document.querySelectorAll('.md strong').length, document.body.innerText.includes('\\u001b')]",
            vec![],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen[0], 1, "only the page's own script: {seen}");
    assert_eq!(seen[1], 0, "no image: {seen}");
    assert!(seen[2].as_u64().is_some_and(|n| n >= 1), "math as MathML: {seen}");
    assert!(seen[3].as_array().is_some_and(|l| l.iter().all(|h| h == "#")), "no javascript: link: {seen}");
    assert!(seen[4].as_u64().is_some_and(|n| n >= 1), "markdown rendered: {seen}");
    assert_eq!(seen[5], false, "no terminal escape: {seen}");

    // The tree: rewinding to the second turn's message shows its plan,
    // then puts back the file the second turn wrote, and only that one.
    let tree_project = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let t = forge.new_session(&["--name", "t", "--cwd", &tree_project.path().display().to_string()]).await;
    let dir_t =
        forge.ok(&["--json", "session", "show", &t]).await.json_lines()[0]["cwd"].as_str().unwrap_or("").to_string();
    for (file, words) in [("tree-a.txt", "write a"), ("tree-b.txt", "write b")] {
        let w = tool_call("write_file", &json!({"path": file, "content": "x\n"}));
        forge.ok(&["send", "--auto-approve", "-s", &t, &format!("{words} {w}")]).await;
    }
    let (a, b) = (std::path::Path::new(&dir_t).join("tree-a.txt"), std::path::Path::new(&dir_t).join("tree-b.txt"));
    assert!(a.exists() && b.exists());
    open_session(&c, &url, &t).await;
    wait_text(&c, "write b").await;
    click(&c, &c.find(Locator::Css("#tree-box summary")).await.unwrap_or_else(|e| panic!("{e}"))).await;
    let rewind = wait_xpath(&c, "//li[./div[contains(text(), 'write b')]]/button[text()='Rewind here…']").await;
    click(&c, &rewind).await;
    wait_text(&c, "Rewind to this point").await;
    let planned = c.execute("return document.getElementById('plan').innerText", vec![]).await.ok();
    assert!(
        planned.as_ref().and_then(|p| p.as_str()).is_some_and(|p| p.contains("tree-b.txt")),
        "the plan names the file: {planned:?}"
    );
    assert!(b.exists(), "nothing changes before the plan is confirmed");
    click(&c, &wait_button(&c, "Restore").await).await;
    wait_text(&c, "Rewound:").await;
    let said = c.execute("return document.getElementById('plan').innerText", vec![]).await.ok();
    assert!(
        a.exists() && !b.exists(),
        "the second turn's file is gone, the first's kept: a {} b {} {said:?}",
        a.exists(),
        b.exists()
    );

    // Signed out from the terminal: the page loses its link and says so.
    forge.ok(&["web", "revoke", "--all"]).await;
    link_says(&c, "signed out").await;
    let _ = c.close().await;
}

/// Waits until the page's text holds `text` (10 s).
async fn wait_text(c: &Client, text: &str) {
    let mut last = String::new();
    for _ in 0..100 {
        let body = c.execute("return document.body.innerText", vec![]).await.ok();
        last = body.and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        if last.contains(text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page never showed \"{text}\"; it shows:\n{last}");
}

/// Clicks `e` as a user would: scrolled to the middle of the screen
/// first, clear of the compose bar kept at the bottom.
async fn click(c: &Client, e: &fantoccini::elements::Element) {
    let arg = serde_json::to_value(e).unwrap_or_default();
    c.execute("arguments[0].scrollIntoView({block: 'center'})", vec![arg]).await.ok();
    e.click().await.unwrap_or_else(|err| panic!("{err}"));
}

/// Goes to session `id`'s view on the page `pairing` (a pairing link) led to.
async fn open_session(c: &Client, pairing: &str, id: &str) {
    let base = pairing.split("/pair").next().unwrap_or_default();
    c.goto(&format!("{base}#/s/{id}")).await.unwrap_or_else(|e| panic!("{e}"));
}

/// The element with id `id` (it must be there).
async fn by_id(c: &Client, id: &str) -> fantoccini::elements::Element {
    c.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}"))
}

/// Clicks the element with id `id`, as [`click`] does.
async fn click_id(c: &Client, id: &str) {
    click(c, &by_id(c, id).await).await;
}

/// Waits until the newest answer on the page holds `text` (10 s).
async fn wait_last_answer(c: &Client, text: &str) {
    let js = "const m = [...document.querySelectorAll('.msg.assistant')].pop(); return m ? m.textContent : ''";
    for _ in 0..100 {
        let last = c.execute(js, vec![]).await.ok();
        if last.as_ref().and_then(|v| v.as_str()).is_some_and(|t| t.contains(text)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the newest answer never held \"{text}\"");
}

/// Waits for a button labelled `label` (10 s).
async fn wait_button(c: &Client, label: &str) -> fantoccini::elements::Element {
    wait_xpath(c, &format!("//button[text()='{label}']")).await
}

/// Waits for the element `xpath` finds (10 s).
async fn wait_xpath(c: &Client, xpath: &str) -> fantoccini::elements::Element {
    for _ in 0..100 {
        if let Ok(e) = c.find(Locator::XPath(xpath)).await {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = c.execute("return document.body.innerText", vec![]).await.unwrap_or_default();
    panic!("nothing matched {xpath}; the page shows:\n{}", body.as_str().unwrap_or_default());
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| std::path::Path::new(d).join(program)).find(|p| p.exists())
}

const GIT_TEST: &str = "web_browser::a_git_sessions_commits_diffs_and_merge_are_on_the_page";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_sessions_commits_diffs_and_merge_are_on_the_page() {
    let Some((_mock, forge, _driver, c)) = open(GIT_TEST, 1024, 800, |_| {}).await else { return };
    let repo = forge_tests::harness::git_repository(&[("a.txt", "a\n")]);
    let id = forge.new_session(&["--git", "--cwd", &repo.path().display().to_string()]).await;
    let w = tool_call("write_file", &json!({"path": "from-the-session.txt", "content": "made in the session\n"}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("add a file {w}")]).await;

    pair_and_open(&c, &forge, &id).await;
    wait_text(&c, "add a file").await;
    wait_text(&c, "branch forge/session/").await;
    click(&c, &c.find(Locator::Css("#git-box summary")).await.unwrap_or_else(|e| panic!("{e}"))).await;
    // The branch's newest commit, its diff shown.
    click(&c, &wait_button(&c, "Diff").await).await;
    wait_text(&c, "+made in the session").await;
    // The merge says what it brings first, then brings it.
    click(&c, &wait_button(&c, "Merge…").await).await;
    wait_text(&c, "A merge would bring").await;
    assert!(!repo.path().join("from-the-session.txt").exists(), "nothing merged before the word");
    click(&c, &wait_xpath(&c, "//button[text()='Merge']").await).await;
    wait_text(&c, "Merged (").await;
    assert!(repo.path().join("from-the-session.txt").exists(), "the session's file reached the user's branch");
    // The last commit reworded from the page; the tip it replaced is kept,
    // and drawn beside the branch.
    click(&c, &wait_button(&c, "Reword…").await).await;
    wait_xpath(&c, "//div[@id='git-out']/textarea").await;
    c.execute("document.querySelector('#git-out textarea').value = 'Add the session file'", vec![]).await.ok();
    click(&c, &wait_button(&c, "Save").await).await;
    wait_text(&c, "reworded:").await;
    wait_text(&c, "prev-1: left by a move of the branch").await;
    let log = forge.ok(&["--json", "git", "log", &id]).await.stdout;
    assert!(log.contains("Add the session file"), "{log}");
    let dots = c.execute("return document.querySelectorAll('#git ul.graph > li').length", vec![]).await.ok();
    assert!(dots.and_then(|v| v.as_u64()).is_some_and(|n| n >= 2), "the branch and its kept tip drawn");
    // The model and temperature switched from the page.
    click(&c, &c.find(Locator::Css("#model-box summary")).await.unwrap_or_else(|e| panic!("{e}"))).await;
    wait_xpath(&c, "//select[@id='model']/option[contains(text(), 'claude-haiku')]").await;
    c.execute(
        "const s = document.getElementById('model'); \
         s.value = [...s.options].find(o => o.text.startsWith('claude-haiku')).value; \
         document.getElementById('temperature').value = '0.3'",
        vec![],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "configure").await;
    wait_text(&c, "from the next request").await;
    let shown = forge.ok(&["--json", "session", "show", &id]).await.json_lines();
    assert!(shown[0]["model"].as_str().is_some_and(|m| m.starts_with("claude-haiku")), "{}", shown[0]);
    assert_eq!(shown[0]["temperature"], 0.3, "{}", shown[0]);

    // A turn that thinks: its thinking streams in, folded.
    forge.ok(&["send", "-s", &id, "think first mock:thinking=3 mock:tokens=2"]).await;
    let folded = wait_xpath(&c, "//details[contains(@class, 'thinking')]").await;
    assert_eq!(folded.attr("open").await.ok().flatten(), None, "folded until opened");
    let thought = c.execute("return document.querySelector('details.thinking pre').textContent", vec![]).await;
    assert!(thought.ok().and_then(|v| v.as_str().map(str::to_string)).is_some_and(|t| t.contains("thought0")));
    let _ = c.close().await;
}

const TRANSCRIPT_TEST: &str = "web_browser::a_turns_calls_edits_images_and_commands_show_as_in_the_tui";

/// The session view as the TUI shows a turn: each tool call one box, an
/// edit as its highlighted diff, a command's output as it streamed; an
/// image picked on the page goes to the model and shows in the
/// transcript; a slash command completes from the session's list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_calls_edits_images_and_commands_show_as_in_the_tui() {
    // A command of the user's own, to complete.
    let config = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let commands = config.path().join("forge/commands");
    std::fs::create_dir_all(&commands).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(commands.join("review.md"), "---\ndescription: review the change\n---\nReview $ARGUMENTS\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let xdg = |f: &mut Forge| f.set_env("XDG_CONFIG_HOME", &config.path().display().to_string());
    let Some((mock, forge, _driver, c)) = open(TRANSCRIPT_TEST, 1280, 800, xdg).await else { return };
    let project = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.path().join("lib.rs"), "fn old() {}\n").unwrap_or_else(|e| panic!("{e}"));
    let id = forge.new_session(&["--name", "calls", "--cwd", &project.path().display().to_string()]).await;
    pair_and_open(&c, &forge, &id).await;

    // A turn the page follows live: an edit, then a command with output.
    let edit = tool_call("edit", &json!({"path": "lib.rs", "old_string": "fn old() {}", "new_string": "fn new() {}"}));
    let run = tool_call("run_command", &json!({"command": "echo streamed-from-the-command"}));
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("rename it {edit}")]).await;
    forge.ok(&["send", "--auto-approve", "-s", &id, &format!("run it {run}")]).await;
    wait_text(&c, "streamed-from-the-command").await;
    let boxes = "return [...document.querySelectorAll('details.call')].map(d => [d.querySelector('summary').textContent, \
                 d.querySelectorAll('.asks span[class*=\"hl-\"]').length, d.querySelector('.asks') ? d.querySelector('.asks').textContent : '', \
                 d.querySelector('pre.output').textContent])";
    let mut live = serde_json::Value::Null;
    for _ in 0..100 {
        live = c.execute(boxes, vec![]).await.unwrap_or_default();
        if live.as_array().is_some_and(|l| l.len() == 2 && l.iter().all(|b| b[1].as_u64().is_some_and(|n| n > 0))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let calls = live.as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 2, "one box per call: {live}");
    assert_eq!(calls[0][0], "edit lib.rs", "{live}");
    assert!(calls[0][1].as_u64().is_some_and(|n| n > 0), "the edit's diff is highlighted: {live}");
    let diff = calls[0][2].as_str().unwrap_or_default();
    assert!(diff.contains("-fn old() {}") && diff.contains("+fn new() {}"), "{live}");
    assert_eq!(calls[1][0], "run_command echo streamed-from-the-command", "{live}");
    assert!(calls[1][3].as_str().is_some_and(|o| o.contains("streamed-from-the-command")), "{live}");
    // A reload shows the same boxes, from the history.
    c.refresh().await.unwrap_or_else(|e| panic!("{e}"));
    link_says(&c, "live").await;
    let mut again = serde_json::Value::Null;
    for _ in 0..100 {
        again = c.execute(boxes, vec![]).await.unwrap_or_default();
        if again == live {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(again, live, "the history shows what streamed");

    // The files the calls touched, listed beside the chat; one opens
    // highlighted, as it is now.
    click(&c, &c.find(Locator::Css("#files-box summary")).await.unwrap_or_else(|e| panic!("{e}"))).await;
    click(&c, &wait_xpath(&c, "//ul[@id='files']/li/button[text()='lib.rs']").await).await;
    wait_xpath(&c, "//div[@id='file-view']//code[contains(@class, 'language-rs')]").await;
    let shown = c.execute("return document.getElementById('file-view').innerText", vec![]).await.ok();
    assert!(shown.as_ref().and_then(|v| v.as_str()).is_some_and(|t| t.contains("fn new() {}")), "{shown:?}");
    // On a wide screen the files sit beside the transcript.
    let beside = "const f = document.getElementById('files-box').getBoundingClientRect(); \
                  const t = document.getElementById('transcript').getBoundingClientRect(); return f.left >= t.right";
    assert_eq!(c.execute(beside, vec![]).await.ok(), Some(json!(true)), "the files beside the chat");
    // Only what the session's tools may read.
    for outside in ["../secret.txt", "/etc/passwd"] {
        let refused = forge.rpc("session.file", json!({"session": id, "path": outside})).await;
        assert!(refused["error"]["message"].is_string(), "{outside}: {refused}");
    }

    // A slash command completes from the session's list.
    let compose = by_id(&c, "compose").await;
    compose.send_keys("/rev").await.unwrap_or_else(|e| panic!("{e}"));
    let hint = wait_xpath(&c, "//div[@id='command-hints']/button[starts-with(text(), '/review')]").await;
    let said = hint.text().await.unwrap_or_default();
    assert!(said.contains("review the change") && said.contains("user"), "{said}");
    click(&c, &hint).await;
    let value = c.execute("return document.getElementById('compose').value", vec![]).await.ok();
    assert_eq!(value.and_then(|v| v.as_str().map(str::to_string)).as_deref(), Some("/review "));
    c.execute("document.getElementById('compose').value = ''", vec![]).await.ok();

    // An image picked on the page goes with the message and is shown.
    let png = project.path().join("shot.png");
    let bytes = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD.decode(bytes).unwrap_or_default();
    std::fs::write(&png, decoded).unwrap_or_else(|e| panic!("{e}"));
    let picker = by_id(&c, "attach").await;
    picker.send_keys(&png.display().to_string()).await.unwrap_or_else(|e| panic!("{e}"));
    wait_text(&c, "shot.png (1×1)").await;
    let compose = by_id(&c, "compose").await;
    compose.send_keys("what is in it").await.unwrap_or_else(|e| panic!("{e}"));
    click_id(&c, "send").await;
    wait_xpath(&c, "//figure[contains(@class, 'image')]/img").await;
    forge.wait_for_session(&id, "idle", |s| s["state"] == "idle").await;
    let sent = mock.last_turn_request();
    assert!(sent.contains(bytes), "the model got the image");
    let history = forge.ok(&["history", &id]).await.stdout;
    assert!(history.contains("[image shot.png, 1×1 PNG, 1 KiB]\nwhat is in it"), "{history}");
    let shot = c.screenshot().await.unwrap_or_default();
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-calls.png"), shot).ok();

    // A message edited in the tree and sent again: answered as a new
    // branch, the original kept.
    click(&c, &c.find(Locator::Css("#tree-box summary")).await.unwrap_or_else(|e| panic!("{e}"))).await;
    let edit = wait_xpath(&c, "//li[./div[contains(text(), 'what is in it')]]/button[text()='Edit and resend…']").await;
    click(&c, &edit).await;
    wait_xpath(&c, "//div[@id='plan']/textarea").await;
    c.execute("document.querySelector('#plan textarea').value = 'what else is in it'", vec![]).await.ok();
    click(&c, &wait_xpath(&c, "//div[@id='plan']/button[text()='Send']").await).await;
    wait_text(&c, "You said: “what else is in it”").await;
    let tree = forge.rpc("session.tree", json!({"session": id})).await;
    let texts: Vec<&str> = tree["result"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["role"] == "user")
        .filter_map(|n| n["preview"].as_str())
        .collect();
    assert!(texts.contains(&"what is in it") && texts.contains(&"what else is in it"), "{texts:?}");
    // Back to the list: the session's view is gone from it, wide as it is.
    c.execute("location.hash = ''", vec![]).await.ok();
    wait_text(&c, "Waiting for you").await;
    let text = c.execute("return document.body.innerText", vec![]).await.ok();
    assert!(text.as_ref().and_then(|t| t.as_str()).is_some_and(|t| !t.contains("Steer")), "{text:?}");
    let _ = c.close().await;
}

const PROXY_TEST: &str = "web_browser::the_page_works_through_the_tls_reverse_proxy_remote_md_shows";

/// docs/remote.md's nginx example, as written there: TLS in front of
/// the listener, WebSocket upgrades passed on, `Host` kept and
/// `X-Forwarded-Proto` set. Paired through `https://`, the browser's
/// cookie is `Secure`, and the page is live over `wss://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_through_the_tls_reverse_proxy_remote_md_shows() {
    let Some(nginx) = ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().find(|p| std::path::Path::new(p).exists())
    else {
        return skipped(PROXY_TEST, "nginx is not installed (Debian: nginx)");
    };
    if which("openssl").is_none() {
        return skipped(PROXY_TEST, "openssl is not installed");
    }
    let Some((_mock, forge, _driver, c)) = open(PROXY_TEST, 1024, 800, |_| {}).await else { return };
    let id = forge.new_session(&["--name", "behind-a-proxy"]).await;
    let pairing = forge.ok(&["--json", "web"]).await.json_lines()[0].clone();
    let url = pairing["url"].as_str().unwrap_or_default().to_string();
    let upstream = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_string();

    // A certificate of its own, and nginx as the example configures it.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| panic!("{e}"));
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status();
    assert!(made.is_ok_and(|s| s.success()), "openssl made a certificate");
    let port = free_port();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/remote.md"))
        .unwrap_or_else(|e| panic!("{e}"));
    let example = doc
        .split("```nginx\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("docs/remote.md has an nginx example"));
    let server = example
        .replace("forge.example.org", "127.0.0.1")
        .replace("listen 443 ssl;", &format!("listen 127.0.0.1:{port} ssl;"))
        .replace("/etc/ssl/forge/cert.pem", &cert.display().to_string())
        .replace("/etc/ssl/forge/key.pem", &key.display().to_string())
        .replace("127.0.0.1:7070", &upstream);
    let t = dir.path().display();
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {t}/nginx.pid;\nerror_log {t}/error.log warn;\nevents {{}}\n\
         http {{\naccess_log off;\nclient_body_temp_path {t}/body;\nproxy_temp_path {t}/proxy;\n\
         fastcgi_temp_path {t}/fcgi;\nuwsgi_temp_path {t}/uwsgi;\nscgi_temp_path {t}/scgi;\n{server}\n}}\n"
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = tokio::process::Command::new(nginx)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("nginx: {e}"));
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let code = url.split("code=").nth(1).unwrap_or_default();
    c.goto(&format!("https://127.0.0.1:{port}/pair?code={code}")).await.unwrap_or_else(|e| panic!("{e}"));
    let said = link_says(&c, "live").await;
    assert_eq!(said, "live", "{}", std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default());
    let cookies = c.get_all_cookies().await.unwrap_or_else(|e| panic!("{e}"));
    let device = cookies.iter().find(|k| k.name() == "forge_device").unwrap_or_else(|| panic!("{cookies:?}"));
    assert_eq!(device.secure(), Some(true), "Secure behind TLS: {device:?}");
    assert_eq!(device.http_only(), Some(true), "{device:?}");
    wait_text(&c, "behind-a-proxy").await;
    c.goto(&format!("https://127.0.0.1:{port}/#/s/{id}")).await.unwrap_or_else(|e| panic!("{e}"));
    link_says(&c, "live").await;
    forge.ok(&["send", "-s", &id, "through the proxy"]).await;
    wait_text(&c, "You said: “through the proxy”").await;
    let _ = c.close().await;
}
