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
    /// address: the first published record of its namespace that has the address (an IP
    /// address, or a load balancer's host name, whose endpoint stands for every address
    /// the name resolves to).
    pub fn probe_endpoints(&self) -> BTreeMap<(String, String), String> {
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
            let probed = match endpoints.contains_key(&key) {
                true => Probed::At(&of_probe),
                false => self.unprobed(&key.0, probe.data["spec"]["address"].as_str()),
            };
            let want = probe_status(&probe, probed);
            if differs(&probe, &want, &["healthy", "consecutiveFailures", "reason"]) {
                changed.insert(key, want);
            }
        }
        self.probe_statuses.send(changed);
    }

    /// Why a probe of namespace `ns` at `address` is not probed: an address that is none, a
    /// host name that does not resolve, the refusal of the records naming it, or no
    /// published record naming it.
    fn unprobed(&self, ns: &str, address: Option<&str>) -> Probed<'static> {
        let failed = |reason: String| Probed::Not {
            failed: true,
            reason,
        };
        let Some(address) = address else {
            return failed("refused: the probe has no spec.address".to_owned());
        };
        let target = ProbeTarget::of(address);
        if let ProbeTarget::Host(host) = &target {
            if !plausible_host(host) {
                return failed(format!(
                    "refused: address {address:?} is neither an IP address nor a host name"
                ));
            }
            if let Some(why) = self.hosts.failed(host) {
                return failed(format!("host name {host} does not resolve: {why}"));
            }
        }
        let written = target.to_string();
        // The translation says which address refused a record only in its reason's words.
        let refused = self
            .core
            .records()
            .iter()
            .filter(|((n, _), _)| n == ns)
            .filter_map(|(_, r)| r.stand_ins.as_ref().err().map(ToString::to_string))
            .find(|why| why.contains(&written));
        Probed::Not {
            // The probe's own refusal (its Secret, say) fails it, as dns-operator reports.
            failed: refused
                .as_ref()
                .is_some_and(|why| why.contains("DNSHealthCheckProbe")),
            reason: match refused {
                Some(why) => format!("not probed: {why}"),
                None => "not probed: no published DNSRecord has this address".to_owned(),
            },
        }
    }
}

/// Whether `host` (lower case, no trailing dot) can be a host name: letters, digits and
/// hyphens in two labels or more, as the probe's CRD has it.
fn plausible_host(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
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
