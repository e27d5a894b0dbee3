//! A new session in a folder whose own hooks and MCP servers Forge
//! ignores until trusted: the editor asks the user once, as a permission
//! request (ACP has no other question to ask), and the answer trusts the
//! folder or leaves it as it is.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    TextContent, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use forge_client::ForgeClient;
use forge_proto::FolderTrust;

use super::Bridge;

const TRUST: &str = "trust";
const NOT_NOW: &str = "not-now";

/// Asks whether to trust `folder` for `session`'s sake.
pub async fn ask(b: Arc<Bridge>, cx: ConnectionTo<Client>, session: String, folder: FolderTrust) {
    let Ok(d) = b.daemon().await else { return };
    let what = folder.provides.join(", ");
    let text = format!(
        "{} provides {what}. These run programs on your machine; Forge ignores them until you trust this folder (as its files are now).",
        folder.dir
    );
    let fields = ToolCallUpdateFields::new()
        .title(format!("Trust {}?", folder.dir))
        .status(ToolCallStatus::Pending)
        .content(vec![ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))]);
    let options = vec![
        PermissionOption::new(TRUST.to_string(), "Trust this folder", PermissionOptionKind::AllowAlways),
        PermissionOption::new(NOT_NOW.to_string(), "Not now", PermissionOptionKind::RejectOnce),
    ];
    let request =
        RequestPermissionRequest::new(session, ToolCallUpdate::new("forge-trust".to_string(), fields), options);
    let Ok(answer) = cx.send_request(request).block_task().await else { return };
    if let RequestPermissionOutcome::Selected(s) = answer.outcome
        && s.option_id.to_string() == TRUST
    {
        let _ = d.client.trust_add(folder.dir).await;
    }
}
