//! Helper agents, routed: what a session's machine asks for a helper
//! (`HelperOut`) is carried out here: a helper's session made as the
//! parent's machine decided it (or, after a restart, the one the call
//! made before found) and given its task, a helper's news handed to its
//! parent, a cancel or an approval's answer handed to a helper. The
//! engine decides nothing; the machines on both ends do.

use std::sync::Weak;

use forge_proto::params::{CreateParams, SendParams};
use forge_proto::{ClientRef, ErrorKind};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{Engine, Inner};
use crate::error::EngineError;
use crate::session::machine::{HelperIn, HelperOut, HelperStart, NewHelper};
use crate::session::{Reply, SessionCmd};

/// Routes what sessions send until the engine is gone. News for one
/// session is handed over in the order it came.
pub(super) fn route(engine: Weak<Inner>, mut rx: UnboundedReceiver<HelperOut>) {
    tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let Some(inner) = engine.upgrade() else { break };
            let engine = Engine { inner };
            // A stopping daemon starts nothing again.
            if engine.check_running().is_err() {
                continue;
            }
            match out {
                HelperOut::Start(start) => {
                    tokio::spawn(async move { engine.start_helper(start).await });
                }
                HelperOut::Done { parent, report }
                | HelperOut::Approval { parent, report }
                | HelperOut::Report { to: parent, report } => engine.tell(&parent, SessionCmd::Helper(report)).await,
                HelperOut::Cancel { child } => {
                    let params = forge_proto::params::CancelParams { session: child.clone(), drop_queued: true };
                    let request = forge_proto::methods::SessionRequest::Cancel(params);
                    let cmd = SessionCmd::Request { request, client: helper_client(), reply: Reply::nobody() };
                    engine.tell(&child, cmd).await;
                }
                HelperOut::Forward { child, cmd } => engine.tell(&child, *cmd).await,
            }
        }
    });
}

/// Who a helper's messages come from.
fn helper_client() -> ClientRef {
    ClientRef { name: "forged (task)".into(), ..ClientRef::daemon() }
}

impl Engine {
    /// Hands `cmd` to session `id`, waiting for room in its queue: news
    /// of a helper is never dropped for a busy session.
    async fn tell(&self, id: &str, cmd: SessionCmd) {
        let sent = match self.handle(id).await {
            Ok(h) => h.command_waiting(cmd).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            tracing::warn!(session = id, error = %e.message, "a helper agent's news could not be handed over");
        }
    }

    /// Starts the helper of a `task` call (or takes up the one it started
    /// before a restart) and tells the parent which session it is.
    async fn start_helper(&self, start: HelperStart) {
        let (parent, call_id, nonce) = (start.parent.clone(), start.call_id.clone(), start.nonce.clone());
        let report = match self.helper_session(start).await {
            Ok(()) => return,
            Err(e) => HelperIn::Failed { call_id, nonce, error: e.message },
        };
        self.tell(&parent, SessionCmd::Helper(report)).await;
    }

    async fn helper_session(&self, start: HelperStart) -> Result<(), EngineError> {
        let store = &self.shared().store;
        // Taken up again: the parent resumed a batch a restart interrupted.
        let before = match start.resume {
            true => store.helper_of(&start.parent, start.answer.as_deref(), &start.call_id).await?,
            false => None,
        };
        if let Some(child) = before {
            let row = store.session(&child).await?.ok_or_else(|| EngineError::not_found(&child))?;
            let of = row.helper.as_ref().map(|h| h.of.clone());
            let (agent, description) = of.map(|o| (o.agent, o.description)).unwrap_or_default();
            let started = HelperIn::Started {
                call_id: start.call_id,
                nonce: start.nonce,
                child: child.clone(),
                agent,
                description,
            };
            self.tell(&start.parent, SessionCmd::Helper(started)).await;
            return match row.head_id {
                None => self.give_task(&child, start.prompt).await,
                Some(_) => {
                    self.tell(&child, SessionCmd::Helper(HelperIn::Resume)).await;
                    Ok(())
                }
            };
        }
        let NewHelper { spec, cwd, provider, model, approval } =
            *start.create.map_err(|why| EngineError::new(ErrorKind::InvalidParams, why))?;
        let agent = spec.of.agent.clone();
        let req = CreateParams {
            cwd: Some(cwd),
            provider: Some(provider),
            model: Some(model),
            // The parent's directory was accepted when it was made; a
            // helper works beside it, never on a branch of its own.
            allow_broad_root: true,
            git: Some(false),
            ..Default::default()
        };
        let info = self.create_session_at(req, helper_client(), None, Some((spec, approval))).await?;
        let started = HelperIn::Started {
            call_id: start.call_id,
            nonce: start.nonce,
            child: info.id.clone(),
            agent,
            description: start.description,
        };
        self.tell(&start.parent, SessionCmd::Helper(started)).await;
        self.give_task(&info.id, start.prompt).await
    }

    /// The helper's first message: its task. A failure ends its turn,
    /// which reports to the parent like any end.
    async fn give_task(&self, child: &str, prompt: String) -> Result<(), EngineError> {
        let params = SendParams { session: child.to_string(), text: Some(prompt), ..Default::default() };
        self.request(forge_proto::methods::SessionRequest::Send(params), helper_client()).await.map(drop)
    }
}
