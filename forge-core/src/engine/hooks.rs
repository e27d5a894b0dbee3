//! The hooks the engine runs around a session's life: `SessionStart`
//! after a creation, `UserPromptSubmit` before a message, `Stop` when a
//! turn ends complete (from a task following the session's live events).

use super::*;

impl Engine {
    /// Whether any hook for `event` may apply in a session working in `cwd`.
    pub(super) fn has_hooks(&self, event: crate::hooks::HookEvent, cwd: &str) -> bool {
        let config = &self.shared().config.hooks;
        config.hooks.iter().any(|h| h.event == event)
            || (config.import_claude && std::path::Path::new(cwd).join(".claude").is_dir())
    }

    /// Runs `event`'s hooks for session `id`, journaling each run; the
    /// runs, in order (stopping at the first that does not allow).
    pub(super) async fn run_session_hooks(
        &self,
        handle: &SessionHandle,
        cwd: &str,
        event: crate::hooks::HookEvent,
        extra: serde_json::Value,
        client: Option<ClientRef>,
    ) -> Result<Vec<crate::hooks::HookRun>, EngineError> {
        let config = &self.shared().config;
        let trusted = self.shared().trust.state(Path::new(cwd)).trusted();
        let (set, _) = crate::hooks::HookSet::for_session(&config.hooks, Path::new(cwd), trusted);
        let hooks = set.matching(event, None);
        let mut runs = Vec::new();
        if hooks.is_empty() {
            return Ok(runs);
        }
        let sandbox = crate::tools::Sandbox::for_session(Path::new(cwd), &config.tools);
        for hook in &hooks {
            let input = crate::hooks::input(event, &handle.id, cwd, extra.clone());
            let run = crate::hooks::run(hook, &input, &sandbox, None).await;
            let (journaled, c) = (run.clone(), client.clone());
            handle.request(|reply| SessionCmd::HookRan { run: journaled, client: c, reply }).await?;
            let stop = run.decision != crate::hooks::HookDecision::Allow;
            runs.push(run);
            if stop {
                break;
            }
        }
        Ok(runs)
    }

    /// `SessionStart` hooks of a new session: what they add goes with its
    /// first message.
    pub(super) async fn session_start_hooks(&self, id: &str) -> Result<(), EngineError> {
        let Some(row) = self.shared().store.session(id).await? else { return Ok(()) };
        if !self.has_hooks(crate::hooks::HookEvent::SessionStart, &row.cwd) {
            return Ok(());
        }
        let handle = self.handle(id).await?;
        let runs = self
            .run_session_hooks(
                &handle,
                &row.cwd,
                crate::hooks::HookEvent::SessionStart,
                serde_json::json!({"source": "startup"}),
                None,
            )
            .await?;
        let added: Vec<String> = runs.into_iter().filter_map(|r| r.context).collect();
        if !added.is_empty() {
            self.inner.start_context.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), added.join("\n"));
        }
        Ok(())
    }

    /// `Stop` hooks after a turn ended: the reason of one that blocks, to
    /// send the model on with.
    pub(super) async fn stop_hooks(&self, id: &str, cwd: &str, active: bool) -> Option<String> {
        let handle = self.handle(id).await.ok()?;
        let runs = self
            .run_session_hooks(
                &handle,
                cwd,
                crate::hooks::HookEvent::Stop,
                serde_json::json!({"stop_hook_active": active}),
                None,
            )
            .await
            .ok()?;
        let last = runs.last()?;
        // A Stop hook's `continue: false` means "stop": that is no reason
        // to send the model on.
        (last.decision == crate::hooks::HookDecision::Block && !last.halt)
            .then(|| last.reason.clone().unwrap_or_else(|| "a Stop hook asked to go on".into()))
    }

    /// Runs the `UserPromptSubmit` hooks on a message about to be sent:
    /// each run is journaled; a block or a hook error refuses the message
    /// (`hook_blocked`), and what the hooks (and the session's
    /// `SessionStart` hooks, for its first message) add is appended to it.
    pub(super) async fn prompt_hooks(
        &self,
        handle: &SessionHandle,
        text: String,
        client: &ClientRef,
    ) -> Result<String, EngineError> {
        let mut added: Vec<String> = Vec::new();
        added.extend(self.inner.start_context.lock().unwrap_or_else(|p| p.into_inner()).remove(&handle.id));
        let config = &self.shared().config;
        if !config.hooks.hooks.is_empty() || config.hooks.import_claude {
            let row =
                self.shared().store.session(&handle.id).await?.ok_or_else(|| EngineError::not_found(&handle.id))?;
            let runs = self
                .run_session_hooks(
                    handle,
                    &row.cwd,
                    crate::hooks::HookEvent::UserPromptSubmit,
                    serde_json::json!({"prompt": text}),
                    Some(client.clone()),
                )
                .await?;
            for run in runs {
                if run.decision != crate::hooks::HookDecision::Allow {
                    return Err(EngineError::new(
                        ErrorKind::HookBlocked,
                        format!("the message was not sent: {}", run.says()),
                    ));
                }
                added.extend(run.context);
            }
        }
        Ok(if added.is_empty() { text } else { format!("{text}\n\n{}", added.join("\n")) })
    }
}

/// Follows a session with `Stop` hooks: when a turn ends complete, the
/// hooks run; one that blocks sends the model on with its reason (at most
/// `MAX_STOP_CONTINUATIONS` times in a row, `stop_hook_active` telling
/// the hook it is one of those). Ends with the session's actor.
pub(super) fn watch_stops(
    engine: Engine,
    id: String,
    cwd: String,
    events: tokio::sync::broadcast::Receiver<crate::session::PublishedEvent>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    // Boxed: it starts sessions, which start watchers.
    Box::pin(watch_stops_loop(engine, id, cwd, events))
}

pub(super) async fn watch_stops_loop(
    engine: Engine,
    id: String,
    cwd: String,
    mut events: tokio::sync::broadcast::Receiver<crate::session::PublishedEvent>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let mut chained = 0u32;
    loop {
        let ev = match events.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev.json) else { continue };
        if v["kind"] != "turn_finished" {
            continue;
        }
        if v["status"] != "complete" {
            chained = 0;
            continue;
        }
        match engine.stop_hooks(&id, &cwd, chained > 0).await {
            Some(reason) if chained < MAX_STOP_CONTINUATIONS => {
                chained += 1;
                let text = format!("[Stop hook] {reason}");
                let hook = ClientRef { id: 0, name: "hook".into(), kind: forge_proto::ClientKind::Other };
                if let Err(e) = engine.send(&id, text, hook).await {
                    tracing::warn!(session = %id, error = %e, "a Stop hook's continuation was not sent");
                }
            }
            _ => chained = 0,
        }
    }
}
