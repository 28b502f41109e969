//! A test server of external-dns's webhook-provider protocol, written from external-dns's
//! protocol document (docs/tutorials/webhook-provider.md) and its Go types and server
//! (`endpoint.Endpoint`, `plan.Changes`, `endpoint.DomainFilter`,
//! `provider/webhook/api/httpapi.go`, v0.22), with the validation of external-dns's own
//! in-memory provider (`provider/inmemory`) as its store. It implements:
//! - `GET /`: negotiation: the domain filter (`{"include": [...]}`, or any filter JSON the
//!   test sets, regex filters included) with `Content-Type`
//!   `application/external.dns.webhook+json;version=1`;
//! - `GET /records`: every record set;
//! - `POST /adjustendpoints`: the record sets back, with a TTL under the provider's
//!   minimum raised to it (as providers whose API has one adjust);
//! - `POST /records`: one `plan.Changes`, 204 when applied; applied whole or not at all,
//!   and refused (500, as external-dns's server answers a provider's error) when a create
//!   finds its record set, an update or delete does not, a record set appears twice in
//!   the changes, `updateOld` and `updateNew` differ in length, or a name is outside the
//!   domain filter; an undecodable body is 400.
//!
//! It is stricter than external-dns's Go server where that checks the client: `Accept`
//! must be the media type on every request (406 otherwise), `Content-Type` too on a body
//! (415), and keys must be spelled as external-dns's JSON tags spell them (Go's decoder
//! would take any case; an unknown key is 400 here).
//!
//! Not implemented: refusing names by a regex filter it serves (it refuses names outside its
//! zones only), `providerSpecific` semantics (kept as sent), `/healthz` and `/metrics` on
//! the provider's other port. The test can make it answer 503 (an outage), hold requests to
//! a rate (429 with `Retry-After` in seconds or as a date), either a bucket or at most so
//! many in any sliding second as the DNS APIs behind providers count, answer the next
//! requests 429 or 503 naming a time, and drop records behind the client's back. Every
//! request is logged as it arrived ([`Arrival`]), so a test can count them per sliding
//! second and check that none came before a time named.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::{Deserialize, Serialize};

use super::{Admit, Limit, Window};
use crate::serve_http;

/// The media type of the protocol.
pub const MEDIA_TYPE: &str = "application/external.dns.webhook+json;version=1";

/// One record set, keyed by name, type and set identifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoint {
    /// Its name.
    pub dns_name: String,
    /// Its values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Its type.
    #[serde(default)]
    pub record_type: String,
    /// Its set identifier.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub set_identifier: String,
    /// Its TTL (0: not configured).
    #[serde(rename = "recordTTL", default, skip_serializing_if = "is_zero")]
    pub record_ttl: i64,
    /// Labels, kept as sent.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub labels: serde_json::Map<String, serde_json::Value>,
    /// Provider-specific properties, kept as sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_specific: Vec<serde_json::Value>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl Endpoint {
    fn key(&self) -> (String, String, String) {
        (
            self.dns_name.trim_end_matches('.').to_ascii_lowercase(),
            self.record_type.clone(),
            self.set_identifier.clone(),
        )
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Changes {
    #[serde(default)]
    create: Vec<Endpoint>,
    #[serde(default)]
    update_old: Vec<Endpoint>,
    #[serde(default)]
    update_new: Vec<Endpoint>,
    #[serde(default)]
    delete: Vec<Endpoint>,
}

/// How a refusal names the time to come back (`Retry-After`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// Delta-seconds: `Retry-After: 2`.
    Seconds(u64),
    /// An HTTP-date this long from now, rounded up to its whole second (the form's
    /// resolution): `Retry-After: Sun, 06 Nov 1994 08:49:39 GMT`.
    Date(Duration),
}

/// The time a refusal named: on the provider's monotonic clock for seconds, on the wall
/// clock for a date (as the client reads each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Not before this instant.
    At(Instant),
    /// Not before this date.
    Date(SystemTime),
}

impl Named {
    /// Whether a request arriving as `a` came no earlier than named.
    pub fn kept_by(&self, a: &Arrival) -> bool {
        match *self {
            Named::At(at) => a.at >= at,
            Named::Date(date) => a.wall >= date,
        }
    }
}

/// One request as the provider saw it arrive, and what it answered.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// When it arrived (monotonic).
    pub at: Instant,
    /// When it arrived (wall clock).
    pub wall: SystemTime,
    /// `GET /records`, ...
    pub request: String,
    /// The status answered.
    pub status: u16,
    /// For a refusal with `Retry-After`: the time it named.
    pub named: Option<Named>,
}

/// A running test provider.
#[derive(Clone)]
pub struct ExternalDnsProvider {
    /// Its webhook URL (`http://ADDR`).
    pub url: String,
    domains: Vec<String>,
    /// What `GET /` answers.
    filter: Arc<Mutex<serde_json::Value>>,
    min_ttl: i64,
    records: Arc<Mutex<Vec<Endpoint>>>,
    down: Arc<AtomicBool>,
    limit: Arc<Mutex<Option<Arc<dyn Admit>>>>,
    /// Refusals over the limit name their time as a date.
    dates: Arc<AtomicBool>,
    /// The next requests' scripted refusals: a status and its `Retry-After`.
    script: Arc<Mutex<VecDeque<(u16, RetryAfter)>>>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    /// Requests refused (429) over the limit.
    pub refused: Arc<AtomicUsize>,
    /// `GET /records` answered.
    pub lists: Arc<AtomicUsize>,
    /// `POST /records` applied.
    pub applied: Arc<AtomicUsize>,
    /// `POST /adjustendpoints` answered.
    pub adjusts: Arc<AtomicUsize>,
}

fn answer(status: u16, content_type: Option<&str>, body: String) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::builder().status(status);
    if let Some(t) = content_type {
        r = r.header("content-type", t);
    }
    r.body(Full::new(Bytes::from(body))).unwrap()
}

fn error(status: u16, text: impl Into<String>) -> hyper::Response<Full<Bytes>> {
    answer(status, Some("text/plain; charset=utf-8"), text.into())
}

/// A refusal with `Retry-After` as `after` says, and the time it names.
fn refusal(
    status: u16,
    text: &str,
    after: RetryAfter,
) -> (hyper::Response<Full<Bytes>>, Option<Named>) {
    let (value, named) = match after {
        RetryAfter::Seconds(s) => (
            s.to_string(),
            Named::At(Instant::now() + Duration::from_secs(s)),
        ),
        RetryAfter::Date(wait) => {
            let t = (SystemTime::now() + wait)
                .duration_since(UNIX_EPOCH)
                .unwrap();
            let whole =
                UNIX_EPOCH + Duration::from_secs(t.as_secs() + u64::from(t.subsec_nanos() > 0));
            (httpdate::fmt_http_date(whole), Named::Date(whole))
        }
    };
    let mut r = error(status, text);
    r.headers_mut()
        .insert("retry-after", value.parse().unwrap());
    (r, Some(named))
}

impl ExternalDnsProvider {
    /// Starts a provider taking `domains` (its domain filter), with TTLs of at least
    /// `min_ttl` seconds, on a loopback address of its own.
    pub async fn start(domains: &[&str], min_ttl: i64) -> ExternalDnsProvider {
        ExternalDnsProvider::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), domains, min_ttl).await
    }

    /// Starts it on `addr`.
    pub async fn start_at(addr: SocketAddr, domains: &[&str], min_ttl: i64) -> ExternalDnsProvider {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let p = ExternalDnsProvider {
            url: format!("http://{}", listener.local_addr().unwrap()),
            domains: domains.iter().map(|d| d.to_ascii_lowercase()).collect(),
            filter: Arc::new(Mutex::new(serde_json::json!({ "include": domains }))),
            min_ttl,
            records: Arc::default(),
            down: Arc::default(),
            limit: Arc::default(),
            dates: Arc::default(),
            script: Arc::default(),
            arrivals: Arc::default(),
            refused: Arc::default(),
            lists: Arc::default(),
            applied: Arc::default(),
            adjusts: Arc::default(),
        };
        let served = p.clone();
        serve_http(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>| {
                let p = served.clone();
                async move { p.answer(req).await }
            },
        );
        p
    }

    /// Answers `req` and logs its arrival.
    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let (at, wall) = (Instant::now(), SystemTime::now());
        let request = format!("{} {}", req.method(), req.uri().path());
        let (response, named) = match self.gate() {
            Some((r, named)) => (r, named),
            None => (self.serve(req).await, None),
        };
        self.arrivals.lock().unwrap().push(Arrival {
            at,
            wall,
            request,
            status: response.status().as_u16(),
            named,
        });
        response
    }

    /// A refusal before the request is looked at: an outage, a scripted refusal, or the
    /// limit.
    fn gate(&self) -> Option<(hyper::Response<Full<Bytes>>, Option<Named>)> {
        if self.down.load(Ordering::Relaxed) {
            return Some((error(503, "provider unavailable"), None));
        }
        if let Some((status, after)) = self.script.lock().unwrap().pop_front() {
            return Some(refusal(status, "refused as scripted", after));
        }
        let limit = self.limit.lock().unwrap().clone();
        let wait = limit.map_or(Ok(()), |l| l.admit()).err()?;
        self.refused.fetch_add(1, Ordering::Relaxed);
        let after = if self.dates.load(Ordering::Relaxed) {
            RetryAfter::Date(wait)
        } else {
            RetryAfter::Seconds(super::retry_after(wait).parse().unwrap())
        };
        Some(refusal(429, "rate limited by the DNS API", after))
    }

    async fn serve(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if header("accept").as_deref() != Some(MEDIA_TYPE) {
            return error(406, format!("client must accept {MEDIA_TYPE}"));
        }
        let method = req.method().as_str().to_owned();
        let path = req.uri().path().to_owned();
        if method == "POST" && header("content-type").as_deref() != Some(MEDIA_TYPE) {
            return error(415, format!("client must send {MEDIA_TYPE}"));
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let json = |value: String| answer(200, Some(MEDIA_TYPE), value);
        match (method.as_str(), path.as_str()) {
            ("GET", "/") => json(self.filter.lock().unwrap().to_string()),
            ("GET", "/records") => {
                self.lists.fetch_add(1, Ordering::Relaxed);
                json(serde_json::to_string(&*self.records.lock().unwrap()).unwrap())
            }
            ("POST", "/adjustendpoints") => {
                self.adjusts.fetch_add(1, Ordering::Relaxed);
                match serde_json::from_slice::<Vec<Endpoint>>(&body) {
                    Ok(mut endpoints) => {
                        for e in &mut endpoints {
                            e.record_ttl = e.record_ttl.max(self.min_ttl);
                        }
                        json(serde_json::to_string(&endpoints).unwrap())
                    }
                    Err(e) => error(400, format!("decoding endpoints: {e}")),
                }
            }
            ("POST", "/records") => match serde_json::from_slice::<Changes>(&body) {
                Ok(changes) => match self.apply(changes) {
                    Ok(()) => {
                        self.applied.fetch_add(1, Ordering::Relaxed);
                        answer(204, None, String::new())
                    }
                    Err(e) => error(500, e),
                },
                Err(e) => error(400, format!("decoding changes: {e}")),
            },
            _ => error(404, "404 page not found"),
        }
    }

    /// The in-memory provider's checks, then the changes, all or nothing.
    fn apply(&self, c: Changes) -> Result<(), String> {
        if c.update_old.len() != c.update_new.len() {
            return Err("updateOld and updateNew differ in length".into());
        }
        let mut records = self.records.lock().unwrap();
        let exists =
            |e: &Endpoint, records: &Vec<Endpoint>| records.iter().any(|r| r.key() == e.key());
        let mut seen = std::collections::BTreeSet::new();
        for e in c.create.iter().chain(&c.update_new).chain(&c.delete) {
            if !seen.insert(e.key()) {
                return Err(format!("record {:?} appears twice in the changes", e.key()));
            }
            let name = e.key().0;
            let inside = self
                .domains
                .iter()
                .any(|d| name == *d || name.ends_with(&format!(".{d}")));
            if !inside {
                return Err(format!("no zone for {name}"));
            }
        }
        for e in &c.create {
            if exists(e, &records) {
                return Err(format!("record {:?} already exists", e.key()));
            }
        }
        for e in c.update_old.iter().chain(&c.delete) {
            if !exists(e, &records) {
                return Err(format!("record {:?} not found", e.key()));
            }
        }
        records.retain(|r| {
            !c.delete
                .iter()
                .chain(&c.update_old)
                .any(|d| d.key() == r.key())
        });
        records.extend(c.update_new.into_iter().chain(c.create));
        Ok(())
    }

    /// The addresses published at `name` (A and AAAA), sorted; `None` without any.
    pub fn addresses(&self, name: &str) -> Option<Vec<String>> {
        let mut found: Vec<String> = self
            .records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.key().0 == name && (r.record_type == "A" || r.record_type == "AAAA"))
            .flat_map(|r| r.targets.clone())
            .collect();
        found.sort();
        (!found.is_empty()).then_some(found)
    }

    /// Every record set, as held.
    pub fn records(&self) -> Vec<Endpoint> {
        self.records.lock().unwrap().clone()
    }

    /// Adds a record set as someone else would (external-dns itself, a person).
    pub fn insert(&self, name: &str, record_type: &str, targets: &[&str]) {
        self.records.lock().unwrap().push(Endpoint {
            dns_name: name.into(),
            targets: targets.iter().map(|t| t.to_string()).collect(),
            record_type: record_type.into(),
            set_identifier: String::new(),
            record_ttl: 300,
            labels: Default::default(),
            provider_specific: Vec::new(),
        });
    }

    /// Drops the A and AAAA record sets at `name`, as if lost.
    pub fn lose(&self, name: &str) {
        self.records
            .lock()
            .unwrap()
            .retain(|r| !(r.key().0 == name && (r.record_type == "A" || r.record_type == "AAAA")));
    }

    /// Every request answers 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }

    /// Holds requests to `per_second` after a burst of `burst` (the DNS API's limit behind
    /// the provider); past it, 429.
    pub fn set_limit(&self, per_second: f64, burst: f64) {
        *self.limit.lock().unwrap() = Some(Arc::new(Limit::new(per_second, burst)));
    }

    /// Admits at most `allowance` requests in any one second; past it, 429.
    pub fn set_window(&self, allowance: usize) {
        *self.limit.lock().unwrap() = Some(Arc::new(Window::new(allowance)));
    }

    /// Refusals over the limit name their time as an HTTP-date (`true`) or in seconds.
    pub fn set_date_form(&self, dates: bool) {
        self.dates.store(dates, Ordering::Relaxed);
    }

    /// The next request is refused with `status` (429 or 503) and `after`.
    pub fn refuse_next(&self, status: u16, after: RetryAfter) {
        self.script.lock().unwrap().push_back((status, after));
    }

    /// Answers `GET /` with `filter` (external-dns's `DomainFilter` JSON).
    pub fn set_filter(&self, filter: serde_json::Value) {
        *self.filter.lock().unwrap() = filter;
    }

    /// Every request so far, in the order they arrived.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }
}
