//! Past one machine: replicas share the probing. Each replica holds a Kubernetes Lease of
//! its own ([`members`]); every target is owned by `replication` of the live members by
//! rendezvous hashing ([`rendezvous`]), probed by them (with make-before-break as owners
//! change, [`handover`]) and their verdicts combined ([`combine`]).

pub mod combine;
pub mod handover;
pub mod members;
pub mod rendezvous;

#[cfg(test)]
mod simulation_tests;
