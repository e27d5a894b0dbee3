//! docs/protocol.schema.json is what forge-proto's types say today.
//! After changing the protocol: `FORGE_UPDATE_SCHEMA=1 cargo test -p
//! forge-proto --test schema` writes it again.

use std::path::Path;

#[test]
fn the_checked_in_schema_matches_the_types() {
    let schema = forge_proto::schema::protocol_schema().unwrap_or_else(|e| panic!("{e}"));
    let text = serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.schema.json");
    if std::env::var_os("FORGE_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == text,
        "docs/protocol.schema.json is out of date: run `FORGE_UPDATE_SCHEMA=1 cargo test -p forge-proto --test schema` and commit it"
    );
}

#[test]
fn every_method_is_in_the_schema_with_its_params() {
    let schema = forge_proto::schema::protocol_schema().unwrap_or_else(|e| panic!("{e}"));
    // The table's methods and the subscription.
    let declared = forge_proto::methods::METHODS.len() + 1;
    let methods = schema["methods"].as_object().map(|m| m.len()).unwrap_or(0);
    assert_eq!(methods, declared);
    let send = &schema["methods"]["session.send"]["params"];
    assert_eq!(send["required"], serde_json::json!(["session"]));
    for p in ["text", "n", "continue"] {
        assert!(send["properties"].get(p).is_some(), "session.send has {p}: {send}");
    }
    assert!(schema["notifications"]["session.event"].is_object());
    assert!(schema["$defs"]["SessionEvent"].is_object() && schema["$defs"]["ErrorKind"].is_object());
}
