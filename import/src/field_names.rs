//! Field names as Kubernetes writes them. A `DNSFailover` spells every field camelCase, as
//! every Kubernetes and Kuadrant API does; the config file it becomes spells them snake_case.
//! The `check` table is one shape in both (the operator's `[defaults.check]` and a
//! resource's `check` are the same keys), so its keys are translated at the resource's
//! edge: read camelCase (snake_case still read, so resources written before the rename keep
//! being accepted), written camelCase, and refusals name the camelCase key.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use ho_config::CheckOverrides;

/// The resource's name of a config field: camelCase, acronyms in capitals (`degraded_ttl`
/// is `degradedTTL`).
pub fn resource_field(config_field: &str) -> String {
    let mut out = String::new();
    for (i, word) in config_field.split('_').enumerate() {
        match (i, word) {
            (0, w) => out.push_str(w),
            (_, "ttl") => out.push_str("TTL"),
            (_, w) => {
                let mut chars = w.chars();
                out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
                out.push_str(chars.as_str());
            }
        }
    }
    out
}

/// The config's name of a resource field: [`resource_field`] undone (`degradedTTL` is
/// `degraded_ttl`); a snake_case name is itself.
pub fn config_field(resource_field: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in resource_field.chars() {
        if c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
        {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
        previous = Some(c);
    }
    out
}

/// A path below a check table (`.fast_interval`, `.damping.half_life`) in the resource's
/// spelling (`.fastInterval`, `.damping.halfLife`); what follows a key is kept.
pub fn check_path(path: &str) -> String {
    let Some(rest) = path.strip_prefix('.') else {
        return path.to_owned();
    };
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    let (key, tail) = rest.split_at(end);
    let tail = if NESTED.contains(&key) {
        check_path(tail)
    } else {
        tail.to_owned()
    };
    format!(".{}{tail}", resource_field(key))
}

/// A refusal of a key below a check table (`unknown key `fast_intervl`; did you mean
/// `fast_interval`?`, or the list of keys expected) in the resource's spelling: the key
/// as it would be written and the keys to write instead, camelCase. Other reasons are
/// kept.
pub fn key_reason(reason: &str) -> String {
    let Some(rest) = reason.strip_prefix("unknown key ") else {
        return reason.to_owned();
    };
    let (named, list) = match rest.split_once("; expected one of: ") {
        Some((named, list)) => (named, Some(list)),
        None => (rest, None),
    };
    // Backticks alternate: every odd part is a key.
    let parts: Vec<String> = named
        .split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            1 => resource_field(part),
            _ => part.to_owned(),
        })
        .collect();
    let mut out = format!("unknown key {}", parts.join("`"));
    if let Some(list) = list {
        let keys: Vec<String> = list.split(", ").map(resource_field).collect();
        out.push_str("; expected one of: ");
        out.push_str(&keys.join(", "));
    }
    out
}

/// Tables inside a check table whose keys are field names too (the rest hold user data,
/// such as `headers`, whose keys are kept as written).
const NESTED: &[&str] = &["damping"];

/// A check table's keys renamed by `rename`, with the nested tables' keys; two keys that
/// name one field (`fastInterval` and `fast_interval`) are an error.
fn renamed(
    table: Map<String, Value>,
    rename: fn(&str) -> String,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (key, value) in table {
        let name = rename(&key);
        let value = match value {
            Value::Object(inner) if NESTED.contains(&config_field(&key).as_str()) => {
                Value::Object(renamed(inner, rename)?)
            }
            other => other,
        };
        if out.insert(name.clone(), value).is_some() {
            return Err(format!(
                "check key {name} is given twice (as {key} and another spelling)"
            ));
        }
    }
    Ok(out)
}

/// Reads a resource's `check` table (camelCase or snake_case keys) as the config's.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CheckOverrides>, D::Error> {
    let Some(table) = Option::<Map<String, Value>>::deserialize(d)? else {
        return Ok(None);
    };
    let table = renamed(table, config_field).map_err(serde::de::Error::custom)?;
    serde_json::from_value(Value::Object(table))
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Writes a `check` table with camelCase keys.
pub fn serialize<S: Serializer>(check: &Option<CheckOverrides>, s: S) -> Result<S::Ok, S::Error> {
    let Some(check) = check else {
        return s.serialize_none();
    };
    let Value::Object(table) = serde_json::to_value(check).map_err(serde::ser::Error::custom)?
    else {
        return Err(serde::ser::Error::custom("a check table is a map"));
    };
    renamed(table, resource_field)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

/// A check table's schema (the CRD's copy) with its property names camelCase, each
/// snake_case name kept beside as a deprecated spelling: the API server prunes fields its
/// schema does not list, and a resource stored before the rename must keep its check.
pub fn camel_case_schema(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = map.remove("properties") {
        let mut renamed = Map::new();
        for (key, mut child) in properties {
            if NESTED.contains(&key.as_str()) {
                camel_case_schema(&mut child);
            }
            let camel = resource_field(&key);
            if camel != key {
                let mut old = child.clone();
                old["description"] = Value::String(format!("Deprecated spelling of `{camel}`."));
                renamed.insert(key, old);
            }
            renamed.insert(camel, child);
        }
        map.insert("properties".into(), Value::Object(renamed));
    }
    if let Some(Value::Array(required)) = map.get_mut("required") {
        for name in required.iter_mut() {
            if let Some(n) = name.as_str() {
                *name = Value::String(resource_field(n));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::DNSFailoverSpec;

    fn spec(check: Value) -> Result<DNSFailoverSpec, serde_json::Error> {
        serde_json::from_value(serde_json::json!({
            "domains": ["api.example.org"],
            "sinks": ["dns"],
            "endpoints": [{"addresses": ["192.0.2.1"]}],
            "check": check,
        }))
    }

    #[test]
    fn check_keys_read_in_either_spelling_and_write_camel_case() {
        let camel = spec(serde_json::json!({
            "kind": "http", "fastInterval": "50ms", "expectStatus": [200],
            "damping": {"halfLife": "10s"}, "headers": {"X-Tenant_Id": "a"},
        }))
        .unwrap();
        let snake = spec(serde_json::json!({
            "kind": "http", "fast_interval": "50ms", "expect_status": [200],
            "damping": {"half_life": "10s"}, "headers": {"X-Tenant_Id": "a"},
        }))
        .unwrap();
        assert_eq!(camel, snake);
        let check = camel.check.as_ref().unwrap();
        assert_eq!(
            check.fast_interval,
            Some(std::time::Duration::from_millis(50))
        );
        let written = serde_json::to_value(&camel).unwrap();
        assert_eq!(written["check"]["fastInterval"], "50ms");
        assert_eq!(written["check"]["expectStatus"], serde_json::json!([200]));
        assert_eq!(written["check"]["damping"]["halfLife"], "10s");
        assert_eq!(
            written["check"]["headers"]["X-Tenant_Id"], "a",
            "user keys kept"
        );
        assert!(written["check"].get("fast_interval").is_none());
        assert_eq!(
            serde_json::from_value::<DNSFailoverSpec>(written).unwrap(),
            camel
        );
    }

    #[test]
    fn one_key_in_two_spellings_is_refused() {
        let e = spec(serde_json::json!({"fastInterval": "50ms", "fast_interval": "60ms"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fast_interval is given twice"), "{e}");
    }

    #[test]
    fn refused_check_keys_are_said_camel_case() {
        assert_eq!(
            key_reason("unknown key `fast_intervl`; did you mean `fast_interval`?"),
            "unknown key `fastIntervl`; did you mean `fastInterval`?"
        );
        assert_eq!(
            key_reason("unknown key `bogus_key`; expected one of: fall, fast_interval"),
            "unknown key `bogusKey`; expected one of: fall, fastInterval"
        );
        assert_eq!(key_reason("must be at least 1"), "must be at least 1");
    }

    #[test]
    fn paths_below_a_check_are_said_camel_case() {
        assert_eq!(check_path(".fast_interval"), ".fastInterval");
        assert_eq!(check_path(".damping.half_life"), ".damping.halfLife");
        assert_eq!(check_path(".headers.X_Y"), ".headers.X_Y");
        assert_eq!(check_path(".expect_status[1]"), ".expectStatus[1]");
        assert_eq!(check_path(""), "");
    }
}
