//! A test server for Azure DNS through Azure Resource Manager (API 2018-05-01) and its
//! token endpoints, written from Microsoft's published REST reference (no Azure DNS
//! emulator can be installed here). It holds one zone of one resource group and implements:
//! - `POST /{tenant}/oauth2/v2.0/token`: Microsoft Entra's client credentials grant, with a
//!   client secret or a client assertion (workload identity); a wrong secret is 401
//!   `invalid_client` (AADSTS7000215);
//! - `GET /metadata/identity/oauth2/token` with `Metadata: true` (400 without): the
//!   instance metadata service's managed identity token (`expires_in` as a string, as the
//!   service sends it);
//! - `GET .../dnsZones/{zone}`: the zone (404 `ResourceNotFound` for another name);
//! - `GET .../dnsZones/{zone}/recordsets`: 100 sets a page, `nextLink` with `$skipToken`;
//! - `PUT .../dnsZones/{zone}/{type}/{name}`: create or replace a set, honouring
//!   `If-None-Match: *` and `If-Match: <etag>` (412 `PreconditionFailed`), checking the TTL,
//!   the records of A, AAAA and TXT sets (400 `BadRequest`) and CNAME beside other data
//!   (409 `Conflict`); each write gives the set a new etag;
//! - `DELETE .../dnsZones/{zone}/{type}/{name}`: honouring `If-Match` (412), 204 when absent;
//! - `api-version=2018-05-01` on every Resource Manager request (400 otherwise) and
//!   `Authorization: Bearer <token>` with an issued token (401 otherwise).
//!
//! Not implemented: `PATCH`, other record types' data, metadata, alias (target resource)
//! sets, private zones, and throttling (the sink's own pacing is what is measured). The test
//! can make Resource Manager answer 503 (an outage) and drop sets behind the sink's back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::{Admit, Limit};
use crate::serve_http;

/// The subscription the zone is in.
pub const SUBSCRIPTION: &str = "00000000-1111-2222-3333-444444444444";
/// The zone's resource group.
pub const RESOURCE_GROUP: &str = "dns-rg";
/// The Entra tenant that issues tokens.
pub const TENANT: &str = "55555555-6666-7777-8888-999999999999";
/// The app registration a client secret belongs to.
pub const CLIENT_ID: &str = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
/// Its secret (with characters a form body must encode).
pub const CLIENT_SECRET: &str = "s3cr3t~with/odd+chars=";

/// A record set as the server keeps it.
#[derive(Debug, Clone)]
struct Set {
    rtype: String,
    /// Relative name (`@` for the apex), lower case.
    name: String,
    ttl: u64,
    records: Value,
    etag: String,
}

struct State {
    zone: String,
    sets: Vec<Set>,
    tokens: Vec<String>,
    next_etag: u64,
    /// A set to rewrite (new etag) when the next write to it arrives: someone else
    /// changing it between the sink's listing and its write.
    tamper: Option<(String, String)>,
}

/// A running test server.
#[derive(Clone)]
pub struct AzureDns {
    /// Resource Manager's base URL; also the login and metadata URLs.
    pub url: String,
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
    limit: Arc<Mutex<Option<Arc<Limit>>>>,
    /// Listing pages answered.
    pub pages: Arc<AtomicUsize>,
    /// Writes refused on their etag (412).
    pub preconditions_failed: Arc<AtomicUsize>,
    /// Writes (PUT, DELETE) answered.
    pub writes: Arc<AtomicUsize>,
    /// Tokens issued.
    pub tokens_issued: Arc<AtomicUsize>,
}

fn error(status: u16, code: &str, message: &str) -> hyper::Response<Full<Bytes>> {
    respond(
        status,
        &json!({"error": {"code": code, "message": message}}),
    )
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

impl AzureDns {
    /// Starts the server for zone `zone`.
    pub async fn start(zone: &str) -> AzureDns {
        AzureDns::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), zone).await
    }

    /// Starts the server for zone `zone` on `addr`.
    pub async fn start_at(addr: SocketAddr, zone: &str) -> AzureDns {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let server = AzureDns {
            url: format!("http://{}", listener.local_addr().unwrap()),
            state: Arc::new(Mutex::new(State {
                zone: zone.to_owned(),
                sets: Vec::new(),
                tokens: Vec::new(),
                next_etag: 1,
                tamper: None,
            })),
            down: Arc::default(),
            limit: Arc::default(),
            pages: Arc::default(),
            preconditions_failed: Arc::default(),
            writes: Arc::default(),
            tokens_issued: Arc::default(),
        };
        let served = server.clone();
        serve_http(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>| {
                let s = served.clone();
                async move { s.answer(req).await }
            },
        );
        server
    }

    fn zone_path(&self) -> String {
        let zone = self.state.lock().unwrap().zone.clone();
        format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Network/dnsZones/{zone}")
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        let header = |k: &str| {
            req.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (bearer, if_match, if_none) = (
            header("authorization"),
            header("if-match"),
            header("if-none-match"),
        );
        let metadata = header("metadata");
        let body = req.into_body().collect().await.unwrap().to_bytes();
        if path == format!("/{TENANT}/oauth2/v2.0/token") && method == "POST" {
            return self.login(&String::from_utf8_lossy(&body));
        }
        if path == "/metadata/identity/oauth2/token" {
            if metadata.as_deref() != Some("true") {
                return respond(
                    400,
                    &json!({"error": "invalid_request", "error_description": "Required metadata header not specified"}),
                );
            }
            return self.issue(true);
        }
        if self.down.load(Ordering::Relaxed) {
            return error(
                503,
                "ServiceUnavailable",
                "The service is temporarily unavailable.",
            );
        }
        // Resource Manager throttles writes and reads apart; the limit set is the writes'.
        let writes = matches!(method.as_str(), "PUT" | "DELETE");
        if let Some(wait) = writes.then(|| self.admit().err()).flatten() {
            let mut r = error(429, "TooManyRequests", "The request is being throttled as the limit has been reached for operation type - Write.");
            r.headers_mut()
                .insert("retry-after", super::retry_after(wait).parse().unwrap());
            return r;
        }
        let token = bearer.as_deref().and_then(|b| b.strip_prefix("Bearer "));
        if !token.is_some_and(|t| self.state.lock().unwrap().tokens.iter().any(|k| k == t)) {
            return error(
                401,
                "InvalidAuthenticationToken",
                "The access token is invalid.",
            );
        }
        if !query.split('&').any(|kv| kv == "api-version=2018-05-01") {
            return error(
                400,
                "InvalidApiVersionParameter",
                "The api-version is invalid.",
            );
        }
        let base = format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Network/dnsZones/");
        let Some(rest) = path.strip_prefix(&base) else {
            return error(
                404,
                "ResourceGroupNotFound",
                &format!("Resource group or subscription of '{path}' could not be found."),
            );
        };
        let zone = self.state.lock().unwrap().zone.clone();
        let mut parts = rest.splitn(3, '/');
        let (asked, rtype, name) = (parts.next().unwrap_or(""), parts.next(), parts.next());
        if !asked.eq_ignore_ascii_case(&zone) {
            return error(404, "ResourceNotFound", &format!("The Resource 'Microsoft.Network/dnszones/{asked}' under resource group '{RESOURCE_GROUP}' was not found."));
        }
        match (method.as_str(), rtype, name) {
            ("GET", None, None) => respond(
                200,
                &json!({"id": self.zone_path(), "name": zone, "type": "Microsoft.Network/dnszones", "properties": {"nameServers": ["ns1-01.azure-dns.com."]}}),
            ),
            ("GET", Some("recordsets"), None) => self.list(&query),
            ("PUT", Some(t), Some(n)) => self.put(t, n, &body, if_match, if_none),
            ("DELETE", Some(t), Some(n)) => self.delete(t, n, if_match),
            _ => error(405, "MethodNotAllowed", &format!("{method} {path}")),
        }
    }

    fn issue(&self, imds: bool) -> hyper::Response<Full<Bytes>> {
        let n = self.tokens_issued.fetch_add(1, Ordering::Relaxed);
        let token = format!("eyJ0eXAi.test-token-{n}");
        self.state.lock().unwrap().tokens.push(token.clone());
        if imds {
            respond(
                200,
                &json!({"access_token": token, "expires_in": "3599", "resource": "https://management.azure.com/", "token_type": "Bearer"}),
            )
        } else {
            respond(
                200,
                &json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
            )
        }
    }

    fn login(&self, form: &str) -> hyper::Response<Full<Bytes>> {
        let field = |k: &str| {
            form.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
        };
        let decoded = |v: &str| {
            let mut out = Vec::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%' && i + 2 < b.len() {
                    out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap_or(b'?'));
                    i += 3;
                } else {
                    out.push(if b[i] == b'+' { b' ' } else { b[i] });
                    i += 1;
                }
            }
            String::from_utf8_lossy(&out).into_owned()
        };
        let scope_ok =
            field("scope").map(decoded).as_deref() == Some("https://management.azure.com/.default");
        let grant_ok = field("grant_type") == Some("client_credentials");
        let client_ok = field("client_id").map(decoded).as_deref() == Some(CLIENT_ID);
        let secret_ok = field("client_secret").map(decoded).as_deref() == Some(CLIENT_SECRET);
        let assertion_ok = field("client_assertion_type").map(decoded).as_deref()
            == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            && field("client_assertion").is_some_and(|a| !a.is_empty());
        if !(scope_ok && grant_ok && client_ok) {
            return respond(
                400,
                &json!({"error": "invalid_request", "error_description": "AADSTS900144: The request body must contain the parameters client_id, scope and grant_type."}),
            );
        }
        if !(secret_ok || assertion_ok) {
            return respond(
                401,
                &json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
            );
        }
        self.issue(false)
    }

    fn set_json(&self, s: &Set) -> Value {
        let zone = self.state.lock().unwrap().zone.clone();
        let fqdn = if s.name == "@" {
            format!("{zone}.")
        } else {
            format!("{}.{zone}.", s.name)
        };
        let mut properties = json!({"TTL": s.ttl, "fqdn": fqdn, "provisioningState": "Succeeded"});
        properties[format!("{}Records", s.rtype)] = s.records.clone();
        json!({"id": format!("{}/{}/{}", self.zone_path(), s.rtype, s.name), "name": s.name,
               "type": format!("Microsoft.Network/dnszones/{}", s.rtype), "etag": s.etag, "properties": properties})
    }

    fn list(&self, query: &str) -> hyper::Response<Full<Bytes>> {
        self.pages.fetch_add(1, Ordering::Relaxed);
        let skip: usize = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("$skipToken="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let sets = self.state.lock().unwrap().sets.clone();
        let page: Vec<Value> = sets
            .iter()
            .skip(skip)
            .take(100)
            .map(|s| self.set_json(s))
            .collect();
        let mut answer = json!({"value": page});
        if skip + 100 < sets.len() {
            answer["nextLink"] = json!(format!(
                "{}{}/recordsets?api-version=2018-05-01&$skipToken={}",
                self.url,
                self.zone_path(),
                skip + 100
            ));
        }
        respond(200, &answer)
    }

    fn put(
        &self,
        rtype: &str,
        name: &str,
        body: &[u8],
        if_match: Option<String>,
        if_none: Option<String>,
    ) -> hyper::Response<Full<Bytes>> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let name = name.to_ascii_lowercase();
        let tamper = self.state.lock().unwrap().tamper.take();
        if let Some((full, address)) = tamper {
            self.lose(&full);
            self.insert("A", &full, &address);
        }
        let Ok(body) = serde_json::from_slice::<Value>(body) else {
            return error(400, "BadRequest", "The request body is not valid JSON.");
        };
        let p = &body["properties"];
        let Some(ttl) = p["TTL"]
            .as_u64()
            .filter(|t| (1..=2_147_483_647).contains(t))
        else {
            return error(400, "BadRequest", "The value for TTL is invalid.");
        };
        let records = p[format!("{rtype}Records")].clone();
        let valid = records.as_array().is_some_and(|rs| {
            !rs.is_empty()
                && rs.iter().all(|r| match rtype {
                    "A" => r["ipv4Address"]
                        .as_str()
                        .is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok()),
                    "AAAA" => r["ipv6Address"]
                        .as_str()
                        .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
                    "TXT" => r["value"].as_array().is_some_and(|v| {
                        v.iter().all(|s| s.as_str().is_some_and(|s| s.len() <= 255))
                    }),
                    _ => false,
                })
        });
        if !valid {
            return error(
                400,
                "BadRequest",
                &format!("The {rtype} records of record set '{name}' are invalid."),
            );
        }
        let mut state = self.state.lock().unwrap();
        let existing = state
            .sets
            .iter()
            .position(|s| s.rtype == rtype && s.name == name);
        if if_none.as_deref() == Some("*") && existing.is_some() {
            self.preconditions_failed.fetch_add(1, Ordering::Relaxed);
            return error(
                412,
                "PreconditionFailed",
                &format!("The Record set {name} exists already and hence cannot be created again."),
            );
        }
        if let Some(etag) = &if_match {
            if existing.is_none_or(|i| state.sets[i].etag != *etag) {
                self.preconditions_failed.fetch_add(1, Ordering::Relaxed);
                return error(
                    412,
                    "PreconditionFailed",
                    &format!("The Record set {name} has been modified (etag mismatch)."),
                );
            }
        }
        let clash = state.sets.iter().any(|s| {
            s.name == name
                && s.rtype != "TXT"
                && rtype != "TXT"
                && ((s.rtype == "CNAME") != (rtype == "CNAME"))
        });
        if clash {
            return error(
                409,
                "Conflict",
                &format!(
                    "The record set {name} of type {rtype} conflicts with a CNAME record set."
                ),
            );
        }
        let etag = format!("etag-{:08}", state.next_etag);
        state.next_etag += 1;
        let set = Set {
            rtype: rtype.to_owned(),
            name: name.clone(),
            ttl,
            records,
            etag,
        };
        let created = match existing {
            Some(i) => {
                state.sets[i] = set.clone();
                false
            }
            None => {
                state.sets.push(set.clone());
                true
            }
        };
        drop(state);
        respond(if created { 201 } else { 200 }, &self.set_json(&set))
    }

    fn delete(
        &self,
        rtype: &str,
        name: &str,
        if_match: Option<String>,
    ) -> hyper::Response<Full<Bytes>> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let name = name.to_ascii_lowercase();
        let mut state = self.state.lock().unwrap();
        let existing = state
            .sets
            .iter()
            .position(|s| s.rtype == rtype && s.name == name);
        if let Some(etag) = &if_match {
            if existing.is_none_or(|i| state.sets[i].etag != *etag) {
                self.preconditions_failed.fetch_add(1, Ordering::Relaxed);
                return error(
                    412,
                    "PreconditionFailed",
                    &format!("The Record set {name} has been modified (etag mismatch)."),
                );
            }
        }
        match existing {
            Some(i) => {
                state.sets.remove(i);
                respond(200, &Value::Null)
            }
            None => hyper::Response::builder()
                .status(204)
                .body(Full::new(Bytes::new()))
                .unwrap(),
        }
    }

    fn relative(&self, name: &str) -> String {
        let zone = self.state.lock().unwrap().zone.clone();
        name.strip_suffix(&zone)
            .and_then(|n| n.strip_suffix('.'))
            .map_or("@".to_owned(), str::to_owned)
    }

    /// The addresses published at `name` (A and AAAA), sorted; `None` without any.
    pub fn addresses(&self, name: &str) -> Option<Vec<String>> {
        let rel = self.relative(name);
        let state = self.state.lock().unwrap();
        let mut found: Vec<String> = state
            .sets
            .iter()
            .filter(|s| s.name == rel && (s.rtype == "A" || s.rtype == "AAAA"))
            .flat_map(|s| s.records.as_array().cloned().unwrap_or_default())
            .filter_map(|r| {
                r.get("ipv4Address")
                    .or_else(|| r.get("ipv6Address"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect();
        found.sort();
        (!found.is_empty()).then_some(found)
    }

    /// The TXT texts of `name` (each record's strings joined), if the set is there.
    pub fn txt(&self, name: &str) -> Option<Vec<String>> {
        let rel = self.relative(name);
        let state = self.state.lock().unwrap();
        let set = state
            .sets
            .iter()
            .find(|s| s.name == rel && s.rtype == "TXT")?;
        Some(
            set.records
                .as_array()?
                .iter()
                .map(|r| {
                    r["value"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect()
                })
                .collect(),
        )
    }

    /// Adds a set as someone else would (another tool, a person).
    pub fn insert(&self, rtype: &str, name: &str, address: &str) {
        let rel = self.relative(name);
        let mut state = self.state.lock().unwrap();
        let etag = format!("etag-{:08}", state.next_etag);
        state.next_etag += 1;
        let key = if rtype == "A" {
            "ipv4Address"
        } else {
            "ipv6Address"
        };
        state.sets.push(Set {
            rtype: rtype.into(),
            name: rel,
            ttl: 300,
            records: json!([{ key: address }]),
            etag,
        });
    }

    /// When the next write arrives, first rewrites the A set at `name` to `address` (a new
    /// etag), as someone changing it between the sink's listing and its write.
    pub fn tamper_before_next_write(&self, name: &str, address: &str) {
        self.state.lock().unwrap().tamper = Some((name.to_owned(), address.to_owned()));
    }

    /// Drops the A and AAAA sets at `name`, as if lost.
    pub fn lose(&self, name: &str) {
        let rel = self.relative(name);
        self.state
            .lock()
            .unwrap()
            .sets
            .retain(|s| !(s.name == rel && (s.rtype == "A" || s.rtype == "AAAA")));
    }

    /// Holds requests to `per_second` after a burst of `burst` (the provider's published
    /// limit); past it, the provider's 429.
    pub fn set_limit(&self, per_second: f64, burst: f64) {
        *self.limit.lock().unwrap() = Some(Arc::new(Limit::new(per_second, burst)));
    }

    fn admit(&self) -> Result<(), std::time::Duration> {
        let limit = self.limit.lock().unwrap().clone();
        limit.map_or(Ok(()), |l| l.admit())
    }

    /// Every Resource Manager request answers 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }
}
