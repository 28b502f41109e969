//! Tenants as namespaced resources: [`resource`] (the `DNSFailover` kind and its status,
//! defined in ho-import, which makes them of other systems' resources; [`field_names`] its
//! spelling of the config's keys), [`discover`] (gateways' addresses from Gateways, Services and Nodes), [`admit`] (which
//! resources become tenants, on top of the config files; a refused edit falls back on
//! `last_accepted`), [`status`] (what a team reads in
//! `kubectl get`), [`watch`] (the reflectors), [`controller`] (rounds, statuses and
//! finalizers), [`crd`] (the CustomResourceDefinition) and [`kuadrant`] (Kuadrant's
//! resources, live).

pub mod admit;
mod claims;
pub mod controller;
pub mod crd;
pub mod discover;
pub mod kuadrant;
mod last_accepted;
pub mod status;
mod status_writer;
pub mod watch;

pub use ho_import::{field_names, resource};

#[cfg(test)]
mod admit_tests;
#[cfg(test)]
mod host_sources_tests;
#[cfg(test)]
mod last_accepted_tests;
