//! `forge-bench`: the journal pipeline benchmark, by hand.
//!
//! Drives the real pipeline: the in-tree mock provider streams over
//! loopback into a real `forged`, which persists every chunk before any of
//! the attached real clients (over the Unix socket) receives it. Reports:
//! chunks/s for one flooded session and across 50 sessions; journal rows and
//! transactions per second; delivery latency from a chunk's arrival at
//! forged (forged notes when it read the bytes: `FORGE_BENCH_ARRIVALS`) to
//! each of 10 clients receiving it (p50/p99) at 50 and 1,000 chunks/s, and
//! from the mock's write call (the mock and each client on a thread of
//! their own, like separate processes);
//! the daemon's peak memory. Once per durability setting.
//!
//!     cargo build --release --workspace --bins
//!     target/release/forge-bench [--quick] [--clients N] [--latency [--runs N]] [--ws]
//!     target/release/forge-bench search PATTERN DIR    # the search tool vs ripgrep
//!     target/release/forge-bench patch                  # apply_patch on a 10,000-line file
//!     target/release/forge-bench memory [--runs N] [--mb M]  # RSS after each run of M MB streamed

use forge_proto::params::{CheckoutParams, CreateParams, SendParams, SubscribeParams};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use forge_client::ForgeClient;
use forge_client::{Connection, Endpoint, Follow, connect, connect_to};
use forge_proto::{ClientInfo, ClientKind, EventKind, SubscriptionItem};
use forge_tests::mock::{MockOptions, MockServer};

mod patch;
mod remote;
mod search;
mod snapshot;
mod stamps;

use stamps::{Stamps, pct};

const USAGE: &str = "\
forge-bench: the journal pipeline benchmark (mock provider -> forged -> clients)

usage:
  forge-bench [--quick] [--clients N] [--ws] throughput, latency and memory, both durabilities
  forge-bench --latency [--runs N] [--ws]    delivery latency only
  (--ws: clients follow over WebSocket instead of JSON lines)
  forge-bench search PATTERN DIR             the search tool against ripgrep
  forge-bench patch                          apply_patch on a 10,000-line file
  forge-bench tree [TURNS]                   session.tree and checkout on a TURNS-turn session with branches (200)
  forge-bench snapshot [N]                   rewind's scans around a command in an N-file tree (10000)
  forge-bench memory [--runs N] [--mb M]     the daemon's memory after N runs of M MB streamed (3, 25)
  forge-bench remote                         latency over the ssh bridge beside the socket; resume after a drop

Build first: cargo build --release --workspace --bins";

struct Daemon {
    child: tokio::process::Child,
    socket: PathBuf,
    /// Where forged notes when stamped chunks arrived (`FORGE_BENCH_ARRIVALS`).
    arrivals: PathBuf,
    _home: tempfile::TempDir,
}

impl Daemon {
    async fn start(bin: &Path, mock_url: &str, durability: &str) -> anyhow::Result<Daemon> {
        let home = tempfile::Builder::new().prefix("forge-bench-").tempdir()?;
        std::fs::write(home.path().join("config.toml"), format!("[journal]\ndurability = \"{durability}\"\n"))?;
        let socket = home.path().join("forged.sock");
        let arrivals = home.path().join("arrivals.txt");
        let child = tokio::process::Command::new(bin.join("forged"))
            .arg("--socket")
            .arg(&socket)
            .env("FORGE_HOME", home.path())
            .env("ANTHROPIC_BASE_URL", mock_url)
            .env("ANTHROPIC_API_KEY", "bench")
            .env("FORGE_BENCH_ARRIVALS", &arrivals)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        for _ in 0..1000 {
            if tokio::net::UnixStream::connect(&socket).await.is_ok() {
                return Ok(Daemon { child, socket, arrivals, _home: home });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("forged did not start")
    }

    fn home(&self) -> &Path {
        self._home.path()
    }

    fn peak_rss_mib(&self) -> f64 {
        self.status_mib("VmHWM:")
    }

    fn rss_mib(&self) -> f64 {
        self.status_mib("VmRSS:")
    }

    /// A `/proc/PID/status` figure in MiB.
    fn status_mib(&self, field: &str) -> f64 {
        let pid = self.child.id().unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    }
}

fn info() -> ClientInfo {
    ClientInfo { name: "forge-bench".into(), version: env!("CARGO_PKG_VERSION").into(), kind: ClientKind::Script }
}

/// `--ws`: follow over the WebSocket subscription (as an editor plugin
/// might) instead of JSON lines (as Forge's own clients do).
fn over_websocket() -> bool {
    std::env::args().any(|a| a == "--ws")
}

/// Sends `msg` on a new session and waits for the turn to finish; returns
/// (elapsed, bytes of text received).
async fn run_turn(socket: &Path, session: &str, msg: &str) -> anyhow::Result<(Duration, usize)> {
    let conn = connect(socket, info()).await?;
    let sent = conn
        .client
        .session_send(SendParams { session: session.to_string(), text: Some(msg.to_string()), ..Default::default() })
        .await?;
    let start = Instant::now();
    let mut bytes = 0;
    // Text bytes so far; true once the turn is over.
    let mut on = |item: SubscriptionItem| match item {
        SubscriptionItem::Event(ev) => match ev.kind {
            EventKind::TextDelta { text } => {
                bytes += text.len();
                false
            }
            EventKind::TurnFinished { .. } => true,
            _ => false,
        },
        _ => false,
    };
    if !follow(&conn, sent.session_id.clone(), Some(sent.seq), || {}, &mut on).await? {
        anyhow::bail!("the stream ended early");
    }
    Ok((start.elapsed(), bytes))
}

/// Follows `session` from `from_seq` over the transport the flags choose,
/// calling `ready` once subscribed and `on` with each item until it returns
/// true (then true) or the stream ends (then false).
async fn follow(
    conn: &Connection,
    session: String,
    from_seq: Option<u64>,
    ready: impl FnOnce(),
    mut on: impl FnMut(SubscriptionItem) -> bool,
) -> anyhow::Result<bool> {
    if over_websocket() {
        let mut sub = conn.client.session_subscribe(SubscribeParams { session, from_seq }).await?;
        ready();
        while let Some(item) = sub.next().await {
            if on(item?) {
                return Ok(true);
            }
        }
    } else {
        let mut follow = Follow::start(conn, session, from_seq).await?;
        ready();
        while let Some(item) = follow.next().await {
            if on(item?) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

async fn new_session(socket: &Path) -> anyhow::Result<String> {
    let conn = connect(socket, info()).await?;
    let dir = std::env::temp_dir().join("forge-bench");
    std::fs::create_dir_all(&dir)?;
    Ok(conn
        .client
        .session_create(CreateParams { cwd: Some(dir.display().to_string()), ..Default::default() })
        .await?
        .id)
}

async fn journal_counts(socket: &Path) -> anyhow::Result<(u64, u64)> {
    let conn = connect(socket, info()).await?;
    let st = conn.client.journal_status(()).await?;
    Ok((st.rows, st.transactions))
}

/// Latencies (µs) of every stamped chunk as seen by each of `clients`:
/// from its arrival at forged (when forged read its bytes), and from the
/// mock's write call (which adds the loopback hop and forged waking up).
/// Each client runs on a thread and runtime of its own, as separate client
/// processes would: none waits for another's work.
async fn latency(d: &Daemon, chunks: usize, delay_ms: u64, clients: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let socket = d.socket.as_path();
    let session = new_session(socket).await?;
    let mut followers = Vec::new();
    for _ in 0..clients {
        let (ready, seen) = follower(Endpoint::Socket(socket.to_path_buf()), session.clone());
        followers.push((seen, ready));
    }
    let mut done = Vec::new();
    for (d, ready) in followers {
        let _ = ready.await;
        done.push(d);
    }
    // Sent by an 11th client that does not follow: the 10 followers end
    // with the turn.
    let conn = connect(socket, info()).await?;
    conn.client
        .session_send(SendParams {
            session: session.clone(),
            text: Some(format!("mock:tokens={chunks} mock:delay={delay_ms} mock:stamp")),
            ..Default::default()
        })
        .await?;
    let mut seen = Vec::new();
    for d in done {
        seen.extend(d.await??);
    }
    let arrived: std::collections::HashMap<u128, u128> = std::fs::read_to_string(&d.arrivals)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(stamp, at)| Some((stamp.parse().ok()?, at.parse().ok()?)))
        .collect();
    let us = |from: u128, to: u128| to.saturating_sub(from) as f64 / 1000.0;
    let mut from_write: Vec<f64> = seen.iter().map(|&(stamp, at)| us(stamp, at)).collect();
    let mut from_arrival: Vec<f64> =
        seen.iter().filter_map(|&(stamp, at)| arrived.get(&stamp).map(|&arr| us(arr, at))).collect();
    from_write.sort_by(|a, b| a.total_cmp(b));
    from_arrival.sort_by(|a, b| a.total_cmp(b));
    Ok((from_arrival, from_write))
}

/// The median round trip of one byte between two threads over a Unix
/// socket pair, each time after 2 ms asleep: what waking an idle thread
/// costs on this machine today, to compare runs across machines and days.
fn wake_round_trip() -> anyhow::Result<f64> {
    use std::io::{Read, Write};
    let (mut a, mut b) = std::os::unix::net::UnixStream::pair()?;
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while b.read(&mut byte).is_ok_and(|n| n == 1) && b.write_all(&byte).is_ok() {}
    });
    let mut us = Vec::new();
    let mut byte = [0u8; 1];
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(2));
        let t = Instant::now();
        a.write_all(b"x")?;
        a.read_exact(&mut byte)?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(a);
    let _ = echo.join();
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// One client: follows `session` live and returns, for each stamped token,
/// its stamp and when it got here (Unix ns).
async fn follow_stamps(
    endpoint: &Endpoint,
    session: String,
    ready: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Vec<(u128, u128)>> {
    let mut stamps = Stamps::default();
    let conn = connect_to(endpoint, info()).await?;
    follow(
        &conn,
        session,
        None,
        || {
            let _ = ready.send(());
        },
        |item| stamps.on(item),
    )
    .await?;
    Ok(stamps.seen)
}

/// Said once a follower is subscribed; its stamps once the turn ends.
type Ready = tokio::sync::oneshot::Receiver<()>;
type Seen = tokio::sync::oneshot::Receiver<anyhow::Result<Vec<(u128, u128)>>>;

/// One follower of `session` at `endpoint` ([`follow_stamps`]) on a thread
/// and runtime of its own, as a separate client process would be.
fn follower(endpoint: Endpoint, session: String) -> (Ready, Seen) {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return drop(done_tx.send(Err(anyhow::anyhow!("{e}")))),
        };
        let _ = done_tx.send(rt.block_on(follow_stamps(&endpoint, session, ready_tx)));
    });
    (ready_rx, done_rx)
}

/// The mock provider on a thread and runtime of its own, like a server
/// elsewhere: the clients' work never delays its writes. Returns its URL.
fn start_mock_thread() -> anyhow::Result<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return drop(tx.send(Err(anyhow::anyhow!("{e}")))),
        };
        rt.block_on(async move {
            match MockServer::start(MockOptions::default()).await {
                Ok(mock) => {
                    let _ = tx.send(Ok(mock.anthropic_url()));
                    // Serves until the process exits.
                    std::future::pending::<()>().await;
                    drop(mock);
                }
                Err(e) => drop(tx.send(Err(e.into()))),
            }
        });
    });
    rx.recv()?
}

/// `session.tree` and `session.checkout` on a session of `turns` turns
/// with a branch at every tenth turn.
async fn tree_bench(turns: usize) -> anyhow::Result<()> {
    let bin = std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_default();
    let mock_url = start_mock_thread()?;
    let d = Daemon::start(&bin, &mock_url, "process").await?;
    let session = new_session(&d.socket).await?;
    for i in 0..turns {
        run_turn(&d.socket, &session, &format!("turn {i} mock:tokens=5")).await?;
    }
    let conn = connect(&d.socket, info()).await?;
    let history = conn.client.session_history(session.clone()).await?.messages;
    // Branches: the same question again under every tenth answer.
    for k in (1..history.len()).step_by(20) {
        conn.client.session_checkout(CheckoutParams { session: session.clone(), node: history[k].id.clone() }).await?;
        run_turn(&d.socket, &session, &format!("a branch at {k} mock:tokens=5")).await?;
    }
    let mut tree_ms = Vec::new();
    let mut checkout_ms = Vec::new();
    let mut nodes = 0;
    for round in 0..20 {
        let t = Instant::now();
        nodes = conn.client.session_tree(session.clone()).await?.nodes.len();
        tree_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let target = history[(round * 37) % history.len()].id.clone();
        let t = Instant::now();
        conn.client.session_checkout(CheckoutParams { session: session.clone(), node: target }).await?;
        checkout_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    for v in [&mut tree_ms, &mut checkout_ms] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    println!(
        "{turns} turns ({nodes} nodes): session.tree p50 {:.1} ms, max {:.1} ms; session.checkout p50 {:.1} ms, max {:.1} ms",
        tree_ms[10], tree_ms[19], checkout_ms[10], checkout_ms[19]
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    if argv.get(1).map(String::as_str) == Some("patch") {
        return patch::patch_bench().await;
    }
    if argv.get(1).map(String::as_str) == Some("tree") {
        let turns = argv.get(2).and_then(|n| n.parse().ok()).unwrap_or(200);
        return tree_bench(turns).await;
    }
    if argv.get(1).map(String::as_str) == Some("snapshot") {
        let files = argv.get(2).and_then(|n| n.parse().ok()).unwrap_or(10_000);
        return snapshot::snapshot_bench(files);
    }
    if argv.get(1).map(String::as_str) == Some("remote") {
        let bin = std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_default();
        return remote::remote_bench(&bin, &start_mock_thread()?).await;
    }
    if argv.get(1).map(String::as_str) == Some("memory") {
        return memory_bench().await;
    }
    if argv.get(1).map(String::as_str) == Some("search") {
        let pattern = argv.get(2).cloned().unwrap_or_else(|| "fn main".into());
        let dir = argv.get(3).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        return search::search_bench(&pattern, &dir).await;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let only_latency = std::env::args().any(|a| a == "--latency");
    let clients: usize =
        std::env::args().skip_while(|a| a != "--clients").nth(1).and_then(|n| n.parse().ok()).unwrap_or(10);
    let runs: usize =
        std::env::args().skip_while(|a| a != "--runs").nth(1).and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
    let bin = std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_default();
    let mock_url = start_mock_thread()?;
    let (flood, per_session, sessions) = if quick { (50_000, 2_000, 10) } else { (200_000, 10_000, 50) };
    println!("forge-bench: mock provider -> forged -> clients over the Unix socket (2 cores)");
    let rt = wake_round_trip()?;
    println!(
        "machine baseline: one-byte round trip between two threads over a Unix socket after 2 ms idle: p50 {rt:.1} µs"
    );
    for durability in ["process", "power"] {
        let d = Daemon::start(&bin, &mock_url, durability).await?;
        println!("\n== durability = \"{durability}\"");
        if only_latency {
            // Idle-machine latency varies from run to run: summarize several.
            let mut p50s: Vec<(u32, f64)> = Vec::new();
            for _ in 0..runs {
                p50s.extend(latency_report(&d, quick, clients).await?);
            }
            if runs > 1 {
                for rate in [50, 1000] {
                    let mut v: Vec<f64> = p50s.iter().filter(|(r, _)| *r == rate).map(|(_, p)| *p).collect();
                    v.sort_by(|a, b| a.total_cmp(b));
                    println!(
                        "p50 from arrival @{rate:>4}/s over {runs} runs: min {:.3} ms, median {:.3} ms, max {:.3} ms",
                        v.first().copied().unwrap_or(f64::NAN),
                        pct(&v, 0.5),
                        v.last().copied().unwrap_or(f64::NAN)
                    );
                }
            }
            continue;
        }

        // One flooded session.
        let s = new_session(&d.socket).await?;
        let (rows0, tx0) = journal_counts(&d.socket).await?;
        let (took, bytes) = run_turn(&d.socket, &s, &format!("mock:tokens={flood}")).await?;
        let (rows1, tx1) = journal_counts(&d.socket).await?;
        let secs = took.as_secs_f64();
        println!(
            "one session:   {flood} chunks in {:.2} s = {:>9.0} chunks/s ({:.1} MB/s); {} journal rows ({:.0}/s) in {} transactions ({:.0}/s)",
            secs,
            flood as f64 / secs,
            bytes as f64 / secs / 1e6,
            rows1 - rows0,
            (rows1 - rows0) as f64 / secs,
            tx1 - tx0,
            (tx1 - tx0) as f64 / secs
        );

        // Many sessions at once.
        let mut ids = Vec::new();
        for _ in 0..sessions {
            ids.push(new_session(&d.socket).await?);
        }
        let (rows0, tx0) = journal_counts(&d.socket).await?;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for id in ids {
            let socket = d.socket.clone();
            // Paced a little, so many small writes from many sessions meet
            // in the writer (group commit), as with real providers.
            let msg = format!("mock:tokens={per_session} mock:delay=1");
            tasks.push(tokio::spawn(async move { run_turn(&socket, &id, &msg).await }));
        }
        for t in tasks {
            t.await??;
        }
        let secs = start.elapsed().as_secs_f64();
        let (rows1, tx1) = journal_counts(&d.socket).await?;
        let total = sessions * per_session;
        println!(
            "{sessions} sessions:  {total} chunks in {secs:.2} s = {:>9.0} chunks/s; {} journal rows = {:.0} rows/s in {} transactions = {:.0} tx/s ({:.1} rows/tx)",
            total as f64 / secs,
            rows1 - rows0,
            (rows1 - rows0) as f64 / secs,
            tx1 - tx0,
            (tx1 - tx0) as f64 / secs,
            (rows1 - rows0) as f64 / (tx1 - tx0).max(1) as f64
        );

        latency_report(&d, quick, clients).await?;
        println!("daemon peak memory: {:.1} MiB (VmHWM)", d.peak_rss_mib());
    }
    Ok(())
}

/// `forge-bench memory`: one daemon streams `--mb` MB of text per run, in
/// a new session each time, with a client following, `--runs` times; the
/// daemon's resident memory is read when it is idle again after each run.
/// A daemon that streams for hours must stay near its idle size.
async fn memory_bench() -> anyhow::Result<()> {
    let arg = |name: &str, default: usize| -> usize {
        std::env::args().skip_while(|a| a != name).nth(1).and_then(|n| n.parse().ok()).unwrap_or(default)
    };
    let (runs, mb) = (arg("--runs", 3), arg("--mb", 25));
    let bin = std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_default();
    let mock_url = start_mock_thread()?;
    let d = Daemon::start(&bin, &mock_url, "process").await?;
    let settle = || tokio::time::sleep(Duration::from_secs(12));
    settle().await;
    println!("forged idle: RSS {:.1} MiB", d.rss_mib());
    // Tokens of 100 bytes: `mb` MB per run.
    let tokens = mb * 10_000;
    for run in 1..=runs {
        let s = new_session(&d.socket).await?;
        let (took, bytes) = run_turn(&d.socket, &s, &format!("mock:tokens={tokens} mock:pad=100")).await?;
        settle().await;
        println!(
            "run {run}: streamed {:.1} MB in {:.1} s; idle again: RSS {:.1} MiB (peak so far {:.1} MiB)",
            bytes as f64 / 1e6,
            took.as_secs_f64(),
            d.rss_mib(),
            d.peak_rss_mib()
        );
    }
    Ok(())
}

/// Delivery latency to `clients` attached clients, paced and fast; returns
/// each rate's p50 from arrival (ms).
async fn latency_report(d: &Daemon, quick: bool, clients: usize) -> anyhow::Result<Vec<(u32, f64)>> {
    let mut p50s = Vec::new();
    for (rate, chunks, delay) in [(50, if quick { 100 } else { 250 }, 20), (1000, if quick { 1000 } else { 3000 }, 1)] {
        let (from_arrival, from_write) = latency(d, chunks, delay, clients).await?;
        let ms = |v: &[f64], p: f64| pct(v, p) / 1000.0;
        println!(
            "latency @{rate:>4}/s: {} deliveries to {clients} clients: from arrival at forged p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            from_arrival.len(),
            ms(&from_arrival, 0.5),
            ms(&from_arrival, 0.99),
            from_arrival.last().copied().unwrap_or(f64::NAN) / 1000.0,
        );
        println!(
            "                 from the mock's write call (+ loopback, + forged waking): p50 {:.3} ms, p99 {:.3} ms",
            ms(&from_write, 0.5),
            ms(&from_write, 0.99),
        );
        p50s.push((rate, ms(&from_arrival, 0.5)));
    }
    Ok(p50s)
}
