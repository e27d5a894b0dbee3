//! `forgectl web`: the web client. Prints a pairing URL (a one-time code
//! on the daemon's TCP listener) and the same URL as a QR code to scan
//! with a phone; `devices` lists paired browsers, `revoke` signs them out.

use forge_client::ForgeClient;
use forge_proto::params::{WebPairParams, WebRevokeParams};
use forge_proto::web::WebPairing;

use crate::Global;
use crate::connect::daemon;
use crate::exit::Failure;
use crate::output::json_line;

#[derive(Debug, clap::Args)]
pub struct WebArgs {
    #[command(subcommand)]
    cmd: Option<WebCmd>,
    /// Open the URL in this machine's browser (`xdg-open`)
    #[arg(long)]
    open: bool,
    /// Serve the page on this address (ws://HOST:PORT) [default: the
    /// running listener, else loopback on a port the system picks; kept
    /// for the daemon's next start]
    #[arg(long, value_name = "ws://HOST:PORT")]
    listen: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum WebCmd {
    /// List the browsers paired with the web client
    Devices,
    /// Sign a paired browser out (or every one): its open pages lose
    /// their connection at once
    Revoke {
        /// The device's id (`forgectl web devices`)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        #[arg(long)]
        all: bool,
    },
}

/// The pairing URL on the first listener (loopback preferred).
fn url(p: &WebPairing) -> Option<String> {
    let host = p.listeners.iter().find(|a| a.starts_with("127.") || a.starts_with("[::1]")).or(p.listeners.first())?;
    Some(format!("http://{host}/pair?code={}", p.code))
}

/// `text` as a QR code of half-block characters, two rows a line, with
/// the quiet zone the code needs (dark on light, as phones expect).
fn qr(text: &str) -> Option<String> {
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    let width = code.width();
    let colors = code.to_colors();
    let dark = |x: isize, y: isize| {
        x >= 0
            && y >= 0
            && (x as usize) < width
            && (y as usize) < width
            && colors[y as usize * width + x as usize] == qrcode::Color::Dark
    };
    let quiet = 2isize;
    let mut out = String::new();
    let mut y = -quiet;
    while y < width as isize + quiet {
        for x in -quiet..width as isize + quiet {
            out.push(match (dark(x, y), dark(x, y + 1)) {
                (false, false) => '█',
                (true, false) => '▄',
                (false, true) => '▀',
                (true, true) => ' ',
            });
        }
        out.push('\n');
        y += 2;
    }
    Some(out)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub async fn run(g: &Global, a: WebArgs) -> Result<(), Failure> {
    let conn = daemon(g).await?;
    match a.cmd {
        Some(WebCmd::Devices) => {
            let devices = conn.client.web_devices(()).await?;
            for d in &devices {
                if g.json {
                    json_line(d);
                } else {
                    let ago = now_ms().saturating_sub(d.last_seen_ms) / 1000;
                    outln!("{}  {}  from {}  last seen {ago} s ago", d.id, crate::output::shown(&d.name), d.address);
                }
            }
            if devices.is_empty() && !g.json {
                eprintln!("forgectl: no browser is paired; `forgectl web` prints a pairing link");
            }
        }
        Some(WebCmd::Revoke { id, all }) => {
            let removed = conn.client.web_revoke(WebRevokeParams { device: id, all }).await?;
            if g.json {
                json_line(&serde_json::json!({"revoked": removed}));
            } else {
                outln!("signed out {} browser(s)", removed.len());
            }
        }
        None => {
            let pairing = conn.client.web_pair(WebPairParams { listen: a.listen }).await?;
            let Some(url) = url(&pairing) else {
                return Err(Failure::new(1, "no_listener", "the daemon serves no TCP listener to pair with"));
            };
            if g.json {
                json_line(&serde_json::json!({"url": url, "expires_ms": pairing.expires_ms}));
            } else {
                outln!("Open this link to pair a browser (once, within 5 minutes):\n\n  {url}\n");
                if let Some(code) = qr(&url) {
                    outln!("{code}");
                }
                eprintln!(
                    "forgectl: `forgectl web devices` lists paired browsers; `forgectl web revoke --all` signs them out"
                );
            }
            if a.open
                && let Err(e) = std::process::Command::new("xdg-open")
                    .arg(&url)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
            {
                eprintln!("forgectl: could not open a browser ({e}); open the link yourself");
            }
        }
    }
    Ok(())
}
