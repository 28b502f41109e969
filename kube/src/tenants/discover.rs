//! Gateways discovered, not typed: the addresses or host names a Gateway, an Ingress, a
//! LoadBalancer Service or a Node reports in its status (a cloud load balancer that reports
//! only a host name, as AWS's do, is resolved and probed at its addresses, or published as
//! a CNAME with `answer: cname`). Pure functions over the objects; the watchers keep them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::DynamicObject;

use super::resource::{DNSFailover, EndpointSource, NodeAddressType};

/// What the watchers currently know, as the admission asks it.
pub trait Lookup {
    /// Gateway `namespace/name`; `None` when no such Gateway exists.
    fn gateway(&self, namespace: &str, name: &str) -> Option<FoundGateway>;
    /// The load balancer IPs or host names of Ingress `namespace/name`; `None` when it
    /// does not exist.
    fn ingress(&self, namespace: &str, name: &str) -> Option<Vec<Target>>;
    /// The ingress IPs or host names of Service `namespace/name`; `None` when it does not
    /// exist.
    fn service(&self, namespace: &str, name: &str) -> Option<Vec<Target>>;
    /// The chosen address of every Node carrying all of `selector`'s labels, by node name.
    fn nodes(
        &self,
        selector: &BTreeMap<String, String>,
        kind: NodeAddressType,
    ) -> Vec<(String, IpAddr)>;
}

/// What a source reads of a Gateway.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FoundGateway {
    /// Its `status.addresses[]` of type `IPAddress` and `Hostname`.
    pub addresses: Vec<Target>,
    /// Whether a listener takes routes from every namespace (`allowedRoutes.namespaces.from:
    /// All`): only then may a resource in another namespace publish at its addresses, as
    /// only then could that namespace's routes attach to it.
    pub open_to_all_namespaces: bool,
}

impl FoundGateway {
    /// What a source reads of `gateway`.
    pub fn of(gateway: &DynamicObject) -> FoundGateway {
        let open = gateway
            .data
            .pointer("/spec/listeners")
            .and_then(|l| l.as_array())
            .is_some_and(|listeners| {
                listeners
                    .iter()
                    .any(|l| l.pointer("/allowedRoutes/namespaces/from") == Some(&"All".into()))
            });
        FoundGateway {
            addresses: gateway_addresses(gateway),
            open_to_all_namespaces: open,
        }
    }
}

/// A Gateway's `status.addresses[]`: those of type `IPAddress` (the default type when
/// unset) and `Hostname`; other types (implementation-specific) are skipped.
pub(super) fn gateway_addresses(gateway: &DynamicObject) -> Vec<Target> {
    let Some(addresses) = gateway
        .data
        .pointer("/status/addresses")
        .and_then(|a| a.as_array())
    else {
        return Vec::new();
    };
    let typed = |a: &serde_json::Value| {
        let value = a.get("value")?.as_str()?;
        match a.get("type").and_then(|t| t.as_str()) {
            None | Some("IPAddress") => value.parse().ok().map(Target::Address),
            Some("Hostname") => host_target(value),
            Some(_) => None,
        }
    };
    addresses.iter().filter_map(typed).collect()
}

/// A Service's `status.loadBalancer.ingress[]`: each entry's `ip`, else its `hostname`.
pub fn service_addresses(service: &Service) -> Vec<Target> {
    let entries = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    balancer_targets(
        entries
            .iter()
            .map(|i| (i.ip.as_deref(), i.hostname.as_deref())),
    )
}

/// An Ingress's `status.loadBalancer.ingress[]`: each entry's `ip`, else its `hostname`.
pub fn ingress_addresses(ingress: &Ingress) -> Vec<Target> {
    let entries = ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    balancer_targets(
        entries
            .iter()
            .map(|i| (i.ip.as_deref(), i.hostname.as_deref())),
    )
}

/// Load balancer entries as (`ip`, `hostname`): the IP when one parses, else the host name.
fn balancer_targets<'a>(
    entries: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> Vec<Target> {
    entries
        .filter_map(|(ip, host)| match ip.and_then(|ip| ip.parse().ok()) {
            Some(ip) => Some(Target::Address(ip)),
            None => host.and_then(host_target),
        })
        .collect()
}

/// A host name as status reports it, lower-cased and without a trailing dot; `None` for
/// an empty one.
fn host_target(host: &str) -> Option<Target> {
    let host = host.trim_end_matches('.');
    (!host.is_empty()).then(|| Target::Host(host.to_ascii_lowercase()))
}

/// The Node's first address of `kind`, if it has one that parses.
pub fn node_address(node: &Node, kind: NodeAddressType) -> Option<IpAddr> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == kind.as_str())
        .find_map(|a| a.address.parse().ok())
}

/// Whether the node carries every label of `selector`.
pub fn node_matches(node: &Node, selector: &BTreeMap<String, String>) -> bool {
    let labels = node.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// What one endpoint probes: an address, or a host name resolved at each probe round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An IP address, probed and published as it is.
    Address(IpAddr),
    /// A host name (a cloud load balancer's), probed at the addresses it resolves to.
    Host(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Address(a) => a.fmt(f),
            Target::Host(h) => f.write_str(h),
        }
    }
}

/// One discovered target and the source (index in `spec.endpoints`) that found it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Found {
    pub(super) address: Target,
    pub(super) source: usize,
}

/// What the sources yielded.
#[derive(Debug, Default)]
pub(super) struct Discovered {
    /// Every address the sources yield (the first source to find an address keeps it).
    pub(super) found: Vec<Found>,
    /// What found nothing (yet).
    pub(super) missing: Vec<String>,
    /// Each malformed source or address, located: the well-formed sources are still
    /// discovered, so the rest of the resource is judged in the same round.
    pub(super) errors: Vec<String>,
}

/// Every source of `resource`, each one's problems said apart.
pub(super) fn discover(resource: &DNSFailover, namespace: &str, world: &dyn Lookup) -> Discovered {
    let mut out = Discovered::default();
    if resource.spec.endpoints.is_empty() {
        out.errors
            .push("spec.endpoints: name at least one source of gateways".into());
    }
    for (i, source) in resource.spec.endpoints.iter().enumerate() {
        let addresses = match source_addresses(source, i, namespace, world, &mut out.missing) {
            Ok(addresses) => addresses,
            Err(mut errors) => {
                out.errors.append(&mut errors);
                continue;
            }
        };
        for address in addresses {
            if !out.found.iter().any(|f| f.address == address) {
                out.found.push(Found { address, source: i });
            }
        }
    }
    out
}

fn source_addresses(
    source: &EndpointSource,
    i: usize,
    namespace: &str,
    world: &dyn Lookup,
    missing: &mut Vec<String>,
) -> Result<Vec<Target>, Vec<String>> {
    let set = [
        !source.addresses.is_empty(),
        !source.hosts.is_empty(),
        source.gateway.is_some(),
        source.ingress.is_some(),
        source.service.is_some(),
        source.nodes.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err(vec![format!(
            "spec.endpoints[{i}]: set exactly one of addresses, hosts, gateway, ingress, service or nodes"
        )]);
    }
    let mut none = |what: String| {
        missing.push(what);
        Vec::new()
    };
    if !source.hosts.is_empty() {
        // Checked as the config checks an endpoint's host name, where its path is told.
        let host = |h: &String| Target::Host(h.trim_end_matches('.').to_ascii_lowercase());
        return Ok(source.hosts.iter().map(host).collect());
    }
    let addresses = if let Some(reference) = &source.gateway {
        let (gateway_ns, name) = reference.split_once('/').unwrap_or((namespace, reference));
        match world.gateway(gateway_ns, name) {
            None => none(format!("Gateway \"{reference}\" not found")),
            Some(g) if gateway_ns != namespace && !g.open_to_all_namespaces => {
                return Err(vec![format!("spec.endpoints[{i}].gateway: Gateway \"{reference}\" takes routes only from its own namespace (no listener has allowedRoutes.namespaces.from: All), so namespace {namespace} may not publish at its addresses")]);
            }
            Some(g) if g.addresses.is_empty() => none(format!(
                "Gateway \"{reference}\" has no IPAddress or Hostname in its status yet"
            )),
            Some(g) => g.addresses,
        }
    } else if let Some(name) = &source.ingress {
        match world.ingress(namespace, name) {
            None => none(format!("Ingress \"{name}\" not found")),
            Some(a) if a.is_empty() => none(format!(
                "Ingress \"{name}\" has no load balancer IP or host name in its status yet"
            )),
            Some(a) => a,
        }
    } else if let Some(name) = &source.service {
        match world.service(namespace, name) {
            None => none(format!("Service \"{name}\" not found")),
            Some(a) if a.is_empty() => none(format!(
                "Service \"{name}\" has no load balancer ingress IP or host name yet"
            )),
            Some(a) => a,
        }
    } else if let Some(selector) = &source.nodes {
        let nodes = world.nodes(selector, source.node_address.unwrap_or_default());
        if nodes.is_empty() {
            none(format!(
                "no Node matches spec.endpoints[{i}].nodes with an {} address",
                source.node_address.unwrap_or_default().as_str()
            ))
        } else {
            nodes.into_iter().map(|(_, a)| Target::Address(a)).collect()
        }
    } else {
        return static_addresses(&source.addresses, i);
    };
    Ok(addresses)
}

/// Source `i`'s static `addresses`; each that is no IP address said at its path.
fn static_addresses(addresses: &[String], i: usize) -> Result<Vec<Target>, Vec<String>> {
    let (mut parsed, mut errors) = (Vec::new(), Vec::new());
    for (j, a) in addresses.iter().enumerate() {
        match a.parse() {
            Ok(address) => parsed.push(Target::Address(address)),
            Err(_) => errors.push(format!("spec.endpoints[{i}].addresses[{j}]: \"{a}\" is not an IP address (a load balancer's host name goes under hosts)")),
        }
    }
    match errors.is_empty() {
        true => Ok(parsed),
        false => Err(errors),
    }
}
