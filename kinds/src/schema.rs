//! The configuration's JSON Schema, for editors that check TOML against a schema as people
//! type (taplo / Even Better TOML): generated from the config types, with each sink kind's
//! own keys from its settings type, so a `[sinks.NAME]` table is checked against the kind
//! its `kind` names, and every check kind's keys in a check table, each tagged with the
//! kinds that read it (`x-kinds`). `health-orchestrator config-schema` prints it; the copy kept in the
//! repository (`docs/config.schema.json`) is compared with it by a test.

use ho_config::Config;
use schemars::generate::SchemaSettings;
use serde_json::{json, Value};

use crate::SINK_KINDS;

/// The schema, draft-07 (what TOML editors support).
pub fn config_schema() -> Value {
    let mut generator = SchemaSettings::draft07().into_generator();
    let kinds: Vec<(&str, String)> = SINK_KINDS
        .0
        .iter()
        .map(|kind| {
            let reference = kind.settings_schema(&mut generator);
            let name = reference
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.rsplit('/').next())
                .expect("a kind's settings are a named definition")
                .to_owned();
            (kind.name(), name)
        })
        .collect();
    let mut root = generator.into_root_schema_for::<Config>().to_value();
    let definitions = root["definitions"]
        .as_object_mut()
        .expect("the root schema has definitions");
    // The keys every sink table takes besides its kind's (`delivery`, `canary`), as the
    // config type declares them: a key added there cannot go missing here.
    let common = definitions["SinkTable"]["properties"]
        .as_object()
        .expect("the sink table has properties")
        .clone();
    let mut choices = Vec::new();
    for (kind, name) in kinds {
        let mut table = definitions
            .remove(&name)
            .expect("the kind's definition was generated");
        for (key, schema) in &common {
            table["properties"][key] = schema.clone();
        }
        table["properties"]["kind"] = json!({ "const": kind, "description": "The sink kind." });
        let required = table
            .as_object_mut()
            .expect("a settings schema is an object")
            .entry("required")
            .or_insert_with(|| json!([]));
        required
            .as_array_mut()
            .expect("required is a list")
            .push(json!("kind"));
        let id = format!("sink_{kind}");
        definitions.insert(id.clone(), table);
        choices.push(json!({ "$ref": format!("#/definitions/{id}") }));
    }
    let check = definitions
        .get_mut("CheckOverrides")
        .expect("the check table is a definition");
    crate::CHECK_KINDS.with_check_fields(check, SchemaSettings::draft07());
    check["additionalProperties"] = json!(false);
    definitions.insert(
        "SinkTable".into(),
        json!({
            "description": "One DNS back end: `kind` picks which; the other keys are the kind's.",
            "oneOf": choices
        }),
    );
    root
}
