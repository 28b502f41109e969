//! `[defaults.check]` and an endpoint's `check`: every field optional, merged field by
//! field (endpoint wins), and flap damping.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The protocol a health check speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// HTTP/1.1 GET, healthy when the status is expected (and the body matches, if asked).
    Http,
    /// Like `http`, over TLS.
    Https,
    /// Healthy when a TCP connection is accepted within the timeout.
    Tcp,
}

/// A health check, every field optional so that `[defaults.check]` and an endpoint's `check`
/// can each set a few fields and be merged field by field (endpoint wins).
///
/// Each field names the check kinds that read it in its schema (`x-kinds`: `"all"` or a
/// list): validation refuses a field an endpoint sets for a kind that ignores it from that
/// tag ([`crate::validate::check_fields`]), and a test refuses a field without one, so a new field
/// or kind cannot be forgotten there.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckOverrides {
    /// `http`, `https` or `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub kind: Option<CheckKind>,
    /// TCP port on the endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub port: Option<u16>,
    /// HTTP request path (http/https only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub path: Option<String>,
    /// Time between two scheduled probes of a settled endpoint.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    #[schemars(extend("x-kinds" = "all"))]
    pub interval: Option<Duration>,
    /// Hard deadline over the whole probe (connect + TLS + request + body). Must be shorter
    /// than `interval` so probes of one target never overlap. Default: 500 ms, or 0.8 x
    /// `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    #[schemars(extend("x-kinds" = "all"))]
    pub timeout: Option<Duration>,
    /// Consecutive successes that turn a down (or unknown) endpoint up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub rise: Option<u32>,
    /// Consecutive failures that turn an up (or unknown) endpoint down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub fall: Option<u32>,
    /// Re-check delay while a result disagrees with the current state, so a verdict settles
    /// in `interval + (fall-1)·fast_interval` instead of `fall·interval`. Default: 100 ms,
    /// or `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    #[schemars(extend("x-kinds" = "all"))]
    pub fast_interval: Option<Duration>,
    /// HTTP status codes that count as healthy: codes and ranges (`[200, "300-399"]`,
    /// Kuadrant's probes accept 200 and 201), expanded into codes when read.
    #[serde(
        default,
        deserialize_with = "status_codes",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<Vec<StatusEntry>>")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub expect_status: Option<Vec<u16>>,
    /// `Host` header, and the TLS server name for https (default: the endpoint's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub host: Option<String>,
    /// Extra request headers, e.g. an auth token the health endpoint wants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request headers whose values are read from files (a mounted Secret), at load and at
    /// every reload: `{ Authorization = "/run/secrets/probe-token" }`. The values are never
    /// logged or shown; only the file names are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub headers_from_files: Option<BTreeMap<String, PathBuf>>,
    /// https only: accept any certificate. Opt-in because it hides a broken certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["https"]))]
    pub insecure: Option<bool>,
    /// https only: PEM file of CA certificates to trust instead of the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["https"]))]
    pub ca_file: Option<PathBuf>,
    /// Healthy only if the response body contains this text (within `body_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub body_contains: Option<String>,
    /// Most body bytes read when `body_contains` is set; a larger body is judged on its prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub body_limit: Option<usize>,
    /// http/https only: keep the connection open between probes (HTTP/1.1 keep-alive, TLS
    /// session kept) instead of opening one per probe. Off by default: a reused connection
    /// does not see faults that only new connections meet (a firewall rule, a full accept
    /// queue, conntrack), so a fresh one is still opened after every failure and at least
    /// every `fresh_connection_every` probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub reuse_connection: Option<bool>,
    /// With `reuse_connection`: most probes carried by one connection (default 10), so new
    /// connections are still tested at least every `fresh_connection_every` intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = ["http", "https"]))]
    pub fresh_connection_every: Option<u32>,
    /// Flap damping: an endpoint that keeps going down and up is held out of DNS until it
    /// has been calm for a while. Off unless this table is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub damping: Option<DampingConfig>,
    /// Local address probes leave from (HAProxy's `source`): on a multi-homed host, the
    /// interface whose path to the gateways is the one to judge; the same family as the
    /// endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kinds" = "all"))]
    pub source_address: Option<IpAddr>,
}

/// `damping = { ... }`: route-flap damping as BGP does it (RFC 2439), applied to endpoint
/// verdicts. Each time the endpoint goes down its penalty grows by `penalty`; the penalty
/// halves every `half_life`. Above `suppress` the endpoint is held out of DNS (as if down)
/// until the penalty decays below `reuse`, and never longer than `max_suppress` after its
/// last flap. With the defaults the third down within about a minute holds the endpoint out.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DampingConfig {
    /// `false` turns damping off for one endpoint when `[defaults.check]` turns it on.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Time for the penalty to halve.
    #[serde(default = "default_half_life", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub half_life: Duration,
    /// Added each time the endpoint goes down.
    #[serde(default = "default_flap_penalty")]
    pub penalty: u32,
    /// Held out of DNS while the penalty is above this.
    #[serde(default = "default_suppress")]
    pub suppress: u32,
    /// Released once the penalty decays below this.
    #[serde(default = "default_reuse")]
    pub reuse: u32,
    /// Longest hold after the last flap (caps the penalty).
    #[serde(default = "default_max_suppress", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_suppress: Duration,
}

fn yes() -> bool {
    true
}

/// An `expect_status` entry as written: a code or a range (`"200-299"`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used; `status_codes` parses the entries
enum StatusEntry {
    Code(u16),
    Range(String),
}

/// `expect_status` entries: a code (`200`) or an inclusive range (`"200-299"`).
fn status_codes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u16>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Code(u16),
        Range(String),
    }
    let entries = Vec::<Entry>::deserialize(d)?;
    let mut codes = Vec::new();
    for entry in entries {
        match entry {
            Entry::Code(code) => codes.push(code),
            Entry::Range(text) => {
                let range = text
                    .split_once('-')
                    .and_then(|(a, b)| {
                        Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?))
                    })
                    .filter(|(a, b)| a <= b && *b - *a < 600);
                let Some((first, last)) = range else {
                    return Err(serde::de::Error::custom(format!(
                        "{text:?} is neither a status code nor a range like \"200-299\""
                    )));
                };
                codes.extend(first..=last);
            }
        }
    }
    Ok(Some(codes))
}

fn default_half_life() -> Duration {
    Duration::from_secs(60)
}

fn default_flap_penalty() -> u32 {
    1000
}

fn default_suppress() -> u32 {
    2000
}

fn default_reuse() -> u32 {
    750
}

fn default_max_suppress() -> Duration {
    Duration::from_secs(600)
}

impl CheckOverrides {
    /// The built-in check: the lowest configuration layer, below files and environment.
    pub fn builtin() -> CheckOverrides {
        CheckOverrides {
            kind: Some(CheckKind::Http),
            port: Some(80),
            path: Some("/".into()),
            interval: Some(Duration::from_secs(1)),
            // timeout and fast_interval follow the interval unless set: see
            // `validate::checks::required`.
            rise: Some(1),
            fall: Some(2),
            expect_status: Some(vec![200]),
            body_limit: Some(64 * 1024),
            ..CheckOverrides::default()
        }
    }

    /// Every field of `self` that is set, else the field of `base`: the endpoint-over-defaults merge.
    pub fn over(&self, base: &CheckOverrides) -> CheckOverrides {
        fn pick<T: Clone>(top: &Option<T>, base: &Option<T>) -> Option<T> {
            top.clone().or_else(|| base.clone())
        }
        CheckOverrides {
            kind: pick(&self.kind, &base.kind),
            port: pick(&self.port, &base.port),
            path: pick(&self.path, &base.path),
            interval: pick(&self.interval, &base.interval),
            timeout: pick(&self.timeout, &base.timeout),
            rise: pick(&self.rise, &base.rise),
            fall: pick(&self.fall, &base.fall),
            fast_interval: pick(&self.fast_interval, &base.fast_interval),
            expect_status: pick(&self.expect_status, &base.expect_status),
            host: pick(&self.host, &base.host),
            headers: pick(&self.headers, &base.headers),
            headers_from_files: pick(&self.headers_from_files, &base.headers_from_files),
            insecure: pick(&self.insecure, &base.insecure),
            ca_file: pick(&self.ca_file, &base.ca_file),
            body_contains: pick(&self.body_contains, &base.body_contains),
            body_limit: pick(&self.body_limit, &base.body_limit),
            reuse_connection: pick(&self.reuse_connection, &base.reuse_connection),
            fresh_connection_every: pick(
                &self.fresh_connection_every,
                &base.fresh_connection_every,
            ),
            damping: pick(&self.damping, &base.damping),
            source_address: pick(&self.source_address, &base.source_address),
        }
    }
}
