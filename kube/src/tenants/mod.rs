//! Tenants as namespaced resources: [`resource`] (the `DNSFailover` kind and its status),
//! [`discover`] (gateways' addresses from Gateways, Services and Nodes), [`admit`] (which
//! resources become tenants, on top of the config files).

pub mod admit;
pub mod discover;
pub mod resource;

#[cfg(test)]
mod admit_tests;
