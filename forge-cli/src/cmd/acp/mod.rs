//! `forgectl acp`: the Agent Client Protocol (v1) on stdin/stdout, as
//! editors launch agents, bridged to daemon sessions. An ACP session is a
//! daemon session (its id is Forge's): the TUI and scripts see the same
//! turns, approvals can be answered anywhere, and closing the editor
//! stops nothing.
//!
//! - [`map`]: Forge's events and history in ACP's words.
//! - [`turn`]: one prompt, followed to its end, approvals included.

mod map;
mod trust;
mod turn;
mod wire;

use forge_proto::params::{
    ApprovalRulesParams, CancelParams, CheckoutParams, ConfigureParams, CreateParams, ForkParams, ModelsParams,
    RewindParams, SetMcpServersParams,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, CancelNotification,
    ConfigOptionUpdate, Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue, SessionConfigSelectOption, SessionMode,
    SessionModeState, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, UnstructuredCommandInput,
};
use agent_client_protocol::{Agent, Client, UntypedMessage};
use forge_client::{Connection, ForgeClient};
use forge_proto::{ClientInfo, ClientKind, McpServerSpec, SessionInfo};
use serde_json::{Value, json};

use crate::Global;
use crate::exit::Failure;

/// Forge's methods where ACP has none, announced in `initialize`'s `_meta`.
pub const EXTENSIONS: [&str; 4] = ["_forge/tree", "_forge/rewind", "_forge/fork", "_forge/checkout"];

/// The approval modes an editor may pick (`session/set_mode`).
const MODES: [(&str, &str, &str); 3] = [
    ("default", "Ask", "Reading runs at once; changes and commands ask first"),
    ("permissive", "Auto", "Everything runs without asking, except high-risk tools"),
    ("strict", "Read-only", "Only allowlisted tools run; the rest are refused"),
];

/// The commands a prompt may start with.
const COMMANDS: [(&str, &str); 4] = [
    ("undo", "Take back the last turn: its messages and the files it changed"),
    ("summarize", "Summarize the conversation so far to free the context window"),
    ("usage", "Tokens and estimated cost of this session"),
    ("context", "add PATH... or remove PATH...: keep files' whole text in every request"),
];

pub(crate) type Result<T> = std::result::Result<T, agent_client_protocol::Error>;

pub(crate) struct Bridge {
    global: Global,
    /// The connection to the daemon; made again if it was lost.
    daemon: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Prompts not yet handed to the daemon: the bridge waits for them
    /// before it exits when the editor closes its end right after one.
    sending: tokio::sync::watch::Sender<usize>,
    /// The editor, as `initialize` named it.
    editor: Mutex<Option<String>>,
    /// Working directories of the sessions this editor opened.
    cwds: Mutex<HashMap<String, PathBuf>>,
}

impl Bridge {
    /// The daemon, connected (and started) on first use, as the editor,
    /// and connected again if the connection was lost.
    pub(crate) async fn daemon(&self) -> Result<Arc<Connection>> {
        let mut held = self.daemon.lock().await;
        if let Some(c) = held.as_ref().filter(|c| c.client.is_connected()) {
            return Ok(c.clone());
        }
        let editor = self.editor.lock().map(|e| e.clone()).unwrap_or_default();
        let info = ClientInfo {
            name: match editor {
                Some(e) => format!("{e} (acp)"),
                None => "acp".into(),
            },
            version: env!("CARGO_PKG_VERSION").into(),
            kind: ClientKind::Editor,
        };
        let c =
            Arc::new(crate::connect::daemon_as(&self.global, info).await.map_err(|f| rpc_error(-32603, f.message))?);
        *held = Some(c.clone());
        Ok(c)
    }

    /// Counts a prompt as being handed to the daemon until the guard drops.
    pub(crate) fn sending(self: &Arc<Self>) -> Sending {
        self.sending.send_modify(|n| *n += 1);
        Sending(self.clone())
    }

    /// The working directory of a session this editor opened.
    fn cwd(&self, session: &str) -> Option<PathBuf> {
        self.cwds.lock().ok().and_then(|c| c.get(session).cloned())
    }
}

/// See [`Bridge::sending`].
pub(crate) struct Sending(Arc<Bridge>);

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.sending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A daemon error as an ACP error, its Forge kind in `data`.
pub(crate) fn from_client(e: forge_client::jsonrpsee::core::ClientError) -> agent_client_protocol::Error {
    from_failure(Failure::from(e))
}

fn from_failure(f: Failure) -> agent_client_protocol::Error {
    // The editor's own mistakes (a bad cwd, a bad argument) are its to fix.
    let code = if f.kind == "invalid_params" { -32602 } else { -32603 };
    rpc_error(code, f.message).data(json!({"forge_kind": f.kind}))
}

pub(crate) fn rpc_error(code: i32, message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(code, message)
}

pub async fn run(g: &Global) -> std::result::Result<(), Failure> {
    let bridge = Arc::new(Bridge {
        global: g.clone(),
        daemon: tokio::sync::Mutex::new(None),
        sending: tokio::sync::watch::channel(0).0,
        editor: Mutex::new(None),
        cwds: Mutex::new(HashMap::new()),
    });
    let (b1, b2, b3, b4, b5, b6, b7, b8) = (
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
    );
    Agent
        .v1()
        .name("forge")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx: ConnectionTo<Client>| {
                if let (Some(info), Ok(mut editor)) = (&req.client_info, b1.editor.lock()) {
                    *editor = Some(info.name.clone());
                }
                match b1.daemon().await {
                    Ok(_) => responder.respond(initialize_response()),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx: ConnectionTo<Client>| match new_session(&b2, req).await {
                Ok((response, id, untrusted)) => {
                    responder.respond(response)?;
                    if let Some(folder) = untrusted {
                        tokio::spawn(trust::ask(b2.clone(), cx.clone(), id.clone(), folder));
                    }
                    announce_commands(&b2, &cx, &id).await
                }
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx: ConnectionTo<Client>| match load_session(&b3, req, &cx)
                .await
            {
                Ok((response, id)) => {
                    responder.respond(response)?;
                    announce_commands(&b3, &cx, &id).await
                }
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: ConnectionTo<Client>| {
                // A turn takes long: it runs outside the dispatch loop, so
                // cancels and other sessions' requests go on meanwhile.
                let bridge = b4.clone();
                let conn = cx.clone();
                let sending = bridge.sending();
                tokio::spawn(async move {
                    let _ = match turn::prompt(&bridge, req, &conn, sending).await {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx: ConnectionTo<Client>| {
                if let Ok(d) = b5.daemon().await {
                    let _ = d
                        .client
                        .session_cancel(CancelParams { session: n.session_id.to_string(), ..Default::default() })
                        .await;
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest, responder, _cx: ConnectionTo<Client>| match set_mode(
                &b6,
                &req.session_id.to_string(),
                &req.mode_id.to_string(),
            )
            .await
            {
                Ok(()) => responder.respond(SetSessionModeResponse::new()),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, _cx: ConnectionTo<Client>| {
                match set_config_option(&b7, req).await {
                    Ok(options) => responder.respond(SetSessionConfigOptionResponse::new(options)),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: UntypedMessage, responder, cx: ConnectionTo<Client>| match extension(
                &b8,
                &req.method,
                req.params,
                &cx,
            )
            .await
            {
                Ok(v) => responder.respond(v),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(wire::lines(tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|e| Failure::new(1, "acp", format!("the editor connection failed: {e}")))?;
    // The editor closed its end: a prompt it sent just before still
    // reaches the daemon (its turn runs there; any client can follow it).
    let mut sending = bridge.sending.subscribe();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), sending.wait_for(|n| *n == 0)).await;
    Ok(())
}

fn initialize_response() -> InitializeResponse {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "forge".into(),
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "extensions": EXTENSIONS,
            "sessions": "every ACP session is a forged session: `forgectl ps` and `forge` show it",
        }),
    );
    let caps = AgentCapabilities::new()
        .load_session(true)
        // Forge's messages are text: files come inline, images do not.
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
        .mcp_capabilities(McpCapabilities::new().http(true));
    // Version 1 is the one this bridge speaks, whatever the editor asked.
    InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .agent_capabilities(caps)
        .agent_info(Implementation::new("forge", env!("CARGO_PKG_VERSION")).title("Forge".to_string()))
        .meta(meta)
}

/// The editor's MCP servers, as the daemon takes them.
fn mcp_specs(servers: &[McpServer]) -> Vec<McpServerSpec> {
    servers
        .iter()
        .filter_map(|s| match s {
            McpServer::Stdio(s) => Some(McpServerSpec {
                name: s.name.clone(),
                command: Some(s.command.display().to_string()),
                args: s.args.clone(),
                env: s.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect(),
                ..Default::default()
            }),
            McpServer::Http(s) => Some(McpServerSpec {
                name: s.name.clone(),
                url: Some(s.url.clone()),
                headers: s.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
                ..Default::default()
            }),
            // Not offered in `initialize` (`sse: false`).
            _ => None,
        })
        .collect()
}

/// MCP server names as the daemon takes them (an editor may use any).
fn clean_names(mut specs: Vec<McpServerSpec>) -> Vec<McpServerSpec> {
    let mut seen = std::collections::HashSet::new();
    for s in &mut specs {
        let mut name: String = s
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
            .collect::<String>()
            .split("__")
            .collect::<Vec<_>>()
            .join("_");
        name.truncate(48);
        if name.is_empty() {
            name = "mcp".into();
        }
        let mut unique = name.clone();
        let mut n = 2;
        while !seen.insert(unique.clone()) {
            unique = format!("{name}-{n}");
            n += 1;
        }
        s.name = unique;
    }
    specs
}

async fn give_mcp_servers(d: &Connection, session: &str, servers: &[McpServer]) -> Result<()> {
    let specs = clean_names(mcp_specs(servers));
    if specs.is_empty() {
        return Ok(());
    }
    d.client
        .session_set_mcp_servers(SetMcpServersParams { session: session.to_string(), servers: specs })
        .await
        .map_err(from_client)?;
    Ok(())
}

async fn new_session(
    b: &Bridge,
    req: NewSessionRequest,
) -> Result<(NewSessionResponse, String, Option<forge_proto::FolderTrust>)> {
    let d = &*b.daemon().await?;
    let cwd = req.cwd.display().to_string();
    if !req.cwd.is_absolute() {
        return Err(rpc_error(-32602, format!("cwd must be an absolute path, not {cwd}")));
    }
    // Through --remote the editor's cwd is a path of the far machine (an
    // editor running there, or one whose tree is the same on both).
    let info = d.client.session_create(CreateParams { cwd: Some(cwd), ..Default::default() }).await.map_err(|e| {
        let mut f = Failure::from(e);
        if let Some(url) = b.global.remote().filter(|_| f.kind == "invalid_params") {
            f.message = format!("{} (through --remote, the cwd is a directory on {url})", f.message);
        }
        from_failure(f)
    })?;
    give_mcp_servers(d, &info.id, &req.mcp_servers).await?;
    // The session's own directory: a git session works in its worktree,
    // where the files its calls name are.
    if let Ok(mut cwds) = b.cwds.lock() {
        cwds.insert(info.id.clone(), PathBuf::from(&info.cwd));
    }
    let response =
        NewSessionResponse::new(info.id.clone()).modes(modes(&info)).config_options(config_options(d, &info).await?);
    Ok((response, info.id, info.untrusted))
}

async fn load_session(
    b: &Bridge,
    req: LoadSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<(LoadSessionResponse, String)> {
    let d = &*b.daemon().await?;
    let info = d.client.session_show(req.session_id.to_string()).await.map_err(from_client)?;
    give_mcp_servers(d, &info.id, &req.mcp_servers).await?;
    if let Ok(mut cwds) = b.cwds.lock() {
        cwds.insert(info.id.clone(), PathBuf::from(&info.cwd));
    }
    // The conversation so far, before the answer (as ACP asks).
    let history = d.client.session_history(info.id.clone()).await.map_err(from_client)?;
    // Its images, as the editor sent them (one read each).
    let mut images = std::collections::HashMap::new();
    for i in history.messages.iter().flat_map(|m| &m.meta.images) {
        if !images.contains_key(&i.hash)
            && let Ok(got) = d.client.images_get(forge_proto::params::ImageGetParams { hash: i.hash.clone() }).await
        {
            images.insert(i.hash.clone(), got.data);
        }
    }
    for update in map::replay(&history.messages, Path::new(&info.cwd), &images) {
        cx.send_notification(SessionNotification::new(info.id.clone(), update))?;
    }
    let response = LoadSessionResponse::new().modes(modes(&info)).config_options(config_options(d, &info).await?);
    Ok((response, info.id))
}

/// The slash commands a session has: the bridge's own, then the user's
/// and the project's (`commands.list`, expanded by the daemon).
async fn announce_commands(b: &Bridge, cx: &ConnectionTo<Client>, session: &str) -> Result<()> {
    let mut commands: Vec<AvailableCommand> =
        COMMANDS.iter().map(|(name, what)| AvailableCommand::new(*name, *what)).collect();
    if let Ok(d) = b.daemon().await
        && let Ok(own) = d.client.commands_list(session.to_string()).await
    {
        for c in own.into_iter().filter(|c| !COMMANDS.iter().any(|(n, _)| *n == c.name)) {
            let mut a = AvailableCommand::new(c.name, c.description);
            if let Some(hint) = c.argument_hint {
                a = a.input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint)));
            }
            commands.push(a);
        }
    }
    cx.send_notification(SessionNotification::new(
        session.to_string(),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
    ))
}

fn modes(info: &SessionInfo) -> SessionModeState {
    let current = match info.approval_mode.as_deref() {
        Some("auto" | "permissive") => "permissive",
        Some("deny" | "strict") => "strict",
        _ => "default",
    };
    let available = MODES
        .iter()
        .map(|(id, name, what)| SessionMode::new(id.to_string(), *name).description(what.to_string()))
        .collect();
    SessionModeState::new(current.to_string(), available)
}

async fn set_mode(b: &Bridge, session: &str, mode: &str) -> Result<()> {
    if !MODES.iter().any(|(id, ..)| *id == mode) {
        return Err(rpc_error(-32602, format!("no mode `{mode}`; the modes are default, permissive, strict")));
    }
    let d = &*b.daemon().await?;
    d.client
        .session_approval_rules(ApprovalRulesParams {
            session: session.to_string(),
            mode: Some(mode.to_string()),
            ..Default::default()
        })
        .await
        .map_err(from_client)?;
    Ok(())
}

/// The model selector: the catalog's models, the session's chosen.
async fn config_options(d: &Connection, info: &SessionInfo) -> Result<Vec<SessionConfigOption>> {
    let models = d.client.models_list(ModelsParams::default()).await.map_err(from_client)?;
    let mut options: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|m| {
            SessionConfigSelectOption::new(m.name.clone(), m.name.clone())
                .description(format!("{}, {} tokens of context", m.provider, m.context_window))
        })
        .collect();
    if !models.iter().any(|m| m.name == info.model) {
        options.insert(0, SessionConfigSelectOption::new(info.model.clone(), info.model.clone()));
    }
    Ok(vec![
        SessionConfigOption::select("model", "Model", info.model.clone(), options)
            .category(SessionConfigOptionCategory::Model)
            .description("The model this session's next turns use".to_string()),
    ])
}

async fn set_model(d: &Connection, session: &str, model: &str) -> Result<SessionInfo> {
    let models = d.client.models_list(ModelsParams::default()).await.map_err(from_client)?;
    let provider = models.iter().find(|m| m.name == model).map(|m| m.provider.clone());
    d.client
        .session_configure(ConfigureParams {
            session: session.to_string(),
            provider,
            model: Some(model.to_string()),
            ..Default::default()
        })
        .await
        .map_err(from_client)
}

async fn set_config_option(b: &Bridge, req: SetSessionConfigOptionRequest) -> Result<Vec<SessionConfigOption>> {
    let d = &*b.daemon().await?;
    let session = req.session_id.to_string();
    if req.config_id.to_string() != "model" {
        return Err(rpc_error(-32602, format!("no option `{}`; Forge offers `model`", req.config_id)));
    }
    let SessionConfigOptionValue::ValueId { value } = &req.value else {
        return Err(rpc_error(-32602, "`model` takes a model name"));
    };
    let info = set_model(d, &session, &value.to_string()).await?;
    config_options(d, &info).await
}

/// `session/set_model` (as editors before config options sent it) and
/// Forge's `_forge/` methods.
async fn extension(b: &Bridge, method: &str, params: Value, cx: &ConnectionTo<Client>) -> Result<Value> {
    let d = &*b.daemon().await?;
    let s = |key: &str| params.get(key).and_then(Value::as_str).map(str::to_string);
    let session = s("sessionId").or_else(|| s("session_id")).or_else(|| s("session"));
    let need_session = || session.clone().ok_or_else(|| rpc_error(-32602, format!("{method} needs `sessionId`")));
    match method {
        "session/set_model" | "session/setModel" => {
            let model = s("modelId").ok_or_else(|| rpc_error(-32602, "session/set_model needs `modelId`"))?;
            let info = set_model(d, &need_session()?, &model).await?;
            let options = config_options(d, &info).await?;
            cx.send_notification(SessionNotification::new(
                info.id.clone(),
                SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
            ))?;
            Ok(json!({}))
        }
        "_forge/tree" => to_value(d.client.session_tree(need_session()?).await.map_err(from_client)?),
        "_forge/rewind" => {
            let dry = params.get("dryRun").and_then(Value::as_bool);
            let force = params.get("force").and_then(Value::as_bool);
            let r = d
                .client
                .session_rewind(RewindParams {
                    session: need_session()?,
                    node: s("node"),
                    dry_run: dry.unwrap_or_default(),
                    force: force.unwrap_or_default(),
                    partial: params.get("partial").and_then(Value::as_bool).unwrap_or_default(),
                    ..Default::default()
                })
                .await
                .map_err(from_client)?;
            to_value(r)
        }
        "_forge/fork" => {
            let r = d
                .client
                .session_fork(ForkParams {
                    session: need_session()?,
                    node: s("node"),
                    name: s("name"),
                    ..Default::default()
                })
                .await
                .map_err(from_client)?;
            to_value(r)
        }
        "_forge/checkout" => {
            let node = s("node").ok_or_else(|| rpc_error(-32602, "_forge/checkout needs `node`"))?;
            to_value(
                d.client
                    .session_checkout(CheckoutParams { session: need_session()?, node })
                    .await
                    .map_err(from_client)?,
            )
        }
        _ => Err(agent_client_protocol::Error::method_not_found().data(json!({"method": method}))),
    }
}

fn to_value(r: impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(r).map_err(|e| rpc_error(-32603, e.to_string()))
}
