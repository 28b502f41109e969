//! The DNS server as the fuzz targets see it (`fuzz/fuzz_targets/dns_respond.rs`): one zone
//! with a published name, response rate limiting and cookies on, answering raw bytes through
//! the same [`respond`] the sockets and the XDP path use, at one instant so that rate
//! limiting is deterministic within a run. Built only with the `fuzzing` feature.

use std::net::IpAddr;
use std::time::Instant;

use ho_config::RoutingPolicy;
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

use super::answer::Authority;
use super::build;
use super::config::{DnsServerConfig, RateLimitConfig, SoaConfig};
use super::metrics::ServerMetrics;
use super::records::Records;
use super::transport::{respond, Tally};

/// Identical answers a client network gets per second before rate limiting drops or
/// truncates them.
pub const RESPONSES_PER_SECOND: u32 = 5;

/// The largest UDP answer the server sends whatever a client offers.
pub const MAX_UDP_PAYLOAD: u16 = 1232;

/// The zone served.
pub const ZONE: &str = "example.org";

/// A server with one tenant published (`api.example.org`, `www.example.org`: two IPv4 and
/// one IPv6 address).
pub struct Responder {
    authority: Authority,
    metrics: ServerMetrics,
    arrived: Instant,
}

/// What one query got.
pub struct Answer {
    /// The bytes sent.
    pub bytes: Vec<u8>,
    /// The query carried a valid server cookie (rate limiting does not apply).
    pub proven_client: bool,
}

impl Responder {
    /// The server, rate limiting at [`RESPONSES_PER_SECOND`] with every second limited
    /// answer truncated, cookies with a fixed secret.
    pub fn new() -> Responder {
        let config = DnsServerConfig {
            listen: vec!["127.0.0.1:0".parse().expect("an address")],
            zones: vec![ZONE.into()],
            soa: SoaConfig::default(),
            nameservers: Vec::new(),
            answers: 2,
            geo: Default::default(),
            max_udp_payload: MAX_UDP_PAYLOAD,
            rate_limit: Some(RateLimitConfig {
                responses_per_second: RESPONSES_PER_SECOND,
                slip: 2,
                ipv4_prefix: 24,
                ipv6_prefix: 56,
                exempt: Vec::new(),
            }),
            cookies: Default::default(),
            dnssec: None,
            transfer: None,
            reports: None,
            acme: None,
            static_records: None,
            xdp: None,
        };
        let mut records = Records::default();
        let snapshot = TenantSnapshot::healthy(
            "t",
            &["api.example.org", "www.example.org"],
            RoutingPolicy::All,
            ["192.0.2.1", "192.0.2.2", "2001:db8::1"]
                .iter()
                .map(|a| PublishedAddress::of(a, a.parse().expect("an address"), 1, [].into()))
                .collect(),
        );
        records.publish(&snapshot);
        Responder {
            authority: build::authority(&config, records).expect("a valid server"),
            metrics: ServerMetrics::default(),
            arrived: Instant::now(),
        }
    }

    /// The answer to `request` from `client` over UDP, if one is sent.
    pub fn respond(&self, request: &[u8], client: IpAddr) -> Option<Answer> {
        let mut tally = Tally::new(&self.metrics);
        let reply = respond(&self.authority, &mut tally, request, client, self.arrived)?;
        Some(Answer {
            proven_client: reply.proven_client,
            bytes: reply.bytes,
        })
    }
}

impl Default for Responder {
    fn default() -> Responder {
        Responder::new()
    }
}
