//! A turn whose final answer must be JSON valid against a schema
//! (`session.send {output_schema}`): the model is told the schema (and the
//! provider asked for structured output where it has it); the answer is
//! checked when the turn would end; an invalid one is sent back once with
//! the errors, and a second invalid one ends the turn as an error
//! (`output_schema_invalid`) naming them. A valid one is journaled as
//! `structured_output`, the parsed object.

use serde_json::Value;

use super::Session;
use crate::error::EngineError;
use forge_proto::ErrorKind;

/// The error kind of a turn whose answer never validated.
pub(super) const INVALID_KIND: &str = "output_schema_invalid";

/// A turn answering on a schema.
pub(crate) struct SchemaTurn {
    pub schema: Value,
    /// Answers that may still be sent back to be fixed.
    pub fixes_left: u8,
}

/// What the turn's final answer is, measured against the schema.
pub(super) enum Verdict {
    /// No schema was asked for.
    Free,
    Valid(Value),
    /// Invalid: ask the model to fix it (the message to send).
    Fix(String),
    /// Invalid again: the turn fails with these errors.
    Invalid(String),
}

impl Session {
    /// A schema must compile, and its turn start now (a queued message
    /// would lose it).
    pub(super) fn check_schema(&self, schema: Option<&Value>, n: u32) -> Result<(), EngineError> {
        let Some(schema) = schema else { return Ok(()) };
        let invalid = |m: String| EngineError::new(ErrorKind::InvalidParams, m);
        if !schema.is_object() {
            return Err(invalid("output_schema must be a JSON schema object".into()));
        }
        crate::tools::jsonschema::validator_for(schema)
            .map_err(|e| invalid(format!("output_schema is not a JSON schema: {e}")))?;
        if n > 1 {
            return Err(invalid("an answer on a schema is asked once (n = 1)".into()));
        }
        if !matches!(self.state, super::state::OperationState::Idle) {
            return Err(self.busy("an answer on a schema needs its own turn; send it once the session is idle"));
        }
        Ok(())
    }

    /// The answer that would end the turn, judged (the schema is dropped
    /// once the turn is decided).
    pub(super) fn judge_output(&mut self, text: &str) -> Verdict {
        let Some(turn) = self.schema.as_mut() else { return Verdict::Free };
        match check(&turn.schema, text) {
            Ok(value) => {
                self.schema = None;
                Verdict::Valid(value)
            }
            Err(errors) if turn.fixes_left > 0 => {
                turn.fixes_left -= 1;
                Verdict::Fix(format!(
                    "Your answer is not JSON valid against the schema you were given: {errors}. \
                     Answer again with only the JSON object."
                ))
            }
            Err(errors) => {
                self.schema = None;
                Verdict::Invalid(format!("the answer is not JSON valid against the output schema: {errors}"))
            }
        }
    }
}

/// What the model is told along with the user's message.
pub(super) fn instruction(schema: &Value) -> String {
    // Marked as what it is: no hook is involved (see `user_message`).
    format!(
        "{}\nYour final answer must be only a JSON object valid against this JSON schema (no prose, no code fence):\n{schema}\n{}",
        forge_proto::OUTPUT_SCHEMA_OPEN,
        forge_proto::OUTPUT_SCHEMA_CLOSE
    )
}

/// The answer's JSON (a code fence around it is taken off), checked.
pub(super) fn check(schema: &Value, text: &str) -> Result<Value, String> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(t)
        .trim();
    // Words before the JSON (Claude's answer tool comes after any text it
    // wrote) leave the JSON as the last paragraph.
    let value: Value = serde_json::from_str(t)
        .or_else(|e| t.rsplit_once("\n\n").and_then(|(_, last)| serde_json::from_str(last.trim()).ok()).ok_or(e))
        .map_err(|e| format!("it is not JSON ({e})"))?;
    let validator = crate::tools::jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    let problems = crate::tools::schema_problems(&validator, &value);
    if problems.is_empty() { Ok(value) } else { Err(problems.join("; ")) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn an_answer_is_parsed_fences_and_all_and_checked() {
        let schema = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
        assert_eq!(super::check(&schema, "```json\n{\"n\": 3}\n```").ok(), Some(json!({"n": 3})));
        assert_eq!(super::check(&schema, " {\"n\": 1} ").ok(), Some(json!({"n": 1})));
        let wrong = super::check(&schema, "{\"n\": \"x\"}").err().unwrap_or_default();
        assert!(wrong.contains("/n"), "{wrong}");
        assert!(super::check(&schema, "sure! here it is").err().unwrap_or_default().contains("not JSON"));
        assert_eq!(super::check(&schema, "Counted.\n\n{\"n\":2}").ok(), Some(json!({"n": 2})), "after words");
    }
}
