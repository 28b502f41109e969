//! Stand-ins for servers no test machine can run for real (the Kubernetes API, Route53,
//! Cloudflare's API, PowerDNS 5.1's refusals, an OTLP collector, a customer's webhook receiver) and gateways scripted byte by byte. Each
//! says in its own doc comment what it implements and where it is faithful.

pub mod gateways;
/// The Kubernetes API test server, shared with the load test (`ho_testkit::kube_api`).
pub use ho_testkit::kube_api;
pub mod otlp;
pub mod powerdns51;
pub mod route53;
pub mod webhook;

/// The cloud DNS API test servers live in the test kit, shared with the rehearsals.
pub use ho_testkit::cloud::{azure as azure_dns, cloudflare, external_dns, google as google_dns};
