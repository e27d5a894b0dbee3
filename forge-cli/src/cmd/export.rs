//! `forgectl export` and `forgectl import`: a whole session as JSON lines
//! (round-trip exact), or its conversation as Markdown to read.

use forge_proto::params::{ExportParams, ImportParams};
use std::io::{Read, Write};

use forge_client::ForgeClient;
use forge_proto::Role;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Every node of the tree, bookmarks, facts and the event log: what
    /// `forgectl import` reads
    Jsonl,
    /// The conversation on the current path, to read
    Markdown,
}

fn write_out(path: Option<&std::path::Path>, text: &str) -> Result<(), Failure> {
    match path {
        Some(p) => {
            use std::os::unix::fs::OpenOptionsExt;
            // An export holds the whole conversation: private to the user.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(p)
                .map_err(|e| Failure::new(1, "io", format!("cannot write {}: {e}", p.display())))?;
            f.write_all(text.as_bytes())
                .map_err(|e| Failure::new(1, "io", format!("cannot write {}: {e}", p.display())))
        }
        None => {
            crate::output::stdout_result(crate::output::stdout().write_all(text.as_bytes()));
            Ok(())
        }
    }
}

pub async fn export(g: &Global, session: &str, format: Format, out: Option<&std::path::Path>) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    let text = match format {
        Format::Jsonl => {
            // Long sessions come in pages.
            let (mut text, mut offset, mut count) = (String::new(), None, 0usize);
            let id = loop {
                let r = conn
                    .client
                    .session_export(ExportParams { session: session.to_string(), offset: offset.unwrap_or_default() })
                    .await?;
                for line in &r.lines {
                    text.push_str(&serde_json::to_string(line).unwrap_or_default());
                    text.push('\n');
                }
                count += r.lines.len();
                match r.next {
                    Some(n) if r.lines.is_empty() => {
                        return Err(Failure::new(
                            1,
                            "protocol",
                            format!("the daemon sent an empty page before line {n}"),
                        ));
                    }
                    Some(n) => offset = Some(n),
                    None => break r.session_id,
                }
            };
            if let Some(p) = out {
                eprintln!("forgectl: exported session {id} ({count} lines) to {}", p.display());
            }
            text
        }
        Format::Markdown => {
            let info = conn.client.session_show(session.to_string()).await?;
            let h = conn.client.session_history(session.to_string()).await?;
            markdown(info.name.as_deref().unwrap_or(&info.id), &info.cwd, &h.messages)
        }
    };
    write_out(out, &text)
}

/// The path as Markdown: a heading per message, tool calls and results
/// as fenced blocks.
fn markdown(title: &str, cwd: &str, messages: &[forge_proto::HistoryMessage]) -> String {
    let mut md = format!("# {title}\n\n_Forge session in `{cwd}`, {} messages._\n", messages.len());
    for m in messages {
        match m.role {
            Role::User => md.push_str(&format!("\n## You\n\n{}\n", m.text.trim_end())),
            Role::Assistant => {
                md.push_str(&format!("\n## {}\n", m.meta.model.as_deref().unwrap_or("Assistant")));
                if !m.text.trim().is_empty() {
                    md.push_str(&format!("\n{}\n", m.text.trim_end()));
                }
                for c in &m.meta.tool_calls {
                    md.push_str(&format!("\n**{}**\n\n```json\n{}\n```\n", c.name, c.arguments));
                }
            }
            Role::Tool => {
                let name = m.meta.tool_result.as_ref().map(|t| t.name.as_str()).unwrap_or("tool");
                let failed = m.meta.tool_result.as_ref().is_some_and(|t| t.is_error);
                let fence = if m.text.contains("```") { "~~~~" } else { "```" };
                md.push_str(&format!(
                    "\n_{name} {}:_\n\n{fence}\n{}\n{fence}\n",
                    if failed { "failed" } else { "returned" },
                    m.text.trim_end()
                ));
            }
            Role::Summary | Role::Other => {}
        }
    }
    md
}

/// Most bytes of lines in one `session.import` piece.
const PIECE_BYTES: usize = 4 * 1024 * 1024;

pub async fn import(
    g: &Global,
    file: &str,
    cwd: Option<&std::path::Path>,
    allow_broad_root: bool,
) -> Result<(), Failure> {
    let cwd = match cwd {
        Some(p) => crate::connect::daemon_dir(g, Some(p.to_path_buf()), "--cwd", false)?,
        None => None,
    };
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(file).map(|t| text = t)
    };
    read.map_err(|e| Failure::new(2, "invalid_input", format!("cannot read {file}: {e}")))?;
    let mut lines = Vec::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| {
            Failure::new(
                2,
                "invalid_input",
                format!("{file}, line {}: not JSON ({e}); `forgectl export` writes what import reads", i + 1),
            )
        })?;
        lines.push((i + 1, v));
    }
    let conn = daemon(g).await?;
    // In pieces that fit the socket's messages (8 MiB), the last one
    // committing the whole.
    let mut pieces: Vec<Vec<serde_json::Value>> = vec![Vec::new()];
    let mut bytes = 0;
    for (line, l) in lines {
        let size = l.to_string().len();
        // A line is never split: one larger than a message to the daemon
        // can hold is refused here, saying so (not as a lost connection).
        if size > PIECE_BYTES * 2 - 64 * 1024 {
            return Err(Failure::new(
                2,
                "invalid_input",
                format!(
                    "{file}: line {line} is {:.1} MiB, more than one message to forged may hold ({} MiB); it cannot be imported as it is",
                    size as f64 / (1024.0 * 1024.0),
                    forge_proto::MAX_MESSAGE_BYTES / (1024 * 1024)
                ),
            ));
        }
        if bytes + size > PIECE_BYTES && pieces.last().is_some_and(|p| !p.is_empty()) {
            pieces.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(p) = pieces.last_mut() {
            p.push(l);
        }
    }
    let (last, mut upload) = (pieces.len() - 1, None);
    let mut imported = None;
    for (i, piece) in pieces.into_iter().enumerate() {
        let r = conn
            .client
            .session_import(ImportParams {
                lines: piece,
                upload: upload.take(),
                more: i < last,
                cwd: cwd.clone(),
                allow_broad_root,
            })
            .await?;
        upload = r.upload;
        imported = r.session;
    }
    let Some(info) = imported else {
        return Err(Failure::new(1, "protocol", "the daemon did not say which session it imported"));
    };
    if g.json {
        crate::output::json_line(&info);
    } else {
        eprintln!(
            "forgectl: imported session {}{} ({} messages on its path); `forgectl tree {}` draws it",
            info.id,
            info.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default(),
            info.message_count,
            info.id
        );
    }
    Ok(())
}
