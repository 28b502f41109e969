//! A test server for the Google Cloud DNS API v1 and its token endpoints, written from
//! Google's published API reference (no Cloud DNS emulator can be installed here). It holds
//! one managed zone of one project and implements:
//! - `POST /token`: the service account exchange (RFC 7523): the JWT's RS256 signature is
//!   checked against the account's public key, and its `iss`, `aud`, `scope` and `exp`;
//!   an access token valid an hour is answered;
//! - `GET /computeMetadata/v1/instance/service-accounts/default/token` with
//!   `Metadata-Flavor: Google` (403 without): the metadata server's token;
//! - `GET .../managedZones/{zone}`: the zone (`dnsName` with its trailing dot);
//! - `GET .../managedZones/{zone}/rrsets?maxResults=&pageToken=`: paged listing;
//! - `POST .../managedZones/{zone}/changes`: deletions then additions, all or nothing: a
//!   deletion of a set that does not exist (404 `notFound`) or that differs from the set
//!   in the zone in ttl, data or routing policy (412 `conditionNotMet`), an addition of a
//!   set that exists (409 `alreadyExists`), outside the zone or with data its type does
//!   not take (400 `invalid`), an A/AAAA beside a CNAME (400
//!   `cnameResourceRecordSetConflict`), more than 1,000 additions or deletions (403
//!   `quotaExceeded`) fail the whole change; a change applied answers `status: done`;
//! - `Authorization: Bearer <token>` with an issued token on every API request (401
//!   otherwise).
//!
//! Not implemented: other routing policies than weighted round robin, health-checked
//! policies, DNSSEC signature sets, `changes.get`, zone creation, and quotas per minute
//! (the sink's own pacing is what the rehearsal measures). The test can make the API
//! answer 503 (an outage) and drop record sets behind the sink's back.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::{Admit, Limit};
use crate::serve_http;

/// The project the zone is in.
pub const PROJECT: &str = "ho-test-project";
/// The managed zone's name.
pub const MANAGED_ZONE: &str = "tenant-a-io";
/// The service account's e-mail.
pub const ACCOUNT: &str = "orchestrator@ho-test-project.iam.gserviceaccount.com";

struct State {
    zone: String,
    rrsets: Vec<Value>,
    tokens: Vec<String>,
    next_change: u64,
}

/// A running test server.
#[derive(Clone)]
pub struct GoogleDns {
    /// The API's base URL (`http://ADDR/dns/v1`).
    pub url: String,
    /// The metadata server's base URL.
    pub metadata_url: String,
    base: String,
    state: Arc<Mutex<State>>,
    public_key: Arc<Vec<u8>>,
    private_pem: Arc<String>,
    down: Arc<AtomicBool>,
    limit: Arc<Mutex<Option<Arc<Limit>>>>,
    /// Listing pages answered.
    pub lists: Arc<AtomicUsize>,
    /// Changes answered.
    pub changes: Arc<AtomicUsize>,
    /// Tokens issued.
    pub tokens_issued: Arc<AtomicUsize>,
}

fn error(status: u16, reason: &str, message: &str) -> hyper::Response<Full<Bytes>> {
    let body = json!({"error": {"code": status, "message": message,
        "errors": [{"domain": "global", "reason": reason, "message": message}]}});
    respond(status, &body)
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// What a deletion must match: the set without its `kind` and empty signatures.
fn identity(set: &Value) -> Value {
    json!({
        "name": set.get("name"), "type": set.get("type"), "ttl": set.get("ttl"),
        "rrdatas": set.get("rrdatas").filter(|v| v.as_array().is_some_and(|a| !a.is_empty())),
        "routingPolicy": set.get("routingPolicy"),
    })
}

fn key_of(set: &Value) -> (String, String) {
    (
        set["name"].as_str().unwrap_or("").to_ascii_lowercase(),
        set["type"].as_str().unwrap_or("").to_owned(),
    )
}

/// Every datum of a set: its `rrdatas`, or its weighted items'.
fn data(set: &Value) -> Vec<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    match set
        .pointer("/routingPolicy/wrr/items")
        .and_then(Value::as_array)
    {
        Some(items) => items.iter().flat_map(|i| strings(&i["rrdatas"])).collect(),
        None => strings(&set["rrdatas"]),
    }
}

impl GoogleDns {
    /// Starts the server for zone `zone` with a fresh RSA key pair (openssl) for the
    /// service account.
    pub async fn start(zone: &str) -> GoogleDns {
        GoogleDns::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), zone).await
    }

    /// Starts the server for zone `zone` on `addr`.
    pub async fn start_at(addr: SocketAddr, zone: &str) -> GoogleDns {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("key.pem");
        let der = dir.path().join("pub.der");
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        run(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            pem.to_str().unwrap(),
        ]);
        run(&[
            "rsa",
            "-in",
            pem.to_str().unwrap(),
            "-RSAPublicKey_out",
            "-outform",
            "DER",
            "-out",
            der.to_str().unwrap(),
        ]);
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = GoogleDns {
            url: format!("{base}/dns/v1"),
            metadata_url: format!("{base}/computeMetadata/v1"),
            base,
            state: Arc::new(Mutex::new(State {
                zone: zone.to_owned(),
                rrsets: Vec::new(),
                tokens: Vec::new(),
                next_change: 1,
            })),
            public_key: Arc::new(std::fs::read(&der).unwrap()),
            private_pem: Arc::new(std::fs::read_to_string(&pem).unwrap()),
            down: Arc::default(),
            limit: Arc::default(),
            lists: Arc::default(),
            changes: Arc::default(),
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

    /// The token endpoint's URL.
    pub fn token_uri(&self) -> String {
        format!("{}/token", self.base)
    }

    /// Writes the service account key file (as `gcloud iam service-accounts keys create`
    /// does) into `dir`.
    pub fn key_file(&self, dir: &Path) -> PathBuf {
        let file = dir.join("service-account.json");
        let key = json!({"type": "service_account", "project_id": PROJECT,
            "private_key_id": "0123456789abcdef", "private_key": *self.private_pem,
            "client_email": ACCOUNT, "client_id": "1", "token_uri": self.token_uri()});
        std::fs::write(&file, key.to_string()).unwrap();
        file
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        if self.down.load(Ordering::Relaxed) {
            return error(503, "backendError", "Backend Error");
        }
        if let Err(wait) = self.admit() {
            let mut r = error(429, "rateLimitExceeded", "Rate Limit Exceeded");
            r.headers_mut()
                .insert("retry-after", super::retry_after(wait).parse().unwrap());
            return r;
        }
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        let flavor = req
            .headers()
            .get("metadata-flavor")
            .and_then(|v| v.to_str().ok())
            == Some("Google");
        let bearer = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        if path == "/token" && method == "POST" {
            return self.exchange(&body);
        }
        if path == "/computeMetadata/v1/instance/service-accounts/default/token" {
            if !flavor {
                return error(403, "forbidden", "Missing Metadata-Flavor:Google header.");
            }
            return self.issue();
        }
        let known = bearer.is_some_and(|t| self.state.lock().unwrap().tokens.contains(&t));
        if !known {
            return error(
                401,
                "authError",
                "Request had invalid authentication credentials.",
            );
        }
        let prefix = format!("/dns/v1/projects/{PROJECT}/managedZones/{MANAGED_ZONE}");
        let Some(rest) = path.strip_prefix(&prefix) else {
            return error(
                404,
                "notFound",
                &format!("The 'parameters.managedZone' resource named '{path}' does not exist."),
            );
        };
        match (method.as_str(), rest) {
            ("GET", "") => {
                let zone = self.state.lock().unwrap().zone.clone();
                respond(
                    200,
                    &json!({"kind": "dns#managedZone", "name": MANAGED_ZONE, "dnsName": format!("{zone}."), "visibility": "public"}),
                )
            }
            ("GET", "/rrsets") => self.list(&query),
            ("POST", "/changes") => self.change(&body),
            _ => error(404, "notFound", &format!("{method} {path}")),
        }
    }

    fn issue(&self) -> hyper::Response<Full<Bytes>> {
        let n = self.tokens_issued.fetch_add(1, Ordering::Relaxed);
        let token = format!("ya29.test-token-{n}");
        self.state.lock().unwrap().tokens.push(token.clone());
        respond(
            200,
            &json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}),
        )
    }

    /// RFC 7523: checks the JWT's signature and claims.
    fn exchange(&self, body: &[u8]) -> hyper::Response<Full<Bytes>> {
        let form = String::from_utf8_lossy(body);
        let field = |k: &str| {
            form.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
        };
        if field("grant_type") != Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") {
            return error(400, "unsupported_grant_type", "Invalid grant_type");
        }
        let Some(jwt) = field("assertion") else {
            return error(400, "invalid_request", "Missing assertion");
        };
        let parts: Vec<&str> = jwt.split('.').collect();
        let decode = |s: &str| data_encoding_decode(s);
        let (Some(header), Some(claims), Some(signature)) = (
            parts.first().and_then(|p| decode(p)),
            parts.get(1).and_then(|p| decode(p)),
            parts.get(2).and_then(|p| decode(p)),
        ) else {
            return error(400, "invalid_grant", "Invalid JWT");
        };
        let signed = format!("{}.{}", parts[0], parts[1]);
        let key = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            &*self.public_key,
        );
        if key.verify(signed.as_bytes(), &signature).is_err() {
            return error(400, "invalid_grant", "Invalid JWT Signature.");
        }
        let header: Value = serde_json::from_slice(&header).unwrap_or_default();
        let claims: Value = serde_json::from_slice(&claims).unwrap_or_default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let valid = header["alg"] == "RS256"
            && claims["iss"] == ACCOUNT
            && claims["aud"] == format!("{}/token", self.base)
            && claims["scope"]
                .as_str()
                .is_some_and(|s| s.contains("ndev.clouddns.readwrite"))
            && claims["exp"]
                .as_u64()
                .is_some_and(|e| e > now && e <= now + 3700);
        if !valid {
            return error(
                400,
                "invalid_grant",
                &format!("Invalid JWT claims: {claims}"),
            );
        }
        self.issue()
    }

    fn list(&self, query: &str) -> hyper::Response<Full<Bytes>> {
        self.lists.fetch_add(1, Ordering::Relaxed);
        let param = |key: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        };
        let max: usize = param("maxResults")
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        let start: usize = param("pageToken").and_then(|v| v.parse().ok()).unwrap_or(0);
        if max == 0 || max > 1000 {
            return error(400, "invalid", "Invalid value for 'parameters.maxResults'");
        }
        let state = self.state.lock().unwrap();
        let page: Vec<Value> = state.rrsets.iter().skip(start).take(max).cloned().collect();
        let mut answer = json!({"kind": "dns#resourceRecordSetsListResponse", "rrsets": page});
        if start + max < state.rrsets.len() {
            answer["nextPageToken"] = json!((start + max).to_string());
        }
        respond(200, &answer)
    }

    fn change(&self, body: &[u8]) -> hyper::Response<Full<Bytes>> {
        self.changes.fetch_add(1, Ordering::Relaxed);
        let change: Value = match serde_json::from_slice(body) {
            Ok(c) => c,
            Err(e) => return error(400, "parseError", &format!("Parse Error: {e}")),
        };
        let list = |k: &str| change[k].as_array().cloned().unwrap_or_default();
        let (additions, deletions) = (list("additions"), list("deletions"));
        for (k, n) in [
            ("additions", additions.len()),
            ("deletions", deletions.len()),
        ] {
            if n > 1000 {
                return error(
                    403,
                    "quotaExceeded",
                    &format!("The 'entity.change.{k}' resource exceeds the quota of 1000"),
                );
            }
        }
        let mut state = self.state.lock().unwrap();
        let mut sets = state.rrsets.clone();
        for (i, d) in deletions.iter().enumerate() {
            let Some(at) = sets.iter().position(|s| key_of(s) == key_of(d)) else {
                return error(404, "notFound", &format!("The 'entity.change.deletions[{i}]' resource named '{} ({})' does not exist.", key_of(d).0, key_of(d).1));
            };
            if identity(&sets[at]) != identity(d) {
                return error(
                    412,
                    "conditionNotMet",
                    &format!("Precondition not met for 'entity.change.deletions[{i}]'"),
                );
            }
            sets.remove(at);
        }
        let zone = format!("{}.", state.zone);
        for (i, a) in additions.iter().enumerate() {
            let (name, rtype) = key_of(a);
            if !(name == zone || name.ends_with(&format!(".{zone}"))) {
                return error(
                    400,
                    "invalid",
                    &format!("Invalid value for 'entity.change.additions[{i}].name': '{name}'"),
                );
            }
            let ok = match rtype.as_str() {
                "A" => data(a)
                    .iter()
                    .all(|d| d.parse::<std::net::Ipv4Addr>().is_ok()),
                "AAAA" => data(a)
                    .iter()
                    .all(|d| d.parse::<std::net::Ipv6Addr>().is_ok()),
                "TXT" | "CNAME" => true,
                _ => false,
            } && !data(a).is_empty()
                && a["ttl"].as_u64().is_some();
            if !ok {
                return error(
                    400,
                    "invalid",
                    &format!("Invalid value for 'entity.change.additions[{i}]'"),
                );
            }
            if sets
                .iter()
                .any(|s| key_of(s) == (name.clone(), rtype.clone()))
            {
                return error(409, "alreadyExists", &format!("The resource 'entity.change.additions[{i}]' named '{name} ({rtype})' already exists"));
            }
            let clash = sets.iter().any(|s| {
                let (n, t) = key_of(s);
                n == name && t != "TXT" && rtype != "TXT" && ((t == "CNAME") != (rtype == "CNAME"))
            });
            if clash {
                return error(
                    400,
                    "cnameResourceRecordSetConflict",
                    &format!("The resource named '{name}' cannot have a CNAME beside other data."),
                );
            }
            let mut stored = a.clone();
            stored["kind"] = json!("dns#resourceRecordSet");
            sets.push(stored);
        }
        state.rrsets = sets;
        let id = state.next_change;
        state.next_change += 1;
        respond(
            200,
            &json!({"kind": "dns#change", "id": id.to_string(), "status": "done",
            "additions": additions, "deletions": deletions}),
        )
    }

    /// The addresses published at `name` (A and AAAA), sorted; `None` without any.
    pub fn addresses(&self, name: &str) -> Option<Vec<String>> {
        let state = self.state.lock().unwrap();
        let mut found: Vec<String> = state
            .rrsets
            .iter()
            .filter(|s| {
                let (n, t) = key_of(s);
                n == format!("{name}.") && (t == "A" || t == "AAAA")
            })
            .flat_map(data)
            .collect();
        found.sort();
        (!found.is_empty()).then_some(found)
    }

    /// The record set `name` `rtype`, as held.
    pub fn rrset(&self, name: &str, rtype: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        state
            .rrsets
            .iter()
            .find(|s| key_of(s) == (format!("{name}."), rtype.to_owned()))
            .cloned()
    }

    /// Adds a record set as someone else would (another tool, a person).
    pub fn insert(&self, rtype: &str, name: &str, rrdata: &str) {
        self.state.lock().unwrap().rrsets.push(
            json!({"kind": "dns#resourceRecordSet", "name": format!("{name}."), "type": rtype, "ttl": 300, "rrdatas": [rrdata]}),
        );
    }

    /// Drops the A and AAAA sets at `name`, as if lost.
    pub fn lose(&self, name: &str) {
        self.state.lock().unwrap().rrsets.retain(|s| {
            let (n, t) = key_of(s);
            !(n == format!("{name}.") && (t == "A" || t == "AAAA"))
        });
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

    /// Every API request answers 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }
}

/// Base64url without padding, as JWTs carry it.
fn data_encoding_decode(s: &str) -> Option<Vec<u8>> {
    data_encoding::BASE64URL_NOPAD.decode(s.as_bytes()).ok()
}
