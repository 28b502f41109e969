//! The cluster the generated sequences edit: two Gateways, the two DNSPolicies that
//! target them (`p0` → `g0`, `p1` → `g1`), three written DNSRecords and two
//! DNSHealthCheckProbes on the addresses they publish, each valid or broken in one place, and the steps that change it. Every name says whose it is
//! (`LISTENER.gN.team-a.io`, `rN-K.team-a.io`), so the oracle knows which objects a name
//! depends on without asking the engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::{json, Value};

/// The addresses the Gateways and records publish.
const POOL: [&str; 4] = ["192.0.2.10", "192.0.2.11", "198.51.100.7", "203.0.113.5"];
/// The listeners a Gateway may have.
const LISTENERS: [&str; 3] = ["api", "web", "www"];

/// One object of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Obj {
    Gateway(usize),
    Policy(usize),
    Record(usize),
    Probe(usize),
}

/// An object's spec (and, for a Gateway, its status addresses), valid or broken in one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Spec {
    Gateway {
        listeners: Vec<(&'static str, String)>,
        addresses: Vec<usize>,
    },
    Policy {
        protocol: &'static str,
        path: &'static str,
    },
    Record {
        host: String,
        targets: Vec<String>,
        ttl: u32,
        protocol: &'static str,
    },
    Probe {
        address: &'static str,
        protocol: &'static str,
    },
}

/// One step of a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Creates or edits the object.
    Put(Obj, Spec),
    /// Deletes it.
    Delete(Obj),
    /// A round while one of Kuadrant's kinds is not listed (an empty list before the first).
    EmptyList,
    /// A round whose list failed: the stores keep what they had, the round sees that.
    FailedList,
    /// The process restarts (its state directory kept) and its first round comes before
    /// the lists.
    Restart,
}

/// The cluster: each object's spec, generation and the step that created it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct World {
    pub(super) objects: BTreeMap<Obj, (Spec, i64, usize)>,
}

impl Spec {
    /// Whether the spec is valid, as the oracle sees it: no broken field.
    pub(super) fn valid(&self) -> bool {
        match self {
            Spec::Gateway { addresses, .. } => !addresses.is_empty(),
            Spec::Policy { protocol, .. } | Spec::Probe { protocol, .. } => *protocol != "UDP",
            Spec::Record {
                host,
                targets,
                protocol,
                ..
            } => {
                *protocol != "UDP"
                    && !host.contains("..")
                    && targets
                        .iter()
                        .all(|t| t.parse::<std::net::Ipv4Addr>().is_ok())
            }
        }
    }
}

/// A valid spec for `obj`, at random.
pub(super) fn valid(rng: &mut fastrand::Rng, obj: Obj) -> Spec {
    let some = |rng: &mut fastrand::Rng, n: usize| -> Vec<usize> {
        let mut picked: Vec<usize> = (0..n).filter(|_| rng.bool()).collect();
        if picked.is_empty() {
            picked.push(rng.usize(..n));
        }
        picked
    };
    match obj {
        Obj::Gateway(i) => Spec::Gateway {
            listeners: some(rng, LISTENERS.len())
                .into_iter()
                .map(|l| (LISTENERS[l], format!("{}.g{i}.team-a.io", LISTENERS[l])))
                .collect(),
            addresses: some(rng, POOL.len()),
        },
        Obj::Policy(_) => Spec::Policy {
            protocol: ["HTTP", "HTTPS"][rng.usize(..2)],
            path: ["/healthz", "/ready"][rng.usize(..2)],
        },
        Obj::Record(i) => Spec::Record {
            host: format!("r{i}-{}.team-a.io", rng.usize(1..3)),
            targets: some(rng, POOL.len())
                .into_iter()
                .map(|a| POOL[a].to_owned())
                .collect(),
            ttl: [30, 60][rng.usize(..2)],
            protocol: ["HTTP", "HTTPS"][rng.usize(..2)],
        },
        Obj::Probe(_) => Spec::Probe {
            address: POOL[rng.usize(..POOL.len())],
            protocol: ["HTTP", "HTTPS"][rng.usize(..2)],
        },
    }
}

/// `spec` broken in one place (what a typo does), at random.
pub(super) fn broken(rng: &mut fastrand::Rng, spec: &Spec) -> Spec {
    let mut spec = spec.clone();
    match &mut spec {
        // A listener's hostname is validated by the API server (Gateway API's schema); what
        // breaks is the status: a Gateway controller that lost its addresses for a while.
        Spec::Gateway { addresses, .. } => addresses.clear(),
        Spec::Policy { protocol, .. } | Spec::Probe { protocol, .. } => *protocol = "UDP",
        Spec::Record {
            host,
            targets,
            protocol,
            ..
        } => match rng.usize(..3) {
            0 => *host = host.replacen('.', "..", 1),
            1 => targets[0] = "300.1.1.1".to_owned(),
            _ => *protocol = "UDP",
        },
    }
    spec
}

/// A random object.
pub(super) fn any_object(rng: &mut fastrand::Rng) -> Obj {
    match rng.usize(..4) {
        0 => Obj::Gateway(rng.usize(..2)),
        1 => Obj::Policy(rng.usize(..2)),
        2 => Obj::Probe(rng.usize(..2)),
        _ => Obj::Record(rng.usize(..3)),
    }
}

impl World {
    /// Applies a `Put` or `Delete` made at step `at`.
    pub(super) fn apply(&mut self, step: &Step, at: usize) {
        match step {
            Step::Put(obj, spec) => {
                let (generation, created) = match self.objects.get(obj) {
                    Some((old, g, c)) => (if old == spec { *g } else { g + 1 }, *c),
                    None => (1, at),
                };
                self.objects
                    .insert(*obj, (spec.clone(), generation, created));
            }
            Step::Delete(obj) => {
                self.objects.remove(obj);
            }
            _ => {}
        }
    }

    /// Whether every object is valid.
    pub(super) fn all_valid(&self) -> bool {
        self.objects.values().all(|(s, _, _)| s.valid())
    }

    /// The policies there are.
    pub(super) fn policies(&self) -> Vec<Obj> {
        self.objects
            .keys()
            .filter(|o| matches!(o, Obj::Policy(_)))
            .copied()
            .collect()
    }

    /// The objects as the watches hold them: records, probes and policies, Gateways.
    pub(super) fn objects(&self) -> [Vec<Arc<DynamicObject>>; 3] {
        let mut out: [Vec<Arc<DynamicObject>>; 3] = Default::default();
        for (obj, (spec, generation, created)) in &self.objects {
            let (slot, value) = document(*obj, spec);
            let mut value = value;
            let name = value["metadata"]["name"].clone();
            value["metadata"] = json!({
                "name": name, "namespace": "team-a",
                "uid": format!("{obj:?}@{created}"), "generation": generation,
                "creationTimestamp": format!("2026-01-01T00:{:02}:{:02}Z", created / 60, created % 60),
            });
            let object: DynamicObject = serde_json::from_value(value).expect("an object");
            out[slot].push(Arc::new(object));
        }
        out
    }
}

/// The object's document, and which watch holds it (0 records, 1 policies, 2 Gateways).
fn document(obj: Obj, spec: &Spec) -> (usize, Value) {
    match (obj, spec) {
        (
            Obj::Gateway(i),
            Spec::Gateway {
                listeners,
                addresses,
            },
        ) => {
            let listeners: Vec<Value> = listeners
                .iter()
                .map(|(l, h)| json!({"name": l, "hostname": h, "port": 443, "protocol": "HTTPS"}))
                .collect();
            let addresses: Vec<Value> = addresses
                .iter()
                .map(|a| json!({"type": "IPAddress", "value": POOL[*a]}))
                .collect();
            (
                2,
                json!({
                    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                    "metadata": {"name": format!("g{i}")},
                    "spec": {"gatewayClassName": "test", "listeners": listeners},
                    "status": {"addresses": addresses},
                }),
            )
        }
        (Obj::Policy(i), Spec::Policy { protocol, path }) => (
            1,
            json!({
                "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
                "metadata": {"name": format!("p{i}")},
                "spec": {
                    "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": format!("g{i}")},
                    "healthCheck": {"path": path, "port": 443, "protocol": protocol, "interval": "1s"},
                },
            }),
        ),
        (
            Obj::Record(i),
            Spec::Record {
                host,
                targets,
                ttl,
                protocol,
            },
        ) => (
            0,
            json!({
                "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
                "metadata": {"name": format!("rec{i}")},
                "spec": {"rootHost": host, "endpoints": [
                    {"dnsName": host, "recordType": "A", "recordTTL": ttl, "targets": targets}
                ], "healthCheck": {"path": "/healthz", "port": 443, "protocol": protocol}},
            }),
        ),
        (Obj::Probe(i), Spec::Probe { address, protocol }) => (
            1,
            json!({
                "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
                "metadata": {"name": format!("probe{i}")},
                "spec": {"port": 443, "hostname": "probe.team-a.io", "address": address,
                         "path": "/healthz", "protocol": protocol, "interval": "1s"},
            }),
        ),
        (obj, spec) => unreachable!("{obj:?} with {spec:?}"),
    }
}
