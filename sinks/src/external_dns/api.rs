//! external-dns's webhook-provider protocol as JSON, from its protocol document
//! (docs/tutorials/webhook-provider.md) and Go types (`endpoint.Endpoint`, `plan.Changes`,
//! external-dns v0.22): every request and answer carries the media
//! type [`MEDIA_TYPE`]; `GET /` negotiates it and answers the provider's domain filter;
//! `GET /records` lists every record set; `POST /adjustendpoints` lets the provider adjust
//! the desired record sets before they are compared; `POST /records` applies one
//! `plan.Changes` and answers 204.

use serde::{Deserialize, Serialize};

/// The media type and version both sides speak (`Accept` and `Content-Type`).
pub const MEDIA_TYPE: &str = "application/external.dns.webhook+json;version=1";

/// One record set: a name, a type and its values (`endpoint.Endpoint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The name, without a trailing dot.
    pub dns_name: String,
    /// Its values: addresses, or a TXT's quoted text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// `A`, `AAAA`, `TXT`, `CNAME`, ...
    pub record_type: String,
    /// Tells apart record sets of one name and type (weighted or geo sets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub set_identifier: String,
    /// Seconds; 0 is "not configured" (the provider's default).
    #[serde(rename = "recordTTL", default, skip_serializing_if = "is_zero")]
    pub record_ttl: i64,
    /// external-dns's labels (owner, resource); providers may keep or drop them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Provider-specific properties (`aws/weight`, ...), kept as listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_specific: Vec<ProviderSpecific>,
}

fn is_zero(ttl: &i64) -> bool {
    *ttl == 0
}

/// One provider-specific property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderSpecific {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl Endpoint {
    /// A record set with no labels or provider-specific properties.
    pub fn new(name: &str, record_type: &str, targets: Vec<String>, ttl: u32) -> Endpoint {
        Endpoint {
            dns_name: name.to_owned(),
            targets,
            record_type: record_type.to_owned(),
            set_identifier: String::new(),
            record_ttl: i64::from(ttl),
            labels: Default::default(),
            provider_specific: Vec::new(),
        }
    }

    /// Whether it is the record set `name`/`record_type` without a set identifier (names
    /// compared without case, as DNS does).
    pub fn is(&self, name: &str, record_type: &str) -> bool {
        self.set_identifier.is_empty()
            && self.record_type.eq_ignore_ascii_case(record_type)
            && self
                .dns_name
                .trim_end_matches('.')
                .eq_ignore_ascii_case(name)
    }

    /// Whether `other` serves the same values: the targets as a set, and the TTL when
    /// `self` (the desired set) configures one (external-dns's own comparison).
    pub fn serves_as(&self, other: &Endpoint) -> bool {
        let sorted = |e: &Endpoint| {
            let mut t: Vec<String> = e.targets.iter().map(|t| t.to_ascii_lowercase()).collect();
            t.sort();
            t.dedup();
            t
        };
        sorted(self) == sorted(other)
            && (self.record_ttl == 0 || self.record_ttl == other.record_ttl)
    }
}

/// One `POST /records` (`plan.Changes`): `updateOld[i]` is replaced by `updateNew[i]`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// Record sets to create.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub create: Vec<Endpoint>,
    /// Record sets to replace, as listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub update_old: Vec<Endpoint>,
    /// Their replacements, in the same order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub update_new: Vec<Endpoint>,
    /// Record sets to delete, as listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<Endpoint>,
}

impl Changes {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update_old.is_empty() && self.delete.is_empty()
    }

    /// Takes `other`'s changes in.
    pub fn absorb(&mut self, other: Changes) {
        self.create.extend(other.create);
        self.update_old.extend(other.update_old);
        self.update_new.extend(other.update_new);
        self.delete.extend(other.delete);
    }

    /// How many record sets it touches.
    pub fn len(&self) -> usize {
        self.create.len() + self.update_old.len() + self.delete.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON external-dns's Go types write: camelCase keys, `recordTTL`, empty lists and
    /// zero TTLs left out (`omitempty`).
    #[test]
    fn changes_are_written_as_external_dns_writes_them() {
        let a = Endpoint::new("api.example.com", "A", vec!["192.0.2.1".into()], 60);
        let changes = Changes {
            create: vec![a.clone()],
            delete: vec![Endpoint::new("old.example.com", "A", vec![], 0)],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&changes).unwrap(),
            r#"{"create":[{"dnsName":"api.example.com","targets":["192.0.2.1"],"recordType":"A","recordTTL":60}],"delete":[{"dnsName":"old.example.com","recordType":"A"}]}"#
        );
        let listed: Endpoint = serde_json::from_str(
            r#"{"dnsName":"api.example.com","targets":["192.0.2.1"],"recordType":"A","setIdentifier":"","recordTTL":60,"labels":{"owner":"x"},"providerSpecific":[{"name":"aws/weight","value":"10"}]}"#,
        )
        .unwrap();
        assert!(a.serves_as(&listed) && listed.labels["owner"] == "x");
    }
}
