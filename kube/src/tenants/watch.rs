//! What the controller knows of the cluster: `DNSFailover` resources, Gateways, Ingresses,
//! Services and Nodes, each kept by a kube-runtime reflector (one list, then a watch resumed from
//! its resourceVersion; a watch too old for the server, 410 Gone, lists again). No
//! polling: the API server is asked again only when a watch ends.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tracing::{info, warn};

use super::discover::{self, Lookup};
use super::resource::{DNSFailover, NodeAddressType, FINALIZER};

/// The five stores, and a signal raised on every change to any of them.
#[derive(Clone)]
pub struct Watched {
    /// The resources, every namespace.
    pub resources: Store<DNSFailover>,
    gateways: Store<DynamicObject>,
    gateway_type: ApiResource,
    ingresses: Store<Ingress>,
    services: Store<Service>,
    nodes: Store<Node>,
    /// Kuadrant's DNSRecords, DNSHealthCheckProbes and DNSPolicies, when watched.
    pub kuadrant: Option<KuadrantStores>,
    changes: Arc<Notify>,
}

/// Kuadrant's resources (`[kubernetes] kuadrant`).
#[derive(Clone)]
pub struct KuadrantStores {
    /// `DNSRecord`s, every namespace.
    pub records: Store<DynamicObject>,
    /// `DNSHealthCheckProbe`s and `DNSPolicy`s, every namespace.
    pub others: [Store<DynamicObject>; 2],
}

impl KuadrantStores {
    /// The `DNSRecord` type, for writing their status.
    pub fn record_type() -> ApiResource {
        kuadrant_type("v1alpha1", "DNSRecord", "dnsrecords")
    }

    /// The `DNSHealthCheckProbe` type.
    pub fn probe_type() -> ApiResource {
        kuadrant_type("v1alpha1", "DNSHealthCheckProbe", "dnshealthcheckprobes")
    }

    /// The `DNSPolicy` type (Kuadrant's current version).
    pub fn policy_type() -> ApiResource {
        kuadrant_type("v1", "DNSPolicy", "dnspolicies")
    }

    /// The probes and policies now.
    pub fn other_documents(&self) -> Vec<Arc<DynamicObject>> {
        self.others.iter().flat_map(|s| s.state()).collect()
    }

    /// The probes now.
    pub fn probes(&self) -> Vec<Arc<DynamicObject>> {
        self.others[0].state()
    }

    /// The policies now.
    pub fn policies(&self) -> Vec<Arc<DynamicObject>> {
        self.others[1].state()
    }
}

fn kuadrant_type(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kuadrant.io".into(),
        version: version.into(),
        api_version: format!("kuadrant.io/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

impl Watched {
    /// Starts the five watches, and Kuadrant's three with `kuadrant` (tasks on the current
    /// runtime, ended with the process).
    pub fn start(client: &Client, kuadrant: bool) -> Watched {
        let changes = Arc::new(Notify::new());
        let gateway_type = ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            plural: "gateways".into(),
        };
        Watched {
            resources: keep(Api::all(client.clone()), (), &changes, failover_relevant),
            gateways: keep(
                Api::all_with(client.clone(), &gateway_type),
                gateway_type.clone(),
                &changes,
                gateway_relevant,
            ),
            gateway_type,
            ingresses: keep(Api::all(client.clone()), (), &changes, ingress_relevant),
            services: keep(Api::all(client.clone()), (), &changes, service_relevant),
            nodes: keep(Api::all(client.clone()), (), &changes, node_relevant),
            kuadrant: kuadrant.then(|| {
                let watch = |t: ApiResource| {
                    keep(
                        Api::all_with(client.clone(), &t),
                        t,
                        &changes,
                        spec_relevant,
                    )
                };
                KuadrantStores {
                    records: watch(KuadrantStores::record_type()),
                    others: [
                        watch(KuadrantStores::probe_type()),
                        watch(KuadrantStores::policy_type()),
                    ],
                }
            }),
            changes,
        }
    }

    /// The change signal, raised on every change; a change while nobody waits is kept for
    /// the next wait.
    pub fn changes(&self) -> Arc<Notify> {
        self.changes.clone()
    }

    /// Raises the change signal: the controller has more to do without a new event.
    pub fn poke(&self) {
        self.changes.notify_one();
    }

    /// Waits until the resources are listed (so the first round never sees "none"), and
    /// up to `grace` for the others (a cluster without Gateway API never lists Gateways;
    /// resources naming one then wait with a status saying so). A cluster without the CRD
    /// never lists the resources either: after `grace` the process runs on (the first
    /// list, whenever it comes, is a change like any other) and says what is missing.
    pub async fn ready(&self, grace: Duration) {
        let all = async {
            let _ = self.resources.wait_until_ready().await;
            let _ = self.ingresses.wait_until_ready().await;
            let _ = self.services.wait_until_ready().await;
            let _ = self.nodes.wait_until_ready().await;
            let _ = self.gateways.wait_until_ready().await;
            // Kuadrant's records publish nothing new until all its kinds are listed.
            for store in self
                .kuadrant
                .iter()
                .flat_map(|k| k.others.iter().chain([&k.records]))
            {
                let _ = store.wait_until_ready().await;
            }
        };
        if tokio::time::timeout(grace, all).await.is_err() {
            let resources =
                tokio::time::timeout(Duration::ZERO, self.resources.wait_until_ready()).await;
            if resources.is_err() {
                warn!("DNSFailover resources are not listed yet: is the CRD installed (kubectl apply -f deploy/kubernetes/crds.yaml) and may the service account list them? Running on; they are published once listed");
            }
        }
    }
}

/// Whether `store` has had its first list.
pub(crate) fn listed<K>(store: &Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    use futures_util::FutureExt;
    store.wait_until_ready().now_or_never().is_some()
}

/// What of an object admission reads, as a value that changes when that does.
type Relevant<K> = fn(&K) -> serde_json::Value;

/// A resource's spec (by generation), its deletion and our finalizer; not its status,
/// which this process writes itself.
fn failover_relevant(r: &DNSFailover) -> serde_json::Value {
    let m = &r.metadata;
    let ours = m.finalizers.iter().flatten().any(|f| f == FINALIZER);
    serde_json::json!([m.generation, m.deletion_timestamp, ours])
}

/// A Node's labels and addresses (not its conditions, which kubelets update all the time).
fn node_relevant(n: &Node) -> serde_json::Value {
    let addresses = n.status.as_ref().map(|s| &s.addresses);
    serde_json::json!([n.metadata.labels, addresses])
}

/// A Service's load balancer ingress.
fn service_relevant(s: &Service) -> serde_json::Value {
    serde_json::json!(s.status.as_ref().map(|s| &s.load_balancer))
}

/// An Ingress's load balancer.
fn ingress_relevant(i: &Ingress) -> serde_json::Value {
    serde_json::json!(i.status.as_ref().map(|s| &s.load_balancer))
}

/// A Kuadrant resource's spec, its deletion and our finalizer (not its status, which we or
/// Kuadrant write).
fn spec_relevant(o: &DynamicObject) -> serde_json::Value {
    let m = &o.metadata;
    let ours = m.finalizers.iter().flatten().any(|f| f == FINALIZER);
    serde_json::json!([o.data.get("spec"), m.deletion_timestamp, ours])
}

/// A Gateway's addresses, its listeners (a DNSPolicy publishes their hostnames) and our
/// `PolicyAffected` condition (a Gateway controller that rewrites its conditions may drop
/// it; a round puts it back).
fn gateway_relevant(g: &DynamicObject) -> serde_json::Value {
    let ours = g.data["status"]["conditions"].as_array().and_then(|c| {
        c.iter()
            .find(|c| c["type"] == super::kuadrant::AFFECTED)
            .cloned()
    });
    serde_json::json!([
        g.data.pointer("/status/addresses"),
        g.data.pointer("/spec/listeners"),
        ours
    ])
}

/// A reflector over `api`, raising `changes` when what admission reads of an object
/// (`relevant`) changed (so the status writes this process makes, and Node heartbeats,
/// start no round), and logging watch errors (the default backoff spaces retries up to a
/// minute apart).
fn keep<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    changes: &Arc<Notify>,
    relevant: Relevant<K>,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let kind = K::kind(&dyntype).into_owned();
    let writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let changes = changes.clone();
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    tokio::spawn(async move {
        futures_util::pin_mut!(stream);
        let mut seen: HashMap<(Option<String>, Option<String>), serde_json::Value> = HashMap::new();
        while let Some(event) = stream.next().await {
            let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    let now = relevant(&o);
                    if seen.insert(key(&o), now.clone()).as_ref() != Some(&now) {
                        changes.notify_one();
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    seen.remove(&key(&o));
                    changes.notify_one();
                }
                // A relist ended: objects deleted meanwhile are gone from the store.
                Ok(watcher::Event::InitDone) => changes.notify_one(),
                Ok(watcher::Event::Init) => {}
                // Compaction outran the watch: the reflector lists again, as designed.
                Err(watcher::Error::WatchError(e)) if e.code == 410 => {
                    info!(kind, "watch expired (410 Gone); listing again")
                }
                Err(e) => warn!(kind, "watch failed, retrying with backoff: {e}"),
            }
        }
    });
    store
}

impl Watched {
    /// The Gateways now, every namespace.
    pub fn gateway_objects(&self) -> Vec<Arc<DynamicObject>> {
        self.gateways.state()
    }

    /// The Gateways, once listed (`None` before: an empty store is not "no Gateways").
    pub fn listed_gateways(&self) -> Option<Vec<Arc<DynamicObject>>> {
        listed(&self.gateways).then(|| self.gateways.state())
    }
}

impl Lookup for Watched {
    fn gateway(&self, namespace: &str, name: &str) -> Option<discover::FoundGateway> {
        let key = ObjectRef::new_with(name, self.gateway_type.clone()).within(namespace);
        self.gateways
            .get(&key)
            .map(|g| discover::FoundGateway::of(&g))
    }

    fn ingress(&self, namespace: &str, name: &str) -> Option<Vec<discover::Target>> {
        let key = ObjectRef::new(name).within(namespace);
        self.ingresses
            .get(&key)
            .map(|i| discover::ingress_addresses(&i))
    }

    fn service(&self, namespace: &str, name: &str) -> Option<Vec<discover::Target>> {
        let key = ObjectRef::new(name).within(namespace);
        self.services
            .get(&key)
            .map(|s| discover::service_addresses(&s))
    }

    fn nodes(
        &self,
        selector: &BTreeMap<String, String>,
        kind: NodeAddressType,
    ) -> Vec<(String, IpAddr)> {
        let mut nodes: Vec<(String, IpAddr)> = self
            .nodes
            .state()
            .iter()
            .filter(|n| discover::node_matches(n, selector))
            .filter_map(|n| Some((n.metadata.name.clone()?, discover::node_address(n, kind)?)))
            .collect();
        nodes.sort();
        nodes
    }
}
