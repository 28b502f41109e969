//! A Kubernetes API test server for the ConfigMap sink and leader election. No
//! kube-apiserver can be installed on the test machines, so this implements, with the real
//! server's semantics, exactly the endpoints they use:
//!
//! - ConfigMaps (`/api/v1/namespaces/{ns}/configmaps`) and Leases
//!   (`/apis/coordination.k8s.io/v1/namespaces/{ns}/leases`);
//! - `GET .../{name}`: the object, or a 404 `Status`;
//! - `POST` on the collection: create, 409 `AlreadyExists` if present;
//! - `PUT .../{name}` (update): replaces the object; a `metadata.resourceVersion` in the body
//!   is a precondition (409 `Conflict` when stale), as the real server applies it;
//! - `PATCH .../{name}` with `application/merge-patch+json` (RFC 7386): a
//!   `metadata.resourceVersion` in the patch is a precondition (409 `Conflict` when stale);
//!   other patch types get 415;
//! - `GET /api/v1/namespaces/kube-system`: the namespace with [`KUBE_SYSTEM_UID`] (the
//!   cluster id is derived from it);
//! - bearer-token authentication (401; any token starting `test-`, so each replica of a
//!   test can have its own), an outage switch for everyone (503) or for one token (a
//!   partitioned replica), per-verb authorization (403 with the real message format), one
//!   `resourceVersion` counter increasing on every change, as etcd's revision does.
//!
//! Not implemented (nothing here uses them): watch, list, delete, server-side apply, field
//! managers' `managedFields` bookkeeping, admission, the Lease fields' validation (e.g.
//! `leaseDurationSeconds` > 0) and `generation`. Clients are the real kube-rs client over
//! HTTP with a kubeconfig file.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::harness::serve_http;

/// The UID of the `kube-system` namespace this server reports.
pub const KUBE_SYSTEM_UID: &str = "0f6d1f3a-7c55-4c8e-9a3b-2b1d9e6c4a10";

/// The token the test kubeconfig presents.
pub const TOKEN: &str = "test-service-account-token";

/// (resource, namespace, name): `configmaps` or `leases`.
type Key = (&'static str, String, String);

#[derive(Default)]
struct State {
    /// Every object by resource, namespace and name.
    objects: BTreeMap<Key, Value>,
    next_version: u64,
    /// Verbs (`get`, `create`, `patch`) the service account may not use.
    denied: BTreeSet<String>,
    /// Each request as "METHOD path content-type".
    requests: Vec<String>,
    /// Changes made by "someone else" right after the next GET, to provoke a conflict.
    interleave: Vec<(String, String)>,
    /// Every request gets 503, as from an API server that lost etcd.
    unavailable: bool,
    /// Requests with these tokens get 503: replicas cut off from the API server.
    partitioned: BTreeSet<String>,
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
        KubeApi::kubeconfig_with(addr, dir, TOKEN)
    }

    /// Writes a kubeconfig presenting `token` (must start with `test-`) into `dir`.
    pub fn kubeconfig_with(addr: SocketAddr, dir: &Path, token: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://{addr}\n\
                 users:\n- name: sa\n  user:\n    token: {token}\n\
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
        s.objects
            .insert(("configmaps", ns.into(), name.into()), object);
    }

    /// The ConfigMap's `data`, if it exists.
    pub fn data(&self, ns: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let s = self.state.lock().unwrap();
        let object = s.objects.get(&("configmaps", ns.into(), name.into()))?;
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

    /// Makes the requests presenting `token` fail with 503 (or stops doing so).
    pub fn set_partitioned(&self, token: &str, partitioned: bool) {
        let mut s = self.state.lock().unwrap();
        if partitioned {
            s.partitioned.insert(token.into());
        } else {
            s.partitioned.remove(token);
        }
    }

    /// The Lease's holder, if the Lease exists and has one.
    pub fn lease_holder(&self, ns: &str, name: &str) -> Option<String> {
        let s = self.state.lock().unwrap();
        let lease = s.objects.get(&("leases", ns.into(), name.into()))?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
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
        let token = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string();
        let authorized = token.starts_with("test-");
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let mut s = self.state.lock().unwrap();
        s.requests.push(format!("{method} {path} {content_type}"));
        if s.unavailable || s.partitioned.contains(&token) {
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
        // Namespaces are read-only here: `kube-system` exists with a fixed UID.
        if let ["api", "v1", "namespaces", "kube-system"] = parts.as_slice() {
            if method == Method::GET {
                let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "kube-system", "uid": KUBE_SYSTEM_UID}});
                return json_response(200, &ns);
            }
        }
        let (resource, ns, name) = match parts.as_slice() {
            ["api", "v1", "namespaces", ns, "configmaps", rest @ ..] if rest.len() <= 1 => (
                "configmaps",
                ns.to_string(),
                rest.first().map(|n| n.to_string()),
            ),
            ["apis", "coordination.k8s.io", "v1", "namespaces", ns, "leases", rest @ ..]
                if rest.len() <= 1 =>
            {
                (
                    "leases",
                    ns.to_string(),
                    rest.first().map(|n| n.to_string()),
                )
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
            (&Method::PUT, Some(_)) => "update",
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
                    "{} \"{target}\" is forbidden: User \"system:serviceaccount:dns-failover:health-orchestrator\" cannot {verb} resource \"{resource}\" in API group \"{}\" in the namespace \"{ns}\"",
                    kind_of(resource),
                    group_of(resource)
                ),
                Some(&target),
            );
        }
        match verb {
            "get" => {
                let name = name.unwrap();
                let key = (resource, ns.clone(), name.clone());
                let Some(object) = s.objects.get(&key).cloned() else {
                    return not_found(resource, &name);
                };
                let pending = std::mem::take(&mut s.interleave);
                for (k, v) in pending {
                    let mut changed = object.clone();
                    changed["data"][k] = json!(v);
                    store(&mut s, key.clone(), changed);
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
                let key = (resource, ns.clone(), name.clone());
                if s.objects.contains_key(&key) {
                    return status(
                        409,
                        "AlreadyExists",
                        &format!("{} \"{name}\" already exists", kind_of(resource)),
                        Some(&name),
                    );
                }
                object["metadata"]["namespace"] = json!(ns);
                let object = store(&mut s, key, object);
                json_response(201, &object)
            }
            "update" => {
                let name = name.unwrap();
                let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
                    return status(400, "BadRequest", "invalid JSON body", None);
                };
                let key = (resource, ns.clone(), name.clone());
                let Some(current) = s.objects.get(&key).cloned() else {
                    return not_found(resource, &name);
                };
                if let Some(rv) = object["metadata"]["resourceVersion"].as_str() {
                    if current["metadata"]["resourceVersion"].as_str() != Some(rv) {
                        return conflict(resource, &name);
                    }
                }
                object["metadata"]["namespace"] = json!(ns);
                let object = store(&mut s, key, object);
                json_response(200, &object)
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
                let key = (resource, ns.clone(), name.clone());
                let Some(current) = s.objects.get(&key).cloned() else {
                    return not_found(resource, &name);
                };
                let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                    return status(400, "BadRequest", "invalid JSON patch", None);
                };
                if let Some(rv) = patch["metadata"]["resourceVersion"].as_str() {
                    if current["metadata"]["resourceVersion"].as_str() != Some(rv) {
                        return conflict(resource, &name);
                    }
                }
                let mut merged = current.clone();
                merge(&mut merged, &patch);
                if merged == current {
                    return json_response(200, &current);
                }
                let object = store(&mut s, key, merged);
                json_response(200, &object)
            }
        }
    }
}

/// Stores `object` with the next resourceVersion and returns it.
fn store(s: &mut State, key: Key, mut object: Value) -> Value {
    s.next_version += 1;
    object["metadata"]["resourceVersion"] = json!(s.next_version.to_string());
    s.objects.insert(key, object.clone());
    object
}

/// How the real server names a resource in messages.
fn kind_of(resource: &str) -> &'static str {
    match resource {
        "leases" => "leases.coordination.k8s.io",
        _ => "configmaps",
    }
}

fn group_of(resource: &str) -> &'static str {
    match resource {
        "leases" => "coordination.k8s.io",
        _ => "",
    }
}

fn conflict(resource: &str, name: &str) -> Response<Full<Bytes>> {
    status(
        409,
        "Conflict",
        &format!("Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again", kind_of(resource)),
        Some(name),
    )
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

fn not_found(resource: &str, name: &str) -> Response<Full<Bytes>> {
    status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", kind_of(resource)),
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
