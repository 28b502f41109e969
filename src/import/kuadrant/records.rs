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

/// One endpoint of a DNSRecord as written.
struct Rec<'a> {
    at: String,
    name: String,
    rtype: &'a str,
    targets: Vec<&'a str>,
    ttl: Option<i64>,
    specific: BTreeMap<&'a str, &'a str>,
}

/// One tenant for a DNSRecord: its A/AAAA names and their targets. In dns-operator's
/// layout (`spec.rootHost` a CNAME to `klb.ROOT`, a CNAME per geo, a CNAME per cluster
/// with its weight, the cluster's A record), the name published is the root host and each
/// address takes the geo and weight of the CNAMEs that lead to it; a `*` geo makes that
/// geo the default.
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
    let recs = read_endpoints(name, spec, notes)?;
    let root = text(spec, "rootHost").map(normalize);
    let mut tenant = Tenant::new(name);
    for rec in recs.iter().filter(|r| matches!(r.rtype, "A" | "AAAA")) {
        add_addresses(&mut tenant, rec, &recs, root.as_deref(), endpoints, name)?;
    }
    for rec in recs.iter().filter(|r| !matches!(r.rtype, "A" | "AAAA")) {
        let in_layout = root.as_deref().is_some_and(|root| {
            rec.name == root
                || rec.name.ends_with(&format!(".klb.{root}"))
                || rec.name == format!("klb.{root}")
        });
        if !in_layout {
            notes.push(format!("{} ({} {}: only A/AAAA records are published here; list the addresses a CNAME leads to in a DNSRecord or probe)", rec.at, rec.name, rec.rtype));
        }
    }
    if tenant.domains.is_empty() || tenant.endpoints.is_empty() {
        bail!("DNSRecord {name} has no A/AAAA endpoint with addresses");
    }
    Ok(tenant)
}

/// One A/AAAA endpoint's addresses into `tenant`: under the root host when CNAMEs lead
/// there from it, with the geo and weight they carry.
fn add_addresses(
    tenant: &mut Tenant,
    rec: &Rec<'_>,
    recs: &[Rec<'_>],
    root: Option<&str>,
    endpoints: &mut Endpoints,
    name: &str,
) -> anyhow::Result<()> {
    let chain = root.and_then(|root| chain_from(recs, root, &rec.name));
    let domain = match &chain {
        Some(_) => root.expect("a chain starts at the root").to_owned(),
        None => rec.name.clone(),
    };
    if !tenant.domains.contains(&domain) {
        tenant.domains.push(domain);
    }
    if let Some(ttl) = rec.ttl {
        tenant.ttl = Some(tenant.ttl.map_or(ttl, |t| t.min(ttl)));
    }
    // The record's own values first, then the nearest CNAME's.
    let mut specific = rec.specific.clone();
    for link in chain.iter().flatten() {
        for (k, v) in &link.specific {
            if *k == "geo-code" && *v == "*" {
                continue;
            }
            specific.entry(k).or_insert(v);
        }
    }
    if let (Some(chain), Some(geo)) = (&chain, specific.get("geo-code")) {
        let default = recs.iter().any(|r| {
            r.specific.get("geo-code") == Some(&"*")
                && chain
                    .iter()
                    .any(|link| r.targets.iter().any(|t| normalize(t) == link.name))
        });
        if default {
            tenant.default_geo = Some((*geo).to_owned());
        }
    }
    for target in &rec.targets {
        let ip: IpAddr = target.parse().with_context(|| {
            format!(
                "{}: target {target:?} of an {} record is not an IP address",
                rec.at, rec.rtype
            )
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
    Ok(())
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The record's endpoints, each checked for keys this import does not know.
fn read_endpoints<'a>(
    name: &str,
    spec: &'a Value,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Rec<'a>>> {
    let mut recs = Vec::new();
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
        recs.push(Rec {
            name: normalize(dns_name),
            rtype: text(e, "recordType").unwrap_or("A"),
            targets: e
                .get("targets")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect(),
            ttl: e.get("recordTTL").and_then(Value::as_i64),
            specific: e
                .get("providerSpecific")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .filter_map(|p| Some((text(p, "name")?, text(p, "value")?)))
                .collect(),
            at,
        });
    }
    Ok(recs)
}

/// The CNAMEs leading from `root` to `name`, nearest to `name` first (the weighted one,
/// then the geo one, ...); `None` when `name` is not reached from `root` by CNAMEs.
fn chain_from<'r, 'a>(recs: &'r [Rec<'a>], root: &str, name: &str) -> Option<Vec<&'r Rec<'a>>> {
    let mut chain = Vec::new();
    let mut at = name.to_owned();
    // dns-operator's layout is four names deep; a cycle ends the walk.
    for _ in 0..8 {
        let parents: Vec<&Rec> = recs
            .iter()
            .filter(|r| r.rtype == "CNAME" && r.targets.iter().any(|t| normalize(t) == at))
            .collect();
        // Prefer a parent with a real geo over the `*` default one pointing at the same name.
        let parent = parents
            .iter()
            .find(|r| r.specific.get("geo-code") != Some(&"*"))
            .or(parents.first())?;
        chain.push(*parent);
        if parent.name == root {
            return Some(chain);
        }
        at = parent.name.clone();
    }
    None
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
