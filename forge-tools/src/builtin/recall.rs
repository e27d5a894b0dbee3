//! `recall`: search what was said earlier in the session, parts summarized
//! out of the conversation included. The session gives the tool its
//! [`Library`] (the facts kept when spans were summarized, and the
//! original messages); every hit cites the message it came from.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{Library, ToolCtx, ToolError, ToolExecutor, ToolFut};

pub struct Recall;

const DEFAULT_LIMIT: usize = 8;
const MAX_LIMIT: usize = 30;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    query: Option<String>,
    node: Option<String>,
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
}

impl ToolExecutor for Recall {
    fn name(&self) -> &str {
        "recall"
    }
    fn description(&self) -> &str {
        "Search this session's earlier conversation, including parts replaced by a summary: requests, file \
paths, commands and their outcome, errors, decisions, names. `query` lists matching facts, each citing the \
message (node) it came from; `node` returns that message's original text."
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
            let library = ctx.library.as_deref().ok_or_else(|| failed("this session has no store to search"))?;
            match (args.query, args.node) {
                (Some(query), None) => search(library, &query, args.limit).await,
                (None, Some(node)) => original(library, &node).await,
                _ => Err(ToolError::BadArgs {
                    message: "give either `query` (to search) or `node` (to read one message)".into(),
                }),
            }
        })
    }
}

fn failed(message: impl Into<String>) -> ToolError {
    ToolError::ExecutionFailed { tool: "recall".into(), message: message.into() }
}

async fn search(library: &dyn Library, query: &str, limit: Option<usize>) -> Result<String, ToolError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let hits = library.search(query, limit).await.map_err(failed)?;
    if hits.is_empty() {
        return Ok(format!(
            "nothing recalled for \"{query}\" (only summarized parts of the conversation are indexed; what is still in the conversation is above)"
        ));
    }
    let mut out = format!("{} facts recalled for \"{query}\", best first:\n", hits.len());
    for (i, h) in hits.iter().enumerate() {
        out.push_str(&format!(
            "\n{}. [{}] {}\n   from {} message {}: {}\n",
            i + 1,
            h.kind,
            h.fact,
            h.role,
            h.node_id,
            h.excerpt
        ));
    }
    out.push_str("\nrecall with `node` set to a message id returns its full original text.");
    Ok(out)
}

async fn original(library: &dyn Library, node: &str) -> Result<String, ToolError> {
    match library.message(node).await.map_err(failed)? {
        Some(m) => Ok(format!("{} message {}:\n{}", m.role, m.node_id, m.text)),
        None => Err(ToolError::BadArgs { message: format!("this session has no message `{node}`") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LibraryFut, RecalledFact, RecalledMessage, run_blocking};
    use serde_json::json;
    use std::sync::Arc;

    struct Shelf;

    impl Library for Shelf {
        fn search<'a>(&'a self, query: &'a str, _limit: usize) -> LibraryFut<'a, Vec<RecalledFact>> {
            Box::pin(async move {
                Ok(if query.contains("port") {
                    vec![RecalledFact {
                        kind: "decision".into(),
                        fact: "We'll serve on port 8431.".into(),
                        node_id: "m-7".into(),
                        role: "assistant".into(),
                        excerpt: "...so we'll serve on port 8431...".into(),
                    }]
                } else {
                    Vec::new()
                })
            })
        }
        fn message<'a>(&'a self, node: &'a str) -> LibraryFut<'a, Option<RecalledMessage>> {
            Box::pin(async move {
                Ok((node == "m-7").then(|| RecalledMessage {
                    node_id: "m-7".into(),
                    role: "assistant".into(),
                    text: "the whole answer".into(),
                }))
            })
        }
    }

    #[test]
    fn finds_facts_citing_their_message_and_reads_the_original() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ctx = ToolCtx::for_tests(dir.path(), 10_000);
        ctx.library = Some(Arc::new(Shelf));
        let found = run_blocking(&Recall, json!({"query": "which port"}), &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert!(found.contains("[decision] We'll serve on port 8431.") && found.contains("message m-7"), "{found}");
        let none = run_blocking(&Recall, json!({"query": "colour"}), &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert!(none.starts_with("nothing recalled"), "{none}");
        let full = run_blocking(&Recall, json!({"node": "m-7"}), &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(full, "assistant message m-7:\nthe whole answer");
        let err = run_blocking(&Recall, json!({"node": "m-8"}), &ctx).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("no message `m-8`"), "{err}");
        let both = run_blocking(&Recall, json!({}), &ctx).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(both.contains("either `query`"), "{both}");
    }
}
