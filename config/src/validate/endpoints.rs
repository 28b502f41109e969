//! Endpoints: names, addresses, checks, and the shared probe targets they resolve to.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::model::{CheckOverrides, Config};
use crate::model::{EndpointConfig, Require};
use crate::names::{check_object_name, normalize_domain};
use crate::plan::{CheckSpec, Composite, Endpoint, EndpointExtras, HostEndpoint, Target, Tenant};

use super::check_kinds::CheckCatalog;
use super::checks::resolve_check;
use super::Errors;

/// The endpoints as validated, built in place: those by address as the plan keeps them,
/// those by host name apart (expanded once resolved), and where each configured endpoint
/// went. No list of all endpoints in another form is made on the way: at 100,000 endpoints
/// such a list and its copy were most of the heap at start-up.
pub(super) struct Resolved {
    /// The endpoints by address, in the order of the file.
    endpoints: Vec<Endpoint>,
    /// The endpoints by host name, in the order of the file.
    hosts: Vec<HostEndpoint>,
    /// Per configured endpoint: its place among `endpoints` or `hosts`; `None` for one with
    /// errors.
    place: Vec<Option<Place>>,
    /// The distinct probe targets, without growth room: the plan holds them for the life
    /// of the process.
    targets: Vec<Target>,
}

/// Where a configured endpoint went.
#[derive(Clone, Copy)]
pub(super) enum Place {
    /// Its index among [`Resolved::endpoints`].
    Address(u32),
    /// Its index among [`Resolved::hosts`].
    Host(u32),
}

/// Resolves each endpoint; a `None` place marks one with errors. Equal checks are shared:
/// every target holds an `Arc` of one copy per distinct check (`default_check` for
/// endpoints that override nothing). None configured is an error unless `[kubernetes]
/// tenants` bring them from resources.
pub(super) fn resolve_endpoints(
    config: &Config,
    base: &CheckOverrides,
    default_check: Option<CheckSpec>,
    checks: &dyn CheckCatalog,
    errs: &mut Errors,
) -> Resolved {
    if config.endpoints.is_empty() && !config.kubernetes.tenants {
        errs.push("endpoints", "none configured: there is nothing to probe");
    }
    let default_check = default_check.map(Arc::new);
    let mut distinct_checks: HashSet<Arc<CheckSpec>> = default_check.iter().cloned().collect();
    let mut seen = HashMap::new();
    let mut targets: Vec<Target> = Vec::new();
    let mut target_ids: HashMap<Target, usize> = HashMap::new();
    let mut out = Resolved::with_capacity(config.endpoints.len());
    for (i, ep) in config.endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let mut ok = true;
        if let Err(e) = check_object_name(&ep.name) {
            errs.push(format!("{path}.name"), e);
            ok = false;
        } else if let Some(first) = seen.insert(ep.name.as_str(), i) {
            errs.push(
                format!("{path}.name"),
                format!(
                    "duplicate endpoint name \"{}\" (first at endpoints[{first}])",
                    ep.name
                ),
            );
            ok = false;
        }
        let (address, host) = match ep.address.parse::<IpAddr>() {
            Ok(a) => (Some(a), None),
            Err(_) => match normalize_domain(&ep.address) {
                Ok(host) if is_host_name(&host) => (None, Some(host)),
                _ => {
                    errs.push(
                        format!("{path}.address"),
                        format!(
                            "\"{}\" is not an IP address or a host name (e.g. my-lb-123.elb.amazonaws.com)",
                            ep.address
                        ),
                    );
                    ok = false;
                    (None, None)
                }
            },
        };
        if host.is_some() && !ep.checks.is_empty() {
            errs.push(
                format!("{path}.checks"),
                "an endpoint given by host name takes one check (`check`), used on every address it resolves to",
            );
            ok = false;
        }
        let mut resolve = |overrides: &CheckOverrides, at: &str| {
            if *overrides == CheckOverrides::default() {
                return default_check.clone();
            }
            let check = resolve_check(&overrides.over(base), Some(overrides), at, checks, errs)?;
            Some(match distinct_checks.get(&check) {
                Some(shared) => shared.clone(),
                None => {
                    let shared = Arc::new(check);
                    distinct_checks.insert(shared.clone());
                    shared
                }
            })
        };
        let check = resolve(&ep.check, &format!("{path}.check"));
        let more: Vec<(String, Option<Arc<CheckSpec>>)> = ep
            .checks
            .iter()
            .enumerate()
            .map(|(j, c)| {
                let at = format!("{path}.checks[{j}]");
                let resolved = resolve(c, &at);
                (at, resolved)
            })
            .collect();
        for (at, c) in std::iter::once((format!("{path}.check"), &check))
            .chain(more.iter().map(|(at, c)| (at.clone(), c)))
        {
            let source = c.as_ref().and_then(|c| c.source_address);
            if let (Some(a), Some(src)) = (address, source) {
                if a.is_ipv4() != src.is_ipv4() {
                    errs.push(
                        format!("{at}.source_address"),
                        format!(
                            "{src} and the endpoint's address {a} are of different IP families"
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok &= check_composite(ep, &path, &check, &more, errs);
        if let Some(cluster) = &ep.cluster {
            if let Err(e) = super::check_cluster_id(cluster) {
                errs.push(format!("{path}.cluster"), e);
                ok = false;
            }
        }
        let more: Option<Vec<Arc<CheckSpec>>> = more.into_iter().map(|(_, c)| c).collect();
        if let (Some(host), Some(check), true) = (&host, &check, ok) {
            out.add_host(HostEndpoint {
                name: ep.name.clone(),
                host: host.clone(),
                labels: ep.labels.clone(),
                weight: ep.weight,
                priority: ep.priority.unwrap_or(0),
                cluster: ep.cluster.clone(),
                hold_failback: ep.hold_failback,
                check: check.clone(),
                tenants: Vec::new(),
            });
            continue;
        }
        match (address, check, more, ok) {
            (Some(address), Some(check), Some(more), true) => {
                let mut intern = |check: Arc<CheckSpec>| {
                    let target = Target { address, check };
                    let next = targets.len();
                    let id = *target_ids.entry(target.clone()).or_insert(next);
                    if id == next {
                        targets.push(target);
                    }
                    id
                };
                let target = intern(check);
                let composite = (!more.is_empty()).then(|| Composite {
                    also: more.into_iter().map(&mut intern).collect(),
                    require: ep.require.unwrap_or_default(),
                    must_pass: ep.must_pass,
                });
                let mut endpoint =
                    Endpoint::new(ep.name.as_str(), address, target).with_extras(EndpointExtras {
                        labels: ep.labels.clone(),
                        cluster: ep.cluster.clone(),
                        host: None,
                        composite,
                    });
                endpoint.weight = ep.weight;
                endpoint.priority = ep.priority.unwrap_or(0);
                endpoint.hold_failback = ep.hold_failback;
                out.add_address(endpoint);
            }
            _ => out.place.push(None),
        }
    }
    targets.shrink_to_fit();
    out.endpoints.shrink_to_fit();
    Resolved { targets, ..out }
}

impl Resolved {
    fn with_capacity(configured: usize) -> Resolved {
        Resolved {
            // Exact when no endpoint is given by host name: the plan keeps this for its life.
            endpoints: Vec::with_capacity(configured),
            hosts: Vec::new(),
            place: Vec::with_capacity(configured),
            targets: Vec::new(),
        }
    }

    fn add_address(&mut self, endpoint: Endpoint) {
        self.place
            .push(Some(Place::Address(narrow(self.endpoints.len()))));
        self.endpoints.push(endpoint);
    }

    fn add_host(&mut self, host: HostEndpoint) {
        self.place.push(Some(Place::Host(narrow(self.hosts.len()))));
        self.hosts.push(host);
    }

    /// The endpoints by address, those by host name and the targets, with `tenants`'
    /// endpoint indices renumbered to the first (see [`renumber_tenants`]).
    pub(super) fn into_plan_parts(
        mut self,
        tenants: &mut [Tenant],
    ) -> (Vec<Endpoint>, Vec<HostEndpoint>, Vec<Target>) {
        renumber_tenants(&self.place, &mut self.hosts, tenants);
        (self.endpoints, self.hosts, self.targets)
    }
}

/// An index into the endpoints as a [`Place`] keeps it.
fn narrow(index: usize) -> u32 {
    u32::try_from(index).expect("a configuration has fewer than 2^32 endpoints")
}

/// Whether `name` (a valid domain name) is a host name rather than a mistyped address:
/// at least two labels, the last not all digits (RFC 3696's rule for top-level domains),
/// and not every label before it all digits (`10.0.0.x`).
fn is_host_name(name: &str) -> bool {
    let labels: Vec<&str> = name.split('.').collect();
    let digits = |l: &&str| l.bytes().all(|b| b.is_ascii_digit());
    let Some((last, before)) = labels.split_last() else {
        return false;
    };
    !before.is_empty() && !digits(last) && !before.iter().all(digits)
}

/// Renumbers the tenants' endpoint indices (into the configured endpoints) to those by
/// address, and tells each host endpoint its tenants. Only for endpoints without errors:
/// every place is set.
fn renumber_tenants(place: &[Option<Place>], hosts: &mut [HostEndpoint], tenants: &mut [Tenant]) {
    for (ti, tenant) in tenants.iter_mut().enumerate() {
        // Collected in place, so the list would keep the growth room of its last push.
        let mut kept: Vec<usize> = std::mem::take(&mut tenant.endpoints)
            .into_iter()
            .filter_map(|e| match place[e].expect("validated") {
                Place::Address(i) => Some(i as usize),
                Place::Host(h) => {
                    hosts[h as usize].tenants.push(ti);
                    None
                }
            })
            .collect();
        kept.shrink_to_fit();
        tenant.endpoints = kept;
    }
}

/// The composite rules of endpoint `ep` (`checks`, `require`, `must_pass`): the keys
/// need `checks`, a quorum is within the number of checks, and no two checks are the same
/// (one probe would count twice). Whether they hold.
fn check_composite(
    ep: &EndpointConfig,
    path: &str,
    check: &Option<Arc<CheckSpec>>,
    more: &[(String, Option<Arc<CheckSpec>>)],
    errs: &mut Errors,
) -> bool {
    if ep.checks.is_empty() {
        for (key, set) in [
            ("require", ep.require.is_some()),
            ("must_pass", ep.must_pass),
        ] {
            if set {
                errs.push(
                    format!("{path}.{key}"),
                    "combines several checks: set `checks` too, or remove it",
                );
            }
        }
        return !(ep.require.is_some() || ep.must_pass);
    }
    let mut ok = true;
    let count = ep.checks.len() + 1;
    if let Some(Require::Quorum { quorum }) = ep.require {
        if quorum == 0 || quorum as usize > count {
            errs.push(
                format!("{path}.require.quorum"),
                format!("{quorum} is not between 1 and the endpoint's {count} checks"),
            );
            ok = false;
        }
    }
    let mut seen: Vec<(&str, &Arc<CheckSpec>)> = Vec::new();
    let first = format!("{path}.check");
    for (at, c) in
        std::iter::once((first.as_str(), check)).chain(more.iter().map(|(a, c)| (a.as_str(), c)))
    {
        let Some(c) = c else { continue };
        if let Some((twin, _)) = seen.iter().find(|(_, s)| *s == c) {
            errs.push(
                at,
                format!("is the same check as {twin}: each check must differ"),
            );
            ok = false;
        } else {
            seen.push((at, c));
        }
    }
    ok
}
