//! `kind = "dns_server"`: the settings and the checks of what they say by themselves (the
//! kind's checks that reach a part, its build and capabilities: [`kind`](super::kind)).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use ho_config::names::normalize_domain;
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::Problems;

mod checks;

use checks::{check_rate_limit, check_reports, check_transfer, check_xdp, checked_networks};

/// An authoritative DNS server inside this process: it answers the tenants' domains from
/// the published set the moment a snapshot arrives, with no file, ConfigMap or reload in
/// between, and answers per query (rotation, weights, location).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsServerConfig {
    /// Addresses to answer on, UDP and TCP on each (e.g. `"0.0.0.0:53"`, `"[::]:53"`).
    pub listen: Vec<SocketAddr>,
    /// Apexes this server is authoritative for; every domain of its tenants must be inside
    /// one. Normalised when parsed (lower case, no trailing dot).
    pub zones: Vec<String>,
    /// The zones' SOA fields; the serial is the server's own (it rises with every change).
    #[serde(default)]
    pub soa: SoaConfig,
    /// Name servers of the zones (NS records at the apex); default: the SOA's `mname`.
    #[serde(default)]
    pub nameservers: Vec<String>,
    /// `weighted` tenants: addresses in each answer, each picked by weight.
    #[serde(default = "one")]
    pub answers: usize,
    /// `geo` tenants: how a client's address maps to a location.
    #[serde(default)]
    pub geo: GeoConfig,
    /// Largest UDP answer this server sends (EDNS); bigger answers are truncated (TC) so the
    /// client retries over TCP. 1232 avoids IP fragmentation (DNS flag day 2020).
    #[serde(default = "default_udp_payload")]
    pub max_udp_payload: u16,
    /// Response rate limiting over UDP, off unless given: a server answering the internet
    /// needs it, or spoofed queries make it a reflector aimed at their victim.
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
    /// DNS cookies (RFC 7873, RFC 9018), always answered; a client that returns the server
    /// cookie it was given is exempt from `rate_limit`.
    #[serde(default)]
    pub cookies: CookiesConfig,
    /// DNSSEC online signing, off unless given: a zone delegated from a signed parent
    /// with a DS record must be signed.
    #[serde(default)]
    pub dnssec: Option<DnssecConfig>,
    /// Zone transfers to secondaries (AXFR, IXFR, NOTIFY), off unless given.
    #[serde(default)]
    pub transfer: Option<TransferConfig>,
    /// `[multi_cluster]` with no provider in between: this server holds this cluster's
    /// vote reports and reads its peers' from their servers, so clusters that are
    /// themselves the zone's name servers can vote. Off unless given.
    #[serde(default)]
    pub reports: Option<ReportsConfig>,
    /// ACME DNS-01 challenges: RFC 2136 updates signed with `tsig`, limited to TXT at
    /// `_acme-challenge.NAME` of names this server serves (cert-manager's `rfc2136`
    /// solver). Off unless given: updates are then not implemented (NOTIMP).
    #[serde(default)]
    pub acme: Option<AcmeConfig>,
    /// Static records served in the zones beside the tenants' names, as RFC 1035 zone-file
    /// text (names relative to the first zone; `$ORIGIN` for the others): the name
    /// servers' addresses, MX, TXT, CAA, SRV, CNAME. Signed and transferred with the rest;
    /// one at a tenant's name that would change its answer is a config error.
    #[serde(default)]
    pub static_records: Option<String>,
    /// UDP queries to `listen` taken straight from the network card's receive queues
    /// (AF_XDP) and answered before the kernel's IP and UDP layers, off unless given: for
    /// servers answering more queries than the socket path affords. Linux only; needs
    /// `CAP_NET_ADMIN`, `CAP_NET_RAW` and `CAP_BPF` (or root), and no other XDP program
    /// on the interface. Read at start; a reload keeps what started.
    #[serde(default)]
    pub xdp: Option<XdpConfig>,
}

/// `xdp = { interface = "eth0" }`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct XdpConfig {
    /// The interface the clients' queries arrive on (the one holding the `listen`
    /// addresses); one AF_XDP socket and thread serve each of its receive queues.
    pub interface: String,
}

/// `acme = { tsig = { name = "acme", algorithm = "hmac-sha256", secret_file = "..." } }`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcmeConfig {
    /// The key challenge updates must be signed with (the same shape as the `rfc2136`
    /// sink's).
    pub tsig: crate::wire::key::TsigConfig,
}

/// `reports = { peers = ["198.51.100.53:53"], tsig = { ... } }`: the other clusters'
/// `dns_server` listeners, asked over TCP for their reports each round with queries
/// signed by `tsig`; this server answers theirs only when signed with the same key.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportsConfig {
    /// Every other cluster's server (address and port); each is asked for its own
    /// cluster's reports.
    pub peers: Vec<SocketAddr>,
    /// The key every cluster signs report queries and answers with (the same shape as
    /// the `rfc2136` sink's): a report is a vote, so only a key holder may read or
    /// pose as one.
    pub tsig: crate::wire::key::TsigConfig,
    /// How long one peer may take to answer a round's queries; a peer that does not
    /// keeps counting with its last report until that ages out (`report_ttl`).
    #[serde(default = "default_report_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: std::time::Duration,
}

fn default_report_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(1)
}

/// `transfer = { notify = ["192.0.2.53:53"], allow = ["192.0.2.53/32"], tsig = { ... } }`:
/// secondaries in `allow` (and signing with `tsig`, when given) may transfer the zones
/// over TCP; `notify` ones are told of every change.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferConfig {
    /// Secondaries sent a NOTIFY (UDP) whenever a zone's content changes, so they
    /// transfer it at once rather than at their next SOA refresh.
    #[serde(default)]
    pub notify: Vec<SocketAddr>,
    /// Networks allowed to transfer (e.g. `["192.0.2.53/32"]`); others are REFUSED.
    pub allow: Vec<String>,
    /// The key transfers (and the secondaries' SOA checks) must be signed with; the same
    /// shape as the `rfc2136` sink's. Without it, `allow` alone decides.
    #[serde(default)]
    pub tsig: Option<crate::wire::key::TsigConfig>,
}

/// `dnssec = { keys = "/etc/health-orchestrator/dnssec" }`: sign every answer with the
/// keys in that directory.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnssecConfig {
    /// Directory of key files in BIND's format (`K<zone>.+<alg>+<tag>.key` and
    /// `.private`), as `health-orchestrator dnssec keygen` or BIND's `dnssec-keygen`
    /// write them. Every zone needs a key that signs; files added or changed later are
    /// read within 10 seconds, and key times (`Publish`, `Activate`, `Inactive`,
    /// `Delete`) take effect at their second: the way keys roll over.
    pub keys: PathBuf,
    /// TTL of the DNSKEY records, seconds (also how long a rollover waits between steps).
    #[serde(default = "default_dnskey_ttl")]
    pub dnskey_ttl: u32,
}

fn default_dnskey_ttl() -> u32 {
    3600
}

/// `cookies = { secret_file = "/run/secrets/dns-cookie" }`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CookiesConfig {
    /// File holding the server secret, 32 hex digits (128 bits, as BIND's `cookie-secret`):
    /// give every replica behind one name the same file so each accepts the others'
    /// cookies. Default: a secret drawn at start (cookies then last one process).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Files of secrets accepted but never used to make a cookie, for a rollover: add the
    /// new secret here on every replica, then make it `secret_file` with the old one here,
    /// and drop the old one an hour later (cookies live an hour).
    #[serde(default)]
    pub accepted_secret_files: Vec<PathBuf>,
}

/// `rate_limit = { responses_per_second = 20 }`: at most that many identical answers (same
/// name, type, response code) per second to one client network, after a burst of as
/// many; past that, answers are dropped, every `slip`-th sent truncated so a real client
/// retries over TCP (never limited).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Identical answers per second to one client network (BIND's `responses-per-second`).
    pub responses_per_second: u32,
    /// Every `slip`-th limited answer is sent truncated (TC) instead of dropped; 0 drops
    /// all, 1 truncates all. Default 2, as BIND and Knot.
    #[serde(default = "default_slip")]
    pub slip: u32,
    /// IPv4 clients in one network of this prefix length share an account (default 24).
    #[serde(default = "default_ipv4_prefix")]
    pub ipv4_prefix: u8,
    /// IPv6 clients in one network of this prefix length share an account (default 56).
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Client networks never limited (your own resolvers, monitoring), e.g. `["10.0.0.0/8"]`.
    #[serde(default)]
    pub exempt: Vec<String>,
}

fn default_slip() -> u32 {
    2
}

fn default_ipv4_prefix() -> u8 {
    24
}

fn default_ipv6_prefix() -> u8 {
    56
}

/// SOA fields of every zone of a `dns_server` sink.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoaConfig {
    /// Primary name server; default `ns1.<zone>`.
    #[serde(default)]
    pub mname: Option<String>,
    /// Responsible mailbox as a name; default `hostmaster.<zone>`.
    #[serde(default)]
    pub rname: Option<String>,
    /// Seconds secondaries wait between refreshes.
    #[serde(default = "default_refresh")]
    pub refresh: u32,
    /// Seconds before a failed refresh is retried.
    #[serde(default = "default_retry")]
    pub retry: u32,
    /// Seconds after which secondaries stop answering without a refresh.
    #[serde(default = "default_expire")]
    pub expire: u32,
    /// Negative-caching TTL in seconds (how long resolvers remember NXDOMAIN and NODATA);
    /// short, so a name that appears is answered soon.
    #[serde(default = "default_minimum")]
    pub minimum: u32,
}

impl Default for SoaConfig {
    fn default() -> Self {
        SoaConfig {
            mname: None,
            rname: None,
            refresh: default_refresh(),
            retry: default_retry(),
            expire: default_expire(),
            minimum: default_minimum(),
        }
    }
}

/// Where `geo` answers get a client's location: first `networks` (longest prefix wins),
/// then the database, else the tenant's `default_geo`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeoConfig {
    /// Client networks and their location (ISO country code, as in endpoints'
    /// `labels.geo`), e.g. `{ "10.1.0.0/16" = "IE" }`.
    #[serde(default)]
    pub networks: BTreeMap<String, String>,
    /// A MaxMind-format database (GeoLite2-Country, GeoIP2-Country or City); its country
    /// ISO code is the location.
    #[serde(default)]
    pub geoip_db: Option<PathBuf>,
}

fn one() -> usize {
    1
}
fn default_udp_payload() -> u16 {
    1232
}
fn default_refresh() -> u32 {
    3600
}
fn default_retry() -> u32 {
    600
}
fn default_expire() -> u32 {
    604_800
}
fn default_minimum() -> u32 {
    5
}

impl DnsServerConfig {
    /// The checks of what the settings say by themselves, normalising in place: addresses,
    /// names, sizes, networks, rate limiting, transfers and the ACME key.
    pub(super) fn check_fields(&mut self, p: &mut Problems<'_>) {
        if self.listen.is_empty() {
            p.at("listen", "must list at least one address");
        }
        let mut seen = std::collections::HashSet::new();
        for a in &self.listen {
            if !seen.insert(a) {
                p.at("listen", format!("{a} is listed twice"));
            }
        }
        self.check_names(p);
        if self.answers == 0 {
            p.at("answers", "must be at least 1");
        }
        if self.max_udp_payload < 512 {
            p.at("max_udp_payload", "must be at least 512 (the DNS minimum)");
        }
        self.geo.networks = checked_networks(std::mem::take(&mut self.geo.networks), p);
        if let Some(limit) = &self.rate_limit {
            check_rate_limit(limit, p);
        }
        if let Some(transfer) = &mut self.transfer {
            check_transfer(transfer, p);
        }
        if let Some(acme) = &mut self.acme {
            acme.tsig.check("acme.tsig", p);
        }
    }

    /// The checks of what must agree with `listen`: the reports' peers and the XDP path.
    pub(super) fn check_against_listen(&mut self, p: &mut Problems<'_>) {
        if let Some(reports) = &mut self.reports {
            check_reports(reports, &self.listen, p);
        }
        if let Some(xdp) = &self.xdp {
            check_xdp(xdp, &self.listen, p);
        }
    }

    /// The zones and the SOA and NS names, normalised; a name that is not one is said.
    fn check_names(&mut self, p: &mut Problems<'_>) {
        if self.zones.is_empty() {
            p.at("zones", "must list at least one zone");
        }
        for (i, zone) in self.zones.iter_mut().enumerate() {
            match normalize_domain(zone) {
                Ok(z) => *zone = z,
                Err(e) => {
                    p.at(&format!("zones[{i}]"), e);
                    zone.clear();
                }
            }
        }
        for (field, name) in [
            ("soa.mname", &mut self.soa.mname),
            ("soa.rname", &mut self.soa.rname),
        ] {
            if let Some(n) = name {
                match normalize_domain(n) {
                    Ok(v) => *n = v,
                    Err(e) => p.at(field, e),
                }
            }
        }
        for (i, ns) in self.nameservers.iter_mut().enumerate() {
            match normalize_domain(ns) {
                Ok(v) => *ns = v,
                Err(e) => p.at(&format!("nameservers[{i}]"), e),
            }
        }
    }
}
