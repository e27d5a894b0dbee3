//! Sessions: each live session is a state machine ([`machine::Session`])
//! run by one task, its shell ([`actor`]), which does all its I/O; the rest
//! of the daemon holds a [`SessionHandle`] and talks to it through a
//! bounded command channel.

pub(crate) mod actor;
pub(crate) mod answers;
mod crash_guard;

/// A removed session's saved git guard goes with it.
pub(crate) fn forget_saved_guard(db: &std::path::Path, session: &str) {
    crash_guard::clear(&crash_guard::path(db, session));
}
mod git_task;
mod input_task;
pub(crate) use input_task::keep_image;
pub mod live;
pub(crate) mod load;
pub(crate) mod machine;
mod rewind_task;

pub(crate) use rewind_task::lineage_changes;
pub mod subscription;
mod tool_task;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use forge_proto::methods::SessionRequest;
use forge_proto::{ClientRef, ErrorKind, OperationStateKind};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::error::EngineError;

/// Where a command's caller waits for its answer: a channel the engine
/// reads, typed; for a [`SessionRequest`], the answer as JSON, which
/// [`Reply::typed`] lets each arm give as its own type.
pub(crate) struct Reply<T>(Box<dyn FnOnce(Result<T, EngineError>) + Send + Sync>);

impl<T: 'static> Reply<T> {
    /// For an answer nobody waits for (a turn a Stop hook starts).
    pub(crate) fn nobody() -> Self {
        Reply(Box::new(drop))
    }

    /// Gives the caller its answer (a caller that went away loses it).
    pub(crate) fn send(self, result: Result<T, EngineError>) {
        (self.0)(result)
    }

    /// The same caller, its errors first made over by `f`.
    pub(crate) fn map_err(self, f: impl FnOnce(EngineError) -> EngineError + Send + Sync + 'static) -> Reply<T> {
        Reply(Box::new(move |result: Result<T, EngineError>| self.send(result.map_err(f))))
    }

    /// A caller waiting for a `U`, answered with what `f` makes of a `T`.
    pub(crate) fn mapped<U: 'static>(reply: Reply<U>, f: impl FnOnce(T) -> U + Send + Sync + 'static) -> Reply<T> {
        Reply(Box::new(move |result: Result<T, EngineError>| reply.send(result.map(f))))
    }
}

impl<T: Send + 'static> From<oneshot::Sender<Result<T, EngineError>>> for Reply<T> {
    fn from(tx: oneshot::Sender<Result<T, EngineError>>) -> Self {
        Reply(Box::new(move |result| drop(tx.send(result))))
    }
}

impl Reply<serde_json::Value> {
    /// The same caller, answered with a typed value (sent as its JSON).
    pub(crate) fn typed<T: serde::Serialize>(self) -> Reply<T> {
        Reply(Box::new(move |result: Result<T, EngineError>| {
            let json = result.and_then(|v| serde_json::to_value(v).map_err(|e| EngineError::internal(e.to_string())));
            (self.0)(json)
        }))
    }
}

/// Commands a session accepts: one variant each, handled in one arm of
/// `Session::on_command`. A client's command carries its params as the
/// wire gave them (the session and node references resolved to ids).
pub(crate) enum SessionCmd {
    /// A new session begins: its `SessionStart` hooks run (answered once
    /// their runs are durable).
    Start { reply: Reply<()> },
    /// A command of the method table's `machine` block, as the wire gave
    /// it (its session resolved to the id): one arm per request in
    /// `machine/requests.rs`.
    Request { request: SessionRequest, client: ClientRef, reply: Reply<serde_json::Value> },
    /// A new session branching off this one (`session.fork`, see
    /// `machine/fork.rs`): answered with its id once it exists.
    Fork { params: forge_proto::params::ForkParams, client: ClientRef, reply: Reply<String> },
    /// A helper agent's news for its parent, or its parent's for it
    /// (routed by the daemon, see `machine/helpers.rs`).
    Helper(machine::HelperIn),
    /// Removes the session; the actor exits after the removal is durable.
    Remove { reply: Reply<()> },
    /// Cancels running work, persists, and exits.
    Shutdown { reply: oneshot::Sender<()> },
}

pub(crate) use crate::store::rows::SameMessage;

/// An event as published to subscribers: already durable, already JSON.
#[derive(Debug, Clone)]
pub struct PublishedEvent {
    pub seq: u64,
    /// The `SessionEvent` as JSON.
    pub json: Arc<str>,
}

/// What list/show report about a live session without asking its actor.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    pub state: OperationStateKind,
    pub queued: u32,
    pub last_seq: u64,
    /// The approval the session waits on, if any.
    pub approval: Option<forge_proto::PendingApproval>,
}

/// How the rest of the daemon reaches a session actor.
#[derive(Clone)]
pub(crate) struct SessionHandle {
    pub id: String,
    tx: mpsc::Sender<SessionCmd>,
    events: broadcast::WeakSender<PublishedEvent>,
    pub(crate) taps: Arc<live::Taps>,
    pub(crate) recent: Arc<live::Recent>,
    pub snapshot: watch::Receiver<Snapshot>,
    pub attached: Arc<AtomicU32>,
}

/// Commands waiting for an actor; past this a caller gets `overloaded`.
pub(crate) const COMMAND_QUEUE: usize = 64;

impl SessionHandle {
    /// Sends a command without waiting for room: a session that cannot keep
    /// up answers `overloaded` (retryable) instead of stalling the caller.
    pub fn command(&self, cmd: SessionCmd) -> Result<(), EngineError> {
        self.tx.try_send(cmd).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                EngineError::new(ErrorKind::Overloaded, "the session has too many requests waiting; retry shortly")
            }
            mpsc::error::TrySendError::Closed(_) => EngineError::gone(),
        })
    }

    /// Sends a command the daemon itself makes, waiting for room.
    pub async fn command_waiting(&self, cmd: SessionCmd) -> Result<(), EngineError> {
        self.tx.send(cmd).await.map_err(|_| EngineError::gone())
    }

    pub async fn request<T>(&self, make: impl FnOnce(Reply<T>) -> SessionCmd) -> Result<T, EngineError>
    where
        T: Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.command(make(reply.into()))?;
        rx.await.map_err(|_| EngineError::gone())?
    }

    /// Subscribes to live events and copies the newest ones kept, in one
    /// step: every event after those comes live. `None` once it stopped.
    pub fn join_live(&self) -> Option<live::Joined> {
        self.recent.join(&self.events)
    }

    pub fn is_alive(&self) -> bool {
        !self.tx.is_closed()
    }

    pub fn attached_count(&self) -> u32 {
        self.attached.load(Ordering::Relaxed)
    }
}
