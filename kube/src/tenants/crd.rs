//! The CustomResourceDefinition, made structural. The derive writes what schemars
//! derives; the API server accepts only structural schemas (every node typed, no
//! `additionalProperties` beside `properties`, nothing but value checks inside `anyOf`), so
//! the few shapes our types produce are rewritten into their structural equivalents.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use ho_engine::probe::CheckList;

use super::resource::DNSFailover;

/// The `DNSFailover` CRD as `kubectl apply` takes it, its check tables holding the keys of
/// every kind in `checks`.
pub fn crd(checks: &CheckList) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(DNSFailover::crd()).expect("a CRD serializes");
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                structural(schema, checks);
                old_spellings(schema);
                schema["description"] = json!(
                    "A set of domains published to the healthy subset of the gateways a team names or the orchestrator discovers (health-orchestrator)."
                );
            }
        }
    }
    serde_json::from_value(value).expect("the rewritten CRD is still a CRD")
}

/// The fields 0.2.0 renamed, each under its 0.1.0 name too (described as a deprecated
/// spelling), so the API server keeps what a resource written before the rename holds.
fn old_spellings(schema: &mut Value) {
    let places: [(&str, &[&str]); 2] = [
        (
            "/properties/spec/properties",
            &[
                "degradedTTL",
                "holdFailback",
                "onAllUnhealthy",
                "minHealthy",
                "defaultWeight",
                "defaultGeo",
            ],
        ),
        (
            "/properties/spec/properties/endpoints/items/properties",
            &["nodeAddress"],
        ),
    ];
    for (at, fields) in places {
        let Some(Value::Object(properties)) = schema.pointer_mut(at) else {
            continue;
        };
        for field in fields {
            let Some(mut old) = properties.get(*field).cloned() else {
                continue;
            };
            old["description"] = json!(format!("Deprecated spelling of `{field}`."));
            properties.insert(super::field_names::config_field(field), old);
        }
    }
}

/// Rewrites one schema node and its children.
fn structural(node: &mut Value, checks: &CheckList) {
    if is_check_table(node) {
        checks.with_check_fields(node, SchemaSettings::openapi3());
        super::field_names::camel_case_schema(node);
    }
    let Some(map) = node.as_object_mut() else {
        return;
    };
    // `deny_unknown_fields`: the server's pruning and kubectl's strict field validation
    // refuse unknown fields instead.
    if map.contains_key("properties") && map.get("additionalProperties") == Some(&json!(false)) {
        map.remove("additionalProperties");
    }
    if let Some(Value::Array(branches)) = map.get("anyOf").cloned() {
        collapse_any_of(map, &branches);
    }
    // The check keys' `x-kinds` tags (which kinds read a key) are ours; the API server
    // takes no extension but its own `x-kubernetes-*`.
    map.remove("x-kinds");
    // Formats the API server does not know (Rust integer widths, `ip`) say nothing to it.
    if let Some(Value::String(format)) = map.get("format") {
        if !matches!(
            format.as_str(),
            "int32" | "int64" | "float" | "double" | "byte" | "date" | "date-time"
        ) {
            map.remove("format");
        }
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children
                .values_mut()
                .for_each(|child| structural(child, checks));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            structural(child, checks);
        }
    }
}

/// Whether `node` is a check table: it has every common key of one. The CRD's schema type
/// keeps no extensions, so the config's `x-check-table` tag does not reach here; the kinds'
/// keys must be added to every such node, or the API server would prune them.
fn is_check_table(node: &Value) -> bool {
    static COMMON: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let common = COMMON.get_or_init(|| {
        let schema = schemars::schema_for!(ho_config::CheckOverrides);
        schema.as_value()["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    });
    node["properties"]
        .as_object()
        .is_some_and(|p| !common.is_empty() && common.iter().all(|k| p.contains_key(k)))
}

/// `Option<enum>` (a string enum or null) becomes a nullable string enum; an integer or a
/// string becomes `x-kubernetes-int-or-string`.
fn collapse_any_of(map: &mut Map<String, Value>, branches: &[Value]) {
    let types: Vec<Option<&str>> = branches.iter().map(|b| b["type"].as_str()).collect();
    let strings: Vec<Value> = branches
        .iter()
        .flat_map(|b| b["enum"].as_array().cloned().unwrap_or_default())
        .filter(|v| v.is_string())
        .collect();
    let only_null_or_string = branches
        .iter()
        .all(|b| b["type"] == "string" || b["enum"] == json!([null]));
    if only_null_or_string && !strings.is_empty() {
        map.remove("anyOf");
        map.insert("type".into(), json!("string"));
        map.insert("enum".into(), Value::Array(strings));
        map.insert("nullable".into(), json!(true));
    } else if types.contains(&Some("integer"))
        && types.contains(&Some("string"))
        && types.len() == 2
    {
        map.remove("anyOf");
        map.insert("x-kubernetes-int-or-string".into(), json!(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server's structural rules, checked on every node: a type (or int-or-string,
    /// or preserve-unknown-fields), no `additionalProperties` beside `properties`, no
    /// `anyOf`/`oneOf` left (our types need none), formats it knows.
    fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
        let map = node.as_object().unwrap();
        let typed = map.contains_key("type")
            || map.contains_key("x-kubernetes-int-or-string")
            || map.contains_key("x-kubernetes-preserve-unknown-fields");
        if !typed {
            problems.push(format!("{path}: no type"));
        }
        if map.contains_key("properties") && map.contains_key("additionalProperties") {
            problems.push(format!("{path}: properties and additionalProperties"));
        }
        for key in ["anyOf", "oneOf", "allOf", "not"] {
            if map.contains_key(key) {
                problems.push(format!("{path}: {key}"));
            }
        }
        if let Some(Value::Object(p)) = map.get("properties") {
            for (k, v) in p {
                check(v, &format!("{path}.{k}"), problems);
            }
        }
        if let Some(items) = map.get("items") {
            check(items, &format!("{path}[]"), problems);
        }
        if let Some(v @ Value::Object(_)) = map.get("additionalProperties") {
            check(v, &format!("{path}{{}}"), problems);
        }
    }

    #[test]
    fn the_crd_is_structural() {
        let value = serde_json::to_value(crd(&ho_engine::probe::BUILT_IN)).unwrap();
        let mut problems = Vec::new();
        for version in value["spec"]["versions"].as_array().unwrap() {
            check(&version["schema"]["openAPIV3Schema"], "", &mut problems);
            assert_eq!(version["subresources"]["status"], json!({}));
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
