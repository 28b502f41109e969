//! Kuadrant's `DNSRecord`s (and, without them, its probes' hosts) as our endpoints and
//! tenants.

use super::*;

/// Endpoints by address, in the order first seen.
#[derive(Default)]
pub(super) struct Endpoints {
    pub(super) list: Vec<(IpAddr, Table)>,
}

impl Endpoints {
    pub(super) fn probe(&mut self, doc: &Value, notes: &mut Vec<String>) -> anyhow::Result<()> {
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
    pub(super) fn of_address(&mut self, ip: IpAddr, record: &str) -> String {
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

    pub(super) fn table_mut(&mut self, name: &str) -> Option<&mut Table> {
        self.list
            .iter_mut()
            .map(|(_, t)| t)
            .find(|t| t["name"].as_str() == Some(name))
    }

    pub(super) fn table(&self, name: &str) -> Option<&Table> {
        self.list
            .iter()
            .map(|(_, t)| t)
            .find(|t| t["name"].as_str() == Some(name))
    }

    pub(super) fn weighted(&self, name: &str) -> bool {
        self.table(name).is_some_and(|t| t.contains_key("weight"))
    }

    pub(super) fn has_geo(&self, name: &str) -> bool {
        self.label(name, "geo").is_some()
    }

    /// Endpoint `name`'s label `label`, if it has one.
    pub(super) fn label(&self, name: &str, label: &str) -> Option<&str> {
        self.table(name)
            .and_then(|t| t.get("labels"))
            .and_then(toml::Value::as_table)
            .and_then(|l| l.get(label))
            .and_then(toml::Value::as_str)
    }
}

/// A tenant under construction.
pub(super) struct Tenant {
    pub(super) name: String,
    pub(super) domains: Vec<String>,
    pub(super) endpoints: Vec<String>,
    pub(super) ttl: Option<i64>,
    pub(super) policy: &'static str,
    pub(super) default_weight: Option<i64>,
    pub(super) rules: Vec<(String, String, i64)>,
    pub(super) default_geo: Option<String>,
}

impl Tenant {
    pub(super) fn new(name: &str) -> Tenant {
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

    pub(super) fn table(&self) -> Table {
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
pub(super) fn tenant_of_record(
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
pub(super) fn tenants_of_probes(endpoints: &Endpoints) -> anyhow::Result<Vec<Tenant>> {
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
pub(super) fn zone_of(domain: &str) -> String {
    let labels: Vec<&str> = domain.split('.').collect();
    labels[labels.len().saturating_sub(2)..].join(".")
}
