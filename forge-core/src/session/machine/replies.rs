//! How a command's caller is answered: at once (`ReadyReply`), once the
//! batch carrying its effects is durable (`Responder`), or with what the
//! store adds (`Answer`, completed by the shell); and the proof a rename
//! needs that its name is free (`NameClaim`).

use crate::error::EngineError;

/// Answers completed from the store (`Effect::Answer`, which boxes it:
/// the variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Answer {
    /// The session's info as `session.show` gives it, now; the name
    /// claim a rename held goes with it.
    Info { reply: crate::session::Reply<forge_proto::SessionInfo>, claim: Option<NameClaim> },
    /// A context report with the summaries, the span and the map added.
    Context {
        info: forge_proto::ContextInfo,
        span: Option<u32>,
        repo: bool,
        reply: crate::session::Reply<forge_proto::ContextInfo>,
    },
}

/// Proof that a session name was free when checked (only the shell makes
/// one, after asking the store): it holds the daemon's name lock until
/// the rename it allows is durable and answered.
pub(crate) struct NameClaim {
    name: Option<String>,
    _held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl NameClaim {
    pub(crate) fn new(name: Option<String>, held: Option<tokio::sync::OwnedMutexGuard<()>>) -> Self {
        NameClaim { name, _held: held }
    }

    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// A caller's answer, ready to send.
pub(crate) struct ReadyReply(Box<dyn FnOnce() + Send + Sync>);

impl ReadyReply {
    pub(crate) fn send(self) {
        (self.0)()
    }

    /// `result` for `reply`, now.
    pub(crate) fn now<T: Send + Sync + 'static>(
        reply: crate::session::Reply<T>,
        result: Result<T, EngineError>,
    ) -> Self {
        ReadyReply(Box::new(move || reply.send(result)))
    }
}

/// A caller waiting for the answer to its command, given once the batch
/// that carries the command's effects is durable (or failed). One type for
/// every command: a command's reply is made where the command is handled.
pub(super) struct Responder(Box<dyn FnOnce(Outcome<'_>) + Send + Sync>);

/// How a batch ended, for its responders: the session seqs its events got
/// (by outbox index), or the error that stopped it.
type Outcome<'a> = Result<&'a [Option<u64>], EngineError>;

impl Responder {
    /// Answers `reply` with `value` once the batch is durable.
    pub(crate) fn with<T: Send + Sync + 'static>(reply: crate::session::Reply<T>, value: T) -> Self {
        Responder(Box::new(move |outcome| reply.send(outcome.map(|_| value))))
    }

    /// Answers `reply` with what `make` builds from the session seqs the
    /// batch's events got (by outbox index), once it is durable.
    pub(crate) fn from_seqs<T: Send + Sync + 'static>(
        reply: crate::session::Reply<T>,
        make: impl FnOnce(&[Option<u64>]) -> T + Send + Sync + 'static,
    ) -> Self {
        Responder(Box::new(move |outcome| reply.send(outcome.map(make))))
    }

    /// The answer for how the batch ended.
    pub(super) fn answer(self, outcome: Outcome<'_>) -> ReadyReply {
        let seqs = outcome.map(<[Option<u64>]>::to_vec);
        ReadyReply(Box::new(move || (self.0)(seqs.as_deref().map_err(Clone::clone))))
    }
}
