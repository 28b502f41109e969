//! A configured endpoint as the plan holds it: one per endpoint for the life of the
//! process, so it is laid out for what a typical endpoint sets (a name, an address, a
//! check). What few endpoints set (labels, a cluster, a host name, further checks) lives
//! out of line in one allocation only they pay for.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::Composite;

/// A configured endpoint bound to its target.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Unique name; shared, so whatever keeps it per endpoint can hold the same allocation.
    pub name: Arc<str>,
    /// Address published in DNS.
    pub address: IpAddr,
    /// Weight for weighted routing as set on the endpoint (`None`: the tenant's
    /// `default_weight`, else 1; see `ho_engine::selection::weight_of`).
    pub weight: Option<u32>,
    /// Failover tier (default 0).
    pub priority: u32,
    /// After a failure, held out until an operator releases it.
    pub hold_failback: bool,
    /// Index into [`Plan::targets`](super::Plan::targets): its `check`. A `u32`, as a
    /// plan never has 2^32 targets (each is an allocation of its own).
    target: u32,
    /// `None` when every field of [`EndpointExtras`] is empty.
    extras: Option<Box<EndpointExtras>>,
}

/// What an endpoint rarely sets, each empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointExtras {
    /// Labels for selectors and policies.
    pub labels: BTreeMap<String, String>,
    /// The cluster owning it; `None`: this instance's.
    pub cluster: Option<String>,
    /// The host name it was resolved from (`<name>@<address>` of a
    /// [`HostEndpoint`](super::HostEndpoint)): what a tenant answering `cname` publishes.
    pub host: Option<String>,
    /// Its further checks and how they combine with `target`'s (`checks`); `None`: one check.
    pub composite: Option<Composite>,
}

/// A target index as an endpoint keeps it.
fn narrow(target: usize) -> u32 {
    u32::try_from(target).expect("a plan has fewer than 2^32 targets")
}

/// Labels of an endpoint without any.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl Endpoint {
    /// An endpoint probed at `address` with the check of target `target`, of priority 0,
    /// without weight, hold, or any of [`EndpointExtras`].
    ///
    /// # Panics
    ///
    /// When `target` is not below 2^32, which no plan reaches.
    pub fn new(name: impl Into<Arc<str>>, address: IpAddr, target: usize) -> Endpoint {
        Endpoint {
            name: name.into(),
            address,
            weight: None,
            priority: 0,
            hold_failback: false,
            target: narrow(target),
            extras: None,
        }
    }

    /// Binds the endpoint to target `target` instead.
    ///
    /// # Panics
    ///
    /// When `target` is not below 2^32, which no plan reaches.
    pub fn set_target(&mut self, target: usize) {
        self.target = narrow(target);
    }

    /// This endpoint with `extras` instead of its own; empty ones take no allocation.
    pub fn with_extras(mut self, extras: EndpointExtras) -> Endpoint {
        self.extras = (extras != EndpointExtras::default()).then(|| Box::new(extras));
        self
    }

    /// Index into [`Plan::targets`](super::Plan::targets): its `check`.
    pub fn target(&self) -> usize {
        self.target as usize
    }

    /// Labels for selectors and policies.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        self.extras.as_ref().map_or(&NO_LABELS, |x| &x.labels)
    }

    /// The cluster owning it; `None`: this instance's.
    pub fn cluster(&self) -> Option<&str> {
        self.extras.as_ref()?.cluster.as_deref()
    }

    /// The host name it was resolved from: what a tenant answering `cname` publishes.
    pub fn host(&self) -> Option<&str> {
        self.extras.as_ref()?.host.as_deref()
    }

    /// Its further checks and how they combine with `target`'s; `None`: one check.
    pub fn composite(&self) -> Option<&Composite> {
        self.extras.as_ref()?.composite.as_ref()
    }

    /// Every target the endpoint is judged by: `target`, then the composite's, each once.
    pub fn targets(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.target()).chain(
            self.composite()
                .into_iter()
                .flat_map(|c| c.also.iter().copied()),
        )
    }
}

/// The fields in the order and form of the endpoint as one flat record, which is what the
/// serialized plan shows whatever the in-memory layout.
#[derive(Serialize)]
#[serde(rename = "Endpoint")]
struct Flat<'a> {
    name: &'a str,
    address: IpAddr,
    labels: &'a BTreeMap<String, String>,
    weight: Option<u32>,
    priority: u32,
    cluster: Option<&'a str>,
    hold_failback: bool,
    host: Option<&'a str>,
    target: usize,
    composite: Option<&'a Composite>,
}

impl Serialize for Endpoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Flat {
            name: &self.name,
            address: self.address,
            labels: self.labels(),
            weight: self.weight,
            priority: self.priority,
            cluster: self.cluster(),
            hold_failback: self.hold_failback,
            host: self.host(),
            target: self.target(),
            composite: self.composite(),
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
mod tests;
