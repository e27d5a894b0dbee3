//! `[daemon]`: network listeners for clients beyond this machine's Unix
//! socket (phones, web front ends, a tailnet). Every TCP listener needs
//! the token: unlike the socket, a TCP port lets any local user, and any
//! web page (browsers open WebSockets across origins), reach a daemon
//! that runs commands.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// `ws://HOST:PORT` addresses to serve WebSocket (and HTTP POST) on,
    /// besides the socket. No TLS: put a reverse proxy or a tailnet in front.
    #[serde(default)]
    pub listen: Vec<String>,
    /// The file holding the token every listener requires (`0600`;
    /// created with a random token when missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// `Origin`s a browser may connect from (`https://app.example`); a
    /// request with any other `Origin` is refused. Clients that send no
    /// `Origin` (not browsers) are not concerned.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

/// A `[daemon] listen` entry: where to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    pub host: String,
    pub port: u16,
}

impl ListenAddr {
    /// Reads `ws://HOST:PORT` (`HOST` a name, an IPv4 address or `[IPv6]`).
    pub fn parse(s: &str) -> Result<ListenAddr, String> {
        let bad =
            |why: &str| format!("[daemon] listen = \"{s}\": {why} (write ws://HOST:PORT, e.g. ws://127.0.0.1:7070)");
        let rest = match s.split_once("://") {
            Some(("ws", rest)) => rest,
            Some(("wss", _)) => return Err(bad("forged speaks no TLS; put a reverse proxy or a tailnet in front")),
            _ => return Err(bad("only ws:// is served")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("an IPv6 address lacks its ]"))?;
            (host, after.strip_prefix(':').ok_or_else(|| bad("the port is missing"))?)
        } else {
            rest.rsplit_once(':').ok_or_else(|| bad("the port is missing"))?
        };
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            return Err(bad("the host is not one"));
        }
        let port = port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| bad("the port is not a number"))?;
        Ok(ListenAddr { host: host.to_string(), port })
    }
}

impl DaemonConfig {
    /// Refuses a listener without a token, or an address that is not one.
    pub fn validate(&self) -> Result<(), String> {
        for l in &self.listen {
            ListenAddr::parse(l)?;
        }
        if !self.listen.is_empty() && self.token_file.is_none() {
            return Err(format!(
                "[daemon] listen = {:?} needs token_file: every TCP listener requires a token, loopback included (any local user or web page could otherwise reach a daemon that runs commands); set token_file = \"~/.forge/listen.token\" and clients send it as `Authorization: Bearer TOKEN`",
                self.listen
            ));
        }
        for o in &self.allowed_origins {
            if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
                return Err(format!(
                    "[daemon] allowed_origins: \"{o}\" is not an origin (scheme and host, no path: https://app.example)"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_and_the_token_they_need() {
        assert_eq!(ListenAddr::parse("ws://127.0.0.1:7070"), Ok(ListenAddr { host: "127.0.0.1".into(), port: 7070 }));
        assert_eq!(ListenAddr::parse("ws://[::1]:80/").map(|a| a.host), Ok("::1".into()));
        for bad in ["127.0.0.1:7070", "wss://h:1", "ws://h", "ws://:1", "ws://h:0", "http://h:1"] {
            assert!(ListenAddr::parse(bad).is_err(), "{bad}");
        }
        let no_token = DaemonConfig { listen: vec!["ws://0.0.0.0:7070".into()], ..Default::default() };
        assert!(no_token.validate().is_err_and(|e| e.contains("needs token_file")));
        let ok = DaemonConfig { token_file: Some("/t".into()), ..no_token };
        assert!(ok.validate().is_ok());
    }
}
