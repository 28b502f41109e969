//! Kuadrant's `DNSRecord`s (and, without them, its probes' hosts) as our endpoints and
//! tenants, name by name: each name of a record answers exactly the addresses its chain of
//! CNAMEs in the record leads to, so names that lead to different addresses land in
//! different tenants and never share an answer. A chain that ends at a name outside the
//! record (a load balancer's host name, as dns-operator writes for a Gateway whose address
//! is a `Hostname`) becomes an endpoint given by that name, in a tenant answering
//! `cname`.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// Endpoints by address (an IP address, or a load balancer's host name), in the order first
/// seen.
#[derive(Default)]
pub(super) struct Endpoints {
    pub(super) list: Vec<(String, Table)>,
    /// Live: a record's endpoints are its own (a probe's are shared), so one record's check,
    /// weight or refusal never reaches another record that names the same address.
    per_record: bool,
    /// Which record made each endpoint not made by a probe, by endpoint name.
    made_by: BTreeMap<String, String>,
}

impl Endpoints {
    /// No endpoints yet; `per_record`: each record's endpoints are its own (live).
    pub(super) fn new(per_record: bool) -> Endpoints {
        Endpoints {
            per_record,
            ..Endpoints::default()
        }
    }

    /// The endpoint of `address` (an IP address or a host name), made from a record
    /// (named `record-N`) if no probe names it.
    pub(super) fn of_address(&mut self, address: &str, record: &str) -> String {
        let found = self.list.iter().find(|(a, t)| {
            let name = t["name"].as_str().unwrap_or_default();
            a == address
                && (!self.per_record || self.made_by.get(name).is_none_or(|by| by == record))
        });
        if let Some((_, t)) = found {
            return t["name"].as_str().unwrap_or_default().to_owned();
        }
        let name = format!("{record}-{}", self.list.len() + 1);
        self.made_by.insert(name.clone(), record.to_owned());
        let mut ep = Table::new();
        ep.insert("name".into(), name.clone().into());
        ep.insert("address".into(), address.into());
        self.list.push((address.to_owned(), ep));
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
    /// Its names answer a CNAME to its endpoints' host names.
    pub(super) cname: bool,
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
            cname: false,
        }
    }

    pub(super) fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert("name".into(), self.name.clone().into());
        t.insert("domains".into(), strings(&self.domains));
        t.insert("endpoints".into(), strings(&self.endpoints));
        t.insert("sinks".into(), vec![toml::Value::from("dns")].into());
        if let Some(ttl) = self.ttl {
            t.insert("ttl".into(), format!("{ttl}s").into());
        }
        t.insert("policy".into(), self.policy.into());
        if self.cname {
            t.insert("answer".into(), "cname".into());
        }
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

fn strings(list: &[String]) -> toml::Value {
    list.iter()
        .cloned()
        .map(toml::Value::from)
        .collect::<Vec<_>>()
        .into()
}

/// One endpoint of a DNSRecord as written.
pub(super) struct Rec<'a> {
    at: String,
    pub(super) name: String,
    pub(super) rtype: &'a str,
    pub(super) targets: Vec<&'a str>,
    ttl: Option<i64>,
    specific: BTreeMap<&'a str, &'a str>,
}

impl Rec<'_> {
    fn is_address(&self) -> bool {
        matches!(self.rtype, "A" | "AAAA")
    }

    fn default_geo(&self) -> bool {
        self.specific.get("geo-code") == Some(&"*")
    }
}

/// An address record a name leads to, or a CNAME of it to a name outside the record
/// (`host`), with the CNAMEs on the way (nearest to the leaf first) and whether a `*`
/// (default) geo CNAME was one way there.
struct Leaf<'r, 'a> {
    rec: &'r Rec<'a>,
    host: Option<String>,
    chain: Vec<&'r Rec<'a>>,
    via_default: bool,
}

/// What a name of the record answers: its leaves, or why it cannot be published here.
enum Answer<'r, 'a> {
    Leaves(Vec<Leaf<'r, 'a>>),
    /// The chain loops or runs deeper than any layout Kuadrant writes.
    Loop,
}

/// The addresses `name` leads to through the record's CNAMEs. A name reached both through
/// a real geo and through the `*` geo is one leaf, with the real geo's chain.
fn answer<'r, 'a>(recs: &'r [Rec<'a>], name: &str) -> Answer<'r, 'a> {
    let mut leaves: Vec<Leaf<'r, 'a>> = Vec::new();
    let mut stack: Vec<(String, Vec<&'r Rec<'a>>, bool)> = vec![(name.to_owned(), vec![], false)];
    while let Some((at, path, via_default)) = stack.pop() {
        // dns-operator's layout is four names deep.
        if path.len() > 8 {
            return Answer::Loop;
        }
        for rec in recs.iter().filter(|r| r.name == at) {
            let mut reach = |host: Option<String>| {
                let mut chain = path.clone();
                chain.reverse();
                let same = |l: &&mut Leaf<'r, 'a>| std::ptr::eq(l.rec, rec) && l.host == host;
                match leaves.iter_mut().find(same) {
                    Some(seen) => {
                        if seen.via_default && !via_default {
                            seen.chain = chain;
                        }
                        seen.via_default |= via_default;
                    }
                    None => leaves.push(Leaf {
                        rec,
                        host,
                        chain,
                        via_default,
                    }),
                }
            };
            if rec.is_address() {
                reach(None);
            } else if rec.rtype == "CNAME" {
                for target in &rec.targets {
                    let target = normalize(target);
                    if !recs.iter().any(|r| r.name == target) {
                        reach(Some(target));
                        continue;
                    }
                    let mut next = path.clone();
                    next.push(rec);
                    stack.push((target, next, via_default || rec.default_geo()));
                }
            }
        }
    }
    // A default-only leaf keeps the geo its own chain names (none): the `*` is not a geo.
    Answer::Leaves(leaves)
}

/// A name's answer as the tenant it needs: addresses with their geo and weight, the
/// default geo, the TTL. Names with equal shapes share a tenant.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Shape {
    /// (address, geo, weight)
    addresses: BTreeSet<(IpAddr, Option<String>, Option<i64>)>,
    /// (host name outside the record, geo, weight)
    hosts: BTreeSet<(String, Option<String>, Option<i64>)>,
    default_geo: Option<String>,
}

/// The shape `leaves` publish, and the smallest TTL on their chains.
fn shape_of(at: &str, leaves: &[Leaf<'_, '_>]) -> anyhow::Result<(Shape, Option<i64>)> {
    let mut shape = Shape {
        addresses: BTreeSet::new(),
        hosts: BTreeSet::new(),
        default_geo: None,
    };
    let mut ttl: Option<i64> = None;
    for leaf in leaves {
        // The record's own values first, then the nearest CNAME's.
        let mut specific = leaf.rec.specific.clone();
        for link in &leaf.chain {
            for (k, v) in &link.specific {
                if *k == "geo-code" && *v == "*" {
                    continue;
                }
                specific.entry(k).or_insert(v);
            }
        }
        let geo = specific.get("geo-code").map(|g| (*g).to_owned());
        if leaf.via_default {
            if let Some(g) = &geo {
                shape.default_geo = Some(g.clone());
            }
        }
        let weight = specific.get("weight").and_then(|w| w.parse::<i64>().ok());
        for link in leaf.chain.iter().copied().chain([leaf.rec]) {
            if let Some(t) = link.ttl {
                ttl = Some(ttl.map_or(t, |m| m.min(t)));
            }
        }
        if let Some(host) = &leaf.host {
            shape.hosts.insert((host.clone(), geo, weight));
            continue;
        }
        for target in &leaf.rec.targets {
            let ip: IpAddr = target.parse().with_context(|| {
                format!(
                    "{}: target {target:?} of an {} record is not an IP address (asked for {at})",
                    leaf.rec.at, leaf.rec.rtype
                )
            })?;
            shape.addresses.insert((ip, geo.clone(), weight));
        }
    }
    Ok((shape, ttl))
}

/// The record's tenants: one per distinct answer among its names. The tenant holding
/// `spec.rootHost` (or the first) is named as the record, the others `RECORD-2`, ... In
/// dns-operator's layout (`rootHost` a CNAME to `klb.ROOT`, a CNAME per geo, a CNAME per
/// cluster with its weight, the cluster's A record), the `klb` names are the layout's
/// plumbing: resolvers reach them only through the root's CNAME, which is answered
/// flattened, so they are not published on their own; each address takes the geo and
/// weight of the CNAMEs that lead to it, and a `*` geo makes that geo the default.
///
/// A name whose chain ends at host names outside the record (load balancers) becomes a
/// tenant answering `cname`, as dns-operator answers it: a CNAME to the load balancer's
/// name, which is probed at the addresses it resolves to. A record made from a Gateway's
/// listener (`from_gateway`) may point at a host name of its own zone: that name is the
/// load balancer's, as the Gateway's status reports it, not a missing part of a layout.
pub(super) fn tenants_of_record(
    doc: &Value,
    from_gateway: bool,
    endpoints: &mut Endpoints,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Tenant>> {
    let name = record_name(doc)?;
    let spec = doc
        .get("spec")
        .with_context(|| format!("DNSRecord {name} has no spec"))?;
    let recs = read_endpoints(name, spec, notes)?;
    let root = text(spec, "rootHost").map(normalize);
    let plumbing = |n: &str| {
        root.as_deref()
            .is_some_and(|root| n == format!("klb.{root}") || n.ends_with(&format!(".klb.{root}")))
    };
    let mut names: Vec<&str> = Vec::new();
    for rec in &recs {
        if !names.contains(&rec.name.as_str()) {
            names.push(&rec.name);
        }
    }
    // The root host first, so its tenant is the one named as the record.
    names.sort_by_key(|n| Some(*n) != root.as_deref());
    let mut groups: Vec<(Shape, Tenant)> = Vec::new();
    let mut left_out = Vec::new();
    for n in names {
        if plumbing(n) {
            continue;
        }
        let at = recs.iter().find(|r| r.name == n).expect("a name of recs");
        if !recs
            .iter()
            .any(|r| r.name == n && (r.is_address() || r.rtype == "CNAME"))
        {
            left_out.push(format!(
                "{} ({n} {}: only A/AAAA records and CNAMEs to them are published here)",
                at.at, at.rtype
            ));
            continue;
        }
        let leaves = match answer(&recs, n) {
            Answer::Leaves(leaves) if !leaves.is_empty() => leaves,
            Answer::Leaves(_) => continue,
            Answer::Loop => bail!("DNSRecord {name}: the CNAMEs from {n} loop"),
        };
        let (shape, ttl) = shape_of(n, &leaves)?;
        // A name of the zone the record publishes in, which it does not hold (dns-operator's
        // scale template points its root at a `klb` name it never writes): a missing part
        // of the layout or another record's name, not a load balancer's.
        let ours = |h: &str| plumbing(h) || (!from_gateway && zone_of(h) == zone_of(n));
        if let Some((host, _, _)) = shape.hosts.iter().find(|(h, _, _)| ours(h)) {
            left_out.push(format!("{} ({n} CNAME {host}: a name of the record's zone that the record does not hold; list the addresses it leads to in a DNSRecord or probe)", at.at));
            continue;
        }
        if !shape.hosts.is_empty() && !shape.addresses.is_empty() {
            left_out.push(format!("{} ({n} leads both to addresses and to host names outside the record: a name answers a CNAME or addresses, not both)", at.at));
            continue;
        }
        let tenant = match groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, t)) => t,
            None => {
                let tenant_name = match groups.len() {
                    0 => name.to_owned(),
                    k => format!("{name}-{}", k + 1),
                };
                groups.push((shape.clone(), Tenant::new(&tenant_name)));
                &mut groups.last_mut().expect("just pushed").1
            }
        };
        tenant.domains.push(n.to_owned());
        if let Some(ttl) = ttl {
            tenant.ttl = Some(tenant.ttl.map_or(ttl, |t| t.min(ttl)));
        }
        tenant.default_geo = shape.default_geo.clone();
        tenant.cname = !shape.hosts.is_empty();
        let addresses = shape
            .addresses
            .iter()
            .map(|(ip, g, w)| (ip.to_string(), g, w));
        let hosts = shape.hosts.iter().map(|(h, g, w)| (h.clone(), g, w));
        for (address, geo, weight) in addresses.chain(hosts) {
            let ep = endpoints.of_address(&address, name);
            let table = endpoints.table_mut(&ep).expect("just made");
            if let Some(w) = weight {
                table.insert("weight".into(), (*w).into());
            }
            if let Some(geo) = geo {
                let mut labels = Table::new();
                labels.insert("geo".into(), geo.clone().into());
                table.insert("labels".into(), labels.into());
            }
            if !tenant.endpoints.contains(&ep) {
                tenant.endpoints.push(ep);
            }
        }
    }
    if groups.is_empty() {
        bail!(
            "DNSRecord {name} publishes no name: {}",
            if left_out.is_empty() {
                "it has no A/AAAA endpoint with addresses".to_owned()
            } else {
                left_out.join("; ")
            }
        );
    }
    notes.extend(left_out);
    Ok(groups.into_iter().map(|(_, t)| t).collect())
}

/// A document's `metadata.name`.
pub(super) fn record_name(doc: &Value) -> anyhow::Result<&str> {
    doc.get("metadata")
        .and_then(|m| text(m, "name"))
        .context("a DNSRecord has no metadata.name")
}

pub(super) fn normalize(name: &str) -> String {
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
