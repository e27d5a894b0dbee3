//! Tool argument schemas derived from the `Args` types that parse the
//! arguments (`#[derive(JsonSchema)]`), so that what a tool is offered
//! with and what it accepts are written once. [`schema_of`] gives them
//! the plain shape providers have always been sent: no `$schema`, `title`
//! or type-level description, nothing behind a `$ref`, an optional
//! argument as its plain type left out of `required`.

use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

/// The JSON schema of a tool's arguments, as the providers are sent it.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            // Providers take one self-contained object schema.
            s.inline_subschemas = true;
        })
        .with_transform(Plain)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(map) = schema.as_object_mut() {
        // The Rust type's name (`Args`), and its doc comment, which is for
        // the code's readers: the tool's own description is the model's.
        take(map, "title");
        take(map, "description");
    }
    schema
}

/// Removes `key` from `map`, the other keys staying in their order.
/// Order only shows where serde_json keeps insertion order (its
/// `preserve_order`, which some of the workspace's crates turn on); the
/// schemas then read as the hand-written ones did. `Map::remove` would
/// swap the last key into the gap.
fn take(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let value = map.get(key).cloned()?;
    *map = std::mem::take(map).into_iter().filter(|(k, _)| k != key).collect();
    Some(value)
}

/// Moves `key` to the end of `map` (see [`take`] on order).
pub(crate) fn put_last(map: &mut Map<String, Value>, key: &str) {
    if let Some(value) = take(map, key) {
        map.insert(key.to_string(), value);
    }
}

/// What schemars adds that the tools' schemas never said.
#[derive(Clone)]
struct Plain;

impl Transform for Plain {
    fn transform(&mut self, schema: &mut Schema) {
        // An `Option` argument is optional by being left out of `required`;
        // offering `null` too only invites the model to send it.
        if let Some(ty) = schema.get_mut("type")
            && let Value::Array(types) = ty
        {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                *ty = types.remove(0);
            }
        }
        if let Some(Value::Array(values)) = schema.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
        if let Some(map) = schema.as_object_mut() {
            // An array's words before its items, as written by hand.
            put_last(map, "items");
            // Integer widths (`uint`, `uint64`) are Rust's; `minimum` says
            // what the tool takes.
            take(map, "format");
            // A default is said in the description, where the model reads it.
            take(map, "default");
            if map.get("type").and_then(Value::as_str) == Some("object") {
                // Some providers refuse an object schema without
                // `properties` (a tool that takes no arguments).
                map.entry("properties").or_insert_with(|| Value::Object(Map::new()));
                put_last(map, "additionalProperties");
            }
        }
        transform_subschemas(self, schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// For the code's readers, not in the schema.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// Where
        path: String,
        #[schemars(range(min = 1, max = 30))]
        limit: Option<usize>,
        #[serde(default)]
        all: bool,
        #[schemars(extend("enum" = ["a", "b"]))]
        mode: Option<String>,
        /// Each
        items: Vec<Item>,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Item {
        name: String,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Nothing {}

    /// Compared as text: where serde_json keeps insertion order, the keys
    /// must come in the order a hand-written schema has them too.
    #[test]
    fn the_derived_schema_is_plain() {
        let text = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        assert_eq!(
            text(&schema_of::<Args>()),
            text(&json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 30},
                    "all": {"type": "boolean"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "items": {
                        "type": "array",
                        "description": "Each",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "items"],
                "additionalProperties": false
            }))
        );
        assert_eq!(schema_of::<Nothing>(), json!({"type": "object", "properties": {}}));
    }
}
