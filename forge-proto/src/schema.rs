//! The protocol as a JSON Schema (`docs/protocol.schema.json`), for
//! editors that generate their clients: every wire type (from the serde
//! definitions, through schemars) and every method's params and result.
//!
//! The methods are read from the API trait's own source (`api.rs`), so a
//! method added there is in the schema without a second list to keep; a
//! test compares the result with the checked-in file.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::FolderTrust;

use crate::error::ErrorKind;
use crate::events::{SessionEvent, SubscriptionItem};
use crate::types::*;

/// The API trait's source, parsed for its methods.
const API: &str = include_str!("api.rs");

/// The schema of a Rust type as written in the API trait.
fn type_schema(g: &mut SchemaGenerator, ty: &str) -> Result<Value, String> {
    let ty = ty.trim();
    if let Some(inner) = ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        return type_schema(g, inner);
    }
    if let Some(inner) = ty.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')) {
        return Ok(json!({"type": "array", "items": type_schema(g, inner)?}));
    }
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            match ty {
                "()" => return Ok(json!({"type": "null"})),
                $(stringify!($t) => g.subschema_for::<$t>(),)*
                other => return Err(format!("the schema knows no type `{other}`: add it to `known!` in schema.rs")),
            }
        };
    }
    let schema = known!(
        String,
        bool,
        u32,
        u64,
        i64,
        ClientInfo,
        ApprovalDecision,
        RecoverAction,
        HelloResult,
        SessionInfo,
        RemoveResult,
        SendResult,
        CancelResult,
        ContextInfo,
        ModelInfo,
        TreeInfo,
        BranchInfo,
        EditResult,
        BookmarkResult,
        DeleteNodeResult,
        SplitResult,
        RewindResult,
        SummarizeResult,
        RecallResult,
        UsageReport,
        ToolInfo,
        McpServerInfo,
        McpServerSpec,
        ApprovalRules,
        ToolResultAccepted,
        RecoverResult,
        HistoryResult,
        SessionEvent,
        SubscriptionItem,
        PendingApproval,
        ApprovalResult,
        JournalStatus,
        DaemonStatus,
        SandboxReport,
        ExportResult,
        ImportResult,
        FolderTrust,
        serde_json::Value,
        ErrorKind,
    );
    Ok(schema.to_value())
}

/// One method of the trait: its wire name, params (name, Rust type) and
/// result type (`None`: a subscription).
struct Method {
    name: String,
    notification: Option<String>,
    params: Vec<(String, String)>,
    result: Option<String>,
}

/// Splits at top-level commas (not those inside `<...>`).
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn quoted_after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let at = s.find(key)? + key.len();
    let rest = &s[at..];
    let open = rest.find('"')? + 1;
    let close = open + rest[open..].find('"')?;
    Some(&rest[open..close])
}

fn api_methods() -> Result<Vec<Method>, String> {
    let mut out = Vec::new();
    let mut rest = API;
    // The next method or subscription attribute, whichever comes first.
    let next = |s: &str| [s.find("#[method("), s.find("#[subscription(")].into_iter().flatten().min();
    while let Some(at) = next(rest) {
        rest = &rest[at..];
        let attr_end = rest.find(")]").ok_or("an attribute without its end")?;
        let attr = &rest[..attr_end];
        let name = quoted_after(attr, "name =").ok_or("a method without its name")?.to_string();
        let notification = attr.contains("=>").then(|| quoted_after(attr, "=>").map(str::to_string)).flatten();
        let sig_start = rest.find("fn ").ok_or("a method without its fn")?;
        let sig_end = sig_start + rest[sig_start..].find(';').ok_or("a method without its ;")?;
        let sig = &rest[sig_start..sig_end];
        let open = sig.find('(').ok_or("no params")?;
        let arrow = sig.rfind("->").ok_or("no result")?;
        let close = sig[..arrow].rfind(')').ok_or("no params end")?;
        let mut params = Vec::new();
        for p in split_top(&sig[open + 1..close]).into_iter().filter(|p| *p != "&self") {
            // `#[argument(rename = "x")] name: Type`
            let wire = quoted_after(p, "rename =").map(str::to_string);
            let p = p.rsplit(']').next().unwrap_or(p).trim();
            let (pname, ty) = p.split_once(':').ok_or_else(|| format!("a param without a type in {name}"))?;
            params.push((wire.unwrap_or_else(|| pname.trim().to_string()), ty.trim().to_string()));
        }
        let ret = sig[arrow + 2..].trim();
        let result = ret.strip_prefix("RpcResult<").and_then(|r| r.strip_suffix('>')).map(str::to_string);
        out.push(Method { name, notification, params, result });
        rest = &rest[sig_end..];
    }
    Ok(out)
}

/// The whole schema: `$defs` holds every wire type; `methods` each
/// method's `params` (an object, by name) and `result`; `notifications`
/// what subscriptions deliver.
pub fn protocol_schema() -> Result<Value, String> {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut methods = Map::new();
    let mut notifications = Map::new();
    for m in api_methods()? {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (name, ty) in &m.params {
            properties.insert(name.clone(), type_schema(&mut g, ty)?);
            if !ty.starts_with("Option<") {
                required.push(Value::String(name.clone()));
            }
        }
        let params =
            json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
        let result = match &m.result {
            Some(r) => type_schema(&mut g, r)?,
            None => json!({"description": "a subscription id; items arrive as notifications"}),
        };
        methods.insert(m.name.clone(), json!({"params": params, "result": result}));
        if let Some(n) = m.notification {
            notifications
                .insert(n, json!({"subscription": m.name, "result": type_schema(&mut g, "SubscriptionItem")?}));
        }
    }
    let error_kind = type_schema(&mut g, "ErrorKind")?;
    let defs: Map<String, Value> = g.take_definitions(true).into_iter().collect();
    Ok(sorted(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Forge protocol",
        "description": "JSON-RPC 2.0 over forged's Unix socket (see docs/protocol.md). Params are passed by name. Generated from forge-proto's types.",
        "protocol_version": crate::PROTOCOL_VERSION,
        "methods": methods,
        "notifications": notifications,
        "errors": {"description": "a Forge error's data.kind (codes in docs/protocol.md)", "kind": error_kind},
        "$defs": defs,
    })))
}

/// Keys in order at every level: the same text whether or not a crate in
/// the build turned on serde_json's `preserve_order`.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
