//! A Kubernetes API test server. No kube-apiserver can be installed on the test machines,
//! so this implements, with the real server's semantics, what the orchestrator uses:
//!
//! - ConfigMaps, Secrets, Services, Nodes (cluster-scoped), Leases (`coordination.k8s.io/v1`),
//!   `DNSFailover`s (`healthorchestrator.io/v1alpha1`), Gateways
//!   (`gateway.networking.k8s.io/v1`), Ingresses (`networking.k8s.io/v1`) and Kuadrant's `DNSRecord`s, `DNSHealthCheckProbe`s
//!   and `DNSPolicy`s, external-dns's `DNSEndpoint`s (`externaldns.k8s.io/v1alpha1`), at
//!   the real URLs ([`routes`]);
//! - a list with `resourceVersion=0` may be served from a watch cache made to lag etcd or
//!   restart empty ([`KubeApi::lag_cache`], [`cache`]); a list without one reads current;
//! - `GET .../{name}`: the object, or a 404 `Status` ([`responses`]);
//! - objects created, replaced and deleted with revisions, generations and finalizers
//!   ([`store`]);
//! - `GET` on a collection (one namespace, or all): a list whose `metadata.resourceVersion`
//!   is the current revision (no pagination: every item in one page, which a client must
//!   accept), narrowed by an equality `labelSelector` (`k=v,k2=v2`);
//! - `GET ...?watch=true&resourceVersion=RV`: a chunked stream of `ADDED`/`MODIFIED`/
//!   `DELETED` events after RV (of the objects an equality `labelSelector` selects), then
//!   live ones until `timeoutSeconds` or
//!   [`KubeApi::drop_watches`]; an RV older than the last [`KubeApi::compact`] gets one
//!   `ERROR` event carrying a 410 `Expired` Status, as etcd compaction causes;
//! - `POST` on the collection: create (409 `AlreadyExists`), with `uid`,
//!   `creationTimestamp` and `generation: 1`;
//! - `PUT .../{name}` (update) and `PATCH .../{name}` with `application/merge-patch+json`
//!   (RFC 7386; other patch types get 415): a `metadata.resourceVersion` in the body is a
//!   precondition (409 `Conflict` when stale); `generation` increases when `spec` changes;
//! - the `/status` subresource of Services, Nodes, Ingresses, `DNSFailover`s and Gateways: it changes
//!   `status` only, and the main resource ignores `status`;
//! - `DELETE .../{name}`: with finalizers, sets `deletionTimestamp` and waits until an
//!   update empties `finalizers`; without, removes the object;
//! - `GET /api/v1/namespaces/kube-system`: the namespace with [`KUBE_SYSTEM_UID`];
//! - bearer-token authentication (401; any token starting `test-`, so each replica of a
//!   test can have its own), an outage switch for everyone (503) or for one token (a
//!   partitioned replica), per-verb authorization (403 with the real message format), one
//!   `resourceVersion` counter increasing on every change, as etcd's revision does;
//! - for the tests' judgement, not the API: every Lease's holder after each change and when
//!   it was made ([`KubeApi::lease_history`]), the ground truth of who may write when.
//!
//! Not implemented (nothing here depends on them): set-based label selectors, field
//! selectors (ignored: a client filtering by name must, and does, check names), pagination
//! (`limit`/`continue` are ignored), watch bookmarks, server-side apply, strategic merge
//! and JSON patches, `managedFields`, admission and schema validation (a CRD's OpenAPI
//! schema is checked by the tests against the generated manifests instead), defaulting,
//! garbage collection by owner references, namespaces' own lifecycle. Clients are the
//! real kube-rs client over HTTP with a kubeconfig file.

mod cache;
mod responses;
mod routes;
mod store;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::{Method, Request, Response};
use serde_json::{json, Value};

use crate::serve_http;
pub use cache::Lag;
use responses::{conflict, forbidden, json_response, not_found, status};
use routes::Route;
use store::{create, delete, in_route, merge, ns_of, of_route, replace};
use watch::Watches;

/// The UID of the `kube-system` namespace this server reports.
pub const KUBE_SYSTEM_UID: &str = "0f6d1f3a-7c55-4c8e-9a3b-2b1d9e6c4a10";

/// The token the test kubeconfig presents.
pub const TOKEN: &str = "test-service-account-token";

/// (resource plural, namespace or "" when cluster-scoped, name).
type Key = (&'static str, String, String);

/// A response body: whole, or a watch's stream.
pub type Body = BoxBody<Bytes, Infallible>;

#[derive(Default)]
struct State {
    /// Every object by resource, namespace and name.
    objects: BTreeMap<Key, Value>,
    next_version: u64,
    /// Verbs (`get`, `create`, `patch`) the service account may not use.
    denied: BTreeSet<String>,
    /// Each request as ("METHOD path content-type", token).
    requests: Vec<(String, String)>,
    /// Changes made by "someone else" right after the next GET, to provoke a conflict.
    interleave: Vec<(String, String)>,
    /// Every request gets 503, as from an API server that lost etcd.
    unavailable: bool,
    /// Requests with these tokens get 503: replicas cut off from the API server.
    partitioned: BTreeSet<String>,
    /// Change events and open watches.
    watches: Watches,
    /// The watch cache lists with `resourceVersion=0` may be served from.
    cache: cache::CachedLists,
    /// Every Lease's holder after each change, and when the change was made.
    lease_holders: Vec<(std::time::Instant, Key, Option<String>)>,
}

/// The server; clones share state.
#[derive(Clone, Default)]
pub struct KubeApi {
    state: Arc<Mutex<State>>,
}

impl KubeApi {
    /// Starts serving on a free port of 127.0.0.1.
    pub async fn start(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
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
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        self.apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": data,
        }));
    }

    /// Creates or replaces an object as `kubectl apply` would (its `kind` says which
    /// resource; `status` is kept from the stored object unless the object carries one).
    pub fn apply(&self, mut object: Value) {
        let ty = routes::TYPES
            .iter()
            .find(|t| Some(t.kind) == object["kind"].as_str())
            .expect("a kind this server serves");
        let ns = ns_of(ty, object["metadata"]["namespace"].as_str());
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let key = (ty.plural, ns, name);
        let mut s = self.state.lock().unwrap();
        object["apiVersion"] = json!(ty.api_version());
        match s.objects.get(&key).cloned() {
            None => {
                create(&mut s, key, object);
            }
            Some(current) => {
                if object.get("status").is_none() {
                    if let Some(status) = current.get("status") {
                        object["status"] = status.clone();
                    }
                }
                replace(&mut s, ty, key, &current, object);
            }
        }
    }

    /// Deletes an object as `kubectl delete` would (finalizers hold it).
    pub fn delete(&self, plural: &str, ns: &str, name: &str) {
        let ty = routes::by_plural(plural).unwrap();
        let mut s = self.state.lock().unwrap();
        delete(
            &mut s,
            ty,
            (ty.plural, ns_of(ty, Some(ns)), name.to_owned()),
        );
    }

    /// The stored object, if any.
    pub fn object(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let ty = routes::by_plural(plural).unwrap();
        let s = self.state.lock().unwrap();
        s.objects
            .get(&(ty.plural, ns_of(ty, Some(ns)), name.to_owned()))
            .cloned()
    }

    /// Ends every open watch, as an API server restart or a load balancer's idle timeout
    /// does; clients resume from their last resourceVersion.
    pub fn drop_watches(&self) {
        self.state.lock().unwrap().watches.drop_all();
    }

    /// Forgets the change history (etcd compaction): a watch resuming from an older
    /// resourceVersion gets 410 Gone and must list again.
    pub fn compact(&self) {
        let mut s = self.state.lock().unwrap();
        let now = s.next_version;
        s.watches.compact(now);
    }

    /// Makes the watch cache lag etcd (`Lag::Stale`: frozen as it is now; `Lag::Empty`:
    /// restarted with nothing) until [`KubeApi::cache_catches_up`]: lists that accept any
    /// version (`resourceVersion=0`) get its objects and revision, as a real API server's
    /// cache behind etcd answers them.
    pub fn lag_cache(&self, lag: Lag) {
        let mut s = self.state.lock().unwrap();
        let now = s.next_version;
        let State { cache, objects, .. } = &mut *s;
        cache.lag(lag, objects, now);
    }

    /// The watch cache follows etcd again.
    pub fn cache_catches_up(&self) {
        self.state.lock().unwrap().cache.catch_up();
    }

    /// The ConfigMap's `data`, if it exists.
    pub fn data(&self, ns: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let object = self.object("configmaps", ns, name)?;
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
        let lease = self.object("leases", ns, name)?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
    }

    /// The Lease's holder after each change of it (every renewal included), with the moment
    /// this server made the change: the ground truth of who may write when.
    pub fn lease_history(&self, ns: &str, name: &str) -> Vec<(std::time::Instant, Option<String>)> {
        let s = self.state.lock().unwrap();
        s.lease_holders
            .iter()
            .filter(|(_, (_, n, m), _)| n == ns && m == name)
            .map(|(at, _, holder)| (*at, holder.clone()))
            .collect()
    }

    /// Requests seen so far, as "METHOD path content-type".
    pub fn requests(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.requests.iter().map(|(r, _)| r.clone()).collect()
    }

    /// Requests seen so far with the token that sent each.
    pub fn requests_with_tokens(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().requests.clone()
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let query: BTreeMap<String, String> = req
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let content_type = header("content-type");
        let token = header("authorization")
            .strip_prefix("Bearer ")
            .unwrap_or("")
            .to_string();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let mut s = self.state.lock().unwrap();
        s.requests
            .push((format!("{method} {path} {content_type}"), token.clone()));
        if s.unavailable || s.partitioned.contains(&token) {
            return status(
                503,
                "ServiceUnavailable",
                "etcdserver: request timed out",
                None,
            );
        }
        if !token.starts_with("test-") {
            return status(401, "Unauthorized", "Unauthorized", None);
        }
        // Namespaces are read-only here: `kube-system` exists with a fixed UID.
        if path == "/api/v1/namespaces/kube-system" && method == Method::GET {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "kube-system", "uid": KUBE_SYSTEM_UID}});
            return json_response(200, &ns);
        }
        let Some(route) = routes::parse(&path) else {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            );
        };
        let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
        let verb = match (&method, &route.name) {
            (&Method::GET, None) if watching => "watch",
            (&Method::GET, None) => "list",
            (&Method::GET, Some(_)) => "get",
            (&Method::POST, None) => "create",
            (&Method::PATCH, Some(_)) => "patch",
            (&Method::PUT, Some(_)) => "update",
            (&Method::DELETE, Some(_)) => "delete",
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
            return forbidden(&route, verb);
        }
        let ns = ns_of(route.ty, route.namespace.as_deref());
        match verb {
            "watch" => {
                let from = query.get("resourceVersion").and_then(|v| v.parse().ok());
                let objects = in_route(&s, &route);
                let selector = query
                    .get("labelSelector")
                    .map(|q| label_selector(q))
                    .unwrap_or_default();
                let stream = s.watches.open(
                    (route.ty.plural, route.namespace.clone(), selector),
                    from.filter(|v| *v > 0),
                    objects,
                );
                let timeout = query
                    .get("timeoutSeconds")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(300u64);
                Response::builder()
                    .header("content-type", "application/json")
                    .body(watch::body(stream, std::time::Duration::from_secs(timeout)))
                    .unwrap()
            }
            "list" => list(&s, &route, &query),
            "get" => {
                let name = route.name.clone().unwrap();
                let key = (route.ty.plural, ns, name.clone());
                let Some(object) = s.objects.get(&key).cloned() else {
                    return not_found(route.ty, &name);
                };
                let pending = std::mem::take(&mut s.interleave);
                for (k, v) in pending {
                    let mut changed = object.clone();
                    changed["data"][k] = json!(v);
                    replace(&mut s, route.ty, key.clone(), &object, changed);
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
                let key = (route.ty.plural, ns.clone(), name.clone());
                if s.objects.contains_key(&key) {
                    return status(
                        409,
                        "AlreadyExists",
                        &format!("{} \"{name}\" already exists", route.ty.qualified()),
                        Some(&name),
                    );
                }
                if route.ty.namespaced {
                    object["metadata"]["namespace"] = json!(ns);
                }
                let object = create(&mut s, key, object);
                json_response(201, &object)
            }
            "delete" => {
                let name = route.name.clone().unwrap();
                match delete(&mut s, route.ty, (route.ty.plural, ns, name.clone())) {
                    Some(object) => json_response(200, &object),
                    None => not_found(route.ty, &name),
                }
            }
            _ => self.write(&mut s, &route, ns, verb, &content_type, &body),
        }
    }

    /// `update` and `patch`, of the object or its `/status`.
    fn write(
        &self,
        s: &mut State,
        route: &Route,
        ns: String,
        verb: &str,
        content_type: &str,
        body: &[u8],
    ) -> Response<Body> {
        let name = route.name.clone().unwrap();
        if verb == "patch" && content_type != "application/merge-patch+json" {
            return status(415, "UnsupportedMediaType", &format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json (this test server), got {content_type}"), None);
        }
        let key = (route.ty.plural, ns, name.clone());
        let Some(current) = s.objects.get(&key).cloned() else {
            return not_found(route.ty, &name);
        };
        let Ok(given) = serde_json::from_slice::<Value>(body) else {
            return status(400, "BadRequest", "invalid JSON body", None);
        };
        if let Some(rv) = given["metadata"]["resourceVersion"].as_str() {
            if current["metadata"]["resourceVersion"].as_str() != Some(rv) {
                return conflict(route.ty, &name);
            }
        }
        let mut next = if verb == "patch" {
            let mut merged = current.clone();
            merge(&mut merged, &given);
            merged
        } else {
            given
        };
        if route.ty.namespaced {
            next["metadata"]["namespace"] = current["metadata"]["namespace"].clone();
        }
        // The status subresource changes status only; the object everything but status.
        if route.ty.status_subresource {
            if route.status {
                let mut only_status = current.clone();
                only_status["status"] = next.get("status").cloned().unwrap_or(Value::Null);
                next = only_status;
            } else {
                match current.get("status") {
                    Some(v) => next["status"] = v.clone(),
                    None => {
                        if let Some(o) = next.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
        }
        if next == current {
            return json_response(200, &current);
        }
        match replace(s, route.ty, key, &current, next) {
            Some(object) => json_response(200, &object),
            None => json_response(200, &current),
        }
    }
}

/// A `labelSelector` query value (percent-encoded `k=v,k2=v2`): equality terms only, the
/// form the orchestrator sends; set-based terms (`in`, `notin`, `!k`) are not implemented.
fn label_selector(encoded: &str) -> Vec<(String, String)> {
    let decoded = encoded
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%3D", "=")
        .replace("%3d", "=")
        .replace("%2C", ",")
        .replace("%2c", ",");
    decoded
        .split(',')
        .filter_map(|term| term.split_once('='))
        .map(|(k, v)| (k.trim_end_matches('=').to_owned(), v.to_owned()))
        .collect()
}

/// A list, from the watch cache when the client allows (`resourceVersion=0`) and the
/// cache lags, else from the objects as they are.
fn list(s: &State, route: &routes::Route, query: &BTreeMap<String, String>) -> Response<Body> {
    let selector = query.get("labelSelector").map(|q| label_selector(q));
    let (items, revision) = match s
        .cache
        .serve(query.get("resourceVersion").map(String::as_str))
    {
        Some((objects, revision)) => (of_route(objects, route), revision),
        None => (in_route(s, route), s.next_version),
    };
    let items: Vec<Value> = items
        .into_iter()
        .filter(|o| selector.as_ref().is_none_or(|sel| watch::selected(o, sel)))
        .collect();
    json_response(
        200,
        &json!({
            "apiVersion": route.ty.api_version(),
            "kind": format!("{}List", route.ty.kind),
            "metadata": {"resourceVersion": revision.to_string()},
            "items": items,
        }),
    )
}
