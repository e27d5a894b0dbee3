//! `forgectl trust [DIR] [--list | --revoke | --show]`: the folders whose
//! own hooks and MCP servers Forge honours.

use std::path::PathBuf;

use forge_client::ForgeClient;
use forge_proto::FolderTrust;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The folder [default: the current directory]
    dir: Option<PathBuf>,
    /// List the trusted folders, each with its state now
    #[arg(long, conflicts_with_all = ["revoke", "show", "dir"])]
    list: bool,
    /// Stop trusting the folder
    #[arg(long, conflicts_with = "show")]
    revoke: bool,
    /// Say what the folder provides and whether it is trusted; change
    /// nothing
    #[arg(long)]
    show: bool,
}

/// One folder in a line.
fn line(f: &FolderTrust) -> String {
    let what = if f.provides.is_empty() { "nothing that runs code".to_string() } else { f.provides.join(", ") };
    let state = match f.state.as_str() {
        "changed" => "CHANGED since trusted, ignored until trusted again",
        "untrusted" => "not trusted, ignored",
        "trusted" => "trusted",
        _ => "nothing to trust",
    };
    format!("{}: {state} ({what})", f.dir)
}

/// What a new session's folder holds that Forge ignores, said once.
pub fn notice(f: &FolderTrust) {
    eprintln!(
        "forgectl: ignored until you trust {}: {}; `forgectl trust {}` honours them",
        f.dir,
        crate::output::shown(&f.provides.join(", ")),
        f.dir
    );
}

pub async fn run(g: &Global, a: TrustArgs) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    if a.list {
        let list = conn.client.trust_list(()).await?;
        for f in &list {
            if g.json {
                json_line(f);
            } else {
                outln!("{}", line(f));
            }
        }
        if list.is_empty() && !g.json {
            eprintln!("forgectl: no folder is trusted");
        }
        return Ok(());
    }
    let dir = crate::connect::daemon_dir(g, a.dir, "--dir", true)?.unwrap_or_default();
    let f = if a.show {
        conn.client.trust_show(dir).await?
    } else if a.revoke {
        conn.client.trust_revoke(dir).await?
    } else {
        conn.client.trust_add(dir).await?
    };
    if g.json {
        json_line(&f);
    } else {
        outln!("{}", line(&f));
    }
    Ok(())
}
