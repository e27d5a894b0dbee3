//! `update_plan`: the model keeps a short plan of the task's steps, each
//! `pending`, `in_progress` or `completed`, for the user to follow (the
//! session journals each update as `plan_updated`; clients show it). The
//! shape is the one models know from Codex.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut};

pub struct UpdatePlan;

/// Most steps a plan holds, and the longest step.
const MAX_STEPS: usize = 50;
const MAX_STEP_CHARS: usize = 500;

// `explanation` first: the order the model has always been shown.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Optional: why the plan changed
    #[serde(default)]
    explanation: Option<String>,
    /// The steps, in order
    plan: Vec<Step>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Step {
    step: String,
    // A string checked by `parse_plan`, whose error names the statuses.
    #[schemars(extend("enum" = ["pending", "in_progress", "completed"]))]
    status: String,
}

/// A plan as the model gave it, checked.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Each step's text and status.
    pub steps: Vec<(String, String)>,
    pub note: Option<String>,
}

/// The plan in a call's arguments, checked.
pub fn parse_plan(args: &Value) -> Result<Plan, ToolError> {
    let bad = |message: String| ToolError::BadArgs { message };
    let a: Args = serde_json::from_value(args.clone()).map_err(|e| bad(e.to_string()))?;
    if a.plan.len() > MAX_STEPS {
        return Err(bad(format!("a plan has at most {MAX_STEPS} steps; keep it short")));
    }
    let mut running = 0;
    let mut steps = Vec::with_capacity(a.plan.len());
    for s in a.plan {
        if !matches!(s.status.as_str(), "pending" | "in_progress" | "completed") {
            return Err(bad(format!("status `{}`: use pending, in_progress or completed", s.status)));
        }
        running += usize::from(s.status == "in_progress");
        let text = s.step.trim();
        if text.is_empty() || text.chars().count() > MAX_STEP_CHARS {
            return Err(bad(format!("each step is 1 to {MAX_STEP_CHARS} characters")));
        }
        steps.push((text.to_string(), s.status));
    }
    if running > 1 {
        return Err(bad("at most one step is in_progress at a time".into()));
    }
    Ok(Plan { steps, note: a.explanation.map(|e| e.trim().to_string()).filter(|e| !e.is_empty()) })
}

impl ToolExecutor for UpdatePlan {
    fn name(&self) -> &str {
        "update_plan"
    }
    fn description(&self) -> &str {
        "Keep the user informed of your plan for a multi-step task: the whole list of steps each time, each \
pending, in_progress (at most one) or completed, with an optional explanation of what changed. The user sees it \
beside the conversation. Skip it for a simple one-step request."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, args: Value, _ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let steps = parse_plan(&args)?.steps;
            let done = steps.iter().filter(|(_, s)| s == "completed").count();
            Ok(format!("Plan updated: {} step(s), {done} completed.", steps.len()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plan_is_checked_and_its_steps_kept() {
        let ok = json!({"plan": [{"step": "read", "status": "completed"}, {"step": "fix", "status": "in_progress"}], "explanation": " found it "});
        let Plan { steps, note } = parse_plan(&ok).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(steps, [("read".into(), "completed".into()), ("fix".into(), "in_progress".into())]);
        assert_eq!(note.as_deref(), Some("found it"));
        let two = json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]});
        assert!(parse_plan(&two).is_err());
        assert!(parse_plan(&json!({"plan": [{"step": "a", "status": "done"}]})).is_err());
        assert!(parse_plan(&json!({"plan": [{"step": " ", "status": "pending"}]})).is_err());
    }
}
