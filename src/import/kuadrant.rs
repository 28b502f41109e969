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

/// The ManagedCluster label Kuadrant's custom weights match when they name no attribute.
const CUSTOM_WEIGHT_LABEL: &str = "kuadrant.io/lb-attribute-custom-weight";

/// The config equivalent to Kuadrant documents `docs`, and what could not be carried over.
pub fn convert(docs: &[Value]) -> anyhow::Result<(Table, Vec<String>)> {
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
    let mut zones: Vec<String> = Vec::new();
    for t in &mut tenants {
        policy.apply(t, &endpoints, &mut notes);
        for d in &t.domains {
            let zone = zone_of(d);
            if !zones.contains(&zone) {
                zones.push(zone);
            }
        }
    }
    notes.push("the DNS provider Kuadrant writes to (provider secret, ManagedZone): the tenants publish through the embedded DNS server [sinks.dns]; delegate the zone to it or replace it with a route53, powerdns or rfc2136 sink".into());

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
    Ok((config, notes))
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

    /// Sets `t`'s policy: `geo` when the policy says GEO (and every endpoint has a
    /// location), `weighted` when weights differ, else `all` (Kuadrant's round robin).
    fn apply(&self, t: &mut Tenant, endpoints: &Endpoints, notes: &mut Vec<String>) {
        let weighted = !self.rules.is_empty() || t.endpoints.iter().any(|e| endpoints.weighted(e));
        if let Some(geo) = &self.default_geo {
            if t.endpoints.iter().all(|e| endpoints.has_geo(e)) {
                t.policy = "geo";
                t.default_geo = Some(geo.clone());
            } else {
                notes.push(format!("GEO for tenant {}: its endpoints have no geo-code; set labels.geo on each, then policy = \"geo\" and default_geo = \"{geo}\"", t.name));
            }
        }
        if weighted {
            if t.policy != "geo" {
                t.policy = "weighted";
            }
            t.default_weight = self.default_weight;
            t.rules.clone_from(&self.rules);
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

/// Endpoints by address, in the order first seen.
#[derive(Default)]
struct Endpoints {
    list: Vec<(IpAddr, Table)>,
}

impl Endpoints {
    fn probe(&mut self, doc: &Value, notes: &mut Vec<String>) -> anyhow::Result<()> {
        let name = doc
            .get("metadata")
            .and_then(|m| text(m, "name"))
            .context("a DNSHealthCheckProbe has no metadata.name")?;
        let spec = doc
            .get("spec")
            .with_context(|| format!("DNSHealthCheckProbe {name} has no spec"))?;
        let address = text(spec, "address")
            .with_context(|| format!("DNSHealthCheckProbe {name} has no address"))?;
        let ip: IpAddr = address.parse().with_context(|| {
            format!("DNSHealthCheckProbe {name}: address {address:?} is not an IP address (the address probed is the address published; resolve the load balancer's name first)")
        })?;
        let mut ep = Table::new();
        ep.insert("name".into(), name.into());
        ep.insert("address".into(), ip.to_string().into());
        ep.insert(
            "check".into(),
            check_of(spec, &format!("DNSHealthCheckProbe {name}.spec"), notes)?.into(),
        );
        self.list.push((ip, ep));
        Ok(())
    }

    /// The endpoint of `ip`, made from a record (named `record-N`) if no probe names it.
    fn of_address(&mut self, ip: IpAddr, record: &str) -> String {
        if let Some((_, t)) = self.list.iter().find(|(a, _)| *a == ip) {
            return t["name"].as_str().unwrap_or_default().to_owned();
        }
        let name = format!("{record}-{}", self.list.len() + 1);
        let mut ep = Table::new();
        ep.insert("name".into(), name.clone().into());
        ep.insert("address".into(), ip.to_string().into());
        self.list.push((ip, ep));
        name
    }

    fn table_mut(&mut self, name: &str) -> Option<&mut Table> {
        self.list
            .iter_mut()
            .map(|(_, t)| t)
            .find(|t| t["name"].as_str() == Some(name))
    }

    fn table(&self, name: &str) -> Option<&Table> {
        self.list
            .iter()
            .map(|(_, t)| t)
            .find(|t| t["name"].as_str() == Some(name))
    }

    fn weighted(&self, name: &str) -> bool {
        self.table(name).is_some_and(|t| t.contains_key("weight"))
    }

    fn has_geo(&self, name: &str) -> bool {
        self.table(name)
            .and_then(|t| t.get("labels"))
            .and_then(toml::Value::as_table)
            .is_some_and(|l| l.contains_key("geo"))
    }
}

/// A tenant under construction.
struct Tenant {
    name: String,
    domains: Vec<String>,
    endpoints: Vec<String>,
    ttl: Option<i64>,
    policy: &'static str,
    default_weight: Option<i64>,
    rules: Vec<(String, String, i64)>,
    default_geo: Option<String>,
}

impl Tenant {
    fn new(name: &str) -> Tenant {
        Tenant {
            name: name.to_owned(),
            domains: Vec::new(),
            endpoints: Vec::new(),
            ttl: None,
            policy: "all",
            default_weight: None,
            rules: Vec::new(),
            default_geo: None,
        }
    }

    fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert("name".into(), self.name.clone().into());
        t.insert(
            "domains".into(),
            self.domains
                .iter()
                .cloned()
                .map(toml::Value::from)
                .collect::<Vec<_>>()
                .into(),
        );
        t.insert(
            "endpoints".into(),
            self.endpoints
                .iter()
                .cloned()
                .map(toml::Value::from)
                .collect::<Vec<_>>()
                .into(),
        );
        t.insert("sinks".into(), vec![toml::Value::from("dns")].into());
        if let Some(ttl) = self.ttl {
            t.insert("ttl".into(), format!("{ttl}s").into());
        }
        t.insert("policy".into(), self.policy.into());
        if let Some(w) = self.default_weight {
            t.insert("default_weight".into(), w.into());
        }
        if !self.rules.is_empty() {
            let rules: Vec<toml::Value> = self
                .rules
                .iter()
                .map(|(label, value, weight)| {
                    let mut r = Table::new();
                    r.insert("label".into(), label.clone().into());
                    r.insert("value".into(), value.clone().into());
                    r.insert("weight".into(), (*weight).into());
                    toml::Value::Table(r)
                })
                .collect();
            t.insert("weights".into(), rules.into());
        }
        if let Some(g) = &self.default_geo {
            t.insert("default_geo".into(), g.clone().into());
        }
        t
    }
}

/// One tenant for a DNSRecord: its A/AAAA names and their targets.
fn tenant_of_record(
    doc: &Value,
    endpoints: &mut Endpoints,
    notes: &mut Vec<String>,
) -> anyhow::Result<Tenant> {
    let name = doc
        .get("metadata")
        .and_then(|m| text(m, "name"))
        .context("a DNSRecord has no metadata.name")?;
    let spec = doc
        .get("spec")
        .with_context(|| format!("DNSRecord {name} has no spec"))?;
    let mut tenant = Tenant::new(name);
    for (i, e) in spec
        .get("endpoints")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("DNSRecord {name}.spec.endpoints[{i}]");
        unknown_keys(
            e,
            &[
                "dnsName",
                "recordType",
                "targets",
                "recordTTL",
                "setIdentifier",
                "providerSpecific",
                "labels",
            ],
            &at,
            notes,
        );
        let dns_name = text(e, "dnsName").with_context(|| format!("{at} has no dnsName"))?;
        let rtype = text(e, "recordType").unwrap_or("A");
        if !matches!(rtype, "A" | "AAAA") {
            notes.push(format!("{at} ({dns_name} {rtype}: only A/AAAA records are published here; list the addresses a CNAME leads to in a DNSRecord or probe)"));
            continue;
        }
        let domain = dns_name.trim_end_matches('.').to_ascii_lowercase();
        if !tenant.domains.contains(&domain) {
            tenant.domains.push(domain);
        }
        if let Some(ttl) = e.get("recordTTL").and_then(Value::as_i64) {
            tenant.ttl = Some(tenant.ttl.map_or(ttl, |t| t.min(ttl)));
        }
        let specific: BTreeMap<&str, &str> = e
            .get("providerSpecific")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((text(p, "name")?, text(p, "value")?)))
            .collect();
        for target in e
            .get("targets")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let ip: IpAddr = target.parse().with_context(|| {
                format!("{at}: target {target:?} of an {rtype} record is not an IP address")
            })?;
            let ep = endpoints.of_address(ip, name);
            let table = endpoints.table_mut(&ep).expect("just made");
            if let Some(w) = specific.get("weight").and_then(|w| w.parse::<i64>().ok()) {
                table.insert("weight".into(), w.into());
            }
            if let Some(geo) = specific.get("geo-code") {
                let mut labels = Table::new();
                labels.insert("geo".into(), (*geo).into());
                table.insert("labels".into(), labels.into());
            }
            if !tenant.endpoints.contains(&ep) {
                tenant.endpoints.push(ep);
            }
        }
    }
    if tenant.domains.is_empty() || tenant.endpoints.is_empty() {
        bail!("DNSRecord {name} has no A/AAAA endpoint with addresses");
    }
    Ok(tenant)
}

/// Without DNSRecords: one tenant per probe `host`, with the probes of that host.
fn tenants_of_probes(endpoints: &Endpoints) -> anyhow::Result<Vec<Tenant>> {
    let mut tenants: Vec<Tenant> = Vec::new();
    for (_, ep) in &endpoints.list {
        let name = ep["name"].as_str().unwrap_or_default();
        let host = ep
            .get("check")
            .and_then(|c| c.get("host"))
            .and_then(toml::Value::as_str)
            .with_context(|| format!("DNSHealthCheckProbe {name} has no host, and no DNSRecord names the domain it serves"))?;
        let domain = host.trim_end_matches('.').to_ascii_lowercase();
        match tenants.iter_mut().find(|t| t.domains[0] == domain) {
            Some(t) => t.endpoints.push(name.to_owned()),
            None => {
                let mut t = Tenant::new(&domain.replace('.', "-"));
                t.domains.push(domain);
                t.endpoints.push(name.to_owned());
                tenants.push(t);
            }
        }
    }
    Ok(tenants)
}

/// The zone a domain is served from: its last two labels (the registered domain of most
/// names; a zone further down can be set by hand).
fn zone_of(domain: &str) -> String {
    let labels: Vec<&str> = domain.split('.').collect();
    labels[labels.len().saturating_sub(2)..].join(".")
}
