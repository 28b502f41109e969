//! A DNSFailover's values against the CRD's schema, before the resource is parsed: a value
//! of the wrong type, a value an enum does not list, a number out of range. Each is said at
//! its field path, and the value left out (an optional field) or replaced by an empty one
//! of its type (a required field, an item of a list, so later indices keep their place):
//! the typed parse then succeeds, and the rest of the resource is still judged in the same
//! run, as the API server would judge it field by field.

use serde_json::{Map, Value as Json};

/// Checks `value` (at `path`) against `schema`, saying each value that does not fit in
/// `problems` and taking it out of `value`.
pub(super) fn check(value: &mut Json, schema: &Json, path: &str, problems: &mut Vec<String>) {
    match value {
        Json::Object(map) => check_object(map, schema, path, problems),
        Json::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for (i, item) in items.iter_mut().enumerate() {
                let at = format!("{path}[{i}]");
                match misfit(item, item_schema) {
                    Some(problem) => {
                        problems.push(format!("{at}: {problem}"));
                        *item = empty(item_schema);
                    }
                    None => check(item, item_schema, &at, problems),
                }
            }
        }
        _ => {}
    }
}

/// The fields of one object (its properties, or a free-form map's values).
fn check_object(
    map: &mut Map<String, Json>,
    schema: &Json,
    path: &str,
    problems: &mut Vec<String>,
) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let field_schema = match schema.get("properties").and_then(|p| p.get(&key)) {
            Some(s) => s,
            // Keys the schema does not know were said (and dropped) by the spelling pass.
            None => match schema.get("additionalProperties") {
                Some(s) if s.is_object() => s,
                _ => continue,
            },
        };
        let at = format!("{path}.{key}");
        let Some(value) = map.get_mut(&key) else {
            continue;
        };
        match misfit(value, field_schema) {
            Some(problem) => {
                problems.push(format!("{at}: {problem}"));
                if required.contains(&key) {
                    *value = empty(field_schema);
                } else {
                    map.remove(&key);
                }
            }
            None => check(value, field_schema, &at, problems),
        }
    }
    let properties = schema.get("properties");
    for key in required {
        if let (false, Some(field_schema)) =
            (map.contains_key(&key), properties.and_then(|p| p.get(&key)))
        {
            problems.push(format!("{path}.{key}: missing; it is required"));
            map.insert(key, empty(field_schema));
        }
    }
}

/// Why `value` does not fit `schema`'s type, enum or range; `None` when it does.
fn misfit(value: &Json, schema: &Json) -> Option<String> {
    if value.is_null() && schema.get("nullable") == Some(&Json::Bool(true)) {
        return None;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Json::Bool(true)) {
        return match value {
            Json::String(_) => None,
            Json::Number(n) if n.is_i64() || n.is_u64() => None,
            other => Some(format!(
                "expected an integer or a string, found {}",
                described(other)
            )),
        };
    }
    let wanted = schema.get("type").and_then(Json::as_str)?;
    let fits = match wanted {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !fits {
        return Some(format!(
            "expected {}, found {}",
            article(wanted),
            described(value)
        ));
    }
    if let (Some(listed), Some(found)) =
        (schema.get("enum").and_then(Json::as_array), value.as_str())
    {
        let accepted: Vec<&str> = listed.iter().filter_map(Json::as_str).collect();
        if !accepted.contains(&found) {
            let said = ho_config::explain::unknown("value", found, &accepted);
            return Some(match said.contains("expected one of") {
                true => said,
                false => format!("{said} (accepted: {})", accepted.join(", ")),
            });
        }
    }
    out_of_range(value, schema)
}

/// A number below the schema's `minimum` or above its `maximum`.
fn out_of_range(value: &Json, schema: &Json) -> Option<String> {
    let n = value.as_f64()?;
    let bound = |key: &str| schema.get(key).and_then(Json::as_f64);
    match (bound("minimum"), bound("maximum")) {
        (Some(min), _) if n < min => Some(format!("{value} is below the least accepted, {min}")),
        (_, Some(max)) if n > max => Some(format!("{value} is above the most accepted, {max}")),
        _ => None,
    }
}

/// The value a required field or a list item stands at when its own does not fit: empty,
/// of the schema's type.
fn empty(schema: &Json) -> Json {
    match schema.get("type").and_then(Json::as_str) {
        Some("array") => Json::Array(Vec::new()),
        Some("object") => Json::Object(Map::new()),
        Some("string") => Json::String(String::new()),
        Some("integer" | "number") => Json::from(0),
        Some("boolean") => Json::Bool(false),
        _ => Json::Null,
    }
}

/// A schema type as a reader names it.
fn article(wanted: &str) -> &'static str {
    match wanted {
        "string" => "a string",
        "boolean" => "a boolean (true or false)",
        "integer" => "a whole number",
        "number" => "a number",
        "array" => "a list",
        _ => "a map",
    }
}

/// A value as a reader sees it: its kind and, for a scalar, itself.
fn described(value: &Json) -> String {
    match value {
        Json::Null => "nothing (null)".to_owned(),
        Json::Bool(b) => format!("the boolean {b}"),
        Json::Number(n) => format!("the number {n}"),
        Json::String(s) => format!("the string {s:?}"),
        Json::Array(_) => "a list".to_owned(),
        Json::Object(_) => "a map".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_that_do_not_fit_are_said_and_taken_out() {
        let schema = super::super::spelling::spec_schema();
        let mut spec = json!({
            "domains": "a.example.org",
            "sinks": ["dns", 7],
            "endpoints": [{"addresses": ["192.0.2.1"], "weight": -3}],
            "holdFailback": "2m",
            "policy": "fastest",
            "weights": [{"label": "geo", "weight": 2}],
            "check": {"kind": "htp", "headers": {"X-A": 1}},
        });
        let mut problems = Vec::new();
        check(&mut spec, &schema, "spec", &mut problems);
        problems.sort();
        assert_eq!(
            problems,
            [
                "spec.check.headers.X-A: expected a string, found the number 1",
                "spec.check.kind: unknown value `htp`; did you mean `http`? (accepted: http, https, tcp, dns, grpc, grpcs, icmp, heartbeat, feed)",
                "spec.domains: expected a list, found the string \"a.example.org\"",
                "spec.endpoints[0].weight: -3 is below the least accepted, 0",
                "spec.holdFailback: expected a boolean (true or false), found the string \"2m\"",
                "spec.policy: unknown value `fastest`; expected one of: all, failover, weighted, geo",
                "spec.sinks[1]: expected a string, found the number 7",
                "spec.weights[0].value: missing; it is required",
            ]
        );
        assert_eq!(spec["domains"], json!([]), "a required field stays, empty");
        assert_eq!(
            spec["sinks"],
            json!(["dns", ""]),
            "later items keep their index"
        );
        assert!(spec.get("holdFailback").is_none() && spec.get("policy").is_none());
    }
}
