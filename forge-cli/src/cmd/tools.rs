//! `forgectl tools`: the tools the model may call, and a project's own
//! (`.forge/tools/*.toml`), which it gets once you approve them
//! (`tools approve`), as their files are then.

use std::path::PathBuf;

use forge_client::ForgeClient;
use forge_proto::params::{ApproveToolsParams, RevokeToolsParams, ToolFileRef};
use forge_proto::{ProjectTool, ProjectTools};

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::{interactive, json_line, shown};

#[derive(Debug, clap::Subcommand)]
pub enum ToolsCmd {
    /// Every tool the model may call (risk, approval rule), then the
    /// project's own tools and whether you approved them
    List {
        /// A folder of the project [default: the current directory]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Approve the project's tool files as they are now: shows each one
    /// (name, command, arguments), asks, then sessions of the project offer
    /// them and run them in the sandbox without asking
    Approve {
        /// Tool names or files (.forge/tools/NAME.toml) [default: every
        /// tool not approved yet]
        tools: Vec<String>,
        /// A folder of the project [default: the current directory]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Do not ask (needed without a terminal)
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// End the approval of tool files (none named: all of the project's)
    Revoke {
        /// Tool names or files
        tools: Vec<String>,
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

fn folder(g: &Global, dir: Option<PathBuf>) -> Result<String, Failure> {
    Ok(crate::connect::daemon_dir(g, dir, "--dir", true)?.unwrap_or_default())
}

/// One project tool in a line.
fn line(t: &ProjectTool) -> String {
    let state = match t.state.as_str() {
        "approved" => "approved",
        "changed" => "CHANGED since approved, not offered until approved again",
        "unapproved" => "not approved, not offered",
        _ => "invalid",
    };
    let name = t.name.as_deref().unwrap_or("-");
    let mut s = format!("{name}  ({})  {state}", t.file);
    if let Some(e) = &t.error {
        s.push_str(&format!(": {e}"));
    }
    if !t.pinned.is_empty() {
        s.push_str(&format!("\n    its approval covers {}", t.pinned.join(", ")));
    }
    s
}

/// Whether `t` is the tool `want` names (by name, file or file name).
fn named(t: &ProjectTool, want: &str) -> bool {
    t.name.as_deref() == Some(want)
        || t.file == want
        || t.file.trim_start_matches(".forge/tools/") == want
        || t.file.trim_start_matches(".forge/tools/").trim_end_matches(".toml") == want
}

/// The tools `wanted` names, or every one `all` picks; a name that matches
/// none is an error.
fn pick<'a>(
    p: &'a ProjectTools,
    wanted: &[String],
    all: impl Fn(&ProjectTool) -> bool,
) -> Result<Vec<&'a ProjectTool>, Failure> {
    if wanted.is_empty() {
        return Ok(p.tools.iter().filter(|t| all(t)).collect());
    }
    wanted
        .iter()
        .map(|w| {
            p.tools.iter().find(|t| named(t, w)).ok_or_else(|| {
                Failure::new(2, "not_found", format!("{} has no project tool `{w}` (see `forgectl tools list`)", p.dir))
            })
        })
        .collect()
}

pub async fn run(g: &Global, cmd: ToolsCmd) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    match cmd {
        ToolsCmd::List { dir } => {
            let project = conn.client.tools_project(folder(g, dir)?).await?;
            if g.json {
                json_line(&serde_json::json!({"tools": conn.client.tools_list(()).await?, "project": project}));
                return Ok(());
            }
            for t in conn.client.tools_list(()).await? {
                outln!("{:<28} {:<6} {}", t.name, t.risk, t.approval);
            }
            if project.tools.is_empty() {
                outln!("\nno project tools in {}/.forge/tools", project.dir);
            } else {
                outln!("\nproject tools of {} ({}/.forge/tools):", project.project, project.dir);
                for t in &project.tools {
                    outln!("{}", line(t));
                }
            }
        }
        ToolsCmd::Approve { tools, dir, yes } => {
            let dir = folder(g, dir)?;
            let project = conn.client.tools_project(dir.clone()).await?;
            let chosen = pick(&project, &tools, |t| matches!(t.state.as_str(), "unapproved" | "changed"))?;
            if let Some(bad) = chosen.iter().find(|t| t.state == "invalid") {
                let why = bad.error.clone().unwrap_or_default();
                return Err(Failure::new(2, "invalid_input", format!("cannot approve {}: {why}", bad.file)));
            }
            if chosen.is_empty() {
                eprintln!("forgectl: nothing to approve in {}/.forge/tools", project.dir);
                if g.json {
                    json_line(&project);
                }
                return Ok(());
            }
            for t in &chosen {
                eprintln!("{} ({}):", t.name.as_deref().unwrap_or("-"), t.file);
                eprintln!("  {}", shown(t.description.as_deref().unwrap_or("")));
                eprintln!("  runs: {}", shown(t.command.as_deref().unwrap_or("")));
                if !t.pinned.is_empty() {
                    let files: Vec<String> = t.pinned.iter().map(|p| shown(p).into_owned()).collect();
                    eprintln!("  and its files as they are now: {} (a change asks again)", files.join(", "));
                }
                if let Some(params) = &t.parameters {
                    eprintln!("  arguments: {}", shown(&params.to_string()));
                }
            }
            if !yes {
                if !interactive() {
                    return Err(Failure::new(
                        2,
                        "invalid_input",
                        "approving runs these commands without asking: pass --yes where no terminal can ask",
                    ));
                }
                let q = format!(
                    "Offer {} tool(s) to the model, to run in the sandbox without asking? [y/N] ",
                    chosen.len()
                );
                if !crate::output::ask(&q) {
                    return Err(Failure::new(1, "cancelled", "nothing approved"));
                }
            }
            let files = chosen.iter().map(|t| ToolFileRef { file: t.file.clone(), sha256: t.sha256.clone() }).collect();
            let after = conn.client.tools_approve(ApproveToolsParams { dir, files }).await?;
            report(g, &after);
        }
        ToolsCmd::Revoke { tools, dir } => {
            let dir = folder(g, dir)?;
            let project = conn.client.tools_project(dir.clone()).await?;
            let files = pick(&project, &tools, |_| false)?.iter().map(|t| t.file.clone()).collect();
            let after = conn.client.tools_revoke(RevokeToolsParams { dir, files }).await?;
            report(g, &after);
        }
    }
    Ok(())
}

/// The project tools a new session does not offer yet, said once.
pub fn notice(waiting: &[ProjectTool]) {
    let names: Vec<String> = waiting
        .iter()
        .map(|t| {
            format!(
                "{} ({}{})",
                t.name.as_deref().unwrap_or("-"),
                t.file,
                if t.state == "changed" { ", changed since approved" } else { "" }
            )
        })
        .collect();
    eprintln!(
        "forgectl: project tools not offered until you approve them: {}; `forgectl tools approve` shows and approves them",
        shown(&names.join(", "))
    );
}

fn report(g: &Global, p: &ProjectTools) {
    if g.json {
        json_line(p);
        return;
    }
    for t in &p.tools {
        outln!("{}", line(t));
    }
}
