//! The parts of the Cloud DNS API v1 this sink speaks, as JSON: record sets (a name and
//! type with all their data, or a routing policy) listed a page at a time, and changed by
//! one `changes.create` of additions and deletions that Cloud DNS applies atomically. A
//! deletion must match the set as it is, so the listed set is kept verbatim to delete it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rounds::Packable;

/// Record sets added (and, apart, deleted) in one change at most: Cloud DNS's
/// `rrsetAdditionsPerChange` and `rrsetDeletionsPerChange` quotas.
pub const MAX_CHANGE: usize = 1_000;

/// Record sets asked for per page of a listing.
pub const PAGE: usize = 1_000;

/// A record set as listed: what the sink reads, and the set itself to delete it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its name, lower case, without the trailing dot.
    pub name: String,
    /// `A`, `AAAA`, `TXT`, ...
    pub rtype: String,
    /// Seconds.
    pub ttl: u64,
    /// Its data, sorted (the items of a weighted policy as `weight:data`, of a geolocation
    /// policy as `location:data`).
    pub data: Vec<String>,
    /// The set as the API gave it.
    pub raw: Value,
}

/// A listing page.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// Its record sets.
    #[serde(default)]
    pub rrsets: Vec<Value>,
    /// The next page's token; none on the last.
    #[serde(default)]
    pub next_page_token: Option<String>,
}

impl Listed {
    /// A listed set, or `None` for what this sink never touches (no name or type).
    pub fn of(raw: Value) -> Option<Listed> {
        let name = raw
            .get("name")?
            .as_str()?
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let rtype = raw.get("type")?.as_str()?.to_owned();
        let ttl = raw.get("ttl").and_then(Value::as_u64).unwrap_or(0);
        let items = |policy: &str, key: &str| match raw
            .pointer(&format!("/routingPolicy/{policy}/items"))
        {
            Some(Value::Array(items)) => Some(
                (items.iter())
                    .flat_map(|item| {
                        let at = match item.get(key) {
                            Some(Value::String(s)) => s.clone(),
                            Some(v) => v.as_f64().unwrap_or(0.0).to_string(),
                            None => String::new(),
                        };
                        strings(item.get("rrdatas"))
                            .into_iter()
                            .map(move |d| format!("{at}:{d}"))
                    })
                    .collect(),
            ),
            _ => None,
        };
        let mut data: Vec<String> = match (items("wrr", "weight"), items("geo", "location")) {
            (Some(weighted), _) => weighted,
            (None, Some(located)) => located,
            _ if raw.get("routingPolicy").is_some() => vec!["(another routing policy)".into()],
            _ => strings(raw.get("rrdatas")),
        };
        data.sort();
        Some(Listed {
            name,
            rtype,
            ttl,
            data,
            raw,
        })
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// How a record set's data is answered.
pub enum Routing<'a> {
    /// Every datum to every client.
    Plain,
    /// Weighted round robin: each datum's weight.
    Weighted(&'a [f64]),
    /// Geolocation: each datum's Google Cloud region; a client gets the data of the region
    /// nearest it.
    Geo(&'a [String]),
}

/// A record set to add.
pub fn rrset(name: &str, rtype: &str, ttl: u64, data: &[String], routing: Routing<'_>) -> Value {
    let mut set = serde_json::json!({
        "kind": "dns#resourceRecordSet",
        "name": format!("{name}."),
        "type": rtype,
        "ttl": ttl,
    });
    match routing {
        Routing::Plain => set["rrdatas"] = serde_json::json!(data),
        Routing::Weighted(weights) => {
            let items: Vec<Value> = data
                .iter()
                .zip(weights)
                .map(|(d, w)| serde_json::json!({"weight": w, "rrdatas": [d]}))
                .collect();
            set["routingPolicy"] = serde_json::json!({"wrr": {"items": items}});
        }
        Routing::Geo(locations) => {
            let mut by_location: std::collections::BTreeMap<&str, Vec<&String>> =
                std::collections::BTreeMap::new();
            for (d, location) in data.iter().zip(locations) {
                by_location.entry(location).or_default().push(d);
            }
            let items: Vec<Value> = (by_location.into_iter())
                .map(|(location, d)| serde_json::json!({"location": location, "rrdatas": d}))
                .collect();
            set["routingPolicy"] = serde_json::json!({"geo": {"items": items}});
        }
    }
    set
}

/// One `changes.create`: applied all or nothing.
#[derive(Debug, Default, Serialize)]
pub struct Change {
    /// Record sets added.
    pub additions: Vec<Value>,
    /// Record sets deleted, each as it is in the zone.
    pub deletions: Vec<Value>,
}

impl Change {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.additions.is_empty() && self.deletions.is_empty()
    }
}

impl Packable for Change {
    fn size(&self) -> usize {
        self.additions.len().max(self.deletions.len())
    }

    fn absorb(&mut self, other: Change) {
        self.additions.extend(other.additions);
        self.deletions.extend(other.deletions);
    }

    /// Deletions ride in the first changes, additions after them, so a set is deleted
    /// before (or with) its replacement.
    fn split(self, max: usize) -> Vec<Change> {
        let mut out: Vec<Change> = Vec::new();
        for (i, chunk) in self.deletions.chunks(max).enumerate() {
            out.push(Change::default());
            out[i].deletions = chunk.to_vec();
        }
        let first_free = out.len().saturating_sub(1);
        for (i, chunk) in self.additions.chunks(max).enumerate() {
            if out.len() <= first_free + i {
                out.push(Change::default());
            }
            out[first_free + i].additions = chunk.to_vec();
        }
        out
    }
}

/// A Google API error's reasons and message (`conditionNotMet: Precondition not met for
/// 'entity.change.deletions[0]'`).
pub fn error_text(body: &[u8]) -> (Vec<String>, String) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return (Vec::new(), String::new());
    };
    let reasons = v
        .pointer("/error/errors")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .filter_map(|x| x.get("reason").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let message = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    (reasons, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listed_sets_compare_by_data_whatever_their_form() {
        let plain = Listed::of(json!({"name": "API.example.com.", "type": "A", "ttl": 60,
            "rrdatas": ["192.0.2.2", "192.0.2.1"]}))
        .unwrap();
        assert_eq!(plain.name, "api.example.com");
        assert_eq!(plain.data, ["192.0.2.1", "192.0.2.2"]);
        let weighted = Listed::of(rrset(
            "api.example.com",
            "A",
            60,
            &["192.0.2.1".into(), "192.0.2.2".into()],
            Routing::Weighted(&[3.0, 1.0]),
        ))
        .unwrap();
        assert_eq!(weighted.data, ["1:192.0.2.2", "3:192.0.2.1"]);
        let located = Listed::of(rrset(
            "api.example.com",
            "A",
            60,
            &["192.0.2.1".into(), "192.0.2.2".into(), "192.0.2.3".into()],
            Routing::Geo(&["us-east1".into(), "europe-west1".into(), "us-east1".into()]),
        ))
        .unwrap();
        assert_eq!(
            located.raw["routingPolicy"]["geo"]["items"],
            json!([{"location": "europe-west1", "rrdatas": ["192.0.2.2"]},
                   {"location": "us-east1", "rrdatas": ["192.0.2.1", "192.0.2.3"]}])
        );
        assert_eq!(
            located.data,
            [
                "europe-west1:192.0.2.2",
                "us-east1:192.0.2.1",
                "us-east1:192.0.2.3"
            ]
        );
        let other = Listed::of(json!({"name": "a.example.com.", "type": "A", "ttl": 60,
            "routingPolicy": {"primaryBackup": {}}}))
        .unwrap();
        assert_eq!(other.data, ["(another routing policy)"]);
    }

    #[test]
    fn a_change_too_big_is_split_deletions_first() {
        let sets = |n: usize| (0..n).map(|i| json!(i)).collect::<Vec<_>>();
        let change = Change {
            additions: sets(3),
            deletions: sets(5),
        };
        let parts = change.split(2);
        let shape: Vec<(usize, usize)> = parts
            .iter()
            .map(|c| (c.deletions.len(), c.additions.len()))
            .collect();
        assert_eq!(shape, [(2, 0), (2, 0), (1, 2), (0, 1)]);
    }
}
