//! Connections: who each one is, how busy and how idle it is, and making
//! room when every slot is taken.
//!
//! A local process can open connections until the daemon's slots run out
//! and then send nothing (or half a request). New clients must still be
//! answered: a partial request is given [`partial_request_timeout`], and
//! when no slot is free the connection idle the longest that follows no
//! session and has no call running is closed to make room.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_proto::ClientInfo;
use jsonrpsee::core::middleware::{Batch, Notification, Request, RpcServiceT};
use tokio_util::sync::CancellationToken;

/// How long the rest of a request may take once its first byte arrived:
/// 30 s (`FORGE_PARTIAL_REQUEST_TIMEOUT_SECS` shortens it, for tests that
/// watch half-sent requests being cut off).
pub fn partial_request_timeout() -> Duration {
    static TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        let secs = std::env::var("FORGE_PARTIAL_REQUEST_TIMEOUT_SECS").ok().and_then(|v| v.parse().ok());
        Duration::from_secs(secs.filter(|s| *s > 0).unwrap_or(30))
    })
}

/// Requests and WebSocket connections served at once; past this jsonrpsee
/// answers HTTP 429 (retry later) instead of making anyone wait.
pub const MAX_CONNECTIONS: usize = 512;
/// Sockets held open at once (bounds file descriptors); past this, new
/// connections wait in the listen backlog. Above `MAX_CONNECTIONS` so that
/// overload is answered, not queued.
pub const MAX_SOCKETS: usize = 2 * MAX_CONNECTIONS;
/// Connections that may follow sessions at once: a following connection
/// is never closed to make room, so the last slots are kept for the rest
/// (a new client always finds one free or idle).
pub const MAX_FOLLOWING: usize = MAX_SOCKETS - 128;

/// One connection: its id, after `hello` who the client is, and what it
/// is doing.
pub struct ConnState {
    pub id: u64,
    pub(crate) client: Mutex<Option<ClientInfo>>,
    /// When it last finished a request or answer (ms since the daemon's
    /// connection clock started).
    last_active_ms: AtomicU64,
    calls: AtomicU32,
    /// Calls ever started on it.
    requests: AtomicU64,
    subscriptions: AtomicU32,
    /// Connections following a session, daemon-wide.
    following: Arc<AtomicU32>,
    /// Cancelled to close the connection.
    pub close: CancellationToken,
    clock: Instant,
    /// The paired browser it came in as, if it came through the web client.
    device: std::sync::OnceLock<String>,
}

impl ConnState {
    /// Came in as paired browser `id` (through the web client).
    pub(crate) fn mark_device(&self, id: &str) {
        let _ = self.device.set(id.to_string());
    }

    /// The paired browser it came in as, if any.
    pub(crate) fn device(&self) -> Option<&str> {
        self.device.get().map(String::as_str)
    }

    fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// A request or answer went through.
    pub fn touch(&self) {
        self.last_active_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Marks a call running until the guard is dropped.
    pub fn call(self: &Arc<Self>) -> Busy {
        self.touch();
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        Busy { conn: self.clone(), counter: Counter::Calls }
    }

    /// Marks a subscription open until the guard is dropped: a connection
    /// that follows a session is never closed to make room, so at most
    /// `MAX_FOLLOWING` connections may (the error says so, for the client).
    pub fn subscription(self: &Arc<Self>) -> Result<Busy, String> {
        let mut now = self.subscriptions.load(Ordering::Acquire);
        loop {
            // Its first subscription makes the connection a follower.
            if now == 0
                && self
                    .following
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_FOLLOWING as u32).then_some(n + 1))
                    .is_err()
            {
                return Err(format!(
                    "forged already has {MAX_FOLLOWING} connections following sessions (editors, TUIs, `forgectl attach`), \
                     the most it allows so that new clients always find a free connection; close some of them, then try again"
                ));
            }
            match self.subscriptions.compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(Busy { conn: self.clone(), counter: Counter::Subscriptions }),
                Err(actual) => {
                    if now == 0 {
                        self.following.fetch_sub(1, Ordering::AcqRel);
                    }
                    now = actual;
                }
            }
        }
    }

    /// Whether a whole request ever arrived on it.
    pub fn has_requested(&self) -> bool {
        self.requests.load(Ordering::Relaxed) > 0
    }

    /// How long it has been idle, if it may be closed to make room.
    fn idle_for(&self) -> Option<u64> {
        let quiet = self.calls.load(Ordering::Relaxed) == 0 && self.subscriptions.load(Ordering::Relaxed) == 0;
        (quiet && !self.close.is_cancelled())
            .then(|| self.now_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed)))
    }
}

enum Counter {
    Calls,
    Subscriptions,
}

/// See [`ConnState::call`] and [`ConnState::subscription`].
pub struct Busy {
    conn: Arc<ConnState>,
    counter: Counter,
}

impl Drop for Busy {
    fn drop(&mut self) {
        match self.counter {
            Counter::Calls => {
                self.conn.calls.fetch_sub(1, Ordering::Relaxed);
                self.conn.touch();
            }
            Counter::Subscriptions => {
                if self.conn.subscriptions.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.conn.following.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
    }
}

/// Every open connection.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
    clock: std::sync::OnceLock<Instant>,
    following: Arc<AtomicU32>,
}

impl Connections {
    pub fn open(&self) -> Arc<ConnState> {
        let clock = *self.clock.get_or_init(Instant::now);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let conn = Arc::new(ConnState {
            id,
            client: Mutex::new(None),
            last_active_ms: AtomicU64::new(0),
            calls: AtomicU32::new(0),
            requests: AtomicU64::new(0),
            subscriptions: AtomicU32::new(0),
            following: self.following.clone(),
            close: CancellationToken::new(),
            device: Default::default(),
            clock,
        });
        conn.touch();
        self.lock().insert(id, conn.clone());
        conn
    }

    pub fn close(&self, conn: &ConnState) {
        self.lock().remove(&conn.id);
    }

    pub fn count(&self) -> u32 {
        self.lock().len() as u32
    }

    /// Closes the connection idle the longest among those with no call
    /// running and no subscription; false if there is none.
    pub fn close_longest_idle(&self) -> bool {
        let victim =
            self.lock().values().filter_map(|c| Some((c.idle_for()?, c.clone()))).max_by_key(|(idle, _)| *idle);
        match victim {
            Some((idle_ms, conn)) => {
                tracing::info!(conn = conn.id, idle_ms, "every connection slot is taken: closed the longest-idle one");
                conn.close.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnState>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// jsonrpsee middleware: each call (HTTP or WebSocket) marks its
/// connection busy while it runs and active when it ends.
#[derive(Clone)]
pub struct Activity<S> {
    pub inner: S,
    pub conn: Arc<ConnState>,
}

impl<S> RpcServiceT for Activity<S>
where
    S: RpcServiceT + Send + Sync + Clone + 'static,
{
    type MethodResponse = S::MethodResponse;
    type NotificationResponse = S::NotificationResponse;
    type BatchResponse = S::BatchResponse;

    fn call<'a>(&self, request: Request<'a>) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        busy_while(&self.conn, self.inner.call(request))
    }

    fn batch<'a>(&self, requests: Batch<'a>) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        busy_while(&self.conn, self.inner.batch(requests))
    }

    fn notification<'a>(&self, n: Notification<'a>) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        self.conn.touch();
        self.inner.notification(n)
    }
}

/// `work`, with `conn` marked busy until it is done.
fn busy_while<'a, T>(
    conn: &Arc<ConnState>,
    work: impl Future<Output = T> + Send + 'a,
) -> impl Future<Output = T> + Send + 'a {
    let busy = conn.call();
    async move {
        let done = work.await;
        drop(busy);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_without_calls_or_subscriptions_is_closed_first() {
        let conns = Connections::default();
        let following = conns.open();
        let calling = conns.open();
        let old = conns.open();
        std::thread::sleep(Duration::from_millis(20));
        let young = conns.open();
        let _sub = following.subscription();
        let _call = calling.call();
        assert!(conns.close_longest_idle());
        assert!(old.close.is_cancelled(), "the oldest idle one goes first");
        assert!(!young.close.is_cancelled() && !following.close.is_cancelled() && !calling.close.is_cancelled());
        assert!(conns.close_longest_idle());
        assert!(young.close.is_cancelled());
        assert!(!conns.close_longest_idle(), "a follower and a busy caller are never closed");
    }
}
