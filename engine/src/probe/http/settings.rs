//! The `http` and `https` kinds' keys as written ([`HttpSettings`], [`HttpsSettings`]) and
//! resolved ([`HttpCheck`], [`HttpsCheck`]): what the request is and which answer counts as
//! healthy.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ho_config::{KindSettings, ResolvedCheck, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::HttpProbe;
use crate::probe::registry::{CheckSettings, Prepare, Problems, UrlError};
use crate::probe::tls::{Alpn, TlsProbe, TlsSettings};
use crate::probe::weight::{ReportedWeight, WeightSettings};
use crate::probe::{PreparedProbe, ProbeContext, ProbeError};
use crate::secret::Secret;

/// `kind = "http"`: an HTTP/1.1 GET, healthy when the status is expected (and the body
/// matches, if asked).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// HTTP request path (default `/`).
    pub path: Option<String>,
    /// HTTP status codes that count as healthy (default `[200]`): codes and ranges
    /// (`[200, "300-399"]`, Kuadrant's probes accept 200 and 201), expanded into codes when
    /// read.
    #[serde(default, deserialize_with = "status_codes")]
    #[schemars(with = "Option<Vec<StatusEntry>>")]
    pub expect_status: Option<Vec<u16>>,
    /// `Host` header, and the TLS server name for https (default: the endpoint's address);
    /// for grpc and grpcs the `:authority` and the TLS server name.
    pub host: Option<String>,
    /// Extra request headers, e.g. an auth token the health endpoint wants.
    pub headers: Option<BTreeMap<String, String>>,
    /// Request headers whose values are read from files (a mounted Secret), at load and at
    /// every reload: `{ Authorization = "/run/secrets/probe-token" }`. The values are never
    /// logged or shown; only the file names are.
    pub headers_from_files: Option<BTreeMap<String, PathBuf>>,
    /// Healthy only if the response body contains this text (within `body_limit`).
    pub body_contains: Option<String>,
    /// Most body bytes read to judge it (`body_contains`, `body_matches`, `body_json`;
    /// default 64 KiB); a larger body is judged on its prefix.
    pub body_limit: Option<usize>,
    /// Keep the connection open between probes (HTTP/1.1 keep-alive, TLS session kept)
    /// instead of opening one per probe. Off by default: a reused connection does not see
    /// faults that only new connections meet (a firewall rule, a full accept queue,
    /// conntrack), so a fresh one is still opened after every failure and at least every
    /// `fresh_connection_every` probes.
    pub reuse_connection: Option<bool>,
    /// With `reuse_connection`: most probes carried by one connection (default 10), so new
    /// connections are still tested at least every `fresh_connection_every` intervals.
    pub fresh_connection_every: Option<u32>,
    /// `GET` (default), `HEAD` (no body is read) or `POST` (with `request_body`).
    pub method: Option<String>,
    /// The body sent with `method = "POST"` (set its type with `headers`).
    pub request_body: Option<String>,
    /// Healthy only if the body (within `body_limit`) matches this regular expression
    /// (Rust `regex` syntax, no look-around; `(?i)` for case-insensitive).
    pub body_matches: Option<String>,
    /// Healthy only if the body is JSON with these values: JSON Pointer (RFC 6901) -> the
    /// value as text (`{ "/status" = "UP", "/checks/0/ok" = "true" }`); a string compares by
    /// its content, numbers, booleans and null as JSON writes them.
    pub body_json: Option<BTreeMap<String, String>>,
    /// A healthy answer that takes longer than this (connect to the end of the judged
    /// answer) is a failure, reason `slow`: F5's latency-drift rule. Must be below
    /// `timeout` to matter.
    #[serde(default, with = "humantime_serde::option")]
    #[schemars(with = "Option<String>")]
    pub max_latency: Option<Duration>,
    /// Follow up to this many redirects (301, 302, 303, 307, 308; at most 10) that stay on
    /// the endpoint (same scheme and host), judging the answer at the end. 0 by default: a
    /// redirect is judged as its status. A redirect elsewhere fails (reason `redirect`): what
    /// is probed is what is published.
    pub follow_redirects: Option<u8>,
    /// Read a weight from each healthy answer for weighted answers (PowerDNS's numeric
    /// health answers, HAProxy's agent-check): `{ from = "body" }`, `{ from = "header",
    /// name = "X-Weight" }` or `{ from = "json", name = "/weight" }`, with `min` (default 1),
    /// `max` (255) and `band` (percent it must move to count, default 10).
    pub reported_weight: Option<WeightSettings>,
}

/// `kind = "https"`: like `http`, over TLS.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct HttpsSettings {
    /// The HTTP keys.
    #[serde(flatten)]
    pub http: HttpSettings,
    /// Whom to trust.
    #[serde(flatten)]
    pub tls: TlsSettings,
}

/// An `expect_status` entry as written: a code or a range (`"200-299"`).
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum StatusEntry {
    Code(u16),
    Range(String),
}

/// `expect_status` entries: a code (`200`) or an inclusive range (`"200-299"`).
fn status_codes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u16>>, D::Error> {
    let mut codes = Vec::new();
    for entry in Vec::<StatusEntry>::deserialize(d)? {
        match entry {
            StatusEntry::Code(code) => codes.push(code),
            StatusEntry::Range(text) => {
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

/// HTTP request and the response that counts as healthy, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HttpCheck {
    /// Request path, starting with `/`.
    pub path: String,
    /// `Host` header; `None` means the address.
    pub host: Option<String>,
    /// Extra request headers (names and values already checked to be valid HTTP).
    pub headers: BTreeMap<String, String>,
    /// Headers whose values came from `headers_from_files`: shown redacted.
    pub secret_headers: BTreeMap<String, Secret>,
    /// Healthy status codes.
    pub expect_status: Vec<u16>,
    /// Required body substring.
    pub body_contains: Option<String>,
    /// Most body bytes read when `body_contains` is set, or drained to reuse a connection.
    pub body_limit: usize,
    /// Probes one connection carries: 1 opens a fresh connection per probe (the default),
    /// more is `reuse_connection` with `fresh_connection_every`.
    pub probes_per_connection: u32,
    /// `GET`, `HEAD` or `POST`.
    pub method: String,
    /// Sent with `POST`.
    pub request_body: Option<String>,
    /// A regular expression the body must match.
    pub body_matches: Option<String>,
    /// JSON Pointer -> expected value as text.
    pub body_json: BTreeMap<String, String>,
    /// Longest healthy answer.
    pub max_latency: Option<Duration>,
    /// Most redirects followed on the endpoint (0: a redirect is judged as its status).
    pub follow_redirects: u8,
    /// Where a healthy answer reports its weight, if it does.
    pub reported_weight: Option<ReportedWeight>,
}

/// An https check, resolved: the HTTP part and whom to trust.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HttpsCheck {
    /// The HTTP part.
    pub http: HttpCheck,
    /// The TLS part.
    pub tls: TlsProbe,
}

impl ResolvedCheck for HttpCheck {
    fn kind(&self) -> &'static str {
        HttpSettings::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("http://{target}{}", self.path)
    }

    fn keeps_connection(&self) -> bool {
        self.probes_per_connection > 1
    }
}

impl ResolvedCheck for HttpsCheck {
    fn kind(&self) -> &'static str {
        HttpsSettings::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("https://{target}{}", self.http.path)
    }

    fn keeps_connection(&self) -> bool {
        self.http.keeps_connection()
    }

    fn speaks_tls(&self) -> bool {
        true
    }

    fn unverified_tls(&self) -> bool {
        self.tls.trust.insecure
    }
}

impl CheckSettings for HttpSettings {
    const KIND: &'static str = "http";
    const DEFAULT_PORT: Option<u16> = Some(80);
    const URL_PORT: Option<u16> = Some(80);
    type Resolved = HttpCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<HttpCheck> {
        super::resolve::http(self, problems)
    }

    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        Ok(path_key(rest))
    }
}

impl CheckSettings for HttpsSettings {
    const KIND: &'static str = "https";
    // As documented since the first release: every kind's port defaults to 80.
    const DEFAULT_PORT: Option<u16> = Some(80);
    const URL_PORT: Option<u16> = Some(443);
    type Resolved = HttpsCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<HttpsCheck> {
        let tls = self.tls.resolve(problems);
        let http = super::resolve::http(self.http, problems)?;
        Some(HttpsCheck { http, tls })
    }

    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        Ok(path_key(rest))
    }
}

/// A `probe` URL's path (`/` when it has none).
fn path_key(rest: &str) -> KindSettings {
    let path = if rest.is_empty() { "/" } else { rest };
    KindSettings::from([("path".to_owned(), path.into())])
}

impl Prepare for HttpCheck {
    fn prepare(
        &self,
        target: &Target,
        _ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        let port = target.check.port;
        Ok(PreparedProbe::new(HttpProbe::new(self, port, None)))
    }
}

impl Prepare for HttpsCheck {
    fn prepare(
        &self,
        target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        let tls = ctx
            .tls
            .target(&self.tls, Alpn::Http1, self.http.host.as_deref())?;
        let port = target.check.port;
        Ok(PreparedProbe::new(HttpProbe::new(
            &self.http,
            port,
            Some(tls),
        )))
    }
}
