//! Everything that talks to a Kubernetes API server, in one place: how to connect
//! ([`client`]), which replica writes shared back ends ([`lease`]: Lease leader election)
//! and which cluster this is ([`cluster_id`]). The ConfigMap sink and the binary use it;
//! the engine knows none of it (it sees only the writer fence, `ho_engine::leadership`).

pub mod client;
pub mod cluster_id;
pub mod lease;
pub mod tenants;
