//! A DNSFailover's keys against the CRD's schema, before the resource is parsed: a key in
//! the config file's snake_case where the resource spells it camelCase, a key the schema
//! does not know, a deprecated spelling the schema still reads. Each is said with the
//! spelling to write, and the key renamed or left out so the rest of the resource is still
//! judged: `check-config --resource` says every problem in one run.

use ho_kube::tenants::field_names::resource_field;
use serde_json::{Map, Value as Json};

/// What the keys of one resource came to.
#[derive(Default)]
pub(super) struct Spelling {
    /// Keys the API server would not keep as written (refusals).
    pub problems: Vec<String>,
    /// Deprecated spellings it still reads (notes).
    pub deprecated: Vec<String>,
}

/// The schema of a DNSFailover's `spec`, as the CRD the binary prints has it.
pub(super) fn spec_schema() -> Json {
    let crd = ho_kube::tenants::crd::crd(&ho_kinds::CHECK_KINDS);
    let crd = serde_json::to_value(crd).expect("a CRD serializes");
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .cloned()
        .unwrap_or_default()
}

/// Renames or drops the keys of `value` (at `path`) that `schema` does not take as written,
/// saying each.
pub(super) fn respell(value: &mut Json, schema: &Json, path: &str, out: &mut Spelling) {
    match value {
        Json::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    respell(item, item_schema, &format!("{path}[{i}]"), out);
                }
            }
        }
        Json::Object(map) => {
            // Free-form maps (labels, headers) have no properties to hold keys to.
            if let Some(properties) = schema.get("properties").and_then(Json::as_object) {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let Some(key) = respell_key(map, &key, properties, path, out) else {
                        continue;
                    };
                    if let (Some(child), Some(child_schema)) =
                        (map.get_mut(&key), properties.get(&key))
                    {
                        respell(child, child_schema, &format!("{path}.{key}"), out);
                    }
                }
            }
        }
        _ => {}
    }
}

/// One key of `map`: kept (said when it is a deprecated spelling), renamed to the
/// resource's spelling, or dropped; the key it has now.
fn respell_key(
    map: &mut Map<String, Json>,
    key: &str,
    properties: &Map<String, Json>,
    path: &str,
    out: &mut Spelling,
) -> Option<String> {
    let at = format!("{path}.{key}");
    if let Some(schema) = properties.get(key) {
        let Some(current) = deprecated_of(schema) else {
            return Some(key.to_owned());
        };
        if map.contains_key(current) {
            out.problems.push(twice(path, current, key));
            map.remove(key);
            return None;
        }
        out.deprecated
            .push(format!("{at}: a deprecated spelling; write `{current}`"));
        return Some(key.to_owned());
    }
    let value = map.remove(key)?;
    let camel = resource_field(key);
    if properties.contains_key(&camel) {
        if map.contains_key(&camel) {
            out.problems.push(twice(path, &camel, key));
            return None;
        }
        out.problems.push(format!(
            "{at}: write `{camel}` (`{key}` is the config file's spelling; the API server would not keep it)"
        ));
        map.insert(camel.clone(), value);
        return Some(camel);
    }
    let expected: Vec<&str> = properties
        .iter()
        .filter(|(_, s)| deprecated_of(s).is_none())
        .map(|(k, _)| k.as_str())
        .collect();
    out.problems.push(format!(
        "{at}: {}",
        ho_config::explain::unknown("key", key, &expected)
    ));
    None
}

/// One field given in two spellings, said at the one to keep (whose value is kept).
fn twice(path: &str, current: &str, other: &str) -> String {
    format!("{path}.{current}: given twice ({path}.{current} and {path}.{other} are the same field); keep `{current}`")
}

/// The current spelling a deprecated property names (`Deprecated spelling of `x`.`).
fn deprecated_of(schema: &Json) -> Option<&str> {
    let description = schema.get("description")?.as_str()?;
    let rest = description.strip_prefix("Deprecated spelling of `")?;
    rest.split_once('`').map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snake_case_and_unknown_keys_are_said_and_the_rest_kept() {
        let schema = spec_schema();
        let mut spec = json!({
            "domains": ["a.example.org"],
            "hold_failback": true,
            "holdFailbak": true,
            "endpoints": [{"addresses": ["192.0.2.1"], "node_address": "InternalIP", "labels": {"geo_tag": "eu"}}],
            "check": {"fast_interval": "1s", "kind": "http", "headers": {"X_Y": "z"}},
        });
        let mut out = Spelling::default();
        respell(&mut spec, &schema, "spec", &mut out);
        out.problems.sort();
        assert_eq!(
            out.problems,
            ["spec.holdFailbak: unknown key `holdFailbak`; did you mean `holdFailback`?"]
        );
        // The fields 0.2.0 renamed are read in both spellings: the old one is a note.
        out.deprecated.sort();
        assert_eq!(
            out.deprecated,
            [
                "spec.check.fast_interval: a deprecated spelling; write `fastInterval`",
                "spec.endpoints[0].node_address: a deprecated spelling; write `nodeAddress`",
                "spec.hold_failback: a deprecated spelling; write `holdFailback`",
            ]
        );
        assert_eq!(spec["hold_failback"], true);
        assert_eq!(spec["endpoints"][0]["node_address"], "InternalIP");
        assert_eq!(
            spec["endpoints"][0]["labels"]["geo_tag"], "eu",
            "labels are free-form"
        );
        assert!(spec.get("holdFailbak").is_none());
    }
}
