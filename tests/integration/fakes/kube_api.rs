//! A Kubernetes API test server for the ConfigMap sink. No kube-apiserver can be installed
//! on the test machines, so this implements, with the real server's semantics, exactly the
//! ConfigMap endpoints the sink uses:
//!
//! - `GET /api/v1/namespaces/{ns}/configmaps/{name}`: the object, or a 404 `Status`;
//! - `POST /api/v1/namespaces/{ns}/configmaps`: create, 409 `AlreadyExists` if present;
//! - `PATCH .../configmaps/{name}` with `application/merge-patch+json` (RFC 7386): a
//!   `metadata.resourceVersion` in the patch is a precondition (409 `Conflict` when stale,
//!   the optimistic concurrency the real server applies); other patch types get 415;
//! - bearer-token authentication (401), an outage switch (503), per-verb authorization (403 with the real message
//!   format), `resourceVersion` increasing on every change.
//!
//! Not implemented (the sink never uses them): watch, list, server-side apply, field
//! managers' `managedFields` bookkeeping, admission. The sink is driven through the real
//! kube-rs client over HTTP with a kubeconfig file.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::harness::serve_http;

/// The token the test kubeconfig presents.
pub const TOKEN: &str = "test-service-account-token";

#[derive(Default)]
struct State {
    /// (namespace, name) -> ConfigMap object.
    objects: BTreeMap<(String, String), Value>,
    next_version: u64,
    /// Verbs (`get`, `create`, `patch`) the service account may not use.
    denied: BTreeSet<String>,
    /// Each request as "METHOD path content-type".
    requests: Vec<String>,
    /// Changes made by "someone else" right after the next GET, to provoke a conflict.
    interleave: Vec<(String, String)>,
    /// Every request gets 503, as from an API server that lost etcd.
    unavailable: bool,
}

/// The server; clones share state.
#[derive(Clone, Default)]
pub struct KubeApi {
    state: Arc<Mutex<State>>,
}

impl KubeApi {
    /// Starts serving on a loopback address of its own (a free port).
    pub async fn start(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind(crate::harness::loopback())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let me = self.clone();
        serve_http(listener, move |req| {
            let me = me.clone();
            async move { me.handle(req).await }
        });
        addr
    }

    /// Writes a kubeconfig for this server into `dir`.
    pub fn kubeconfig(addr: SocketAddr, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://{addr}\n\
                 users:\n- name: sa\n  user:\n    token: {TOKEN}\n\
                 contexts:\n- name: test\n  context:\n    cluster: test\n    user: sa\n\
                 current-context: test\n"
            ),
        )
        .unwrap();
        path
    }

    /// Creates a ConfigMap as an operator would (`kubectl create configmap`).
    pub fn put(&self, ns: &str, name: &str, data: &[(&str, &str)]) {
        let mut s = self.state.lock().unwrap();
        s.next_version += 1;
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": s.next_version.to_string()},
            "data": data,
        });
        s.objects.insert((ns.into(), name.into()), object);
    }

    /// The ConfigMap's `data`, if it exists.
    pub fn data(&self, ns: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let s = self.state.lock().unwrap();
        let object = s.objects.get(&(ns.into(), name.into()))?;
        Some(
            object["data"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// Denies or allows a verb to the sink's service account.
    pub fn deny(&self, verb: &str, denied: bool) {
        let mut s = self.state.lock().unwrap();
        if denied {
            s.denied.insert(verb.into());
        } else {
            s.denied.remove(verb);
        }
    }

    /// After the next GET of the ConfigMap, someone else sets `key` to `value` (so the
    /// sink's patch carries a stale resourceVersion).
    pub fn interleave_edit(&self, key: &str, value: &str) {
        let mut s = self.state.lock().unwrap();
        s.interleave.push((key.into(), value.into()));
    }

    /// Makes every request fail with 503 (or stops doing so).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.state.lock().unwrap().unavailable = unavailable;
    }

    /// Requests seen so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let authorized = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            == Some(&format!("Bearer {TOKEN}"));
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let mut s = self.state.lock().unwrap();
        s.requests.push(format!("{method} {path} {content_type}"));
        if s.unavailable {
            return status(
                503,
                "ServiceUnavailable",
                "etcdserver: request timed out",
                None,
            );
        }
        if !authorized {
            return status(401, "Unauthorized", "Unauthorized", None);
        }
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (ns, name) = match parts.as_slice() {
            ["api", "v1", "namespaces", ns, "configmaps"] => (ns.to_string(), None),
            ["api", "v1", "namespaces", ns, "configmaps", name] => {
                (ns.to_string(), Some(name.to_string()))
            }
            _ => {
                return status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                    None,
                )
            }
        };
        let verb = match (&method, &name) {
            (&Method::GET, Some(_)) => "get",
            (&Method::POST, None) => "create",
            (&Method::PATCH, Some(_)) => "patch",
            _ => {
                return status(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                    None,
                )
            }
        };
        if s.denied.contains(verb) {
            let target = name.clone().unwrap_or_default();
            return status(
                403,
                "Forbidden",
                &format!(
                    "configmaps \"{target}\" is forbidden: User \"system:serviceaccount:dns-failover:health-orchestrator\" cannot {verb} resource \"configmaps\" in API group \"\" in the namespace \"{ns}\""
                ),
                Some(&target),
            );
        }
        match verb {
            "get" => {
                let name = name.unwrap();
                let Some(object) = s.objects.get(&(ns.clone(), name.clone())).cloned() else {
                    return not_found(&name);
                };
                let pending = std::mem::take(&mut s.interleave);
                for (k, v) in pending {
                    let mut changed = object.clone();
                    changed["data"][k] = json!(v);
                    store(&mut s, &ns, &name, changed);
                }
                json_response(200, &object)
            }
            "create" => {
                let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
                    return status(400, "BadRequest", "invalid JSON body", None);
                };
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                if s.objects.contains_key(&(ns.clone(), name.clone())) {
                    return status(
                        409,
                        "AlreadyExists",
                        &format!("configmaps \"{name}\" already exists"),
                        Some(&name),
                    );
                }
                object["metadata"]["namespace"] = json!(ns);
                let object = store(&mut s, &ns, &name, object);
                json_response(201, &object)
            }
            _ => {
                let name = name.unwrap();
                if content_type != "application/merge-patch+json" {
                    return status(
                        415,
                        "UnsupportedMediaType",
                        &format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json (this test server), got {content_type}"),
                        None,
                    );
                }
                let Some(current) = s.objects.get(&(ns.clone(), name.clone())).cloned() else {
                    return not_found(&name);
                };
                let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                    return status(400, "BadRequest", "invalid JSON patch", None);
                };
                if let Some(rv) = patch["metadata"]["resourceVersion"].as_str() {
                    if current["metadata"]["resourceVersion"].as_str() != Some(rv) {
                        return status(
                            409,
                            "Conflict",
                            &format!("Operation cannot be fulfilled on configmaps \"{name}\": the object has been modified; please apply your changes to the latest version and try again"),
                            Some(&name),
                        );
                    }
                }
                let mut merged = current.clone();
                merge(&mut merged, &patch);
                if merged == current {
                    return json_response(200, &current);
                }
                let object = store(&mut s, &ns, &name, merged);
                json_response(200, &object)
            }
        }
    }
}

/// Stores `object` with the next resourceVersion and returns it.
fn store(s: &mut State, ns: &str, name: &str, mut object: Value) -> Value {
    s.next_version += 1;
    object["metadata"]["resourceVersion"] = json!(s.next_version.to_string());
    s.objects.insert((ns.into(), name.into()), object.clone());
    object
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().unwrap();
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn not_found(name: &str) -> Response<Full<Bytes>> {
    status(
        404,
        "NotFound",
        &format!("configmaps \"{name}\" not found"),
        Some(name),
    )
}

/// A `Status` object, as the API server sends for errors.
fn status(code: u16, reason: &str, message: &str, name: Option<&str>) -> Response<Full<Bytes>> {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if let Some(name) = name {
        body["details"] = json!({"name": name, "kind": "configmaps"});
    }
    json_response(code, &body)
}

fn json_response(code: u16, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}
