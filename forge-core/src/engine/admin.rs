//! What the daemon reports and administers beside sessions: models and
//! tools, the command sandbox and its escape suite, MCP servers, the
//! journal.

use super::*;

impl Engine {
    /// The models Forge knows, optionally of one provider.
    pub fn models(&self, provider: Option<&str>) -> Result<Vec<forge_proto::ModelInfo>, EngineError> {
        let provider = match provider {
            None => None,
            Some(p) => Some(ProviderKind::parse(p).ok_or_else(|| {
                EngineError::new(
                    ErrorKind::InvalidParams,
                    format!("unknown provider \"{p}\"; use claude (or anthropic), openai or gemini"),
                )
            })?),
        };
        Ok(crate::catalog::list(&self.shared().config, provider)
            .into_iter()
            .map(|m| forge_proto::ModelInfo {
                name: m.name,
                provider: m.provider.as_str().to_string(),
                context_window: m.context_window,
                max_output_tokens: m.max_output_tokens,
                source: m.source.as_str().to_string(),
                price: m.price,
                vision: m.vision,
                deprecated: m.deprecated,
                fallback: m.fallback,
                max_total_tokens: m.max_total_tokens,
                sampling: m.sampling,
            })
            .collect())
    }

    /// The tools and what the approval policy does with each: the
    /// built-in ones and the configured MCP servers'.
    pub fn tools(&self) -> Vec<forge_proto::ToolInfo> {
        let policy = crate::tools::policy::ApprovalPolicy::for_tools(&self.shared().config.tools);
        self.shared()
            .tools
            .iter()
            .cloned()
            .chain(self.shared().mcp.tools(None))
            .map(|t| forge_proto::ToolInfo {
                name: t.name().to_string(),
                description: t.description().to_string(),
                risk: crate::store::rows::enum_str(&t.risk_level()),
                approval: policy.decide(t.as_ref(), None).word().to_string(),
            })
            .collect()
    }

    /// How commands are confined on this machine, as configured.
    pub fn sandbox_status(&self) -> forge_proto::SandboxStatus {
        use crate::tools::confine;
        let tools = &self.shared().config.tools;
        let settings = confine::Settings::from_config(tools.sandbox.as_ref());
        let support = confine::support();
        let totals = confine::totals();
        let limits = settings.limits();
        let (mode, reason) = match (settings.mode, support.missing()) {
            (confine::SandboxMode::PathsOnly, _) => (
                "paths-only",
                Some("[tools.sandbox] mode = \"paths-only\": commands are not confined and every one asks".to_string()),
            ),
            (confine::SandboxMode::Kernel, Some(why)) => ("unavailable", Some(format!("{why}; every command asks"))),
            (confine::SandboxMode::Kernel, None) => ("kernel", None),
        };
        forge_proto::SandboxStatus {
            mode: mode.into(),
            landlock_abi: support.landlock_abi,
            user_namespaces: support.user_namespaces,
            network: settings.network.word().into(),
            max_memory_mb: limits.memory_mb,
            max_processes: limits.processes,
            max_cpu_seconds: limits.cpu_seconds,
            processes_bounded: totals.pids,
            memory_bounded: totals.memory,
            totals: totals.how,
            confined_by: if mode == "kernel" { support.confined_by() } else { None },
            kernel: confine::kernel_release(),
            reason,
            refused_toolchains: confine::host()
                .and_then(|h| h.home.as_deref())
                .map(confine::refused_toolchains)
                .unwrap_or_default()
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        }
    }

    /// Runs the escape suite against the configured command sandbox.
    pub async fn sandbox_test(&self, socket: &std::path::Path) -> Result<forge_proto::SandboxReport, EngineError> {
        use crate::tools::confine;
        let settings = confine::Settings::from_config(self.shared().config.tools.sandbox.as_ref());
        let home = self.shared().db.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        let targets = forge_tools::escape_suite::Targets { socket: socket.to_path_buf(), forge_home: home };
        let rows = forge_tools::escape_suite::run_suite(&settings, &targets)
            .await
            .map_err(|e| EngineError::internal(format!("cannot prepare the escape suite: {e}")))?;
        let mut probes: Vec<forge_proto::SandboxProbe> = rows
            .into_iter()
            .map(|r| forge_proto::SandboxProbe {
                ok: r.passed(),
                probe: r.probe,
                expected: r.expected,
                outcome: r.outcome,
                detail: r.detail,
            })
            .collect();
        probes.push(crate::trust::probe(&self.shared().trust));
        Ok(forge_proto::SandboxReport { status: self.sandbox_status(), passed: probes.iter().all(|p| p.ok), probes })
    }

    /// The MCP servers (those `session` sees, if given).
    pub async fn mcp_list(&self, session: Option<&str>) -> Result<Vec<forge_proto::McpServerInfo>, EngineError> {
        let session = match session {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        Ok(self.shared().mcp.report(session.as_deref()).into_iter().map(mcp_info).collect())
    }

    /// Connects to an MCP server again now.
    pub async fn mcp_restart(
        &self,
        name: &str,
        session: Option<&str>,
    ) -> Result<forge_proto::McpServerInfo, EngineError> {
        self.check_running()?;
        let session = match session {
            Some(s) => Some(self.resolve(s).await?),
            None => None,
        };
        self.shared()
            .mcp
            .restart(name, session.as_deref())
            .map(mcp_info)
            .map_err(|e| EngineError::new(ErrorKind::McpServerNotFound, e.to_string()))
    }

    /// Gives a session MCP servers of its own (an editor's, over ACP),
    /// replacing those it had; they live as long as the daemon.
    pub async fn set_session_mcp_servers(
        &self,
        selector: &str,
        servers: Vec<forge_proto::McpServerSpec>,
    ) -> Result<Vec<forge_proto::McpServerInfo>, EngineError> {
        self.check_running()?;
        let id = self.resolve(selector).await?;
        let config = mcp_config(servers)?;
        self.shared().mcp.set_session_servers(&id, config.servers);
        Ok(self.shared().mcp.report(Some(&id)).into_iter().filter(|r| r.session.is_some()).map(mcp_info).collect())
    }

    /// Rows the journal has written since start (a cheap activity count).
    pub fn journal_rows_written(&self) -> u64 {
        self.shared().writer.stats().rows
    }

    pub fn journal_health(&self) -> (JournalHealth, Option<String>) {
        let h = self.shared().writer.health();
        (h.health, h.reason)
    }

    pub async fn journal_status(&self) -> Result<JournalStatus, EngineError> {
        let shared = self.shared();
        // Written back if it was deleted; the health says how it went.
        let _ = shared.writer.verify().await;
        let h = shared.writer.health();
        let st = shared.writer.stats();
        let (open_streams, events) = shared.store.journal_counts().await?;
        let (db_bytes, wal_bytes) = self.db_sizes();
        Ok(JournalStatus {
            health: h.health,
            reason: h.reason.map(|r| blocked_advice(&r, h.health)),
            since_ms: h.since_ms,
            durability: match shared.config.journal.durability {
                crate::config::Durability::Process => "process".into(),
                crate::config::Durability::Power => "power".into(),
            },
            transactions: st.transactions,
            batches: st.batches,
            rows: st.rows,
            failed_commits: st.failed_commits,
            largest_group: st.largest_group,
            last_commit_us: st.last_commit_us,
            open_streams,
            events,
            db_bytes,
            wal_bytes,
            path: shared.db_path().display().to_string(),
            restored: None,
        })
    }

    /// Whether the daemon may stop without losing the store: a database
    /// deleted or replaced on disk is written back first, and if it cannot
    /// be, the error says why (stopping would lose it).
    pub async fn safe_to_stop(&self) -> Result<(), EngineError> {
        self.shared().writer.verify().await.map_err(|reason| {
            EngineError::new(
                ErrorKind::PersistenceBlocked,
                format!(
                    "forged is not stopping: {reason}. Its sessions live only in the file it still holds open, and \
                     stopping now would lose them. {}",
                    crate::error::unblock_advice(&reason)
                ),
            )
        })
    }

    /// The daemon's periodic look at its store (see `safe_to_stop`): a
    /// database deleted on disk is written back within a moment, before a
    /// crash could lose what only the deleted file held.
    pub async fn check_store(&self) {
        if let Err(e) = self.shared().writer.verify().await {
            tracing::error!(error = %e, "the store cannot be written back");
        }
    }

    /// Tries to leave the blocked state (see `journal.reset`).
    pub async fn journal_reset(&self) -> Result<JournalStatus, EngineError> {
        let writer = &self.shared().writer;
        let mut restored = None;
        match writer.reset().await.map_err(|reason| EngineError::blocked(&reason))? {
            ResetOutcome::Healthy => {}
            ResetOutcome::Restored(note) => {
                // Readers move to the written-back file before the journal
                // says healthy (and sessions reload from it).
                self.shared().store.reopen().await?;
                writer.reset().await.map_err(|reason| EngineError::blocked(&reason))?;
                restored = Some(note);
            }
        }
        // Live sessions reload on the health change; one without an actor
        // recovers what the failure interrupted when it starts, as at
        // start-up.
        for id in self.shared().store.sessions_needing_attention().await? {
            self.handle(&id).await?;
        }
        let mut status = self.journal_status().await?;
        status.restored = restored;
        Ok(status)
    }

    pub async fn counts(&self) -> Result<(u32, u32), EngineError> {
        let total = self.shared().store.sessions().await?.len() as u32;
        let active = self
            .inner
            .sessions
            .lock()
            .await
            .values()
            .filter(|h| h.is_alive() && h.snapshot.borrow().state != OperationStateKind::Idle)
            .count() as u32;
        Ok((total, active))
    }
}

pub(super) fn mcp_info(r: forge_mcp::ServerReport) -> forge_proto::McpServerInfo {
    forge_proto::McpServerInfo {
        name: r.name,
        session_id: r.session,
        transport: r.transport.to_string(),
        target: r.target,
        state: r.state.to_string(),
        error: r.error,
        retry_in_seconds: r.retry_in_seconds,
        server_info: r.server_info,
        restarts: r.restarts,
        calls: r.calls,
        tools: r
            .tools
            .into_iter()
            .map(|t| forge_proto::McpToolInfo {
                name: t.name,
                remote_name: t.remote_name,
                description: t.description,
                read_only: t.read_only,
            })
            .collect(),
        prompts: r.prompts,
        resources: u32::try_from(r.resources).unwrap_or(u32::MAX),
    }
}

/// The reason, with what to do about it when the journal is blocked.
pub(super) fn blocked_advice(reason: &str, health: JournalHealth) -> String {
    if health == JournalHealth::Blocked {
        format!("{reason}. Nothing already acknowledged is lost. {}", crate::error::unblock_advice(reason))
    } else {
        reason.to_string()
    }
}

/// Servers given on the wire (an editor's, a project's `.mcp.json`),
/// checked as `[[mcp.servers]]` entries are.
pub(crate) fn mcp_config(servers: Vec<forge_proto::McpServerSpec>) -> Result<forge_mcp::McpConfig, EngineError> {
    let servers = servers
        .into_iter()
        .map(|s| forge_mcp::McpServerConfig {
            name: s.name,
            command: s.command,
            args: s.args,
            env: s.env,
            url: s.url,
            headers: s.headers,
            ..Default::default()
        })
        .collect();
    let config = forge_mcp::McpConfig { servers, ..Default::default() };
    config.validate().map_err(|e| EngineError::new(ErrorKind::InvalidParams, e))?;
    Ok(config)
}
