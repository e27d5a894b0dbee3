//! Failures and the exit codes documented in `--help`.

use forge_client::jsonrpsee::core::ClientError;

pub const DAEMON_ERROR: u8 = 1;
pub const UNREACHABLE: u8 = 3;
pub const TURN_FAILED: u8 = 4;
pub const TURN_CANCELLED: u8 = 5;
/// The answer never validated against `--output-schema`.
pub const OUTPUT_INVALID: u8 = 6;
pub const INTERRUPTED: u8 = 130;

#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub kind: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, kind: &str, message: impl Into<String>) -> Self {
        Self { code, kind: kind.to_string(), message: message.into() }
    }

    /// Already reported (e.g. a failed turn printed as an event): only the
    /// exit code remains.
    pub fn silent(code: u8) -> Self {
        Self { code, kind: String::new(), message: String::new() }
    }

    pub fn report(&self, json: bool) {
        if self.message.is_empty() {
            return;
        }
        eprintln!("forgectl: {}", crate::output::shown(&self.message));
        if json {
            outln!("{}", serde_json::json!({"type": "error", "error": {"kind": self.kind, "message": self.message}}));
        }
    }
}

impl From<forge_client::FollowError> for Failure {
    fn from(e: forge_client::FollowError) -> Self {
        match e {
            forge_client::FollowError::LinkDown { .. } => {
                Failure::new(UNREACHABLE, "remote_unreachable", e.to_string())
            }
            forge_client::FollowError::Decode(_) => Failure::new(DAEMON_ERROR, "protocol", e.to_string()),
            forge_client::FollowError::Refused(obj) => Failure::from(ClientError::Call(obj)),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(obj) => {
                let kind = forge_proto::error::error_kind_of(&obj).unwrap_or_else(|| match obj.code() {
                    -32700 => "parse_error".into(),
                    -32600 => "invalid_request".into(),
                    -32601 => "method_not_found".into(),
                    -32602 => "invalid_params".into(),
                    _ => "internal".into(),
                });
                Failure::new(DAEMON_ERROR, &kind, obj.message().to_string())
            }
            ClientError::RestartNeeded(_) => Failure::new(
                UNREACHABLE,
                "daemon_gone",
                "the connection to forged was lost (did it stop? `forgectl status` starts it again)",
            ),
            ClientError::RequestTimeout => {
                Failure::new(UNREACHABLE, "timeout", "forged did not answer in time; it may be overloaded")
            }
            other => Failure::new(DAEMON_ERROR, "client", other.to_string()),
        }
    }
}
