//! A test server for Cloudflare's API v4 DNS records, written from Cloudflare's published
//! API reference (no Cloudflare emulator can be installed here). It holds one zone and
//! implements, with the documented envelopes and error codes:
//! - `GET /client/v4/zones/{zone_id}`: the zone's details (`name`);
//! - `GET /client/v4/zones/{zone_id}/dns_records?page=&per_page=`: paged listing (per_page
//!   5 to 5,000,000, default 100) with `result_info`;
//! - `POST /client/v4/zones/{zone_id}/dns_records/batch`: `deletes` then `posts` in one
//!   transaction: a delete of an unknown id (81044), a record outside the zone or of a
//!   type it does not take (1004), an address that is not one (9005), a TTL that is
//!   neither 1 nor 60..=86400 (9021), an identical record (81058), an A/AAAA beside a
//!   CNAME (81053) or more than 200 operations (the Free plan's limit) fail the whole
//!   batch and change nothing;
//! - `Authorization: Bearer <token>` on every request (403, code 9109, otherwise).
//!
//! Not implemented: `patches` and `puts` in a batch, single-record endpoints, other record
//! types' data checks, proxied records, comments and tags, zone-level settings, and rate
//! limiting (the sink's own pacing is what the rehearsal measures). The test can make it
//! answer 503 (an outage) and can drop records behind the sink's back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Admit, Limit};
use crate::serve_http;

/// The token the server accepts.
pub const TOKEN: &str = "cf-test-token-1";
/// The zone's id.
pub const ZONE_ID: &str = "0123456789abcdef0123456789abcdef";

/// A record as the server keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its id.
    pub id: String,
    /// `A`, `TXT`, ...
    pub rtype: String,
    /// Its name, lower case, no trailing dot.
    pub name: String,
    /// Its data.
    pub content: String,
    /// Seconds.
    pub ttl: u32,
}

struct State {
    zone: String,
    records: Vec<Record>,
    next_id: u64,
}

/// A running test server.
#[derive(Clone)]
pub struct Cloudflare {
    /// The API's base URL (`http://ADDR/client/v4`).
    pub url: String,
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
    limit: Arc<Mutex<Option<Arc<Limit>>>>,
    /// Listing pages answered.
    pub lists: Arc<AtomicUsize>,
    /// Batches answered.
    pub batches: Arc<AtomicUsize>,
}

#[derive(Deserialize)]
struct BatchBody {
    #[serde(default)]
    deletes: Vec<IdBody>,
    #[serde(default)]
    posts: Vec<PostBody>,
    #[serde(default)]
    patches: Vec<Value>,
    #[serde(default)]
    puts: Vec<Value>,
}

#[derive(Deserialize)]
struct IdBody {
    id: String,
}

#[derive(Deserialize)]
struct PostBody {
    #[serde(rename = "type")]
    rtype: String,
    name: String,
    content: String,
    #[serde(default = "auto_ttl")]
    ttl: u32,
}

fn auto_ttl() -> u32 {
    1
}

fn envelope(status: u16, result: Value, errors: &[(u32, String)]) -> hyper::Response<Full<Bytes>> {
    let errors: Vec<Value> = errors
        .iter()
        .map(|(code, message)| json!({"code": code, "message": message}))
        .collect();
    let body =
        json!({"success": errors.is_empty(), "errors": errors, "messages": [], "result": result});
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

impl Cloudflare {
    /// Starts the server for zone `zone` on a loopback address of its own.
    pub async fn start(zone: &str) -> Cloudflare {
        Cloudflare::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), zone).await
    }

    /// Starts the server for zone `zone` on `addr`.
    pub async fn start_at(addr: SocketAddr, zone: &str) -> Cloudflare {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let cf = Cloudflare {
            url: format!("http://{}/client/v4", listener.local_addr().unwrap()),
            state: Arc::new(Mutex::new(State {
                zone: zone.to_owned(),
                records: Vec::new(),
                next_id: 1,
            })),
            down: Arc::default(),
            limit: Arc::default(),
            lists: Arc::default(),
            batches: Arc::default(),
        };
        let served = cf.clone();
        serve_http(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>| {
                let cf = served.clone();
                async move { cf.answer(req).await }
            },
        );
        cf
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        if self.down.load(Ordering::Relaxed) {
            return envelope(503, Value::Null, &[(10000, "Service unavailable".into())]);
        }
        if let Err(wait) = self.admit() {
            let mut r = envelope(
                429,
                Value::Null,
                &[(
                    10000,
                    "Rate limited. Please wait and consider throttling your request speed".into(),
                )],
            );
            r.headers_mut()
                .insert("retry-after", super::retry_after(wait).parse().unwrap());
            return r;
        }
        let authorized = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            == Some(&format!("Bearer {TOKEN}"));
        if !authorized {
            return envelope(403, Value::Null, &[(9109, "Invalid access token".into())]);
        }
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let Some(rest) = path.strip_prefix(&format!("/client/v4/zones/{ZONE_ID}")) else {
            return envelope(
                404,
                Value::Null,
                &[(
                    7003,
                    format!(
                        "Could not route to {path}, perhaps your object identifier is invalid?"
                    ),
                )],
            );
        };
        match (method.as_str(), rest) {
            ("GET", "") => {
                let zone = self.state.lock().unwrap().zone.clone();
                envelope(
                    200,
                    json!({"id": ZONE_ID, "name": zone, "status": "active"}),
                    &[],
                )
            }
            ("GET", "/dns_records") => self.list(&query),
            ("POST", "/dns_records/batch") => self.batch(&body),
            _ => envelope(
                405,
                Value::Null,
                &[(10405, format!("Method {method} not allowed for {path}"))],
            ),
        }
    }

    fn list(&self, query: &str) -> hyper::Response<Full<Bytes>> {
        self.lists.fetch_add(1, Ordering::Relaxed);
        let param = |key: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .and_then(|v| v.parse::<usize>().ok())
        };
        let per_page = param("per_page").unwrap_or(100);
        let page = param("page").unwrap_or(1);
        if !(5..=5_000_000).contains(&per_page) || page == 0 {
            return envelope(
                400,
                Value::Null,
                &[(
                    1004,
                    "DNS Validation Error: per_page or page out of range".into(),
                )],
            );
        }
        let state = self.state.lock().unwrap();
        let total = state.records.len();
        let pages = total.div_ceil(per_page).max(1);
        let result: Vec<Value> = state
            .records
            .iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .map(|r| {
                json!({"id": r.id, "type": r.rtype, "name": r.name, "content": r.content,
                       "ttl": r.ttl, "proxied": false, "proxiable": r.rtype != "TXT",
                       "zone_id": ZONE_ID, "zone_name": state.zone})
            })
            .collect();
        let count = result.len();
        let response = json!({"success": true, "errors": [], "messages": [], "result": result,
            "result_info": {"page": page, "per_page": per_page, "count": count,
                            "total_count": total, "total_pages": pages}});
        hyper::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(response.to_string())))
            .unwrap()
    }

    fn batch(&self, body: &[u8]) -> hyper::Response<Full<Bytes>> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        let batch: BatchBody = match serde_json::from_slice(body) {
            Ok(b) => b,
            Err(e) => {
                return envelope(
                    400,
                    Value::Null,
                    &[(9207, format!("Request body is invalid: {e}"))],
                )
            }
        };
        if !batch.patches.is_empty() || !batch.puts.is_empty() {
            return envelope(
                400,
                Value::Null,
                &[(1004, "this test server takes deletes and posts only".into())],
            );
        }
        if batch.deletes.len() + batch.posts.len() > 200 {
            return envelope(
                400,
                Value::Null,
                &[(
                    81080,
                    "Batch exceeds the 200 operations allowed on this plan".into(),
                )],
            );
        }
        let mut state = self.state.lock().unwrap();
        let mut records = state.records.clone();
        for d in &batch.deletes {
            match records.iter().position(|r| r.id == d.id) {
                Some(i) => {
                    records.remove(i);
                }
                None => {
                    return envelope(
                        400,
                        Value::Null,
                        &[(81044, "Record does not exist.".into())],
                    )
                }
            }
        }
        let zone = state.zone.clone();
        let mut created = Vec::new();
        for p in &batch.posts {
            let name = p.name.trim_end_matches('.').to_ascii_lowercase();
            let inside = name == zone || name.ends_with(&format!(".{zone}"));
            if !inside || !matches!(p.rtype.as_str(), "A" | "AAAA" | "TXT" | "CNAME") {
                return envelope(
                    400,
                    Value::Null,
                    &[(
                        1004,
                        format!("DNS Validation Error: {} {}", p.rtype, p.name),
                    )],
                );
            }
            let address_ok = match p.rtype.as_str() {
                "A" => p.content.parse::<std::net::Ipv4Addr>().is_ok(),
                "AAAA" => p.content.parse::<std::net::Ipv6Addr>().is_ok(),
                _ => true,
            };
            if !address_ok {
                return envelope(
                    400,
                    Value::Null,
                    &[(9005, format!("Content for {} record is invalid.", p.rtype))],
                );
            }
            if p.ttl != 1 && !(60..=86_400).contains(&p.ttl) {
                return envelope(
                    400,
                    Value::Null,
                    &[(
                        9021,
                        "Invalid TTL. Must be between 60 and 86400 seconds, or 1 for Automatic."
                            .into(),
                    )],
                );
            }
            let content = match p.rtype.as_str() {
                "AAAA" => p.content.parse::<std::net::Ipv6Addr>().unwrap().to_string(),
                _ => p.content.clone(),
            };
            if records
                .iter()
                .any(|r| r.rtype == p.rtype && r.name == name && r.content == content)
            {
                return envelope(
                    400,
                    Value::Null,
                    &[(81058, "An identical record already exists.".into())],
                );
            }
            let cname_clash = records.iter().any(|r| {
                r.name == name
                    && ((r.rtype == "CNAME") != (p.rtype == "CNAME"))
                    && r.rtype != "TXT"
                    && p.rtype != "TXT"
            });
            if cname_clash {
                return envelope(
                    400,
                    Value::Null,
                    &[(
                        81053,
                        "An A, AAAA, or CNAME record with that host already exists.".into(),
                    )],
                );
            }
            let record = Record {
                id: format!("{:032x}", state.next_id),
                rtype: p.rtype.clone(),
                name,
                content,
                ttl: p.ttl,
            };
            state.next_id += 1;
            created.push(json!({"id": record.id, "type": record.rtype, "name": record.name, "content": record.content, "ttl": record.ttl}));
            records.push(record);
        }
        state.records = records;
        let deleted: Vec<Value> = batch.deletes.iter().map(|d| json!({"id": d.id})).collect();
        envelope(
            200,
            json!({"deletes": deleted, "posts": created, "patches": [], "puts": []}),
            &[],
        )
    }

    /// The addresses published at `name` (A and AAAA), sorted; `None` without any.
    pub fn addresses(&self, name: &str) -> Option<Vec<String>> {
        let state = self.state.lock().unwrap();
        let mut found: Vec<String> = state
            .records
            .iter()
            .filter(|r| r.name == name && (r.rtype == "A" || r.rtype == "AAAA"))
            .map(|r| r.content.clone())
            .collect();
        found.sort();
        (!found.is_empty()).then_some(found)
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

    /// Every record, as the server holds them.
    pub fn records(&self) -> Vec<Record> {
        self.state.lock().unwrap().records.clone()
    }

    /// Adds a record as someone else would (another tool, a person).
    pub fn insert(&self, rtype: &str, name: &str, content: &str) {
        let mut state = self.state.lock().unwrap();
        let id = format!("{:032x}", state.next_id);
        state.next_id += 1;
        state.records.push(Record {
            id,
            rtype: rtype.into(),
            name: name.into(),
            content: content.into(),
            ttl: 300,
        });
    }

    /// Drops the A and AAAA records at `name`, as if lost.
    pub fn lose(&self, name: &str) {
        self.state
            .lock()
            .unwrap()
            .records
            .retain(|r| !(r.name == name && (r.rtype == "A" || r.rtype == "AAAA")));
    }

    /// Every request answers 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }
}
