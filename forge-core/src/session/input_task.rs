//! The I/O of a message's way in (see `machine/input.rs`, which decides):
//! commands of one's own read from disk, an MCP prompt fetched (after
//! waiting for its server if it is still starting), resources read,
//! images kept in the store's blobs, and the same message looked for
//! under the head. A message that names none of these costs one store
//! read.

use std::path::Path;
use std::sync::Arc;

use forge_proto::{ErrorKind, ImageInfo, ImageInput};

use super::machine::Refresh;
use super::machine::call::JobOutcome;
use super::machine::input::{Input, InputJob, Named, Prepared, named, prompt_server};
use crate::error::EngineError;
use crate::journal::{StoreOp, WriteBatch};
use crate::shared::Shared;

pub(super) async fn prepare(shared: Arc<Shared>, job: InputJob, refresh: Refresh) -> JobOutcome {
    let input = input(&shared, job).await;
    JobOutcome::InputPrepared(Box::new(Prepared { refresh: Some(refresh), input }))
}

async fn input(shared: &Shared, job: InputJob) -> Result<Input, EngineError> {
    let InputJob { session, cwd, text, continued, resources, images, .. } = job;
    let mut out = Input::default();
    let mcp = &shared.mcp;
    if let Some(text) = text.as_deref().filter(|t| t.trim_start().starts_with('/')) {
        let cwd = Path::new(&cwd);
        let trusted = shared.trust.trusts(cwd);
        let own = crate::slash_commands::load(cwd, trusted);
        // A server still starting has listed no prompt yet: the first
        // message after forged starts waits for it, as its turn would.
        if let Some(server) = prompt_server(text)
            && mcp.starting(Some(&session)).iter().any(|s| s == server)
        {
            mcp.wait_started(Some(&session), shared.config.mcp.turn_wait()).await;
        }
        let prompts = mcp.prompts(Some(&session));
        let offered =
            |server: &str, prompt: &str| prompts.iter().any(|p| p.server == server && p.prompt.name == prompt);
        match named(text, &own, offered) {
            Named::Own { command, args } => {
                out.grants = super::machine::TurnGrants::of(command);
                out.text = Some(command.expand(args));
            }
            Named::Mcp { server, prompt, args } => {
                let expanded = mcp.prompt_text(Some(&session), server, prompt, args).await.map_err(failed)?;
                if expanded.trim().is_empty() {
                    return Err(EngineError::new(
                        ErrorKind::McpRequestFailed,
                        format!("MCP server `{server}` gave an empty prompt for `{prompt}`; nothing was sent"),
                    ));
                }
                out.text = Some(expanded);
            }
            Named::Plain if !trusted => out.ignored = crate::slash_commands::untrusted_project_command(cwd, text),
            Named::Plain => {}
        }
    }
    if out.text.is_none() {
        out.text = text;
    }
    if !resources.is_empty() {
        let mut parts = Vec::new();
        for named in resources {
            let Some((server, uri)) = named.split_once(':').filter(|(s, u)| !s.is_empty() && !u.is_empty()) else {
                return Err(invalid(format!("`{named}` is not `server:uri` (`forgectl mcp resources` lists them)")));
            };
            parts.push(mcp.resource_text(Some(&session), server, uri).await.map_err(failed)?);
        }
        let text = out.text.take().unwrap_or_default();
        let sep = if text.is_empty() { "" } else { "\n\n" };
        out.text = Some(format!("{text}{sep}{}", parts.join("\n\n")));
    }
    out.images = keep_images(shared, images).await?;
    // Prefix matching: the same message again under the same node is
    // that node, answered anew (a sibling answer), not a copy.
    if let (false, Some(text)) = (continued, &out.text) {
        out.same = shared.store.user_messages_under_head(&session, text).await?;
    }
    Ok(out)
}

/// Keeps one image (checked) in the store's blobs: content-addressed, so
/// once. A blob no message names is dropped when the store next opens.
pub(crate) async fn keep_image(
    shared: &Shared,
    data: &str,
    mime: Option<&str>,
    name: Option<String>,
) -> Result<ImageInfo, EngineError> {
    let decoded = crate::images::decode(data, mime, name).map_err(invalid)?;
    let batch = WriteBatch { ops: vec![StoreOp::PutBlob { hash: decoded.info.hash.clone(), data: decoded.data }] };
    shared.writer.write(batch).await.map_err(|e| EngineError::blocked(&e.to_string()))?;
    Ok(decoded.info)
}

/// A message's images, kept and described: the session gets what names
/// them, never their bytes.
async fn keep_images(shared: &Shared, inputs: Vec<ImageInput>) -> Result<Vec<ImageInfo>, EngineError> {
    let mut out = Vec::with_capacity(inputs.len());
    for ImageInput { data, hash, mime_type, name } in inputs {
        let info = match (data, hash) {
            (Some(data), _) => keep_image(shared, &data, mime_type.as_deref(), name).await?,
            (None, Some(hash)) => {
                let bytes = shared.store.blob(&hash).await?.ok_or_else(|| {
                    invalid(format!("no image {hash} is kept (it is dropped when forged restarts); send it again"))
                })?;
                crate::images::describe(bytes, mime_type.as_deref(), name).map_err(invalid)?.info
            }
            (None, None) => return Err(invalid("an image needs `data` (base64) or the `hash` images.put gave".into())),
        };
        out.push(info);
    }
    Ok(out)
}

fn invalid(message: String) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}

fn failed(e: forge_mcp::ExtraError) -> EngineError {
    let kind = match e {
        forge_mcp::ExtraError::UnknownServer(_) => ErrorKind::McpServerNotFound,
        forge_mcp::ExtraError::Failed(_) => ErrorKind::McpRequestFailed,
    };
    EngineError::new(kind, format!("{e}; nothing was sent"))
}
