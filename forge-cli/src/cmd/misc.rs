//! `forgectl cancel`, `status`, `shutdown`.

use forge_proto::api::ForgeApiClient;

use crate::Global;
use crate::connect::{daemon, socket_path};
use crate::exit::{Failure, UNREACHABLE};
use crate::output::json_line;

pub async fn cancel(g: &Global, session: &str, drop_queued: bool) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let r = conn.client.session_cancel(session.to_string(), Some(drop_queued)).await?;
    if g.json {
        json_line(&r);
    } else if r.cancelled {
        println!("cancelled the running turn of {}", r.session_id);
    } else {
        println!("session {} had no running turn", r.session_id);
    }
    if !g.json && r.dropped_queued > 0 {
        println!("dropped {} queued message(s)", r.dropped_queued);
    }
    Ok(())
}

pub async fn status(g: &Global) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let s = conn.client.daemon_status().await?;
    if g.json {
        json_line(&s);
        return Ok(());
    }
    let up = s.uptime_ms / 1000;
    println!("forged {} (protocol {}), pid {}", s.version, s.protocol_version, s.pid);
    println!("uptime:    {}h{:02}m{:02}s", up / 3600, (up % 3600) / 60, up % 60);
    println!("socket:    {}", s.socket);
    println!("home:      {}", s.home);
    println!("sessions:  {} ({} active)", s.sessions, s.active_sessions);
    println!("clients:   {}", s.clients);
    println!("journal:   {:?}", s.journal);
    Ok(())
}

pub async fn shutdown(g: &Global) -> Result<(), Failure> {
    let socket = socket_path(g);
    // Never start a daemon just to stop it.
    let g2 = crate::Global { no_autostart: true, ..g.clone() };
    let conn = match daemon(&g2).await {
        Ok(c) => c,
        Err(f) if f.code == UNREACHABLE => {
            if !g.json {
                println!("no forged is running on {}", socket.display());
            }
            return Ok(());
        }
        Err(f) => return Err(f),
    };
    let pid = conn.hello.server.pid;
    conn.client.daemon_shutdown().await?;
    // Wait until the daemon released its lock, which it does last, after
    // everything is on disk: then a new daemon can start at once.
    let lock_path = socket.with_extension("lock");
    for _ in 0..1500 {
        let released = match std::fs::File::open(&lock_path) {
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => true,
        };
        if released {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if g.json {
        json_line(&serde_json::json!({"type": "shutdown", "pid": pid}));
    } else {
        println!("forged (pid {pid}) stopped");
    }
    Ok(())
}
