//! The TUI's link to its daemon, on this machine or through ssh: the
//! session followed with [`Resume`] (every event once, in order, across
//! dropped links and a daemon's restart) and the connection for calls,
//! made again when it drops. Both wait with the same backoff (0.2 s,
//! doubling, at most 5 s).

use std::sync::Arc;

use forge_client::jsonrpsee::async_client::Client;
use forge_client::{Backoff, Endpoint, Follow, FollowError, Resume, Resumed, connect_to};
use tokio::sync::mpsc;

use crate::msg::{Msg, client_info};

/// Goes on with `follow` (the session from its first event) for as long
/// as the UI runs, following again after every drop.
pub(crate) fn spawn_follow(endpoint: Endpoint, session: String, follow: Follow, tx: mpsc::Sender<Msg>) {
    tokio::spawn(async move {
        let mut follow = Resume::from_follow(&endpoint, &client_info(), session, follow, Some(1)).always();
        loop {
            let msg = match follow.next().await {
                Some(Ok(Resumed::Item(item))) => Msg::Item(Box::new(item)),
                Some(Ok(Resumed::Lost { why, retry_in })) => {
                    let down = if endpoint.reconnects() { "link down" } else { "daemon gone" };
                    let dropped = format!("the link to {endpoint} ");
                    let why = why.strip_prefix(&dropped).unwrap_or(&why);
                    Msg::Lost(format!("{down} ({why}); reconnecting in {:.1} s", retry_in.as_secs_f64()))
                }
                Some(Ok(Resumed::Back)) => Msg::Back,
                Some(Err(FollowError::Refused(e))) => {
                    let text = format!("forged is back, but this session is not: {}; q leaves", e.message());
                    let _ = tx.send(Msg::SessionGone(text)).await;
                    return;
                }
                Some(Err(e)) => Msg::Lost(e.to_string()),
                None => return,
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    });
}

/// Watches the connection for calls; when it drops, connects again and
/// hands the new one to the loop ([`Msg::Reconnected`]).
pub(crate) fn spawn_keeper(endpoint: Endpoint, client: Arc<Client>, tx: mpsc::Sender<Msg>) {
    tokio::spawn(async move {
        let mut client = client;
        loop {
            client.on_disconnect().await;
            let mut backoff = Backoff::default();
            client = loop {
                tokio::time::sleep(backoff.next_delay()).await;
                if tx.is_closed() {
                    return;
                }
                if let Ok(conn) = connect_to(&endpoint, client_info()).await {
                    break Arc::new(conn.client);
                }
            };
            if tx.send(Msg::Reconnected(client.clone())).await.is_err() {
                return;
            }
        }
    });
}
