//! The DNS back ends ("sinks"). Each implements [`ho_engine::sink::Sink`]: make the back end
//! match a tenant's full desired state. Coalescing, rate limits, retries, reconcile and
//! status live in the engine's sink actor, so a sink here is only the write.
//!
//! Kinds are registered in [`registry`] (one line each); each kind's folder holds its
//! settings and checks (`config.rs`) and its writer.
//!
//! | kind | module |
//! |---|---|
//! | `hosts_file` | [`hosts_file`] |
//! | `powerdns` | [`powerdns`] |
//! | `webhook` | [`webhook`] |
//! | `coredns_configmap` | [`coredns_configmap`] |
//! | `route53` | [`route53`] |
//! | `dns_server` | [`dns_server`] |
//! | `rfc2136` | [`rfc2136`] |

pub mod azure;
pub mod bearer;
pub mod cloudflare;
pub mod coredns_configmap;
pub mod dns_server;
pub mod geo_fallback;
pub mod google;
pub mod hosts_file;
pub mod hosts_format;
pub mod http;
pub mod ownership;
pub mod powerdns;
pub mod registry;
pub mod rfc2136;
pub mod rounds;
pub mod route53;
pub mod schema;
pub mod secret;
pub mod webhook;

pub use registry::{load_plan, preflight, Sinks, CATALOG};
