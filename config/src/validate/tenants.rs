//! Tenants: names, domains, which endpoints they select, their routing policy, and what
//! their sinks can express.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use crate::model::{Answer, Config, EndpointSelection, RoutingPolicy, TenantConfig};
use crate::names::{check_object_name, is_wildcard, normalize_tenant_domain};
use crate::plan::{PlannedSink, Slo, SloWindow, Tenant};

use super::sinks::TenantUse;
use super::{list_names, Errors};

/// What resolving the tenants needs to look up.
struct Lookup<'a> {
    config: &'a Config,
    /// Sinks that parsed.
    sinks: &'a BTreeMap<String, PlannedSink>,
    /// Endpoint index by name (the first, for duplicates).
    by_name: HashMap<&'a str, usize>,
}

/// Resolves every tenant; domains must be unique across tenants.
pub(super) fn resolve_tenants(
    config: &Config,
    sinks: &BTreeMap<String, PlannedSink>,
    errs: &mut Errors,
) -> Vec<Tenant> {
    if config.tenants.is_empty() && !config.kubernetes.tenants {
        errs.push(
            "tenants",
            "none configured: nothing would be published (or set [kubernetes] tenants = true to take them from DNSFailover resources)",
        );
    }
    let lookup = Lookup {
        config,
        sinks,
        by_name: config
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.as_str(), i))
            .rev()
            .collect(),
    };
    let mut seen_tenants = HashMap::new();
    let mut seen_domains: HashMap<String, String> = HashMap::new();
    let mut seen_keys: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (ti, t) in config.tenants.iter().enumerate() {
        let path = format!("tenants[{ti}]");
        let mut duplicate_name = false;
        if let Err(e) = check_object_name(&t.name) {
            errs.push(format!("{path}.name"), e);
        } else if let Some(first) = seen_tenants.insert(t.name.as_str(), ti) {
            duplicate_name = true;
            errs.push(
                format!("{path}.name"),
                format!(
                    "duplicate tenant name \"{}\" (first at tenants[{first}])",
                    t.name
                ),
            );
        }
        let domains = resolve_domains(t, &path, &mut seen_domains, errs);
        let selected = lookup.select(t, &path, errs);
        lookup.check_addresses(&selected, &path, errs);
        let sink_names = lookup.sink_names(t, &path, errs);
        check_policy(config, t, &selected, &path, errs);
        check_answer(config, t, &selected, &path, errs);
        let usage = TenantUse {
            path: &path,
            tenant: t,
            domains: &domains,
            endpoints: selected
                .iter()
                .map(|&i| (i, &config.endpoints[i]))
                .collect(),
        };
        lookup.check_sinks(&usage, &sink_names, errs);
        check_numbers(t, &path, errs);
        let hosts_key = t
            .hosts_key
            .clone()
            .unwrap_or_else(|| format!("{}.hosts", t.name));
        // A duplicate name was reported; its default key would only repeat that.
        if t.hosts_key.is_some() || !duplicate_name {
            check_hosts_key(&hosts_key, ti, &mut seen_keys, errs);
        }
        out.push(Tenant {
            name: t.name.clone(),
            hosts_key,
            domains,
            endpoints: selected,
            sinks: t.sinks.clone(),
            ttl: t.ttl,
            degraded_ttl: t.degraded_ttl,
            on_all_unhealthy: t.on_all_unhealthy,
            min_healthy: t.min_healthy,
            cleanup_on_remove: t.cleanup_on_remove,
            policy: t.policy,
            answer: t.answer,
            weights: t.weights.clone(),
            default_weight: t.default_weight.unwrap_or(1),
            weighs: t.policy == RoutingPolicy::Weighted
                || (t.policy == RoutingPolicy::Geo
                    && (!t.weights.is_empty() || t.default_weight.is_some())),
            default_geo: t.default_geo.clone(),
            multi_cluster: t.multi_cluster.unwrap_or(config.multi_cluster.enabled),
            slo: slo(t, &path, errs),
            resource: t.resource.clone(),
        });
    }
    out
}

/// A hosts file name and ConfigMap key: the characters both accept, unique across tenants
/// (two tenants with one key would overwrite each other's records).
fn check_hosts_key(key: &str, ti: usize, seen: &mut HashMap<String, usize>, errs: &mut Errors) {
    let at = format!("tenants[{ti}].hosts_key");
    let valid = !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        errs.push(
            at,
            format!("\"{key}\" must be 1-253 letters, digits, '-', '_' or '.' (a file name and a ConfigMap key)"),
        );
        return;
    }
    if let Some(first) = seen.insert(key.to_owned(), ti) {
        errs.push(
            at,
            format!("\"{key}\" is also the hosts_key of tenants[{first}]: each would overwrite the other's records"),
        );
    }
}

/// Normalised domains; a domain already published by another tenant is an error.
fn resolve_domains(
    t: &TenantConfig,
    path: &str,
    seen: &mut HashMap<String, String>,
    errs: &mut Errors,
) -> Vec<String> {
    let mut domains = Vec::new();
    if t.domains.is_empty() {
        errs.push(format!("{path}.domains"), "must list at least one domain");
    }
    for (di, d) in t.domains.iter().enumerate() {
        match normalize_tenant_domain(d) {
            Err(e) => errs.push(format!("{path}.domains[{di}]"), e),
            Ok(n) => match seen.get(&n) {
                Some(owner) => errs.push(
                    format!("{path}.domains[{di}]"),
                    format!("\"{n}\" is already published by tenant \"{owner}\""),
                ),
                None => {
                    seen.insert(n.clone(), t.name.clone());
                    domains.push(n);
                }
            },
        }
    }
    domains
}

impl Lookup<'_> {
    /// The endpoints `t` selects (by name or all, then by label selector), as indices.
    fn select(&self, t: &TenantConfig, path: &str, errs: &mut Errors) -> Vec<usize> {
        let before = errs.0.len();
        let picked: Vec<usize> = match &t.endpoints {
            EndpointSelection::All => (0..self.config.endpoints.len()).collect(),
            EndpointSelection::Names(names) => {
                let mut picked = Vec::new();
                for (ni, n) in names.iter().enumerate() {
                    match self.by_name.get(n.as_str()) {
                        None => errs.push(
                            format!("{path}.endpoints[{ni}]"),
                            format!(
                                "no endpoint named \"{n}\" ({})",
                                list_names(self.config.endpoints.iter().map(|e| e.name.as_str()))
                            ),
                        ),
                        Some(&i) if picked.contains(&i) => errs.push(
                            format!("{path}.endpoints[{ni}]"),
                            format!("\"{n}\" is listed twice"),
                        ),
                        Some(&i) => picked.push(i),
                    }
                }
                picked
            }
        };
        let selected: Vec<usize> = picked
            .into_iter()
            .filter(|&i| {
                let labels = &self.config.endpoints[i].labels;
                t.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        if selected.is_empty() && errs.0.len() == before {
            errs.push(
                path,
                "selects no endpoints: a tenant needs at least one (check `endpoints` and `selector`)",
            );
        }
        selected
    }

    /// A tenant publishes each address once (the plan's invariant: at most one endpoint per
    /// target in a tenant). Read from the endpoints as configured, so an endpoint whose check
    /// has its own error is still checked here: one error never hides another.
    fn check_addresses(&self, selected: &[usize], path: &str, errs: &mut Errors) {
        let mut addresses: BTreeMap<IpAddr, &str> = BTreeMap::new();
        for ep in selected.iter().map(|&i| &self.config.endpoints[i]) {
            // An address that does not parse has its own error.
            let Ok(address) = ep.address.parse::<IpAddr>() else {
                continue;
            };
            if let Some(other) = addresses.insert(address, &ep.name) {
                errs.push(
                    path,
                    format!(
                        "endpoints \"{other}\" and \"{}\" share address {address}; a tenant publishes each address once",
                        ep.name
                    ),
                );
            }
        }
    }

    /// The tenant's sink names, each defined and listed once.
    fn sink_names(&self, t: &TenantConfig, path: &str, errs: &mut Errors) -> BTreeSet<String> {
        if t.sinks.is_empty() {
            errs.push(
                format!("{path}.sinks"),
                "must name at least one sink: nothing would be published",
            );
        }
        let mut sinks = BTreeSet::new();
        for (si, s) in t.sinks.iter().enumerate() {
            if !self.config.sinks.contains_key(s) {
                errs.push(
                    format!("{path}.sinks[{si}]"),
                    format!(
                        "no sink named \"{s}\" ({})",
                        list_names(self.config.sinks.keys().map(String::as_str))
                    ),
                );
            } else if !sinks.insert(s.clone()) {
                errs.push(
                    format!("{path}.sinks[{si}]"),
                    format!("\"{s}\" is listed twice"),
                );
            }
        }
        sinks
    }

    /// What each sink of the tenant can express, and what its kind requires of the tenant.
    fn check_sinks(&self, usage: &TenantUse<'_>, names: &BTreeSet<String>, errs: &mut Errors) {
        let policy = usage.tenant.policy;
        for s in names {
            let Some(sink) = self.sinks.get(s) else {
                continue;
            };
            if let Err(hint) = sink.spec.supports(policy) {
                errs.push(
                    format!("{}.policy", usage.path),
                    format!(
                        "sink \"{s}\" ({}) cannot express policy \"{}\"{hint}",
                        sink.spec.kind(),
                        policy.as_str()
                    ),
                );
            }
            if usage.tenant.answer == Answer::Cname {
                if let Err(hint) = sink.spec.takes_cnames(policy) {
                    errs.push(
                        format!("{}.answer", usage.path),
                        format!(
                            "sink \"{s}\" ({}) cannot publish answer = \"cname\" with policy \"{}\"{hint}",
                            sink.spec.kind(),
                            policy.as_str()
                        ),
                    );
                }
            }
            if let Err(hint) = sink.spec.takes_wildcards() {
                for (di, d) in usage
                    .domains
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| is_wildcard(d))
                {
                    errs.push(
                        format!("{}.domains[{di}]", usage.path),
                        format!(
                            "\"{d}\" is a wildcard, and sink \"{s}\" ({}) cannot publish wildcards{hint}",
                            sink.spec.kind()
                        ),
                    );
                }
            }
            sink.spec.check_tenant(s, usage, &mut errs.0);
        }
        let votes = usage
            .tenant
            .multi_cluster
            .unwrap_or(self.config.multi_cluster.enabled);
        let holds_reports = |s: &String| self.sinks.get(s).is_some_and(|k| k.spec.holds_reports());
        if votes && !names.is_empty() && !names.iter().any(holds_reports) {
            let kinds: Vec<&str> = names
                .iter()
                .filter_map(|s| self.sinks.get(s).map(|k| k.spec.kind()))
                .collect();
            errs.push(
                format!("{}.sinks", usage.path),
                format!(
                    "multi_cluster needs a sink the clusters exchange their reports through (powerdns, route53, cloudflare, google_cloud_dns or azure_dns, or dns_server with `reports`); {} cannot hold them: add one or set multi_cluster = false on this tenant",
                    kinds.join(", ")
                ),
            );
        }
    }
}

/// Policy-specific fields: `weights` only with `weighted` or `geo` (Kuadrant's weights
/// inside a geo), `default_geo` only with (and required by) `geo`, and every endpoint of a
/// `geo` tenant has a `geo` label.
fn check_policy(
    config: &Config,
    t: &TenantConfig,
    selected: &[usize],
    path: &str,
    errs: &mut Errors,
) {
    let policy = t.policy;
    let weighs = matches!(policy, RoutingPolicy::Weighted | RoutingPolicy::Geo);
    if !t.weights.is_empty() && !weighs {
        errs.push(
            format!("{path}.weights"),
            "only used with policy = \"weighted\" or \"geo\" (weights inside each geo)",
        );
    }
    if t.default_weight.is_some() && !weighs {
        errs.push(
            format!("{path}.default_weight"),
            "only used with policy = \"weighted\" or \"geo\" (weights inside each geo)",
        );
    }
    if t.default_geo.is_some() && policy != RoutingPolicy::Geo {
        errs.push(
            format!("{path}.default_geo"),
            "only used with policy = \"geo\"",
        );
    }
    if policy != RoutingPolicy::Geo {
        return;
    }
    let geos: BTreeSet<&str> = selected
        .iter()
        .filter_map(|&i| config.endpoints[i].labels.get("geo").map(String::as_str))
        .collect();
    for &i in selected {
        if !config.endpoints[i].labels.contains_key("geo") {
            errs.push(
                path,
                format!(
                    "endpoint \"{}\" has no label \"geo\" (policy = \"geo\")",
                    config.endpoints[i].name
                ),
            );
        }
    }
    match &t.default_geo {
        None => errs.push(
            format!("{path}.default_geo"),
            "required with policy = \"geo\"",
        ),
        Some(g) if !geos.contains(g.as_str()) => errs.push(
            format!("{path}.default_geo"),
            format!(
                "no endpoint of the tenant has geo = \"{g}\" (present: {})",
                geos.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        ),
        Some(_) => {}
    }
}

/// `answer = "cname"`: every endpoint is given by host name (an address has no name to
/// point at), and the tenant does not vote across clusters (another cluster's endpoints
/// arrive as addresses).
fn check_answer(
    config: &Config,
    t: &TenantConfig,
    selected: &[usize],
    path: &str,
    errs: &mut Errors,
) {
    if t.answer != Answer::Cname {
        return;
    }
    for ep in selected.iter().map(|&i| &config.endpoints[i]) {
        if ep.address.parse::<IpAddr>().is_ok() {
            errs.push(
                format!("{path}.answer"),
                format!(
                    "endpoint \"{}\" is an address ({}), and a CNAME names a host: give it by its load balancer's host name, or answer = \"addresses\"",
                    ep.name, ep.address
                ),
            );
        }
    }
    if t.multi_cluster.unwrap_or(config.multi_cluster.enabled) {
        errs.push(
            format!("{path}.answer"),
            "answer = \"cname\" cannot vote across clusters (the clusters report addresses, not host names): set multi_cluster = false on this tenant",
        );
    }
}

/// `slo` (a percentage, `"99.9%"` or `99.9`, or a share, `0.999`, strictly between 0 and
/// 100 %)
/// and `slo_window` (a duration of at least a day, or `"month"`).
fn slo(t: &TenantConfig, path: &str, errs: &mut Errors) -> Option<Slo> {
    let window = match t.slo_window.as_deref() {
        None => Some(SloWindow::Rolling(Duration::from_secs(30 * 86_400))),
        Some("month") => Some(SloWindow::Month),
        Some(text) => match humantime::parse_duration(text) {
            Ok(d) if d >= Duration::from_secs(86_400) => Some(SloWindow::Rolling(d)),
            _ => {
                let why = format!(
                    "\"{text}\" is neither a duration of at least 1d (\"30d\") nor \"month\""
                );
                errs.push(format!("{path}.slo_window"), why);
                None
            }
        },
    };
    let text = t.slo.as_deref()?;
    // A bare number above 1 is a percentage too (`99.9`); 1 itself could be either.
    let share = match text.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => text
            .trim()
            .parse::<f64>()
            .map(|n| if n > 1.0 { n / 100.0 } else { n }),
    };
    // In billionths, so "99.9%" is 0.999 and not 0.9990000000000001.
    let share = share.map(|s| (s * 1e9).round() / 1e9);
    match share {
        Ok(objective) if objective > 0.0 && objective < 1.0 => {
            window.map(|window| Slo { objective, window })
        }
        _ => {
            let why =
                format!("\"{text}\" is not an objective: write a percentage above 0 and below 100, \"99.9%\"");
            errs.push(format!("{path}.slo"), why);
            None
        }
    }
}

/// `ttl`, `degraded_ttl` and `min_healthy` ranges.
fn check_numbers(t: &TenantConfig, path: &str, errs: &mut Errors) {
    if t.ttl < Duration::from_secs(1) {
        errs.push(format!("{path}.ttl"), "must be at least 1s");
    }
    match t.degraded_ttl {
        Some(d) if d < Duration::from_secs(1) => {
            errs.push(format!("{path}.degraded_ttl"), "must be at least 1s");
        }
        Some(d) if d > t.ttl => errs.push(
            format!("{path}.degraded_ttl"),
            format!(
                "{} is longer than ttl ({}): it is the TTL while degraded, meant to be shorter",
                humantime::format_duration(d),
                humantime::format_duration(t.ttl)
            ),
        ),
        _ => {}
    }
    if !(0.0..=1.0).contains(&t.min_healthy) {
        errs.push(
            format!("{path}.min_healthy"),
            format!("{} is not a share between 0.0 and 1.0", t.min_healthy),
        );
    }
}
