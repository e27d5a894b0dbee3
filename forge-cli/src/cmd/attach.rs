//! `forgectl attach`: follow a session's events.

use clap::Args;
use forge_client::ForgeClient;
use forge_client::fold::Fold;
use forge_client::{Resume, Resumed};
use forge_proto::SubscriptionItem;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::{Transcript, json_line};

#[derive(Args)]
pub struct AttachArgs {
    /// Session id, id prefix or name
    session: String,
    /// Replay stored events from this seq (1 = the whole session); `live` follows new events only
    #[arg(long, default_value = "1", value_name = "SEQ|live")]
    from: String,
    /// Exit once the session is idle (no turn running, nothing queued) or
    /// waits for a decision (an approval, a recovery choice)
    #[arg(long)]
    until_idle: bool,
}

pub async fn run(g: &Global, a: AttachArgs) -> Result<(), Failure> {
    let from_live = a.from == "live";
    let mut from_seq = match a.from.as_str() {
        "live" => None,
        s => Some(s.parse::<u64>().map_err(|_| {
            Failure::new(2, "invalid_params", format!("--from takes a sequence number or `live`, not \"{s}\""))
        })?),
    };
    let conn = daemon(g).await?;
    // What runs or waits, as far as the events seen so far tell.
    let mut fold = Fold::default();
    let mut live = false;
    if from_live {
        // Nothing is replayed, so learn what the session is doing as we
        // join, then follow every event after that moment.
        let info = conn.client.session_show(a.session.clone()).await?;
        fold = Fold::joined(&info);
        if a.until_idle && fold.idle() {
            return Ok(());
        }
        from_seq = Some(info.last_seq + 1);
    }
    let mut sub = Resume::start(&conn.endpoint, &conn.info, a.session.clone(), from_seq)
        .await?
        .give_up_after(crate::connect::GIVE_UP_AFTER);
    let mut transcript = Transcript::new(fold);
    let mut interrupt = crate::cmd::send::interrupts()?;
    loop {
        let item = tokio::select! {
            item = sub.next() => item,
            _ = interrupt.recv() => { transcript.finish(); return Ok(()) }
        };
        let item = match item {
            Some(Ok(Resumed::Item(item))) => item,
            Some(Ok(Resumed::Lost { why, retry_in })) => {
                transcript.finish();
                eprintln!("forgectl: {why}; reconnecting in {:.1} s", retry_in.as_secs_f64());
                continue;
            }
            Some(Ok(Resumed::Back)) => {
                eprintln!("forgectl: reconnected; following from where it stopped");
                continue;
            }
            Some(Err(e)) => return Err(e.into()),
            None => {
                transcript.finish();
                return Err(Failure::new(crate::exit::UNREACHABLE, "daemon_gone", "the daemon closed the stream"));
            }
        };
        match item {
            SubscriptionItem::Event(ev) => {
                let seen = if g.json {
                    json_line(&ev);
                    transcript.fold.apply(&ev)
                } else {
                    transcript.event(&ev)
                };
                let settled = seen.is_some_and(|s| s.settled);
                if a.until_idle && live && (settled || transcript.fold.waiting()) {
                    transcript.finish();
                    return Ok(());
                }
            }
            SubscriptionItem::Live { last_seq } => {
                live = true;
                if g.json {
                    json_line(&SubscriptionItem::Live { last_seq });
                }
                if a.until_idle && (transcript.fold.idle() || transcript.fold.waiting()) {
                    transcript.finish();
                    return Ok(());
                }
            }
            SubscriptionItem::Lagged { resume_seq } => {
                if g.json {
                    json_line(&SubscriptionItem::Lagged { resume_seq });
                }
            }
            SubscriptionItem::Journal { health, reason } => {
                if g.json {
                    json_line(&SubscriptionItem::Journal { health, reason: reason.clone() });
                } else {
                    transcript.finish();
                    eprintln!("forgectl: journal {health:?}: {}", reason.as_deref().unwrap_or("ok"));
                }
            }
            SubscriptionItem::Closed { reason } => {
                transcript.finish();
                if g.json {
                    json_line(&SubscriptionItem::Closed { reason: reason.clone() });
                }
                eprintln!("forgectl: the session stream closed: {reason}");
                return Ok(());
            }
            SubscriptionItem::Unknown => {}
        }
    }
}
