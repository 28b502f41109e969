//! Gateways to probe, shared by the demo, the integration tests and the load test: real
//! HTTP(S) listeners on loopback whose behaviour can be switched at run time (healthy,
//! failing status, refusing, hanging, resetting), one per address ([`Gateway`]) or many
//! behind one listener ([`SharedFarm`]); and, with the `kube-api` feature, a Kubernetes API
//! test server ([`kube_api`]) for the tests and the load test; with `cloud-api`, test
//! servers of the Cloudflare, Google Cloud DNS and Azure DNS APIs ([`cloud`]) for the tests
//! and the rehearsals. Probing these instead of mocks is what makes the
//! tests' failures the ones production sees.

#[cfg(feature = "cloud-api")]
pub mod cloud;
mod gateway;
#[cfg(feature = "kube-api")]
pub mod kube_api;
mod serve;
mod shared_farm;

pub use gateway::{endpoints_toml, endpoints_toml_at, Behaviour, Gateway};
pub use serve::serve_http;
pub use shared_farm::SharedFarm;
