//! `introspect`: what the model is running inside. The session, its
//! provider and model, the tools it may call with their risk and whether a
//! user must approve them, the sandbox rules and the limits, so that the
//! model can plan instead of discovering them through failures.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ToolCtx, ToolError, ToolExecutor, ToolFut};

pub struct Introspect;

const TOPICS: [&str; 5] = ["session", "tools", "sandbox", "limits", "forge"];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    // A string checked by `execute`, whose error names the topics.
    #[schemars(extend("enum" = TOPICS))]
    topic: Option<String>,
}

impl ToolExecutor for Introspect {
    fn name(&self) -> &str {
        "introspect"
    }
    fn description(&self) -> &str {
        "Describe this agent's environment: session, tools (risk, approval rule), sandbox rules, limits. \
`topic` narrows it: session, tools, sandbox, limits or forge."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move {
            let args: Args = crate::parse_args(args)?;
            let mut about = ctx.about.as_deref().cloned().unwrap_or_else(|| json!({}));
            if let Value::Object(map) = &mut about {
                map.entry("forge").or_insert_with(|| json!({"version": env!("CARGO_PKG_VERSION")}));
                map.entry("sandbox").or_insert_with(|| ctx.sandbox.describe());
                map.entry("limits").or_insert_with(|| json!(ctx.limits));
            }
            let shown = match args.topic.as_deref() {
                None => about,
                Some(t) if TOPICS.contains(&t) => about.get(t).cloned().unwrap_or(Value::Null),
                Some(t) => {
                    return Err(ToolError::BadArgs {
                        message: format!("unknown topic `{t}`; use one of {}", TOPICS.join(", ")),
                    });
                }
            };
            serde_json::to_string_pretty(&shown)
                .map_err(|e| ToolError::ExecutionFailed { tool: "introspect".into(), message: e.to_string() })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_blocking;

    #[test]
    fn reports_what_the_session_gave_it_and_narrows_by_topic() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ctx = ToolCtx::for_tests(dir.path(), 10_000);
        ctx.about = Some(std::sync::Arc::new(json!({"session": {"model": "m1"}, "tools": [{"name": "read_file"}]})));
        let all = run_blocking(&Introspect, json!({}), &ctx).unwrap_or_else(|e| panic!("{e}"));
        let v: Value = serde_json::from_str(&all).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["session"]["model"], "m1");
        assert_eq!(v["limits"]["output_bytes"], 10_000);
        assert!(v["sandbox"]["denied_patterns"].to_string().contains(".ssh"), "{v}");
        let tools = run_blocking(&Introspect, json!({"topic": "tools"}), &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert!(tools.contains("read_file") && !tools.contains("m1"), "{tools}");
        let bad = run_blocking(&Introspect, json!({"topic": "weather"}), &ctx).err().map(|e| e.to_string());
        assert!(bad.unwrap_or_default().contains("session, tools"));
    }
}
