//! The translation of Kuadrant's resources watched live (`[kubernetes] kuadrant`), which
//! ho-kube calls a namespace at a time: the namespace's documents in, as the API server
//! holds them; out, each tenant the import makes of them as a `DNSFailover` spec, the
//! tenants each DNSRecord became, the records that publish nothing (and why) and what
//! became of each DNSPolicy. The caller gives each spec its sinks and identity.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::document::{Document, Kind, ObjectKey};
use super::records::Endpoints;
use super::{convert_documents, Mode};
use crate::resource::{DNSFailoverSpec, EndpointSource};

/// One namespace's documents translated.
pub struct Translation {
    /// Per tenant of the equivalent config: its `DNSFailover` spec, `sinks` left empty
    /// (the namespace's allowance names them), or why the tenant makes none.
    pub tenants: BTreeMap<String, Result<DNSFailoverSpec, Arc<NotAFailover>>>,
    /// The tenants each DNSRecord became (one per distinct answer among its names), its
    /// own first.
    pub by_record: BTreeMap<String, Vec<String>>,
    /// The DNSRecords that publish nothing, and why.
    pub unpublished: BTreeMap<String, String>,
    /// The DNSRecords refused by a DNSHealthCheckProbe that cannot be read, with that
    /// probe (its namespace the record's): the record's refusal links to the probe by
    /// key, not by the words of its reason.
    pub refused_by_probe: BTreeMap<String, ObjectKey>,
    /// Per DNSPolicy: the records it governs, or why it cannot be applied.
    pub policies: BTreeMap<String, PolicyOutcome>,
    /// Per DNSHealthCheckProbe: its address and check as a `DNSFailover` endpoint source
    /// (what probes it when no record backs its address), or why it cannot be probed.
    pub probes: BTreeMap<String, Result<EndpointSource, String>>,
}

/// What became of one DNSPolicy in a translation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PolicyOutcome {
    /// The DNSRecords it governs.
    pub records: Vec<String>,
    /// Why it cannot be applied; its records keep their last accepted translation.
    pub invalid: Option<String>,
}

/// Why one namespace's documents do not translate: each of its records keeps its last
/// accepted translation, and each of its policies says why in its status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranslateError {
    /// The importer refuses the documents together (two tenants of one name, a record
    /// without a name): its reason and causes, as `import` prints them.
    #[error("{reason}")]
    Refused {
        /// The importer's reason, its causes joined after it.
        reason: String,
    },
    /// The equivalent config does not become JSON, which the specs are read from.
    #[error("{0}")]
    Config(#[source] serde_json::Error),
}

/// A tenant of the translation that makes no `DNSFailover` spec.
#[derive(Debug, thiserror::Error)]
#[error("the translation of DNSRecord {tenant} is not a DNSFailover: {source}")]
pub struct NotAFailover {
    /// The tenant (named as the record it comes from, or `RECORD-N`).
    pub tenant: String,
    /// What the spec's parser said.
    source: serde_json::Error,
}

/// Translates one namespace's DNSRecords, DNSHealthCheckProbes and DNSPolicies (and the
/// Gateways its policies target), read once ([`Document::from_json`]), as `import --from
/// kuadrant` would with the running config's `[defaults.check]` for addresses nothing else
/// checks. A document that does not read is refused as its kind's bad objects are.
pub fn translate(docs: &[Document]) -> Result<Translation, TranslateError> {
    let (imported, refused_by) =
        convert_documents(docs, Mode::Live).map_err(|e| TranslateError::Refused {
            reason: format!("{e:#}"),
        })?;
    let config = serde_json::to_value(&imported.config).map_err(TranslateError::Config)?;
    let tenants = config["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t["name"].as_str()?.to_owned(), spec_of(t, &config))))
        .collect();
    let namespace = docs
        .iter()
        .find_map(|d| d.text(&["metadata", "namespace"]))
        .map(str::to_owned);
    let refused_by_probe = refused_by
        .into_iter()
        .map(|(record, probe)| {
            let key = ObjectKey {
                kind: Kind::Probe,
                namespace: namespace.clone(),
                name: probe,
            };
            (record, key)
        })
        .collect();
    Ok(Translation {
        tenants,
        by_record: imported.by_record,
        unpublished: imported.unpublished,
        refused_by_probe,
        policies: imported.policies,
        probes: probe_sources(docs),
    })
}

/// Each probe of `docs` as an endpoint source of its own, read as the translation reads
/// it (its check in full, so it needs no tenant's), or why it cannot be read.
fn probe_sources(docs: &[Document]) -> BTreeMap<String, Result<EndpointSource, String>> {
    let probes = docs.iter().filter(|d| d.kind() == Some(Kind::Probe));
    probes
        .filter_map(|doc| {
            let name = doc.name()?;
            let mut endpoints = Endpoints::new(true);
            let read = endpoints
                .probe(doc, &mut Vec::new())
                .map_err(|e| format!("{e:#}"));
            let read = read.and_then(|()| {
                let (_, table) = endpoints.list.pop().expect("the probe's endpoint");
                let endpoint = serde_json::to_value(&table).map_err(|e| e.to_string())?;
                serde_json::from_value(source_of(&endpoint)).map_err(|e| e.to_string())
            });
            Some((name.to_owned(), read))
        })
        .collect()
}

/// Tenant `tenant` of the translated `config` as a `DNSFailover` spec without sinks: its
/// `[[tenants]]` keys spelled as the resource spells them, the config's default check as
/// its check.
fn spec_of(tenant: &Json, config: &Json) -> Result<DNSFailoverSpec, Arc<NotAFailover>> {
    let sources = sources_of(tenant, config);
    let mut spec = json!({ "domains": tenant["domains"], "sinks": [], "endpoints": sources });
    for (key, field) in [
        ("ttl", "ttl"),
        ("policy", "policy"),
        ("answer", "answer"),
        ("weights", "weights"),
        ("default_weight", "defaultWeight"),
        ("default_geo", "defaultGeo"),
        ("on_all_unhealthy", "onAllUnhealthy"),
        ("min_healthy", "minHealthy"),
    ] {
        if !tenant[key].is_null() {
            spec[field] = tenant[key].clone();
        }
    }
    if let Some(check) = config["defaults"]["check"]
        .as_object()
        .filter(|c| !c.is_empty())
    {
        spec["check"] = Json::Object(check.clone());
    }
    serde_json::from_value(spec).map_err(|source| {
        Arc::new(NotAFailover {
            tenant: tenant["name"].as_str().unwrap_or_default().to_owned(),
            source,
        })
    })
}

/// The tenant's endpoints as `DNSFailover` sources, one per address with its labels,
/// weight, priority and check: an IP address under `addresses`, a load balancer's host name
/// (a CNAME's target, a host-name probe's address) under `hosts`.
fn sources_of(tenant: &Json, config: &Json) -> Vec<Json> {
    let endpoints: Vec<&Json> = match &tenant["endpoints"] {
        Json::Array(names) => names
            .iter()
            .filter_map(|n| {
                config["endpoints"]
                    .as_array()?
                    .iter()
                    .find(|e| e["name"] == *n)
            })
            .collect(),
        _ => config["endpoints"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
    };
    endpoints.iter().map(|e| source_of(e)).collect()
}

/// Endpoint `e` of the config as a `DNSFailover` source: an IP address under
/// `addresses`, a host name under `hosts`, with its labels, weight, priority and check.
fn source_of(e: &Json) -> Json {
    let by_name = e["address"]
        .as_str()
        .is_some_and(|a| a.parse::<std::net::IpAddr>().is_err());
    let key = if by_name { "hosts" } else { "addresses" };
    let mut source = json!({ key: [e["address"]] });
    for key in ["labels", "weight", "priority", "check"] {
        if !e[key].is_null() {
            source[key] = e[key].clone();
        }
    }
    source
}
