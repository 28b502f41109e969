//! The parts of Azure DNS's Resource Manager API (2018-05-01) this sink speaks, as JSON:
//! record sets (a name relative to the zone, `@` for the apex, and a type) listed a page at
//! a time (`nextLink`), each created or replaced by a `PUT` and removed by a `DELETE`,
//! every one conditional on the set's `etag` as listed (`If-Match`, or `If-None-Match: *`
//! for a set that was not there), so a set changed by someone else since the listing is
//! refused (412) rather than overwritten.

use ho_engine::multi_cluster::report::character_strings;
use serde_json::{json, Value};

/// The API version every request names.
pub const API_VERSION: &str = "2018-05-01";

/// A record set as listed.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its full name, lower case, without the trailing dot.
    pub name: String,
    /// `A`, `AAAA`, `TXT`, `CNAME`, ...
    pub rtype: String,
    /// Seconds.
    pub ttl: u64,
    /// Its data, sorted: addresses, or each TXT record's strings joined.
    pub data: Vec<String>,
    /// The version a change must name.
    pub etag: String,
}

/// A listing page.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// Its record sets.
    #[serde(default)]
    pub value: Vec<Value>,
    /// The next page's URL; none on the last.
    #[serde(default)]
    pub next_link: Option<String>,
}

impl Listed {
    /// A listed set, or `None` for one without a name or type.
    pub fn of(raw: &Value, zone: &str) -> Option<Listed> {
        let relative = raw.get("name")?.as_str()?;
        let rtype = raw.get("type")?.as_str()?.rsplit('/').next()?.to_owned();
        let p = raw.get("properties")?;
        let strings = |key: &str, field: &str| -> Vec<String> {
            p.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get(field).and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        let mut data = match rtype.as_str() {
            "A" => strings("ARecords", "ipv4Address"),
            "AAAA" => strings("AAAARecords", "ipv6Address"),
            "TXT" => p
                .get("TXTRecords")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| {
                    r.get("value")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect::<String>()
                })
                .collect(),
            _ => Vec::new(),
        };
        data.sort();
        Some(Listed {
            name: full_name(relative, zone),
            rtype,
            ttl: p.get("TTL").and_then(Value::as_u64).unwrap_or(0),
            data,
            etag: raw
                .get("etag")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        })
    }
}

/// `relative` (as Azure names a set in `zone`) as a full name.
fn full_name(relative: &str, zone: &str) -> String {
    if relative == "@" {
        zone.to_owned()
    } else {
        format!("{relative}.{zone}").to_ascii_lowercase()
    }
}

/// `name` relative to `zone`, as a request path names it (`@` for the apex).
pub fn relative(name: &str, zone: &str) -> String {
    match name.strip_suffix(zone).and_then(|n| n.strip_suffix('.')) {
        Some(rel) if !rel.is_empty() => rel.to_owned(),
        _ => "@".to_owned(),
    }
}

/// The body of a `PUT` of a set of `rtype` with `data` (addresses, or TXT texts, each
/// split into strings of at most 255 characters).
pub fn body(rtype: &str, ttl: u64, data: &[String]) -> Value {
    let records: Vec<Value> = match rtype {
        "A" => data.iter().map(|d| json!({"ipv4Address": d})).collect(),
        "AAAA" => data.iter().map(|d| json!({"ipv6Address": d})).collect(),
        _ => data
            .iter()
            .map(|d| json!({"value": character_strings(d)}))
            .collect(),
    };
    json!({"properties": {"TTL": ttl, format!("{rtype}Records"): records}})
}

/// A change to one set.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Create (`etag` `None`) or replace the set.
    Put {
        rtype: String,
        name: String,
        body: Value,
        etag: Option<String>,
    },
    /// Remove the set as listed.
    Delete {
        rtype: String,
        name: String,
        etag: String,
    },
}

/// An Azure error's code and message (`PreconditionFailed: The Record set ... has been
/// modified (etag mismatch).`).
pub fn error_text(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            Some(format!(
                "{}: {}",
                e.get("code")?.as_str()?,
                e.get("message").and_then(Value::as_str).unwrap_or("")
            ))
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_relative_to_the_zone_and_back() {
        assert_eq!(relative("api.example.com", "example.com"), "api");
        assert_eq!(relative("a.b.example.com", "example.com"), "a.b");
        assert_eq!(relative("example.com", "example.com"), "@");
        let set = json!({"name": "API", "type": "Microsoft.Network/dnszones/A", "etag": "e1",
            "properties": {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.2"}, {"ipv4Address": "192.0.2.1"}]}});
        let listed = Listed::of(&set, "example.com").unwrap();
        assert_eq!(
            (
                listed.name.as_str(),
                listed.rtype.as_str(),
                listed.ttl,
                listed.etag.as_str()
            ),
            ("api.example.com", "A", 60, "e1")
        );
        assert_eq!(listed.data, ["192.0.2.1", "192.0.2.2"]);
    }

    #[test]
    fn long_txt_texts_are_split_into_255_character_strings_and_read_back_whole() {
        let text = "y".repeat(600);
        let b = body("TXT", 60, std::slice::from_ref(&text));
        let strings = b["properties"]["TXTRecords"][0]["value"]
            .as_array()
            .unwrap();
        assert_eq!(strings.len(), 3);
        let set = json!({"name": "r", "type": "Microsoft.Network/dnszones/TXT", "etag": "e",
            "properties": b["properties"]});
        assert_eq!(Listed::of(&set, "example.com").unwrap().data, [text]);
    }
}
