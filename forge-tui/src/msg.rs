//! What the background tasks (the link, calls, reads) tell the UI loop,
//! and who the TUI says it is to the daemon.

use std::sync::Arc;

use forge_client::jsonrpsee::async_client::Client;
use forge_proto::{ClientInfo, ClientKind, SubscriptionItem};

use crate::branches::TreeOpen;
use crate::transcript::Level;

pub fn client_info() -> ClientInfo {
    ClientInfo { name: "forge".into(), version: env!("CARGO_PKG_VERSION").into(), kind: ClientKind::Tui }
}

/// What the background tasks tell the loop.
pub(crate) enum Msg {
    Item(Box<SubscriptionItem>),
    /// The link to the daemon dropped (or a try to get it back failed).
    Lost(String),
    /// Following again, from where the transcript stopped.
    Back,
    /// The connection for calls, made again after it dropped.
    Reconnected(Arc<Client>),
    Notice(Level, String),
    /// The daemon is back but the session is not.
    SessionGone(String),
    /// A message the daemon refused: back into the draft.
    SendFailed(String, String),
    /// Its images, attached again.
    Reattach(Vec<crate::attach::Attachment>),
    /// The clipboard's image, read (or why not).
    Pasted(Result<crate::attach::Attachment, String>),
    /// The daemon's model catalog, for the picker.
    Models(Vec<forge_proto::ModelInfo>),
    /// The session's commands of one's own.
    Commands(Vec<forge_proto::CommandInfo>),
    /// The resources its MCP servers list.
    Resources(Vec<forge_proto::McpResourceInfo>),
    /// The session's path, read again after its head moved.
    Path(Vec<forge_proto::HistoryMessage>),
    /// The session's tree, and what to open with it.
    Tree(Box<forge_proto::TreeInfo>, TreeOpen),
}
