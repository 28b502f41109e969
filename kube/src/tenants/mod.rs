//! Tenants as namespaced resources: [`resource`] (the `DNSFailover` kind and its status),
//! [`discover`] (gateways' addresses from Gateways, Services and Nodes), [`admit`] (which
//! resources become tenants, on top of the config files), [`status`] (what a team reads in
//! `kubectl get`), [`watch`] (the reflectors) and [`controller`] (rounds, statuses and
//! finalizers).

pub mod admit;
pub mod controller;
pub mod crd;
pub mod discover;
pub mod kuadrant;
pub mod resource;
pub mod status;
mod status_writer;
pub mod watch;

#[cfg(test)]
mod admit_tests;
