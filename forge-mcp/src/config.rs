//! `[[mcp.servers]]` in config.toml: the tool servers forged connects to.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a server may take to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a turn waits for servers still starting before it asks the
/// model without their tools.
pub const DEFAULT_TURN_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// How long a turn waits for servers still starting (the first turns
    /// after forged starts); 0 does not wait. Each server's own
    /// `startup_timeout_seconds` is how long it may take at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<McpServerConfig>,
}

/// One server: `command` (+ `args`, `env`, `cwd`) for stdio, or `url`
/// (+ `headers`, `bearer_token_env_var`) for streamable HTTP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its tools are offered as `NAME__TOOL`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Added to forged's environment for the server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The server's working directory (default: forged's, the home
    /// directory under systemd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every HTTP request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for `url`: read
    /// when forged starts, then removed from its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// `false` keeps the entry without starting the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_seconds: Option<u64>,
    /// `true`: a stdio server runs in the command sandbox (`[tools.sandbox]`:
    /// it may write only in its `cwd` and a private temporary directory,
    /// and reach the network only as `network` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// The token `bearer_token_env_var` named, once read (never written
    /// out).
    #[serde(skip)]
    pub bearer_token: Option<String>,
    /// The command sandbox's settings, given by the daemon for a server
    /// with `sandbox = true`.
    #[serde(skip)]
    pub confine: Option<forge_tools::confine::Settings>,
}

/// How a server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport<'a> {
    Stdio { command: &'a str, args: &'a [String] },
    Http { url: &'a str },
}

impl McpServerConfig {
    pub fn transport(&self) -> Transport<'_> {
        match (&self.command, &self.url) {
            (Some(command), _) => Transport::Stdio { command, args: &self.args },
            (None, Some(url)) => Transport::Http { url },
            // `validate` refuses this; an empty command fails to start.
            (None, None) => Transport::Stdio { command: "", args: &self.args },
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout_seconds.map(Duration::from_secs).unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    pub fn tool_timeout(&self) -> Duration {
        self.tool_timeout_seconds.map(Duration::from_secs).unwrap_or(DEFAULT_TOOL_TIMEOUT)
    }

    /// `stdio` or `http`.
    pub fn transport_name(&self) -> &'static str {
        match self.transport() {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    /// What the server is, for people: the command line or the URL.
    pub fn target(&self) -> String {
        match self.transport() {
            Transport::Stdio { command, args } => {
                std::iter::once(command).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
            }
            Transport::Http { url } => url.to_string(),
        }
    }
}

impl McpConfig {
    /// How long a turn waits for servers still starting.
    pub fn turn_wait(&self) -> Duration {
        self.startup_timeout_seconds.map(Duration::from_secs).unwrap_or(DEFAULT_TURN_WAIT)
    }

    /// Checks every entry; the message names the entry (`[[mcp.servers]]
    /// entry N (`name`)`) and says what to change.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for (i, s) in self.servers.iter().enumerate() {
            let at = format!("[[mcp.servers]] entry {} (`{}`)", i + 1, s.name);
            validate_name(&s.name).map_err(|e| format!("{at}: {e}"))?;
            if !seen.insert(s.name.as_str()) {
                return Err(format!("{at}: another server is called `{}`; names must differ", s.name));
            }
            match (&s.command, &s.url) {
                (Some(_), Some(_)) => {
                    return Err(format!("{at}: give either `command` (stdio) or `url` (HTTP), not both"));
                }
                (None, None) => {
                    return Err(format!("{at}: give `command` (a stdio server) or `url` (a streamable HTTP server)"));
                }
                (Some(c), None) if c.trim().is_empty() => return Err(format!("{at}: `command` is empty")),
                (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                    return Err(format!("{at}: url = \"{url}\" must start with http:// or https://"));
                }
                _ => {}
            }
            if s.url.is_none() && (!s.headers.is_empty() || s.bearer_token_env_var.is_some()) {
                return Err(format!("{at}: `headers` and `bearer_token_env_var` are for `url` servers"));
            }
            if s.command.is_none() && (!s.args.is_empty() || !s.env.is_empty() || s.cwd.is_some()) {
                return Err(format!("{at}: `args`, `env` and `cwd` are for `command` servers"));
            }
            for (name, value) in &s.headers {
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(format!("{at}: `{name}` is not a valid HTTP header name"));
                }
                if reqwest::header::HeaderValue::from_str(value).is_err() {
                    return Err(format!("{at}: the value of header `{name}` is not a valid HTTP header value"));
                }
            }
            for (key, value) in [
                ("startup_timeout_seconds", s.startup_timeout_seconds),
                ("tool_timeout_seconds", s.tool_timeout_seconds),
            ] {
                if value == Some(0) {
                    return Err(format!("{at}: {key} must be at least 1"));
                }
            }
        }
        Ok(())
    }

    /// Reads the bearer tokens from the environment now and returns the
    /// variables read, for the daemon to remove from its environment.
    pub fn capture_secrets(&mut self) -> Vec<String> {
        let mut read = Vec::new();
        for s in &mut self.servers {
            if let Some(var) = &s.bearer_token_env_var {
                s.bearer_token = std::env::var(var).ok().filter(|t| !t.trim().is_empty());
                read.push(var.clone());
            }
        }
        read
    }
}

/// 1–64 characters of letters, digits, `-` and `_`, without `__` (which
/// separates the server from the tool in the names the model sees).
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("`name` must be 1 to 64 characters".into());
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!("name = \"{name}\" may hold only letters, digits, `-` and `_`"));
    }
    if name.contains("__") {
        return Err(format!("name = \"{name}\" may not contain `__` (it separates server and tool names)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> McpConfig {
        toml::from_str::<Wrapper>(text).unwrap_or_else(|e| panic!("{e}")).mcp
    }

    #[derive(Deserialize)]
    struct Wrapper {
        mcp: McpConfig,
    }

    #[test]
    fn stdio_and_http_servers_parse_and_validate() {
        let c = parse(
            r#"
[[mcp.servers]]
name = "files"
command = "npx"
args = ["-y", "server"]
env = { A = "1" }

[[mcp.servers]]
name = "remote"
url = "https://example.com/mcp"
headers = { "X-Team" = "forge" }
bearer_token_env_var = "REMOTE_TOKEN"
"#,
        );
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.servers[0].transport(), Transport::Stdio { command: "npx", args: &c.servers[0].args });
        assert_eq!(c.servers[0].target(), "npx -y server");
        assert_eq!(c.servers[1].transport_name(), "http");
    }

    #[test]
    fn bad_entries_are_named_with_what_to_do() {
        let both = parse("[[mcp.servers]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://b\"\n");
        assert!(both.validate().is_err_and(|e| e.contains("entry 1 (`x`)") && e.contains("not both")));
        let neither = parse("[[mcp.servers]]\nname = \"x\"\n");
        assert!(neither.validate().is_err_and(|e| e.contains("give `command`")));
        let sep = parse("[[mcp.servers]]\nname = \"a__b\"\ncommand = \"x\"\n");
        assert!(sep.validate().is_err_and(|e| e.contains("`__`")));
        let dup =
            parse("[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp.servers]]\nname = \"a\"\ncommand = \"y\"\n");
        assert!(dup.validate().is_err_and(|e| e.contains("entry 2") && e.contains("names must differ")));
        let scheme = parse("[[mcp.servers]]\nname = \"a\"\nurl = \"ftp://x\"\n");
        assert!(scheme.validate().is_err_and(|e| e.contains("http://")));
    }
}
