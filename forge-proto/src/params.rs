//! Each method's params as one struct: what the client sends is what the
//! daemon (and, for a session's commands, the session machine) receives.
//! Params are passed by name (a JSON object); an absent optional param and
//! `null` mean the same, and a flag left out is `false`.

use serde::{Deserialize, Deserializer, Serialize};

use crate::calls::{ApprovalDecision, McpServerSpec, RecoverAction};
use crate::types::ClientInfo;

/// `null` reads as the type's default (a flag as `false`, a list as
/// empty): clients that send every param, set or not, send `null`s.
fn or_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A method that takes no params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NoParams {}

impl From<()> for NoParams {
    fn from((): ()) -> Self {
        Self {}
    }
}

/// A params struct that names the session it is for: a full id, a unique
/// id prefix, or the session's name.
pub trait Addressed {
    fn session(&self) -> &str;
}

/// Declares a params struct (serde, schema, `Default`) and, when it has a
/// `session` field, [`Addressed`] for it.
macro_rules! params {
    ($(#[$meta:meta])* $name:ident { session: String, $($body:tt)* }) => {
        params!(@struct $(#[$meta])* $name { pub session: String, $($body)* });
        impl Addressed for $name {
            fn session(&self) -> &str {
                &self.session
            }
        }
    };
    ($(#[$meta:meta])* $name:ident { $($body:tt)* }) => {
        params!(@struct $(#[$meta])* $name { $($body)* });
    };
    (@struct $(#[$meta:meta])* $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        pub struct $name { $($body)* }
    };
}

// By area, beside this file (the macro above is in scope there).
mod git;
mod tree;
pub use git::*;
pub use tree::*;

params!(
    /// A method about one session and nothing else.
    SessionRef { session: String, }
);

/// A session id (or prefix, or name) alone, for the client's methods.
macro_rules! from_string {
    ($name:ident . $field:ident) => {
        impl From<String> for $name {
            fn from($field: String) -> Self {
                Self { $field }
            }
        }
        impl From<&str> for $name {
            fn from($field: &str) -> Self {
                Self { $field: $field.to_string() }
            }
        }
        impl From<&String> for $name {
            fn from($field: &String) -> Self {
                Self { $field: $field.clone() }
            }
        }
    };
}

from_string!(SessionRef.session);

params!(
    HelloParams {
        /// The protocol version the client speaks.
        pub protocol_version: u32,
        pub client: ClientInfo,
    }
);

params!(
    CreateParams {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// The session's directory (default: the home of the daemon's user).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cwd: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model: Option<String>,
        /// The user means it when `cwd` is `/`, the home directory itself
        /// or a system directory (refused otherwise, error kind
        /// `broad_root`).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub allow_broad_root: bool,
        /// Git mode: the session works on its own branch
        /// `forge/session/<id>` in a private worktree, one commit per
        /// turn; the user's working tree, index and branch are never
        /// touched. Absent: `[git] mode` decides.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub git: Option<bool>,
        /// Git mode: the branch starts here (a commit, branch or tag;
        /// default HEAD).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub base: Option<String>,
        /// Git mode: resume from this commit of a git session, with the
        /// conversation as it was then, on a branch of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub from_commit: Option<String>,
        /// The session's own `temperature` and `top_p` (above `[app]` and
        /// the model's `[[models]]` entry; a turn's own come first).
        #[serde(flatten)]
        pub sampling: crate::Sampling,
    }
);

params!(
    RenameParams {
        session: String,
        /// The new name; `null` clears it.
        #[serde(default)]
        pub name: Option<String>,
    }
);

params!(
    SendParams {
        session: String,
        /// The message (absent with `continue`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub text: Option<String>,
        /// That many sibling answers (tools off only); default 1.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub n: Option<u32>,
        /// No new message: answer what the session holds now.
        #[serde(rename = "continue", default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub continued: bool,
        /// The final answer must be a JSON value valid against this JSON
        /// schema (`structured_output` carries it; a turn whose answer
        /// never validates fails with `output_schema_invalid`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub output_schema: Option<serde_json::Value>,
        /// MCP resources to attach, each `server:uri` (`mcp.resources`
        /// lists them): each is read and added to the message.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
        pub resources: Vec<String>,
        /// Images the message carries (the text may then be empty).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
        pub images: Vec<crate::images::ImageInput>,
        /// `temperature` and `top_p` for this turn only (a queued message
        /// keeps them).
        #[serde(flatten)]
        pub sampling: crate::Sampling,
    }
);

params!(
    /// One image to keep for a message sent after (`session.send` names it
    /// by the `hash` answered): a message may carry several images that
    /// would not fit in one JSON-RPC message together.
    ImagePutParams {
        /// The image, base64.
        pub data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
    }
);

params!(
    /// `images.get`: an image a message holds, by the hash its `images`
    /// name.
    ImageGetParams {
        pub hash: String,
    }
);

params!(
    /// `session.file`: a text file in the session's directories.
    SessionFileParams {
        pub session: String,
        /// Relative to the session's directory, or absolute inside its roots.
        pub path: String,
    }
);

params!(
    /// Text for the running turn: it joins at the next safe point (after
    /// the current tool batch's results, before the next request), or
    /// becomes the next message if the turn ends first.
    SteerParams {
        session: String,
        pub text: String,
    }
);

params!(
    ConfigureParams {
        session: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model: Option<String>,
        /// The session's own `temperature` and `top_p` from now on (each
        /// one given replaces the session's).
        #[serde(flatten)]
        pub sampling: crate::Sampling,
        /// The session's own `temperature` and `top_p` are dropped first:
        /// the configuration's apply again.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub reset_sampling: bool,
    }
);

params!(
    ContextParams {
        session: String,
        /// Add the system prompt the session's requests carry.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub system: bool,
        /// The original messages the session's N-th summary stands for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub span: Option<u32>,
        /// Add the repository map (`[context] repo_summaries`).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub repo: bool,
    }
);

params!(
    /// Paths relative to the session's directory (or absolute within its
    /// roots).
    ContextFilesParams {
        session: String,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
        pub add: Vec<String>,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
        pub remove: Vec<String>,
    }
);

params!(
    RecallParams {
        session: String,
        pub query: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limit: Option<u32>,
    }
);

params!(
    ExportParams {
        session: String,
        /// The line to start from (a previous answer's `next`).
        #[serde(default, deserialize_with = "or_default")]
        pub offset: u64,
    }
);

params!(
    ImportParams {
        pub lines: Vec<serde_json::Value>,
        /// The upload the first piece's answer named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub upload: Option<String>,
        /// More pieces follow.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub more: bool,
        /// Re-roots the session in another directory (with the last piece).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cwd: Option<String>,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub allow_broad_root: bool,
    }
);

params!(
    ModelsParams {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provider: Option<String>,
    }
);

params!(
    UsageParams {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub session: Option<String>,
        /// From this time on (Unix ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub since_ms: Option<i64>,
    }
);

params!(
    McpListParams {
        /// The servers that session sees (its own and config.toml's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub session: Option<String>,
    }
);

params!(
    McpRestartParams {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub session: Option<String>,
    }
);

params!(
    /// A folder, for the trust methods.
    DirParams {
        pub dir: String,
    }
);

from_string!(DirParams.dir);

params!(
    /// Tool files of a project to approve, each as the client showed it to
    /// the user: a file whose content changed since is refused.
    ApproveToolsParams {
        pub dir: String,
        #[serde(default, deserialize_with = "or_default")]
        pub files: Vec<ToolFileRef>,
    }
);

/// A tool file and the digest of the content approved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolFileRef {
    /// Relative to the project's top (`.forge/tools/test.toml`).
    pub file: String,
    pub sha256: String,
}

params!(
    /// Tool files of a project whose approval ends (none named: all).
    RevokeToolsParams {
        pub dir: String,
        #[serde(default, deserialize_with = "or_default")]
        pub files: Vec<String>,
    }
);

params!(
    CancelParams {
        session: String,
        /// Drop queued messages too.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub drop_queued: bool,
    }
);

params!(
    RecoverParams {
        session: String,
        pub action: RecoverAction,
    }
);

params!(
    ToolResultParams {
        session: String,
        pub call_id: String,
        pub output: String,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub is_error: bool,
    }
);

params!(
    EventsParams {
        session: String,
        /// Events with a greater seq (default 0).
        #[serde(default, deserialize_with = "or_default")]
        pub after_seq: u64,
        /// At most this many (default and maximum 10000).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limit: Option<u32>,
    }
);

params!(
    SubscribeParams {
        session: String,
        /// Replay stored events from this seq (default: live only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub from_seq: Option<u64>,
    }
);

params!(
    AnswerParams {
        session: String,
        pub decision: ApprovalDecision,
        /// Must match the pending approval, when given (a stale answer
        /// cannot approve a newer request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub approval_id: Option<String>,
        /// With `approve_selected`: the calls approved.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub call_ids: Option<Vec<String>>,
        /// With `approve_selected`: the calls approved, 1-based.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub indices: Option<Vec<u32>>,
        /// Allow these tools always in this session.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub always: bool,
    }
);

params!(
    ApprovalRulesParams {
        session: String,
        /// `default`, `permissive` or `strict`; `""` drops the session's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<String>,
        /// Tools that run without asking in this session.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
        pub allow: Vec<String>,
        /// Forget the tools allowed before first.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub clear: bool,
    }
);

params!(
    SetMcpServersParams {
        session: String,
        pub servers: Vec<McpServerSpec>,
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_and_absent_params_read_as_their_defaults() {
        let p: RewindParams = serde_json::from_str(r#"{"session":"s","node":null,"force":null}"#).unwrap();
        assert_eq!(p, RewindParams { session: "s".into(), ..Default::default() });
        let p: SendParams = serde_json::from_str(r#"{"session":"s","continue":true}"#).unwrap();
        assert!(p.continued && p.text.is_none());
        assert!(serde_json::from_str::<SendParams>(r#"{"text":"hi"}"#).is_err(), "session is required");
    }

    #[test]
    fn unset_params_are_not_sent() {
        let p = RewindParams { session: "s".into(), dry_run: true, ..Default::default() };
        assert_eq!(serde_json::to_value(&p).unwrap(), serde_json::json!({"session": "s", "dry_run": true}));
    }
}

params!(
    /// `web.revoke`: the paired browser `device` signs out, or with
    /// `all`, every one; their open connections close at once.
    WebRevokeParams {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub device: Option<String>,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub all: bool,
    }
);

params!(
    /// `web.pair`: on the listener at `listen` (`ws://HOST:PORT`), started
    /// now if none runs there; none given: any running listener, else one
    /// started on loopback.
    WebPairParams {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub listen: Option<String>,
    }
);

params!(
    /// `web.render`: messages' texts (markdown, `$…$` math) as the web
    /// client shows them.
    WebRenderParams {
        pub texts: Vec<String>,
    }
);
