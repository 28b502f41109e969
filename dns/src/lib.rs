//! Everything that speaks DNS on the wire: the authoritative server ([`server`], sink kind
//! `dns_server`: answers, DNSSEC online signing, zone transfers, rate limiting, cookies, the
//! AF_XDP fast path) and RFC 2136 dynamic updates to a primary ([`update`], sink kind
//! `rfc2136`), which share what speaks DNS to other servers ([`wire`]: TSIG keys and
//! checks, the TCP client). It is also the engine's DNS client ([`client`]: the `dns` check
//! kind, host-name lookups, the answer canary's questions). Each kind's settings type is
//! exported here and registered in `ho-kinds`.

pub mod client;
pub mod server;
mod update;
pub mod wire;

pub use client::check::DNS_CHECK;
pub use client::Client;
pub use server::{DnsServerConfig, ServerMetrics};
pub use update::config::Rfc2136Config;
