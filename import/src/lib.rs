//! Other systems' configurations as ours: each importer reads another system's documents
//! and makes the equivalent TOML config, with a note for everything without an
//! equivalent (`import` prints them; the output passes `check-config`).
//!
//! - [`openova`]: the OpenOva DNS failover `config.yaml`.
//! - [`kuadrant`]: Kuadrant's DNSPolicy, DNSHealthCheckProbe and DNSRecord documents;
//!   also translated live, a namespace at a time, by ho-kube ([`kuadrant::translate`]).
//! - [`powerdns`]: a PowerDNS zone with LUA records (`ifurlup`, `ifportup`, `pick...`).
//! - [`k8gb`]: k8gb's Gslb resources, as DNSFailover resources (YAML, not TOML: each
//!   names a Kubernetes object as its source, which only a resource can).
//!
//! [`resource`] holds the `DNSFailover` resource's types (and [`field_names`] its
//! spelling of the config's keys): what the k8gb import prints and the Kuadrant
//! translation's tenants become; ho-kube watches, admits and generates the CRD from them.
//! Nothing here reads a file or talks to a server: the caller hands in the documents.

pub mod field_names;
pub mod k8gb;
pub mod kuadrant;
pub mod openova;
pub mod powerdns;
pub mod resource;

use std::collections::BTreeMap;

use serde_yaml::Value;

/// What an import produced: the config, what it could not carry over, and what the
/// operator must still do for it to work as the source did.
pub struct Imported {
    /// The equivalent configuration.
    pub config: toml::Table,
    /// Keys without an equivalent (printed as `# NOT CARRIED OVER:`).
    pub not_carried: Vec<String>,
    /// Steps left to the operator (printed as `# TO DO:`).
    pub to_do: Vec<String>,
    /// Per source resource that became several tenants (a Kuadrant DNSRecord whose names
    /// answer differently), the tenants it became, its own first.
    pub by_record: BTreeMap<String, Vec<String>>,
    /// Per source resource that publishes nothing, why (the others are imported).
    pub unpublished: BTreeMap<String, String>,
    /// Per Kuadrant DNSPolicy: the records it governs, or why it cannot be applied.
    pub policies: BTreeMap<String, kuadrant::PolicyOutcome>,
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Keys of `v` outside `known`, as notes at `path`.
fn unknown_keys(v: &Value, known: &[&str], path: &str, notes: &mut Vec<String>) {
    if let Some(map) = v.as_mapping() {
        for key in map.keys().filter_map(Value::as_str) {
            if !known.contains(&key) {
                let at = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                notes.push(format!("{at} (no equivalent)"));
            }
        }
    }
}
