//! The DNS back ends reached over HTTP APIs and files. Each kind implements
//! [`ho_engine::sink::Sink`]: make the back end match a tenant's full desired state.
//! Coalescing, rate limits, retries, reconcile and status live in the engine's sink actor,
//! so a sink here is only the write. Each kind's folder holds its settings and checks
//! (`config.rs`, the type exported here, registered in `ho-kinds`) and its writer.
//!
//! | kind | module |
//! |---|---|
//! | `hosts_file` | `hosts_file` |
//! | `powerdns` | `powerdns` |
//! | `webhook` | `webhook` |
//! | `route53` | `route53` |
//! | `cloudflare` | `cloudflare` |
//! | `google_cloud_dns` | `google` |
//! | `azure_dns` | `azure` |
//! | `external_dns_webhook` | `external_dns` |
//!
//! The authoritative DNS server and RFC 2136 updates are in `ho-dns`, the CoreDNS ConfigMap
//! in `ho-kube`.

mod azure;
mod bearer;
mod cloudflare;
mod external_dns;
mod google;
mod hosts_file;
pub mod http;
mod listing;
mod pace;
#[cfg(test)]
mod plan_tests;
mod powerdns;
mod retry_after;
mod rounds;
mod route53;
mod webhook;

pub use azure::config::AzureDnsConfig;
pub use azure::AzureDnsSink;
pub use cloudflare::config::CloudflareConfig;
pub use cloudflare::CloudflareSink;
pub use external_dns::config::ExternalDnsWebhookConfig;
pub use external_dns::ExternalDnsWebhookSink;
pub use google::config::GoogleCloudDnsConfig;
pub use google::GoogleCloudDnsSink;
pub use hosts_file::config::HostsFileConfig;
pub use powerdns::config::PowerDnsConfig;
pub use route53::config::Route53Config;
pub use route53::Route53Sink;
pub use webhook::config::WebhookConfig;
pub use webhook::WebhookSink;
