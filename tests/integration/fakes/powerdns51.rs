//! A test server answering as PowerDNS Authoritative 5.1 does with its default
//! `enable-lua-record-updates=no`, written from PowerDNS's source (`pdns/ws-auth.cc` and
//! `pdns/ws-api.cc` at 20096dc, 2026-08; Debian's pdns-server here is 4.7.3, which has no
//! such setting). It holds one zone and implements:
//! - `GET /api/v1/servers/localhost/config`: the settings as `ConfigSetting` objects,
//!   `enable-lua-record-updates` = `no` among them;
//! - `GET /api/v1/servers/localhost/zones/{zone}`: the zone's rrsets;
//! - `PATCH` of the zone: a `REPLACE` of a LUA rrset is refused as `checkNewRecords` does
//!   (422, `RRset NAME IN LUA: update of Lua records is not allowed`), a `DELETE` of one as
//!   `applyDelete` does (422, `Update of Lua records is not allowed`), and a refused PATCH
//!   changes nothing; other rrsets are replaced or deleted (204);
//! - `X-API-Key` on every request (401 otherwise).
//!
//! Not implemented: every other route and check of the API (record content validation,
//! SOA-EDIT, comments beyond storing them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// The API key it takes.
pub const KEY: &str = "pdns51-key";

/// A running server.
#[derive(Clone)]
pub struct PowerDns51 {
    /// Its base URL.
    pub url: String,
    zone: String,
    rrsets: Arc<Mutex<Vec<Value>>>,
    /// PATCHes applied.
    pub applied: Arc<AtomicUsize>,
    /// PATCHes refused.
    pub refused: Arc<AtomicUsize>,
}

fn answer(status: u16, body: Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(if body.is_null() {
            String::new()
        } else {
            body.to_string()
        })))
        .unwrap()
}

impl PowerDns51 {
    /// Starts it holding `zone` (with a trailing dot) and `rrsets` (the API's JSON).
    pub async fn start(zone: &str, rrsets: Vec<Value>) -> PowerDns51 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = PowerDns51 {
            url: format!("http://{}", listener.local_addr().unwrap()),
            zone: zone.to_owned(),
            rrsets: Arc::new(Mutex::new(rrsets)),
            applied: Arc::default(),
            refused: Arc::default(),
        };
        let served = server.clone();
        ho_testkit::serve_http(listener, move |req| {
            let s = served.clone();
            async move { s.answer(req).await }
        });
        server
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        if req.headers().get("x-api-key").and_then(|v| v.to_str().ok()) != Some(KEY) {
            return answer(401, json!({"error": "Unauthorized"}));
        }
        let method = req.method().as_str().to_owned();
        let path = req.uri().path().to_owned();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let zone_path = format!("/api/v1/servers/localhost/zones/{}", self.zone);
        match (method.as_str(), path.as_str()) {
            ("GET", "/api/v1/servers/localhost/config") => answer(
                200,
                json!([
                    {"type": "ConfigSetting", "name": "enable-lua-records", "value": "yes"},
                    {"type": "ConfigSetting", "name": "enable-lua-record-updates", "value": "no"},
                    {"type": "ConfigSetting", "name": "api-key", "value": "***"},
                ]),
            ),
            ("GET", p) if p == zone_path => answer(
                200,
                json!({"name": self.zone, "kind": "Native", "rrsets": *self.rrsets.lock().unwrap()}),
            ),
            ("PATCH", p) if p == zone_path => self.patch(&body),
            _ => answer(404, json!({"error": "Not Found"})),
        }
    }

    fn patch(&self, body: &[u8]) -> hyper::Response<Full<Bytes>> {
        let Ok(patch) = serde_json::from_slice::<Value>(body) else {
            return answer(400, json!({"error": "invalid JSON"}));
        };
        let changes = patch["rrsets"].as_array().cloned().unwrap_or_default();
        let mut errors = Vec::new();
        for change in &changes {
            if change["type"] != "LUA" {
                continue;
            }
            if change["changetype"] == "DELETE" {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return answer(
                    422,
                    json!({"error": "Update of Lua records is not allowed"}),
                );
            }
            errors.push(format!(
                "RRset {} IN LUA: update of Lua records is not allowed",
                change["name"].as_str().unwrap_or_default()
            ));
        }
        if !errors.is_empty() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return answer(
                422,
                if errors.len() == 1 {
                    json!({"error": errors[0]})
                } else {
                    json!({"error": "Multiple errors found in RRset", "errors": errors})
                },
            );
        }
        let mut rrsets = self.rrsets.lock().unwrap();
        for change in changes {
            let same = |r: &Value| r["name"] == change["name"] && r["type"] == change["type"];
            rrsets.retain(|r| !same(r));
            if change["changetype"] == "REPLACE" {
                let mut kept = change.clone();
                kept.as_object_mut().unwrap().remove("changetype");
                rrsets.push(kept);
            }
        }
        self.applied.fetch_add(1, Ordering::Relaxed);
        answer(204, Value::Null)
    }

    /// The rrset `name`/`rtype`'s record contents, if it exists.
    pub fn contents(&self, name: &str, rtype: &str) -> Option<Vec<String>> {
        self.rrsets
            .lock()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name && r["type"] == rtype)
            .map(|r| {
                r["records"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|rec| rec["content"].as_str().map(str::to_owned))
                    .collect()
            })
    }
}
