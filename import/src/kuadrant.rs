//! `import --from kuadrant FILE...`: Kuadrant's DNS resources as ours.
//!
//! - `DNSPolicy` (any number; each governs the records its `targetRef` Gateway's listeners
//!   got, or every record when it is the only one): `healthCheck` (or `health`) is the
//!   check of the addresses it governs; `v1alpha1`'s `loadBalancing.weighted` becomes
//!   `default_weight` and `weights` rules (a custom weight without `attribute` matches the
//!   ManagedCluster label `kuadrant.io/lb-attribute-custom-weight`, as in Kuadrant's RFC),
//!   its `loadBalancing.GEO` makes the tenants `geo` with its `defaultGeo`; `v1`'s
//!   `loadBalancing {weight, geo, defaultGeo}` is its gateways' weight and location, and
//!   the default geo when `defaultGeo` is true.
//! - `DNSHealthCheckProbe`: one endpoint each, probed as the probe says.
//! - `DNSRecord`: one tenant per distinct answer among its names (`records`); its A/AAAA
//!   targets become endpoints (an address a probe already names is that probe's endpoint),
//!   `providerSpecific` `weight` and `geo-code` their weight and `labels.geo`; its own
//!   `spec.healthCheck` (HTTPS on 443 by default, `Host` the root host, as dns-operator
//!   probes) comes before its policy's.
//!
//! - `Gateway` (with a DNSPolicy targeting it): each listener's hostname at its status
//!   addresses, as the record Kuadrant makes (`gateways`).
//!
//! Without DNSRecords, each probe's `host` is a domain. The DNS provider Kuadrant writes to
//! (its provider secret) has no equivalent here: the output publishes through the embedded
//! DNS server (`dns_server`), which expresses every policy, and says so.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use anyhow::{bail, Context};
use serde_yaml::Value;
use toml::Table;

use super::{text, unknown_keys};

mod checks;
mod document;
mod gateways;
mod live;
pub mod objects;
mod policy;
mod probes;
mod records;

use checks::{check_of, CheckDefaults};
use policy::{governing, Policy};
use probes::{read_probes, refused_by_probe, RefusedProbe};
use records::{record_name, tenants_of_probes, tenants_of_record, zone_of, Endpoints, Tenant};

pub use document::{Document, Kind, Malformed, Object, ObjectKey};
pub use live::{translate, NotAFailover, PolicyOutcome, TranslateError, Translation};

/// The key under which a live probe document carries its headers' files (ho-kube writes
/// each header Secret's values to files this process alone reads).
pub const HEADER_FILES: &str = "additionalHeadersFiles";
/// The key under which a live probe document carries why its Secret cannot be used.
pub const HEADER_ERROR: &str = "additionalHeadersError";

/// What the translation is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `import`: a config of its own. Addresses no record or policy gives a check get a TCP
    /// connect to 443 (said in a note); an invalid DNSPolicy is an error.
    Import,
    /// Kuadrant's resources watched live: such addresses get the running config's
    /// `[defaults.check]` (the operator chose it); an invalid DNSPolicy refuses only the
    /// records it governs, which keep their last accepted translation.
    Live,
}

/// The config equivalent to Kuadrant documents `docs`, what could not be carried over, and
/// which tenants each DNSRecord became.
pub fn convert(docs: &[Value], mode: Mode) -> anyhow::Result<super::Imported> {
    let docs: Vec<Document> = docs.iter().cloned().map(Document::read).collect();
    convert_documents(&docs, mode).map(|(imported, _)| imported)
}

/// Per DNSRecord refused by a DNSHealthCheckProbe that cannot be read (live), the probe.
type RefusedBy = BTreeMap<String, String>;

/// [`convert`] of documents already read, with the records refused by a probe.
fn convert_documents(
    docs: &[Document],
    mode: Mode,
) -> anyhow::Result<(super::Imported, RefusedBy)> {
    let mut notes = Vec::new();
    let fallback = Policy::fallback(mode == Mode::Import);
    let mut sorted = Sorted::of(docs, mode, &fallback, &mut notes)?;
    let made = gateways::listener_records(
        &sorted.gateways,
        &sorted.policies,
        &sorted.written_names(),
        &mut notes,
    );
    let written = sorted.records.len();
    sorted.records.extend(made.iter());
    let mut endpoints = Endpoints::new(mode == Mode::Live);
    let refused_probes = read_probes(&sorted.probes, &mut endpoints, &mut notes, mode)?;
    let policies = &sorted.policies;
    let reading = Reading {
        mode,
        fallback: &fallback,
        policies,
        refused_probes: &refused_probes,
        // The first policy's check is the default; addresses checked otherwise say so.
        default_check: policies.first().unwrap_or(&fallback).check.clone(),
    };
    let mut out = Made::new(policies);
    for (name, malformed) in &sorted.malformed_records {
        out.unpublished.insert(name.clone(), malformed.to_string());
    }
    for (i, record) in sorted.records.iter().enumerate() {
        let from_gateway = i >= written;
        reading.record(record, from_gateway, &mut out, &mut endpoints, &mut notes)?;
    }
    // Live, a tenant is a record's: probes alone publish nothing (and cannot fail it).
    if sorted.records.is_empty() && mode == Mode::Import {
        out.tenants = tenants_of_probes(&endpoints)?;
        for t in &mut out.tenants {
            policies
                .first()
                .unwrap_or(&fallback)
                .apply(t, &mut endpoints, &mut out.to_do);
        }
    }
    out.check(mode, &endpoints, &mut notes)?;
    out.to_do.push("the DNS provider Kuadrant writes to (provider secret, ManagedZone): the tenants publish through the embedded DNS server [sinks.dns]; delegate the zone to it or replace it with a route53, powerdns or rfc2136 sink".into());
    let imported = super::Imported {
        config: config_of(reading.default_check, endpoints, &out.tenants),
        not_carried: notes,
        to_do: out.to_do,
        by_record: out.by_record,
        unpublished: out.unpublished,
        policies: out.outcomes,
    };
    Ok((imported, out.refused_by_probe))
}

/// Kuadrant's documents by kind, each DNSPolicy read.
struct Sorted<'a> {
    policies: Vec<Policy>,
    probes: Vec<&'a Document>,
    records: Vec<&'a Value>,
    /// The DNSRecords that do not read, by name: each publishes nothing, and keeps its
    /// name from a listener's record.
    malformed_records: Vec<(String, &'a Malformed)>,
    gateways: Vec<&'a objects::Gateway>,
}

impl<'a> Sorted<'a> {
    /// `docs` by kind; a document of another kind is a note, an invalid DNSPolicy (or one
    /// whose Gateway does not read) an error for `import`.
    fn of(
        docs: &'a [Document],
        mode: Mode,
        fallback: &Policy,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<Sorted<'a>> {
        let mut sorted = Sorted {
            policies: Vec::new(),
            probes: Vec::new(),
            records: Vec::new(),
            malformed_records: Vec::new(),
            gateways: Vec::new(),
        };
        let mut malformed_gateways = Vec::new();
        for doc in docs {
            match doc.object() {
                Some(Ok(Object::Policy(policy))) => {
                    let policy = Policy::read(policy, doc.raw(), fallback, notes);
                    sorted.policies.push(policy);
                }
                Some(Ok(Object::Probe(_))) => sorted.probes.push(doc),
                Some(Ok(Object::Record(_))) => sorted.records.push(doc.raw()),
                Some(Ok(Object::Gateway(gateway))) => sorted.gateways.push(gateway),
                Some(Err(malformed)) => match malformed.object.kind {
                    Kind::Policy => sorted.policies.push(Policy::malformed(doc, malformed)),
                    // A probe that does not read refuses the records naming its address.
                    Kind::Probe => sorted.probes.push(doc),
                    Kind::Record => {
                        let name = malformed.object.name.clone();
                        sorted.malformed_records.push((name, malformed));
                    }
                    Kind::Gateway => malformed_gateways.push(malformed),
                },
                None => notes.push(format!(
                    "a document of kind {} (not a Kuadrant DNS resource)",
                    doc.other_kind().flatten().unwrap_or("(none)")
                )),
            }
        }
        // A policy whose Gateway does not read cannot be applied: its records keep what
        // they published, and its status says which field of the Gateway.
        for policy in &mut sorted.policies {
            let target = malformed_gateways
                .iter()
                .find(|m| policy.gateway() == Some(m.object.name.as_str()));
            if let (Some(malformed), None) = (target, &policy.invalid) {
                policy.invalid = Some(malformed.to_string());
            }
        }
        if let (Mode::Import, Some(invalid)) = (
            mode,
            sorted.policies.iter().find_map(|p| p.invalid.as_ref()),
        ) {
            bail!("{invalid}");
        }
        Ok(sorted)
    }

    /// The names of the written DNSRecords, read or not: a listener's record of one of
    /// these names is the written one.
    fn written_names(&self) -> Vec<&str> {
        let read = self.records.iter().filter_map(|r| record_name(r).ok());
        let malformed = self.malformed_records.iter().map(|(n, _)| n.as_str());
        read.chain(malformed).collect()
    }
}

/// What every record is read against.
struct Reading<'a> {
    mode: Mode,
    fallback: &'a Policy,
    policies: &'a [Policy],
    /// The probes that cannot be read, each refusing the records naming its address.
    refused_probes: &'a [RefusedProbe],
    /// The check of addresses nothing checks otherwise.
    default_check: Table,
}

/// What the records became.
struct Made {
    tenants: Vec<Tenant>,
    by_record: BTreeMap<String, Vec<String>>,
    unpublished: BTreeMap<String, String>,
    /// The records refused by a probe that cannot be read, with the probe's name.
    refused_by_probe: RefusedBy,
    outcomes: BTreeMap<String, PolicyOutcome>,
    to_do: Vec<String>,
}

impl Made {
    /// Nothing yet; each of `policies` governs no record yet.
    fn new(policies: &[Policy]) -> Made {
        let outcomes = policies
            .iter()
            .map(|p| {
                let outcome = PolicyOutcome {
                    records: Vec::new(),
                    invalid: p.invalid.clone(),
                };
                (p.name.clone(), outcome)
            })
            .collect();
        Made {
            tenants: Vec::new(),
            by_record: BTreeMap::new(),
            unpublished: BTreeMap::new(),
            refused_by_probe: RefusedBy::new(),
            outcomes,
            to_do: Vec::new(),
        }
    }

    /// Whether what was made can be a config: for `import`, something publishes and there
    /// are addresses; no two tenants share a name. The reasons records publish nothing
    /// become notes.
    fn check(
        &mut self,
        mode: Mode,
        endpoints: &Endpoints,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        // Live, each record's refusal is its own (it keeps its last accepted answer): failing
        // the namespace would refuse every other record and policy in it too.
        if mode == Mode::Import && self.tenants.is_empty() && !self.unpublished.is_empty() {
            let reasons: Vec<String> = std::mem::take(&mut self.unpublished)
                .into_values()
                .collect();
            bail!("{}", reasons.join("\n"));
        }
        for reason in self.unpublished.values() {
            notes.push(reason.clone());
        }
        if mode == Mode::Import && endpoints.list.is_empty() {
            bail!("no addresses: pass the DNSRecord or DNSHealthCheckProbe documents with the DNSPolicy (a policy alone names no gateway)");
        }
        let mut used = BTreeSet::new();
        for t in &self.tenants {
            if !used.insert(t.name.clone()) {
                bail!("two tenants would be named {:?} (a DNSRecord named like another record's second answer): rename one record", t.name);
            }
        }
        Ok(())
    }
}

impl Reading<'_> {
    /// What DNSRecord `record` becomes: its tenants, or why it publishes nothing;
    /// `from_gateway`: made from a Gateway's listener, not written by a user.
    fn record(
        &self,
        record: &Value,
        from_gateway: bool,
        out: &mut Made,
        endpoints: &mut Endpoints,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let name = record_name(record)?;
        // One record that publishes nothing leaves the others as they are.
        let made = match tenants_of_record(record, from_gateway, endpoints, notes) {
            Ok(made) => made,
            Err(e) => {
                out.unpublished.insert(name.to_owned(), format!("{e:#}"));
                return Ok(());
            }
        };
        let policy = governing(self.policies, record);
        if let Some(p) = policy {
            let outcome = out.outcomes.entry(p.name.clone()).or_default();
            outcome.records.push(name.to_owned());
        }
        if let Some(why) = self.refused(record, name, policy, out) {
            out.unpublished.insert(name.to_owned(), why);
            return Ok(());
        }
        if policy.is_none() && !self.policies.is_empty() {
            notes.push(format!("DNSRecord {name}: none of the DNSPolicies targets its Gateway; its addresses are published round robin"));
        }
        let policy = policy.unwrap_or(self.fallback);
        let check = match record_check(record, name, policy, notes) {
            Ok(check) => check,
            // Live, a record's own bad health check refuses that record alone.
            Err(e) if self.mode == Mode::Live => {
                out.unpublished.insert(name.to_owned(), format!("{e:#}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for mut t in made {
            policy.apply(&mut t, endpoints, &mut out.to_do);
            for e in &t.endpoints {
                let table = endpoints.table_mut(e).expect("a tenant's endpoint");
                if !table.contains_key("check") && check != self.default_check {
                    table.insert("check".into(), check.clone().into());
                }
            }
            let tenants = out.by_record.entry(name.to_owned()).or_default();
            tenants.push(t.name.clone());
            out.tenants.push(t);
        }
        Ok(())
    }

    /// Why record `name` publishes nothing although it has tenants: a refused probe names
    /// one of its addresses (which `out` links it to), or its policy is invalid.
    fn refused(
        &self,
        record: &Value,
        name: &str,
        policy: Option<&Policy>,
        out: &mut Made,
    ) -> Option<String> {
        if let Some(probe) = refused_by_probe(record, self.refused_probes) {
            out.refused_by_probe
                .insert(name.to_owned(), probe.name.clone());
            return Some(format!("DNSRecord {name}: {}", probe.refusal()));
        }
        let invalid = policy.and_then(|p| p.invalid.as_ref())?;
        Some(format!(
            "DNSRecord {name} is governed by an invalid DNSPolicy: {invalid}"
        ))
    }
}

/// The config: the default check, the endpoints, the tenants and the embedded DNS server
/// serving their zones.
fn config_of(default_check: Table, endpoints: Endpoints, tenants: &[Tenant]) -> Table {
    let mut zones: Vec<String> = Vec::new();
    for d in tenants.iter().flat_map(|t| &t.domains) {
        let zone = zone_of(d);
        if !zones.contains(&zone) {
            zones.push(zone);
        }
    }
    let mut defaults = Table::new();
    defaults.insert("check".into(), default_check.into());
    let mut sink = Table::new();
    sink.insert("kind".into(), "dns_server".into());
    sink.insert(
        "listen".into(),
        vec![toml::Value::from("0.0.0.0:53")].into(),
    );
    let zones: Vec<toml::Value> = zones.into_iter().map(toml::Value::from).collect();
    sink.insert("zones".into(), zones.into());
    let mut sinks = Table::new();
    sinks.insert("dns".into(), sink.into());
    let endpoints: Vec<toml::Value> = (endpoints.list.into_iter())
        .map(|(_, t)| toml::Value::Table(t))
        .collect();
    let tenants: Vec<toml::Value> = tenants
        .iter()
        .map(|t| toml::Value::Table(t.table()))
        .collect();
    let mut config = Table::new();
    config.insert("defaults".into(), defaults.into());
    config.insert("endpoints".into(), endpoints.into());
    config.insert("tenants".into(), tenants.into());
    config.insert("sinks".into(), sinks.into());
    config
}

/// How a record's addresses are checked: its own `spec.healthCheck` (dns-operator's
/// defaults, `Host` the root host), else its policy's (the fallback's when none governs it).
fn record_check(
    record: &Value,
    name: &str,
    policy: &Policy,
    notes: &mut Vec<String>,
) -> anyhow::Result<Table> {
    let spec = record.get("spec");
    if let Some(hc) = spec
        .and_then(|s| s.get("healthCheck"))
        .filter(|h| h.is_mapping())
    {
        let at = format!("DNSRecord {name}.spec.healthCheck");
        let mut check = check_of(hc, &at, CheckDefaults::RECORD, notes)?;
        if let Some(root) = spec.and_then(|s| text(s, "rootHost")) {
            check
                .entry("host")
                .or_insert_with(|| records::normalize(root).into());
        }
        return Ok(check);
    }
    if policy.name.is_empty() && !policy.check.is_empty() {
        notes.push(format!("DNSRecord {name} has no healthCheck and no DNSPolicy gives it one (Kuadrant then publishes unchecked): its addresses get a TCP check on port 443"));
    }
    Ok(policy.check.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// dns-operator's load-balanced layout for two clusters whose Gateways have a
    /// `Hostname` address (cloud load balancers): the cluster records are CNAMEs to names
    /// outside the record.
    const TO_LOAD_BALANCERS: &str = r#"
kind: DNSRecord
metadata: {name: api}
spec:
  rootHost: api.example.com
  endpoints:
    - {dnsName: api.example.com, recordType: CNAME, recordTTL: 300, targets: [klb.api.example.com]}
    - {dnsName: klb.api.example.com, recordType: CNAME, setIdentifier: a, targets: [a.klb.api.example.com],
       providerSpecific: [{name: weight, value: "120"}]}
    - {dnsName: klb.api.example.com, recordType: CNAME, setIdentifier: b, targets: [b.klb.api.example.com],
       providerSpecific: [{name: weight, value: "60"}]}
    - {dnsName: a.klb.api.example.com, recordType: CNAME, recordTTL: 60, targets: [lb-a.elb.example.net]}
    - {dnsName: b.klb.api.example.com, recordType: CNAME, recordTTL: 60, targets: [LB-B.elb.example.net.]}
"#;

    fn docs(yaml: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(yaml)
            .map(Value::deserialize)
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn a_chain_to_load_balancer_names_is_a_tenant_answering_a_cname_to_them() {
        let imported = convert(&docs(TO_LOAD_BALANCERS), Mode::Import).unwrap();
        let tenants = imported.config["tenants"].as_array().unwrap();
        assert_eq!(tenants.len(), 1);
        assert_eq!(tenants[0]["domains"][0].as_str(), Some("api.example.com"));
        assert_eq!(tenants[0]["answer"].as_str(), Some("cname"));
        assert_eq!(tenants[0]["ttl"].as_str(), Some("60s"));
        let endpoints: Vec<(&str, i64)> = imported.config["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["address"].as_str().unwrap(),
                    e["weight"].as_integer().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            endpoints,
            [("lb-a.elb.example.net", 120), ("lb-b.elb.example.net", 60)]
        );
    }

    /// The probes dns-operator makes for that layout: one per leaf, at the load balancer's
    /// host name (any case, a trailing dot), one of them with an address no DNS name can be.
    const PROBES: &str = r#"
kind: DNSHealthCheckProbe
metadata: {name: api-lb-a}
spec: {address: LB-A.elb.example.net., port: 8443, hostname: api.example.com, protocol: HTTPS, path: /healthz}
---
kind: DNSHealthCheckProbe
metadata: {name: api-lb-b}
spec: {address: lb-b.elb.example.net, port: 8443, hostname: api.example.com, protocol: HTTPS, path: /healthz}
"#;

    fn endpoint<'a>(imported: &'a crate::Imported, address: &str) -> &'a Table {
        imported.config["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(toml::Value::as_table)
            .find(|e| e["address"].as_str() == Some(address))
            .unwrap_or_else(|| panic!("no endpoint at {address}"))
    }

    /// A probe at a load balancer's host name is that name's endpoint, probed as the probe
    /// says, in the tenant answering a CNAME to it; imported and watched live alike (live,
    /// the record's own endpoints carry the probe's check).
    #[test]
    fn host_name_probes_are_the_load_balancers_endpoints_imported_and_live() {
        let all = format!("{TO_LOAD_BALANCERS}---{PROBES}");
        for mode in [Mode::Import, Mode::Live] {
            let imported = convert(&docs(&all), mode).unwrap();
            assert_eq!(imported.by_record["api"], ["api"]);
            let tenant = imported.config["tenants"][0].as_table().unwrap();
            assert_eq!(tenant["answer"].as_str(), Some("cname"));
            for (lb, probe) in [
                ("lb-a.elb.example.net", "api-lb-a"),
                ("lb-b.elb.example.net", "api-lb-b"),
            ] {
                let e = endpoint(&imported, lb);
                assert_eq!(e["name"].as_str(), Some(probe));
                assert_eq!(e["check"]["port"].as_integer(), Some(8443));
                assert_eq!(e["check"]["kind"].as_str(), Some("https"));
            }
        }
    }

    /// A probe whose address is neither an IP address nor a host name fails `import` with
    /// its name; live it refuses only the record naming its address, and the others publish.
    #[test]
    fn a_bad_probe_address_refuses_only_the_record_naming_it() {
        let other = r#"
kind: DNSRecord
metadata: {name: web}
spec:
  rootHost: web.example.com
  endpoints: [{dnsName: web.example.com, recordType: A, targets: [192.0.2.7]}]
"#;
        let bad = PROBES.replace("lb-b.elb.example.net", "lb_b!.elb.example.net");
        let bad = bad.replace("LB-A.elb.example.net.", "lb-a.elb.example.net");
        let all = format!("{TO_LOAD_BALANCERS}---{other}---{bad}")
            .replace("[b.klb.api.example.com]", "[lb_b!.elb.example.net]");
        let e = convert(&docs(&all), Mode::Import).err().unwrap();
        assert!(
            e.to_string().contains("DNSHealthCheckProbe api-lb-b"),
            "{e}"
        );
        let live = convert(&docs(&all), Mode::Live).unwrap();
        assert!(
            live.by_record.contains_key("web"),
            "the other record publishes"
        );
        let why = &live.unpublished["api"];
        assert!(
            why.contains("lb_b!.elb.example.net") && why.contains("refused"),
            "{why}"
        );
    }
}
