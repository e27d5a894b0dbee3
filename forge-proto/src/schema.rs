//! The protocol as a JSON Schema (`docs/protocol.schema.json`), for
//! editors that generate their clients: every wire type (from the serde
//! definitions, through schemars) and every method's params and result.
//!
//! The methods come from their table ([`crate::methods`]), so a method
//! added there is in the schema with its params and result; a test
//! compares the result with the checked-in file.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::error::ErrorKind;
use crate::events::SubscriptionItem;
use crate::methods::{METHODS, NOTIFICATION, SUBSCRIBE};
use crate::params::SubscribeParams;

/// A params struct's schema as an object that takes nothing else.
fn params_object(schema: schemars::Schema) -> Value {
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("title");
        obj.remove("description");
        obj.insert("additionalProperties".into(), Value::Bool(false));
        obj.entry("required").or_insert_with(|| json!([]));
        obj.entry("properties").or_insert_with(|| json!({}));
    }
    value
}

/// The whole schema: `$defs` holds every wire type; `methods` each
/// method's `params` (an object, by name) and `result`; `notifications`
/// what subscriptions deliver.
pub fn protocol_schema() -> Result<Value, String> {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut methods = Map::new();
    for (name, params, result) in crate::methods::schemas(&mut g) {
        let info = METHODS.iter().find(|m| m.name == name).ok_or_else(|| format!("{name} is not in METHODS"))?;
        let routing = match info.route {
            crate::methods::Route::Session | crate::methods::Route::Machine => "session",
            crate::methods::Route::Daemon => "daemon",
        };
        methods.insert(
            name.to_string(),
            json!({
                "description": info.description(),
                "routing": routing,
                "params": params_object(params),
                "result": result.to_value(),
            }),
        );
    }
    let subscribe = <SubscribeParams as schemars::JsonSchema>::json_schema(&mut g);
    methods.insert(
        SUBSCRIBE.to_string(),
        json!({
            "description": "Follow a session: replays stored events with `seq >= from_seq` (default: none, live only), then live events, with no gap and no duplicate. WebSocket only.",
            "routing": "daemon",
            "params": params_object(subscribe),
            "result": {"description": "a subscription id; items arrive as notifications"},
        }),
    );
    let item = g.subschema_for::<SubscriptionItem>().to_value();
    let notifications = json!({ NOTIFICATION: {"subscription": SUBSCRIBE, "result": item} });
    let error_kind = g.subschema_for::<ErrorKind>().to_value();
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
