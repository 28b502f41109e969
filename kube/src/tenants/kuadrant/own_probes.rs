//! The DNSHealthCheckProbes no published record backs, probed on their own: dns-operator
//! runs every probe and keeps its status whether or not a record names its address, so
//! each such probe of an allowed namespace becomes an endpoint of the merged config that no
//! tenant selects: probed with its own check (address or host name, protocol, port, path,
//! headers), its verdict reaching only the probe's status, never a record it does not
//! back. Each is validated alone, as a resource is, so a bad probe refuses itself (its
//! status says why) and never the round's config.

use std::collections::{BTreeMap, HashSet};

use ho_config::model::EndpointConfig;
use ho_config::validate::{validate, Kinds};
use ho_config::Config;

use super::super::admit::{endpoint_name, tenant_name, Key};
use super::super::resource::EndpointSource;
use super::Live;

/// What became of a probe no published record backs: the endpoint probing it, or why none
/// does.
pub(super) type Own = BTreeMap<Key, Result<String, String>>;

impl Live {
    /// Adds to `config` (admission's merged config) an endpoint for each probe whose address
    /// no endpoint of `config` probes for it, and remembers what became of each.
    pub fn probe_unbacked(&mut self, config: &mut Config, catalog: &Kinds<'_>) {
        let backing = self.backing_endpoints();
        let planned: HashSet<String> = config.endpoints.iter().map(|e| e.name.clone()).collect();
        let mut alone = without_tenants(config);
        let mut own = Own::new();
        for (key, probed) in self.core().probes() {
            if backing.get(key).is_some_and(|e| planned.contains(e)) {
                continue;
            }
            let made = probed
                .as_ref()
                .map_err(|why| format!("refused: {why}"))
                .and_then(|source| self.own_endpoint(key, source, &planned, &mut alone, catalog));
            if let Ok(endpoint) = &made {
                config.endpoints.push(endpoint.clone());
            }
            own.insert(key.clone(), made.map(|e| e.name));
        }
        self.own = own;
    }

    /// The endpoint probing probe `key` on its own at `source`, validated alone (in `alone`,
    /// the base config without tenants), or why it cannot be probed.
    fn own_endpoint(
        &self,
        (ns, name): &Key,
        source: &EndpointSource,
        planned: &HashSet<String>,
        alone: &mut Config,
        catalog: &Kinds<'_>,
    ) -> Result<EndpointConfig, String> {
        if !alone.kubernetes.allow.iter().any(|a| a.namespace == *ns) {
            return Err(format!(
                "refused: namespace \"{ns}\" has no [[kubernetes.allow]] entry in the orchestrator's config: ask the platform team to allow it"
            ));
        }
        let address = source.addresses.iter().chain(&source.hosts).next();
        let address = address.ok_or("refused: the probe has no spec.address")?;
        let unresolved = |h: &String| {
            let why = self.hosts.unresolved(h)?;
            Some(format!("host name {h} does not resolve: {why}"))
        };
        if let Some(why) = source.hosts.iter().find_map(unresolved) {
            return Err(why);
        }
        let written = super::probes::ProbeTarget::of(address).to_string();
        let tenant = tenant_name(&(ns.clone(), format!("dnshealthcheckprobe.{name}")));
        let endpoint = EndpointConfig {
            name: endpoint_name(&tenant, &written),
            address: written,
            labels: BTreeMap::new(),
            weight: None,
            priority: None,
            cluster: None,
            hold_failback: false,
            checks: Vec::new(),
            require: None,
            must_pass: false,
            check: source.check.clone().unwrap_or_default(),
        };
        if planned.contains(&endpoint.name) {
            return Err(format!(
                "refused: endpoint {} is another resource's (a DNSFailover named dnshealthcheckprobe.{name}): rename one",
                endpoint.name
            ));
        }
        alone.endpoints = vec![endpoint];
        let checked = validate(alone, catalog);
        let endpoint = alone.endpoints.pop().expect("the probe's endpoint");
        match checked {
            Ok(_) => Ok(endpoint),
            Err(errors) => {
                let lines: Vec<String> = errors.0.iter().map(|e| e.reason.clone()).collect();
                Err(format!("refused: {}", lines.join("; ")))
            }
        }
    }
}

/// A copy of `config` without its tenants and endpoints (not cloned: a merged config holds
/// every resource's).
fn without_tenants(config: &mut Config) -> Config {
    let tenants = std::mem::take(&mut config.tenants);
    let endpoints = std::mem::take(&mut config.endpoints);
    let alone = config.clone();
    config.tenants = tenants;
    config.endpoints = endpoints;
    alone
}
