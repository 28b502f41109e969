//! `import --from kuadrant FILE...`: Kuadrant's DNS resources as ours.
//!
//! - `DNSPolicy` (at most one): `healthCheck` (or `health`) becomes `[defaults.check]`;
//!   `loadBalancing.weighted` becomes `default_weight` and `weights` rules (a custom weight
//!   without `attribute` matches the ManagedCluster label
//!   `kuadrant.io/lb-attribute-custom-weight`, as in Kuadrant's RFC); `loadBalancing.GEO`
//!   makes the tenants `geo` with its `defaultGeo`.
//! - `DNSHealthCheckProbe`: one endpoint each, probed as the probe says.
//! - `DNSRecord`: one tenant each; its A/AAAA endpoints' targets become endpoints (an address
//!   a probe already names is that probe's endpoint), `providerSpecific` `weight` and
//!   `geo-code` their weight and `labels.geo`.
//!
//! Without DNSRecords, each probe's `host` is a domain. The DNS provider Kuadrant writes to
//! (its provider secret) has no equivalent here: the output publishes through the embedded
//! DNS server (`dns_server`), which expresses every policy, and says so.

use std::collections::BTreeMap;
use std::net::IpAddr;

use anyhow::{bail, Context};
use serde_yaml::Value;
use toml::Table;

use super::{text, unknown_keys};

mod records;

use records::{tenant_of_record, tenants_of_probes, zone_of, Endpoints, Tenant};

/// The ManagedCluster label Kuadrant's custom weights match when they name no attribute.
const CUSTOM_WEIGHT_LABEL: &str = "kuadrant.io/lb-attribute-custom-weight";

/// The config equivalent to Kuadrant documents `docs`, and what could not be carried over.
pub fn convert(docs: &[Value]) -> anyhow::Result<super::Imported> {
    let mut notes = Vec::new();
    let mut policies = Vec::new();
    let mut probes = Vec::new();
    let mut records = Vec::new();
    for doc in docs {
        match text(doc, "kind") {
            Some("DNSPolicy") => policies.push(doc),
            Some("DNSHealthCheckProbe") => probes.push(doc),
            Some("DNSRecord") => records.push(doc),
            other => notes.push(format!(
                "a document of kind {} (not a Kuadrant DNS resource)",
                other.unwrap_or("(none)")
            )),
        }
    }
    if policies.len() > 1 {
        bail!(
            "{} DNSPolicy documents: import one policy at a time, with the DNSRecords and probes it governs",
            policies.len()
        );
    }
    let policy = policies
        .first()
        .map(|p| Policy::read(p, &mut notes))
        .transpose()?;
    let mut endpoints = Endpoints::default();
    for probe in &probes {
        endpoints.probe(probe, &mut notes)?;
    }
    let mut tenants = Vec::new();
    for record in &records {
        tenants.push(tenant_of_record(record, &mut endpoints, &mut notes)?);
    }
    if records.is_empty() {
        tenants = tenants_of_probes(&endpoints)?;
    }
    if endpoints.list.is_empty() {
        bail!("no addresses: pass the DNSRecord or DNSHealthCheckProbe documents with the DNSPolicy (a policy alone names no gateway)");
    }
    let policy = policy.unwrap_or_default();
    let mut to_do = Vec::new();
    let mut zones: Vec<String> = Vec::new();
    for t in &mut tenants {
        policy.apply(t, &endpoints, &mut to_do);
        for d in &t.domains {
            let zone = zone_of(d);
            if !zones.contains(&zone) {
                zones.push(zone);
            }
        }
    }
    to_do.push("the DNS provider Kuadrant writes to (provider secret, ManagedZone): the tenants publish through the embedded DNS server [sinks.dns]; delegate the zone to it or replace it with a route53, powerdns or rfc2136 sink".into());

    let mut defaults = Table::new();
    defaults.insert("check".into(), policy.check.clone().into());
    let mut sink = Table::new();
    sink.insert("kind".into(), "dns_server".into());
    sink.insert(
        "listen".into(),
        vec![toml::Value::from("0.0.0.0:53")].into(),
    );
    sink.insert(
        "zones".into(),
        zones
            .into_iter()
            .map(toml::Value::from)
            .collect::<Vec<_>>()
            .into(),
    );
    let mut sinks = Table::new();
    sinks.insert("dns".into(), sink.into());
    let mut config = Table::new();
    config.insert("defaults".into(), defaults.into());
    config.insert(
        "endpoints".into(),
        endpoints
            .list
            .into_iter()
            .map(|(_, t)| toml::Value::Table(t))
            .collect::<Vec<_>>()
            .into(),
    );
    config.insert(
        "tenants".into(),
        tenants
            .iter()
            .map(|t| toml::Value::Table(t.table()))
            .collect::<Vec<_>>()
            .into(),
    );
    config.insert("sinks".into(), sinks.into());
    Ok(super::Imported {
        config,
        not_carried: notes,
        to_do,
    })
}

/// What a DNSPolicy says, in our terms.
#[derive(Default)]
struct Policy {
    check: Table,
    default_weight: Option<i64>,
    /// (label, value, weight)
    rules: Vec<(String, String, i64)>,
    default_geo: Option<String>,
}

impl Policy {
    fn read(doc: &Value, notes: &mut Vec<String>) -> anyhow::Result<Policy> {
        // The RFC's drafts put `name` at the top; resources have it under `metadata`.
        let name = doc
            .get("metadata")
            .and_then(|m| text(m, "name"))
            .or_else(|| text(doc, "name"))
            .unwrap_or("(unnamed)");
        let spec = doc
            .get("spec")
            .with_context(|| format!("DNSPolicy {name} has no spec"))?;
        unknown_keys(
            spec,
            &["targetRef", "healthCheck", "health", "loadBalancing"],
            "DNSPolicy.spec",
            notes,
        );
        if spec.get("targetRef").is_some() {
            notes.push(format!("DNSPolicy {name} targetRef (a Gateway: the endpoints here are the addresses listed, not discovered)"));
        }
        let mut policy = Policy::default();
        match spec
            .get("healthCheck")
            .or_else(|| spec.get("health"))
            .filter(|h| h.is_mapping())
        {
            Some(hc) => policy.check = check_of(hc, "DNSPolicy.spec.healthCheck", notes)?,
            None => {
                policy.check.insert("kind".into(), "tcp".into());
                policy.check.insert("port".into(), 443.into());
                notes.push("no healthCheck in the DNSPolicy (Kuadrant then publishes unchecked): the gateways get a TCP check on port 443".into());
            }
        }
        let lb = spec.get("loadBalancing");
        if let Some(lb) = lb {
            unknown_keys(
                lb,
                &["weighted", "GEO", "geo"],
                "DNSPolicy.spec.loadBalancing",
                notes,
            );
        }
        if let Some(w) = lb.and_then(|l| l.get("weighted")) {
            unknown_keys(
                w,
                &["defaultWeight", "custom"],
                "DNSPolicy.spec.loadBalancing.weighted",
                notes,
            );
            policy.default_weight = w.get("defaultWeight").and_then(Value::as_i64);
            for (i, c) in w
                .get("custom")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let at = format!("DNSPolicy.spec.loadBalancing.weighted.custom[{i}]");
                unknown_keys(c, &["attribute", "value", "weight"], &at, notes);
                let value = text(c, "value").with_context(|| format!("{at} has no value"))?;
                let weight = c
                    .get("weight")
                    .and_then(Value::as_i64)
                    .with_context(|| format!("{at} has no weight"))?;
                let label = text(c, "attribute").unwrap_or(CUSTOM_WEIGHT_LABEL);
                policy
                    .rules
                    .push((label.to_owned(), value.to_owned(), weight));
            }
        }
        if let Some(g) = lb.and_then(|l| l.get("GEO").or_else(|| l.get("geo"))) {
            let geo = text(g, "defaultGeo").context(
                "DNSPolicy.spec.loadBalancing.GEO has no defaultGeo (Kuadrant requires it)",
            )?;
            policy.default_geo = Some(geo.to_owned());
        }
        Ok(policy)
    }

    /// Sets `t`'s policy: `geo` when the policy says GEO or the record's layout has a
    /// default geo (and every endpoint has a location), `weighted` when weights differ, else `all` (Kuadrant's round robin). What
    /// the operator must still do (locations to set, weight rules that match nothing) goes
    /// to `to_do`.
    fn apply(&self, t: &mut Tenant, endpoints: &Endpoints, to_do: &mut Vec<String>) {
        let weighted = !self.rules.is_empty() || t.endpoints.iter().any(|e| endpoints.weighted(e));
        // The policy's default geo, else the one the record's own layout names (its `*` geo).
        if let Some(geo) = self
            .default_geo
            .as_ref()
            .or(t.default_geo.as_ref())
            .cloned()
        {
            if t.endpoints.iter().all(|e| endpoints.has_geo(e)) {
                t.policy = "geo";
                t.default_geo = Some(geo.clone());
            } else {
                t.default_geo = None;
                to_do.push(format!("GEO for tenant {}: its endpoints have no geo-code; set labels.geo on each, then policy = \"geo\" and default_geo = \"{geo}\"", t.name));
            }
        }
        if weighted {
            if t.policy != "geo" {
                t.policy = "weighted";
            }
            t.default_weight = self.default_weight;
            t.rules.clone_from(&self.rules);
            for (label, value, weight) in &self.rules {
                let matched = t
                    .endpoints
                    .iter()
                    .any(|e| endpoints.label(e, label) == Some(value.as_str()));
                if !matched {
                    to_do.push(format!("tenant {}: the weight rule {label} = {value:?} (weight {weight}) matches none of its endpoints, so it changes nothing; set labels.{label:?} on the endpoints it means", t.name));
                }
            }
        }
    }
}

/// A health check block (DNSPolicy `healthCheck` or a probe's spec) as a `check` table.
fn check_of(hc: &Value, at: &str, notes: &mut Vec<String>) -> anyhow::Result<Table> {
    let mut check = Table::new();
    let protocol = text(hc, "protocol").unwrap_or("HTTP").to_ascii_lowercase();
    if !matches!(protocol.as_str(), "http" | "https") {
        bail!("{at}.protocol {protocol:?}: only HTTP and HTTPS");
    }
    check.insert("kind".into(), protocol.into());
    if let Some(port) = hc
        .get("port")
        .and_then(|p| p.as_i64().or_else(|| p.as_str()?.parse().ok()))
    {
        check.insert("port".into(), port.into());
    }
    if let Some(path) = text(hc, "endpoint").or_else(|| text(hc, "path")) {
        check.insert("path".into(), path.into());
    }
    if let Some(host) = text(hc, "host").or_else(|| text(hc, "hostname")) {
        check.insert("host".into(), host.into());
    }
    if let Some(interval) = text(hc, "interval") {
        check.insert("interval".into(), interval.into());
    }
    if let Some(n) = hc.get("failureThreshold").and_then(Value::as_i64) {
        check.insert("fall".into(), n.into());
    }
    let codes: Vec<toml::Value> = hc
        .get("expectedResponses")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .map(toml::Value::from)
        .collect();
    // Kuadrant's default is 200 and 201; ours is 200.
    check.insert(
        "expect_status".into(),
        if codes.is_empty() {
            vec![200.into(), 201.into()]
        } else {
            codes
        }
        .into(),
    );
    let insecure = [
        "allowInsecureCertificates",
        "AllowInsecureCertificates",
        "allowInsecureCertificate",
        "AllowInsecureCertificate",
    ];
    if insecure
        .iter()
        .any(|k| hc.get(*k).and_then(Value::as_bool) == Some(true))
    {
        check.insert("insecure".into(), true.into());
    }
    if let Some(k) = ["additionalHeaders", "additionalHeadersRef"]
        .iter()
        .find(|k| hc.get(**k).is_some())
    {
        notes.push(format!(
            "{at}.{k} (a Secret: mount it and name each header's file in headers_from_files)"
        ));
    }
    let known = [
        "protocol",
        "port",
        "endpoint",
        "path",
        "host",
        "hostname",
        "address",
        "interval",
        "failureThreshold",
        "expectedResponses",
        "additionalHeaders",
        "additionalHeadersRef",
    ];
    let mut all_known: Vec<&str> = known.to_vec();
    all_known.extend(insecure);
    unknown_keys(hc, &all_known, at, notes);
    Ok(check)
}

/// The import's translation, for Kuadrant's resources watched live (`[kubernetes]
/// kuadrant`): one namespace's documents in, the equivalent config (as JSON) out.
pub struct LiveTranslation;

impl ho_kube::tenants::kuadrant::Translate for LiveTranslation {
    fn translate(&self, docs: &[serde_json::Value]) -> Result<serde_json::Value, String> {
        let docs: Vec<Value> = docs
            .iter()
            .map(serde_yaml::to_value)
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let imported = convert(&docs).map_err(|e| format!("{e:#}"))?;
        serde_json::to_value(&imported.config).map_err(|e| e.to_string())
    }
}
