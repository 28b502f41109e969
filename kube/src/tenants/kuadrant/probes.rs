//! The `DNSHealthCheckProbe`s' side of [`Live`]: which endpoint probes each probe's
//! address (an IP address, or a load balancer's host name standing for every address it
//! resolves to), and the status each gets, probed or not.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ho_engine::status::EndpointStatus;
use kube::ResourceExt;

use super::super::admit::{endpoint_name, tenant_name};
use super::status::{probe_status, Probed};
use super::{differs, Live};

impl Live {
    /// The endpoints (as admission names them) probing each DNSHealthCheckProbe's
    /// address: its own when no record backs it ([`Self::probe_unbacked`]), else the
    /// backing record's.
    pub fn probe_endpoints(&self) -> BTreeMap<(String, String), String> {
        let mut found = self.backing_endpoints();
        for (key, own) in &self.own {
            match own {
                Ok(endpoint) => found.insert(key.clone(), endpoint.clone()),
                Err(_) => found.remove(key),
            };
        }
        found
    }

    /// The endpoint of the first published record of each probe's namespace that has the
    /// probe's address (an IP address, or a load balancer's host name, whose endpoint
    /// stands for every address the name resolves to).
    pub(super) fn backing_endpoints(&self) -> BTreeMap<(String, String), String> {
        let mut found = BTreeMap::new();
        for probe in self.stores.probes() {
            let ns = probe.metadata.namespace.clone().unwrap_or_default();
            let name = probe.metadata.name.clone().unwrap_or_default();
            let Some(address) = probe.data["spec"]["address"].as_str().map(ProbeTarget::of) else {
                continue;
            };
            let holds = |source: &super::super::resource::EndpointSource| match &address {
                ProbeTarget::Address(ip) => source.addresses.iter().any(|a| a.parse() == Ok(*ip)),
                ProbeTarget::Host(_) => source.hosts.iter().any(|h| ProbeTarget::of(h) == address),
            };
            let stand_in = self
                .core
                .records()
                .iter()
                .filter(|((n, _), _)| *n == ns)
                .filter_map(|(_, r)| r.stand_ins.as_ref().ok())
                .flatten()
                .find(|s| s.spec.endpoints.iter().any(holds));
            if let Some(s) = stand_in {
                let tenant = tenant_name(&(ns.clone(), s.name_any()));
                found.insert((ns, name), endpoint_name(&tenant, &address));
            }
        }
        found
    }

    /// Writes each DNSHealthCheckProbe's status where it changed, from the engine's view of
    /// the endpoints [`Self::probe_endpoints`] named. `lastCheckedAt` rides along with a change
    /// and is not one itself: probes run every second or faster, a write each time would
    /// be a write per probe per second.
    pub fn report_probes(
        &self,
        endpoints: &BTreeMap<(String, String), String>,
        seen: &HashMap<String, Vec<EndpointStatus>>,
    ) {
        let mut changed = BTreeMap::new();
        for probe in self.stores.probes() {
            let key = (
                probe.metadata.namespace.clone().unwrap_or_default(),
                probe.metadata.name.clone().unwrap_or_default(),
            );
            let of_probe: Vec<&EndpointStatus> = endpoints
                .get(&key)
                .and_then(|e| seen.get(e))
                .into_iter()
                .flatten()
                .collect();
            let probed = match (endpoints.contains_key(&key), self.own.get(&key)) {
                (true, _) => Probed::At(&of_probe),
                (false, Some(Err(why))) => Probed::Not {
                    failed: true,
                    reason: why.clone(),
                },
                (false, _) => Self::unprobed(probe.data["spec"]["address"].as_str()),
            };
            let want = probe_status(&probe, probed);
            if differs(&probe, &want, &["healthy", "consecutiveFailures", "reason"]) {
                changed.insert(key, want);
            }
        }
        self.probe_statuses.send(changed);
    }

    /// Why a probe is not probed when neither a record backs it nor it was made a target of
    /// its own: it has no address, or Kuadrant's resources are not all listed yet.
    fn unprobed(address: Option<&str>) -> Probed<'static> {
        match address {
            None => Probed::Not {
                failed: true,
                reason: "refused: the probe has no spec.address".to_owned(),
            },
            Some(_) => Probed::Not {
                failed: false,
                reason: "not probed yet: Kuadrant's resources are not all listed".to_owned(),
            },
        }
    }
}

/// A probe's address as the engine's endpoints name it (its `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ProbeTarget {
    /// An IP address.
    Address(IpAddr),
    /// A host name, in lower case without its trailing dot.
    Host(String),
}

impl ProbeTarget {
    /// `address` as written in a probe or a stand-in's source.
    pub(super) fn of(address: &str) -> ProbeTarget {
        match address.parse() {
            Ok(ip) => ProbeTarget::Address(ip),
            Err(_) => ProbeTarget::Host(address.trim_end_matches('.').to_ascii_lowercase()),
        }
    }
}

impl std::fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeTarget::Address(ip) => ip.fmt(f),
            ProbeTarget::Host(host) => f.write_str(host),
        }
    }
}
