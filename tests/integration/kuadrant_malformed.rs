//! Kuadrant's documents are read into types once, where ho-kube hands them to the
//! translation: a document whose field has the wrong type is refused, naming the object,
//! the field and why, in the status of an object the user can `kubectl get` (the record,
//! the probe, or the policy over a Gateway), and nothing published before leaves DNS.
//!
//! Seeded: every field of the schema the translation reads (the records', both DNSPolicy
//! shapes', the probes' and the Gateways') gets values of other types, one document at a
//! time, against ho-kube's pure core and admission with its last accepted generations.
//! The oracle is this file's table: which object and which field path the refusal names,
//! and that the answers are those from before the edit, and again after its revert.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ho_config::Config;
use ho_kube::tenants::admit::Admitter;
use ho_kube::tenants::kuadrant::{Allowance, Core, Refusal, View};
use kube::api::DynamicObject;

use crate::kuadrant_sequences::Nothing;
use serde_json::{json, Value};

/// Each name's answer: its addresses, sorted.
type Answers = BTreeMap<String, Vec<String>>;

const BASE: &str = r#"
[sinks.local]
kind = "hosts_file"
dir = "/nonexistent/ho-malformed"

[kubernetes]
tenants = true
kuadrant = true

[[kubernetes.allow]]
namespace = "team-a"
domains = ["team-a.io"]
sinks = ["local"]
"#;

/// The type a field holds, and so the values of other types it is given.
#[derive(Clone, Copy, Debug)]
enum Type {
    Str,
    Int,
    /// A port: a number or a string of one.
    IntOrStr,
    Bool,
    List,
    Map,
    /// A struct (a map of fields).
    Struct,
    /// A geo code or a v1alpha1 geo layout.
    StrOrStruct,
}

impl Type {
    /// Values of other types than this one.
    fn wrong(self) -> Vec<Value> {
        match self {
            Type::Str => vec![json!(5), json!(true), json!(["a"]), json!({"a": "b"})],
            Type::Int => vec![
                json!("five"),
                json!(true),
                json!(1.5),
                json!([1]),
                json!({"a": 1}),
            ],
            Type::IntOrStr => vec![json!(true), json!(1.5), json!([1]), json!({"a": 1})],
            Type::Bool => vec![json!("yes"), json!(1), json!([true])],
            Type::List => vec![json!("x"), json!(5), json!({"a": 1})],
            Type::Map => vec![json!("x"), json!(5), json!([1])],
            Type::Struct => vec![json!("x"), json!(5), json!(false)],
            Type::StrOrStruct => vec![json!(5), json!(true), json!([1])],
        }
    }
}

/// The objects of the cluster: which one (kind, name) and its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Obj {
    Record,
    Probe,
    PolicyV1,
    PolicyV1alpha1,
    Gateway,
}

/// A health check block's fields (a policy's `healthCheck`, a record's `healthCheck`, a
/// probe's `spec`), below `at`.
fn check_fields(at: &str) -> Vec<(String, Type)> {
    let fields = [
        ("protocol", Type::Str),
        ("port", Type::IntOrStr),
        ("endpoint", Type::Str),
        ("path", Type::Str),
        ("host", Type::Str),
        ("hostname", Type::Str),
        ("interval", Type::Str),
        ("failureThreshold", Type::Int),
        ("expectedResponses", Type::List),
        ("expectedResponses[0]", Type::Int),
        ("allowInsecureCertificates", Type::Bool),
        ("AllowInsecureCertificates", Type::Bool),
        ("allowInsecureCertificate", Type::Bool),
        ("AllowInsecureCertificate", Type::Bool),
        ("additionalHeadersRef", Type::Struct),
        ("additionalHeadersRef.name", Type::Str),
    ];
    fields
        .into_iter()
        .map(|(f, t)| (format!("{at}.{f}"), t))
        .collect()
}

/// Every field of `obj`'s schema the translation reads, with its type.
fn fields(obj: Obj) -> Vec<(String, Type)> {
    let owned = |list: &[(&str, Type)]| -> Vec<(String, Type)> {
        list.iter().map(|(f, t)| ((*f).to_owned(), *t)).collect()
    };
    match obj {
        Obj::Record => {
            let mut f = owned(&[
                ("spec", Type::Struct),
                ("spec.rootHost", Type::Str),
                ("spec.endpoints", Type::List),
                ("spec.endpoints[0]", Type::Struct),
                ("spec.endpoints[0].dnsName", Type::Str),
                ("spec.endpoints[0].recordType", Type::Str),
                ("spec.endpoints[0].targets", Type::List),
                ("spec.endpoints[0].targets[0]", Type::Str),
                ("spec.endpoints[0].recordTTL", Type::Int),
                ("spec.endpoints[0].setIdentifier", Type::Str),
                ("spec.endpoints[0].providerSpecific", Type::List),
                ("spec.endpoints[0].providerSpecific[0].name", Type::Str),
                ("spec.endpoints[0].providerSpecific[0].value", Type::Str),
                ("spec.endpoints[0].labels", Type::Map),
                ("spec.healthCheck", Type::Struct),
            ]);
            f.extend(check_fields("spec.healthCheck"));
            f
        }
        Obj::Probe => {
            let mut f = owned(&[("spec", Type::Struct), ("spec.address", Type::Str)]);
            f.extend(check_fields("spec"));
            f
        }
        Obj::PolicyV1 => {
            let mut f = owned(&[
                ("spec", Type::Struct),
                ("spec.targetRef", Type::Struct),
                ("spec.targetRef.group", Type::Str),
                ("spec.targetRef.kind", Type::Str),
                ("spec.targetRef.name", Type::Str),
                ("spec.targetRef.sectionName", Type::Str),
                ("spec.healthCheck", Type::Struct),
                ("spec.health", Type::Struct),
                ("spec.loadBalancing", Type::Struct),
                ("spec.loadBalancing.weight", Type::Int),
                ("spec.loadBalancing.geo", Type::StrOrStruct),
                ("spec.loadBalancing.defaultGeo", Type::Bool),
            ]);
            f.extend(check_fields("spec.healthCheck"));
            f
        }
        Obj::PolicyV1alpha1 => owned(&[
            ("spec.loadBalancing.weighted", Type::Struct),
            ("spec.loadBalancing.weighted.defaultWeight", Type::Int),
            ("spec.loadBalancing.weighted.custom", Type::List),
            ("spec.loadBalancing.weighted.custom[0].attribute", Type::Str),
            ("spec.loadBalancing.weighted.custom[0].value", Type::Str),
            ("spec.loadBalancing.weighted.custom[0].weight", Type::Int),
            ("spec.loadBalancing.GEO", Type::Struct),
            ("spec.loadBalancing.GEO.defaultGeo", Type::Str),
            ("spec.loadBalancing.geo.defaultGeo", Type::Str),
        ]),
        Obj::Gateway => owned(&[
            ("spec.listeners", Type::List),
            ("spec.listeners[0]", Type::Struct),
            ("spec.listeners[0].name", Type::Str),
            ("spec.listeners[0].hostname", Type::Str),
            ("status", Type::Struct),
            ("status.addresses", Type::List),
            ("status.addresses[0]", Type::Struct),
            ("status.addresses[0].type", Type::Str),
            ("status.addresses[0].value", Type::Str),
        ]),
    }
}

/// The valid document of `obj`.
fn document(obj: Obj) -> Value {
    let check = json!({"path": "/healthz", "port": 443, "protocol": "HTTPS", "interval": "1s"});
    match obj {
        Obj::Record => json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
            "metadata": {"name": "rec0"},
            "spec": {"rootHost": "r0.team-a.io", "endpoints": [
                {"dnsName": "r0.team-a.io", "recordType": "A", "recordTTL": 60, "targets": ["192.0.2.1"]}
            ], "healthCheck": check},
        }),
        Obj::Probe => json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
            "metadata": {"name": "probe0"},
            "spec": {"port": 443, "hostname": "r0.team-a.io", "address": "192.0.2.1",
                     "path": "/healthz", "protocol": "HTTP", "interval": "1s"},
        }),
        Obj::PolicyV1 => json!({
            "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
            "metadata": {"name": "p0"},
            "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "g0"},
                     "healthCheck": check},
        }),
        Obj::PolicyV1alpha1 => json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSPolicy",
            "metadata": {"name": "p1"},
            "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "g1"},
                     "healthCheck": check},
        }),
        Obj::Gateway => gateway("g0", "192.0.2.10"),
    }
}

fn gateway(name: &str, address: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name},
        "spec": {"gatewayClassName": "test", "listeners": [
            {"name": "api", "hostname": format!("api.{name}.team-a.io"), "port": 443, "protocol": "HTTPS"}
        ]},
        "status": {"addresses": [{"type": "IPAddress", "value": address}]},
    })
}

/// Sets `path` (`a.b[0].c`) of `doc` to `value`, making the maps and one-element lists on
/// the way.
fn set(doc: &mut Value, path: &str, value: Value) {
    let mut at = doc;
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((key, i)) => (key, Some(i.trim_end_matches(']').parse::<usize>().unwrap())),
            None => (part, None),
        };
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .unwrap()
            .entry(key)
            .or_insert(Value::Null);
        if let Some(i) = index {
            if at.as_array().is_none_or(|a| a.len() <= i) {
                *at = json!([{}]);
            }
            at = &mut at[i];
        }
    }
    *at = value;
}

/// The cluster, each object's document in its watch (0 records, 1 probes and policies,
/// 2 Gateways), with a generation per object.
fn objects(docs: &[(Obj, Value, i64)]) -> [Vec<Arc<DynamicObject>>; 3] {
    let mut out: [Vec<Arc<DynamicObject>>; 3] = Default::default();
    let mut all: Vec<(Obj, Value, i64)> = docs.to_vec();
    all.push((Obj::Gateway, gateway("g1", "192.0.2.11"), 1));
    for (i, (obj, doc, generation)) in all.into_iter().enumerate() {
        let slot = match obj {
            Obj::Record => 0,
            Obj::Probe | Obj::PolicyV1 | Obj::PolicyV1alpha1 => 1,
            Obj::Gateway => 2,
        };
        let mut doc = doc;
        let name = doc["metadata"]["name"].clone();
        doc["metadata"] = json!({
            "name": name, "namespace": "team-a", "uid": format!("uid-{i}"),
            "generation": generation, "creationTimestamp": "2026-01-01T00:00:00Z",
        });
        out[slot].push(Arc::new(serde_json::from_value(doc).expect("an object")));
    }
    out
}

/// One process: the core and admission, as the controller runs a round.
struct Process {
    core: Core,
    admitter: Admitter,
    base: Config,
}

impl Process {
    fn start(dir: &Path) -> Process {
        let file = dir.join("base.toml");
        std::fs::write(&file, BASE).expect("the base config written");
        Process {
            core: Core::new(),
            admitter: Admitter::keeping_in(Some(dir)),
            base: ho_config::load::load(&[file]).expect("the base config"),
        }
    }

    fn round(&mut self, docs: &[(Obj, Value, i64)]) -> Answers {
        let sinks = |_: &str| vec!["local".to_owned()];
        let domain = |_: &str, host: &str| host.ends_with(".team-a.io");
        let allowed = Allowance {
            sinks: &sinks,
            domain: &domain,
        };
        let [records, others, gateways] = objects(docs);
        let view = View {
            records: &records,
            others: &others,
            gateways: &gateways,
        };
        let kept = self.admitter.kept();
        self.core.refresh(Some(&view), &allowed, &kept);
        let input = self.core.stand_ins(&mut |_, _| false);
        let refused = self.core.refusals(&kept);
        let admission =
            self.admitter
                .admit_with(&self.base, &input, refused, &Nothing, &ho_kinds::CATALOG);
        let config = &admission.config;
        let mut out = Answers::new();
        for tenant in &config.tenants {
            let ho_config::EndpointSelection::Names(names) = &tenant.endpoints else {
                continue;
            };
            let mut addresses: Vec<String> = (config.endpoints.iter())
                .filter(|e| names.contains(&e.name))
                .map(|e| e.address.clone())
                .collect();
            addresses.sort();
            for domain in &tenant.domains {
                out.insert(domain.clone(), addresses.clone());
            }
        }
        out
    }

    /// The refusal the object the user can `kubectl get` for `obj` says: the record's
    /// own, the probe's, or (for a Gateway) its policy's.
    fn said(&self, obj: Obj) -> Option<String> {
        let key = |name: &str| ("team-a".to_owned(), name.to_owned());
        match obj {
            Obj::Record => (self.core.records().get(&key("rec0"))?.stand_ins.as_ref())
                .err()
                .map(ToString::to_string),
            Obj::Probe => self.core.probes().get(&key("probe0"))?.clone().err(),
            Obj::PolicyV1 | Obj::Gateway => self.policy_invalid("p0"),
            Obj::PolicyV1alpha1 => self.policy_invalid("p1"),
        }
    }

    fn policy_invalid(&self, name: &str) -> Option<String> {
        let outcome = self
            .core
            .policies()
            .get(&("team-a".to_owned(), name.to_owned()))?;
        outcome.as_ref().ok()?.invalid.clone()
    }
}

/// Which object and name a refusal of `obj` names.
fn named(obj: Obj) -> &'static str {
    match obj {
        Obj::Record => "DNSRecord rec0",
        Obj::Probe => "DNSHealthCheckProbe probe0",
        Obj::PolicyV1 => "DNSPolicy p0",
        Obj::PolicyV1alpha1 => "DNSPolicy p1",
        Obj::Gateway => "Gateway g0",
    }
}

/// Every field of every kind, each with values of other types picked by seed: the edit is
/// refused naming the object and the field, every name answers as before the edit, and
/// the revert is accepted with the same answers. A malformed probe refuses the record
/// naming its address, linked to it by key.
#[test]
fn a_document_whose_field_has_the_wrong_type_is_refused_naming_it_and_nothing_leaves() {
    let kinds = [
        Obj::Record,
        Obj::Probe,
        Obj::PolicyV1,
        Obj::PolicyV1alpha1,
        Obj::Gateway,
    ];
    let cases: Vec<(Obj, String, Type)> = kinds
        .iter()
        .flat_map(|k| fields(*k).into_iter().map(|(f, t)| (*k, f, t)))
        .collect();
    let dir = tempfile::tempdir().expect("a state dir");
    let mut process = Process::start(dir.path());
    let valid: Vec<(Obj, Value, i64)> = kinds.iter().map(|k| (*k, document(*k), 1)).collect();
    let before = process.round(&valid);
    for name in ["r0.team-a.io", "api.g0.team-a.io", "api.g1.team-a.io"] {
        assert!(before.contains_key(name), "{name} published: {before:?}");
    }
    let mut refused = 0;
    for seed in 0..3 * cases.len() as u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let (obj, field, ty) = &cases[seed as usize % cases.len()];
        let wrong = ty.wrong();
        let value = wrong[rng.usize(..wrong.len())].clone();
        let mut docs = valid.clone();
        let edited = docs.iter_mut().find(|(o, _, _)| o == obj).unwrap();
        set(&mut edited.1, field, value.clone());
        edited.2 = 2 + seed as i64;
        let at = format!("seed {seed}: {} {field} = {value}", named(*obj));
        let answers = process.round(&docs);
        assert_eq!(answers, before, "{at}: nothing leaves or changes");
        let said = process
            .said(*obj)
            .unwrap_or_else(|| panic!("{at}: not refused"));
        let want = format!("{}: {field}: invalid type", named(*obj));
        assert!(
            said.contains(&want),
            "{at}: {said:?} does not name {want:?}"
        );
        if *obj == Obj::Probe && !field.starts_with("spec.address") && field != "spec" {
            let record = &process.core.records()[&("team-a".to_owned(), "rec0".to_owned())];
            match &record.stand_ins {
                Err(Refusal::ByProbe { probe, .. }) => {
                    assert_eq!(probe.to_string(), "DNSHealthCheckProbe probe0", "{at}")
                }
                other => panic!(
                    "{at}: rec0 is not refused by its probe: {:?}",
                    other.as_ref().err()
                ),
            }
        }
        refused += 1;
        let mut reverted = valid.clone();
        for d in &mut reverted {
            d.2 = 3 + seed as i64;
        }
        assert_eq!(process.round(&reverted), before, "{at}: the revert");
        assert_eq!(process.said(*obj), None, "{at}: the revert is accepted");
    }
    assert_eq!(refused, 3 * cases.len());
}
