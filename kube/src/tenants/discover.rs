//! Gateways discovered, not typed: the addresses a Gateway, a LoadBalancer Service or a
//! Node reports in its status. Pure functions over the objects; the watchers keep them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::DynamicObject;

use super::resource::NodeAddressType;

/// What the watchers currently know, as the admission asks it.
pub trait Lookup {
    /// The `IPAddress` entries of Gateway `namespace/name`'s `status.addresses`; `None`
    /// when no such Gateway exists.
    fn gateway(&self, namespace: &str, name: &str) -> Option<Vec<IpAddr>>;
    /// The ingress IPs of Service `namespace/name`; `None` when it does not exist.
    fn service(&self, namespace: &str, name: &str) -> Option<Vec<IpAddr>>;
    /// The chosen address of every Node carrying all of `selector`'s labels, by node name.
    fn nodes(
        &self,
        selector: &BTreeMap<String, String>,
        kind: NodeAddressType,
    ) -> Vec<(String, IpAddr)>;
}

/// A Gateway's `status.addresses[]` of type `IPAddress` (the default type when unset);
/// `Hostname` entries are skipped, since what is probed must be what is published.
pub fn gateway_addresses(gateway: &DynamicObject) -> Vec<IpAddr> {
    let Some(addresses) = gateway
        .data
        .pointer("/status/addresses")
        .and_then(|a| a.as_array())
    else {
        return Vec::new();
    };
    addresses
        .iter()
        .filter(|a| {
            a.get("type")
                .and_then(|t| t.as_str())
                .is_none_or(|t| t == "IPAddress")
        })
        .filter_map(|a| a.get("value")?.as_str()?.parse().ok())
        .collect()
}

/// A Service's `status.loadBalancer.ingress[].ip` (entries with only a `hostname` are
/// skipped, as for Gateways).
pub fn service_addresses(service: &Service) -> Vec<IpAddr> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ingress| {
            ingress
                .iter()
                .filter_map(|i| i.ip.as_deref()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
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
