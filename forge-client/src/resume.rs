//! Following a session across dropped links: when the connection to a
//! daemon on another machine drops (ssh killed, network gone, laptop
//! asleep), [`Resume`] says so, reconnects with [`Backoff`], and follows
//! again from the first event it has not delivered, so the reader sees
//! every event once, in order, as if the link had never dropped. A local
//! socket is not retried: its daemon is gone, and the stream ends.

use std::time::{Duration, Instant};

use forge_proto::events::SubscriptionItem;
use forge_proto::types::ClientInfo;
use jsonrpsee::core::ClientError;

use crate::endpoint::{Backoff, Endpoint};
use crate::lines::{Follow, FollowError};

/// What [`Resume::next`] gives.
#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "items are nearly all of it, each moved once")]
pub enum Resumed {
    Item(SubscriptionItem),
    /// The link dropped (or a retry failed); the next try is in `retry_in`.
    Lost {
        why: String,
        retry_in: Duration,
    },
    /// Following again after a drop, from where it stopped.
    Back,
}

/// A follower that outlives dropped links.
pub struct Resume {
    endpoint: Endpoint,
    info: ClientInfo,
    session: String,
    follow: Option<Follow>,
    next_seq: Option<u64>,
    backoff: Backoff,
    /// The wait before the next try, once the link is down.
    wait: Option<Duration>,
    /// When the link went down, and how long to keep trying.
    down_since: Option<Instant>,
    give_up_after: Option<Duration>,
    /// Retry a local socket too (a UI waits for its daemon to come back).
    always: bool,
    /// Undecodable lines met in a row at the same event: one that fails
    /// every time ends the follow instead of reconnecting forever.
    bad_at: (Option<u64>, u32),
}

impl Resume {
    /// Follows `session` from `from_seq` (or live only); the first
    /// connection's failure is returned, not retried.
    pub async fn start(
        endpoint: &Endpoint,
        info: &ClientInfo,
        session: String,
        from_seq: Option<u64>,
    ) -> Result<Resume, ClientError> {
        let follow = Follow::open_at(endpoint, info, session.clone(), from_seq).await?;
        Ok(Resume::from_follow(endpoint, info, session, follow, from_seq))
    }

    /// Takes over a follow already started (`forgectl send`'s, on the
    /// connection that sent the message).
    pub fn from_follow(
        endpoint: &Endpoint,
        info: &ClientInfo,
        session: String,
        follow: Follow,
        from_seq: Option<u64>,
    ) -> Resume {
        Resume {
            endpoint: endpoint.clone(),
            info: info.clone(),
            session,
            follow: Some(follow),
            next_seq: from_seq,
            backoff: Backoff::default(),
            wait: None,
            down_since: None,
            give_up_after: None,
            always: false,
            bad_at: (None, 0),
        }
    }

    /// Follows again after every drop, a local socket's included (a UI
    /// waits for its daemon however it went).
    pub fn always(mut self) -> Resume {
        self.always = true;
        self
    }

    /// Stops trying once the link has been down this long (`next` then
    /// ends); without it, tries until dropped.
    pub fn give_up_after(mut self, limit: Duration) -> Resume {
        self.give_up_after = Some(limit);
        self
    }

    /// The first event not yet delivered.
    pub fn next_seq(&self) -> Option<u64> {
        self.next_seq
    }

    /// The next item, a word about the link, or `None` once the stream has
    /// ended (a local daemon gone); [`FollowError::LinkDown`] once the
    /// link has been down past the limit.
    pub async fn next(&mut self) -> Option<Result<Resumed, FollowError>> {
        let Some(follow) = self.follow.as_mut() else {
            if let Some((since, limit)) = self.down_since.zip(self.give_up_after)
                && since.elapsed() >= limit
            {
                let (endpoint, secs) = (self.endpoint.to_string(), limit.as_secs());
                let (session, from) = (self.session.clone(), self.next_seq.unwrap_or(1));
                return Some(Err(FollowError::LinkDown { endpoint, secs, session, from }));
            }
            if let Some(wait) = self.wait.take() {
                tokio::time::sleep(wait).await;
            }
            match Follow::open_at(&self.endpoint, &self.info, self.session.clone(), self.next_seq).await {
                Ok(follow) => {
                    self.follow = Some(follow);
                    self.down_since = None;
                    return Some(Ok(Resumed::Back));
                }
                // The daemon answered that the session is gone: not the link.
                Err(ClientError::Call(e))
                    if forge_proto::error::error_kind_of(&e).as_deref() == Some("session_not_found") =>
                {
                    return Some(Err(FollowError::Refused(e)));
                }
                // Overloaded, stopping, ...: worth another try.
                Err(ClientError::Call(e)) => return Some(Ok(self.lost(e.message().to_string()))),
                Err(e) => return Some(Ok(self.lost(transport_words(&e)))),
            }
        };
        let why = match follow.next().await {
            Some(Ok(item)) => {
                if let Some(next) = follow.next_seq() {
                    self.next_seq = Some(next);
                }
                // Only progress resets the backoff: a link that comes up
                // and drops at once is not retried at the fastest pace.
                self.backoff = Backoff::default();
                self.bad_at = (None, 0);
                return Some(Ok(Resumed::Item(item)));
            }
            Some(Err(e)) if self.retries() => {
                self.bad_at = if self.bad_at.0 == self.next_seq {
                    (self.next_seq, self.bad_at.1 + 1)
                } else {
                    (self.next_seq, 1)
                };
                if self.bad_at.1 >= 3 {
                    return Some(Err(e));
                }
                e.to_string()
            }
            Some(Err(e)) => return Some(Err(e)),
            None if self.endpoint.reconnects() => format!("the link to {} dropped", self.endpoint),
            None if self.always => "connection lost".to_string(),
            None => return None,
        };
        self.follow = None;
        self.down_since = Some(Instant::now());
        Some(Ok(self.lost(why)))
    }

    fn retries(&self) -> bool {
        self.always || self.endpoint.reconnects()
    }

    fn lost(&mut self, why: String) -> Resumed {
        let retry_in = self.backoff.next_delay();
        self.wait = Some(retry_in);
        Resumed::Lost { why, retry_in }
    }
}

/// A connection failure in words (a transport error carries the
/// [`crate::ConnectError`] that explains it).
pub fn transport_words(e: &ClientError) -> String {
    match e {
        ClientError::Transport(inner) => inner.to_string(),
        other => other.to_string(),
    }
}
