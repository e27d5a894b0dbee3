//! `forge-bench remote`: what reaching a daemon through ssh costs, on
//! loopback with a real OpenSSH server: delivery latency (from the mock's
//! write of each stamped token to a follower receiving it) over the local
//! socket and over the `forgectl bridge` ssh link side by side; and how
//! long a followed stream takes to resume after its ssh process is
//! killed (the link back at once), and after the server was gone for a
//! second (from the moment it listens again).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_client::{Endpoint, ForgeClient, Resume, Resumed, SshRemote, connect};
use forge_proto::params::SendParams;
use forge_proto::{EventKind, SubscriptionItem};
use forge_tests::sshd::Sshd;

use crate::stamps::pct;
use crate::{Daemon, follower, info, new_session};

async fn send(d: &Daemon, session: &str, text: String) -> anyhow::Result<()> {
    let conn = connect(&d.socket, info()).await?;
    conn.client
        .session_send(SendParams { session: session.to_string(), text: Some(text), ..Default::default() })
        .await?;
    Ok(())
}

pub(crate) async fn remote_bench(bin: &Path, mock_url: &str) -> anyhow::Result<()> {
    let sshd = Sshd::start().map_err(|why| anyhow::anyhow!("cannot run an sshd here: {why}"))?;
    let d = Daemon::start(bin, mock_url, "process").await?;
    let env = [
        ("FORGE_HOME".to_string(), d.home().display().to_string()),
        ("FORGE_SOCKET".to_string(), d.socket.display().to_string()),
    ];
    let far = SshRemote {
        url: sshd.url(),
        destination: "127.0.0.1".into(),
        host: "127.0.0.1".into(),
        port: Some(sshd.port),
        bin: sshd.remote_bin(&env).display().to_string(),
        autostart: false,
        ssh_command: Some(sshd.ssh_command()),
        batch: true,
    };
    let ssh = Endpoint::Ssh(far);
    let sshd = Arc::new(Mutex::new(sshd));
    let local = Endpoint::Socket(d.socket.clone());
    println!(
        "forge-bench remote: mock -> forged -> a follower on the socket and one through ssh (OpenSSH on loopback)"
    );

    for (rate, chunks, delay) in [(50, 250, 20), (1000, 3000, 1)] {
        let session = new_session(&d.socket).await?;
        let followers = [("local socket", local.clone()), ("ssh bridge", ssh.clone())]
            .map(|(name, e)| (name, follower(e, session.clone())));
        let mut done = Vec::new();
        for (name, (ready, d)) in followers {
            let _ = ready.await;
            done.push((name, d));
        }
        send(&d, &session, format!("mock:tokens={chunks} mock:delay={delay} mock:stamp")).await?;
        for (name, got) in done {
            let seen = got.await??;
            let mut ms: Vec<f64> = seen.iter().map(|&(stamp, at)| at.saturating_sub(stamp) as f64 / 1e6).collect();
            ms.sort_by(f64::total_cmp);
            println!(
                "latency @{rate:>4}/s over the {name:<12}: {} deliveries, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                ms.len(),
                pct(&ms, 0.5),
                pct(&ms, 0.99),
                ms.last().copied().unwrap_or(f64::NAN)
            );
        }
    }

    // The ssh process killed mid-stream, the server still there.
    let session = new_session(&d.socket).await?;
    let mut follow = Resume::start(&ssh, &info(), session.clone(), None).await?;
    send(&d, &session, "mock:tokens=4000 mock:delay=2".into()).await?;
    let (mut deltas, mut killed_at, mut back, mut resumed) = (0usize, None::<Instant>, false, Vec::new());
    while let Some(item) = follow.next().await {
        match item? {
            Resumed::Item(SubscriptionItem::Event(ev)) => {
                if let (true, Some(at)) = (back, killed_at) {
                    resumed.push(at.elapsed().as_secs_f64() * 1000.0);
                    (back, killed_at) = (false, None);
                }
                match ev.kind {
                    EventKind::TextDelta { .. } => deltas += 1,
                    EventKind::TurnFinished { .. } => break,
                    _ => {}
                }
                if killed_at.is_none() && resumed.len() < 5 && deltas > 300 * (resumed.len() + 1) {
                    killed_at = Some(Instant::now());
                    sshd.lock().unwrap_or_else(|p| p.into_inner()).drop_links();
                }
            }
            Resumed::Back => back = true,
            _ => {}
        }
    }
    println!(
        "resume after the ssh process is killed (link back at once; first retry after 0.2 s): {} times, {}",
        resumed.len(),
        figures(&resumed)
    );

    // The server gone for a second, then back.
    let mut resumed = Vec::new();
    for _ in 0..3 {
        let session = new_session(&d.socket).await?;
        let mut follow = Resume::start(&ssh, &info(), session.clone(), None).await?;
        send(&d, &session, "mock:tokens=3000 mock:delay=2".into()).await?;
        // The outage runs beside the follow, which keeps retrying meanwhile.
        let (mut returned, mut back) = (None::<tokio::sync::oneshot::Receiver<Instant>>, false);
        let mut deltas = 0usize;
        while let Some(item) = follow.next().await {
            match item? {
                Resumed::Item(SubscriptionItem::Event(ev)) => {
                    if back && let Some(at) = returned.as_mut().and_then(|r| r.try_recv().ok()) {
                        resumed.push(at.elapsed().as_secs_f64() * 1000.0);
                        returned = None;
                    }
                    match ev.kind {
                        EventKind::TextDelta { .. } => deltas += 1,
                        EventKind::TurnFinished { .. } => break,
                        _ => {}
                    }
                    if deltas == 200 {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        let server = sshd.clone();
                        tokio::task::spawn_blocking(move || {
                            let mut s = server.lock().unwrap_or_else(|p| p.into_inner());
                            s.stop();
                            std::thread::sleep(Duration::from_secs(1));
                            if s.restart().is_ok() {
                                let _ = tx.send(Instant::now());
                            }
                        });
                        returned = Some(rx);
                    }
                }
                Resumed::Back => back = true,
                _ => {}
            }
        }
    }
    println!("resume after the server was gone for 1 s, from when it listens again: {}", figures(&resumed));
    Ok(())
}

/// min / median / max in ms.
fn figures(ms: &[f64]) -> String {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    format!(
        "min {:.0} ms, median {:.0} ms, max {:.0} ms",
        v.first().copied().unwrap_or(f64::NAN),
        pct(&v, 0.5),
        v.last().copied().unwrap_or(f64::NAN)
    )
}
