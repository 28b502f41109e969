//! Everything that talks to a Kubernetes API server, in one place: how to connect
//! ([`client`]), which replica writes shared back ends ([`lease`]: Lease leader election),
//! which cluster this is ([`cluster_id`]), tenants as resources ([`tenants`]: DNSFailover and
//! Kuadrant's, admitted, watched, given status) and the `coredns_configmap` sink kind
//! ([`CorednsConfigMapConfig`]). The engine knows none of it (it sees only the writer fence,
//! `ho_engine::leadership`, and the sink contract).

pub mod client;
pub mod cluster_id;
mod coredns_configmap;
pub mod lease;
pub mod operator_state;
pub mod tenants;

pub use coredns_configmap::config::CorednsConfigMapConfig;
