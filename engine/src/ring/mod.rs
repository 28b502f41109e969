//! Past one machine: replicas share the probing. Each replica holds a Kubernetes Lease of
//! its own ([`members`]); every target is owned by `replication` of the live members by
//! rendezvous hashing ([`rendezvous`]), probed by them (with make-before-break as owners
//! change, [`handover`]) and their verdicts combined ([`combine`]).

pub(crate) mod combine;
pub(crate) mod handover;
pub mod members;
pub(crate) mod ownership;
pub mod rendezvous;
pub(crate) mod run;
pub(crate) mod stream;

#[cfg(test)]
mod simulation_tests;

/// What the binary's Kubernetes side needs to hold this replica's Lease and hand the ring's
/// listings over.
pub struct RingLink {
    /// This replica's identity (its Lease's holder).
    pub identity: String,
    /// Where each listing of the ring's Leases goes.
    pub listings: tokio::sync::mpsc::Sender<Vec<members::Sighting>>,
}
