//! Everything that talks to a Kubernetes API server, in one place, and to the binary behind
//! one facade ([`Cluster`]: connect, share the operator state, join, leave): how to connect
//! ([`client`]), which replica writes shared back ends ([`lease`]: Lease leader election), who shares
//! the probing ([`ring_leases`]: a Lease per replica),
//! which cluster this is ([`cluster_id`]), what operators set and the state files replicas
//! share ([`operator_state`], [`shared_files`]), tenants as resources ([`tenants`]: DNSFailover and
//! Kuadrant's, admitted, watched, given status) and the sink kinds that write Kubernetes
//! objects: `coredns_configmap` ([`CorednsConfigMapConfig`]) and `dns_endpoint`
//! ([`DnsEndpointConfig`], external-dns's DNSEndpoints). The engine knows none of it (it sees only the writer fence,
//! `ho_engine::leadership`, and the sink contract).

mod api_error;
pub mod client;
mod cluster;
pub mod cluster_id;
mod coredns_configmap;
mod dns_endpoint;
pub mod lease;
pub mod operator_state;
pub mod ring_leases;
pub mod shared_files;
pub mod tenants;

pub use cluster::{Cluster, ClusterError, Joined, Leaving, Tenants};
pub use coredns_configmap::config::CorednsConfigMapConfig;
pub use dns_endpoint::config::DnsEndpointConfig;
pub use dns_endpoint::DnsEndpointSink;
