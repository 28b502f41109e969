//! Upgrading from 0.1.0 keeps every setting: the API server prunes what a CRD's schema does
//! not list, so a resource written with 0.1.0's snake_case fields (`hold_failback`, ...)
//! must survive the new CRD whichever comes first, the CRD or the resources. The pruning is
//! the API server's (a structural schema drops unknown fields, recursively), written here
//! from its documentation; 0.1.0's CRD is kept as it shipped
//! (`tests/fixtures/crd/dnsfailover-0.1.0.yaml`). The expected settings are the resource's
//! own values, read back through the type the controller parses.

use serde_json::{json, Value};

use crate::cli::repo;
use ho_kube::tenants::resource::DNSFailover;

/// The `spec` schema of a CRD file.
fn spec_schema(file: &str) -> Value {
    let text = std::fs::read_to_string(repo(file)).unwrap();
    let crd: Value = serde_yaml::from_str(&text).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

/// `value` as the API server stores it under `schema`: object fields the schema does not
/// list are dropped, in every object the schema describes.
fn prune(value: &Value, schema: &Value) -> Value {
    match value {
        Value::Object(map) if schema["x-kubernetes-preserve-unknown-fields"] == true => {
            Value::Object(map.clone())
        }
        Value::Object(map) => {
            match (schema.get("properties"), schema.get("additionalProperties")) {
                (Some(Value::Object(props)), _) => Value::Object(
                    (map.iter())
                        .filter_map(|(k, v)| Some((k.clone(), prune(v, props.get(k)?))))
                        .collect(),
                ),
                (None, Some(each)) if each.is_object() => Value::Object(
                    map.iter()
                        .map(|(k, v)| (k.clone(), prune(v, each)))
                        .collect(),
                ),
                _ => value.clone(),
            }
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| prune(v, &schema["items"])).collect())
        }
        other => other.clone(),
    }
}

/// A resource's spec: its settings as 0.1.0 spelled them, or as 0.2 spells them.
fn spec(old: bool) -> Value {
    let name = |old_name: &str, new_name: &str| if old { old_name } else { new_name }.to_owned();
    let mut spec = serde_json::Map::new();
    spec.insert("domains".into(), json!(["shop.team-a.example.org"]));
    spec.insert("sinks".into(), json!(["dns"]));
    spec.insert(
        "endpoints".into(),
        json!([{ "nodes": {"role": "edge"}, name("node_address", "nodeAddress"): "InternalIP" }]),
    );
    spec.insert(name("degraded_ttl", "degradedTTL"), json!("10s"));
    spec.insert(name("hold_failback", "holdFailback"), json!(true));
    spec.insert(
        name("on_all_unhealthy", "onAllUnhealthy"),
        json!("keep_last"),
    );
    spec.insert(name("min_healthy", "minHealthy"), json!(0.5));
    spec.insert(name("default_weight", "defaultWeight"), json!(3));
    spec.insert(name("default_geo", "defaultGeo"), json!("IE"));
    Value::Object(spec)
}

/// Every setting the resource holds, read as the controller reads it.
fn settings(spec: &Value) -> String {
    let resource: DNSFailover = serde_json::from_value(json!({
        "apiVersion": "healthorchestrator.io/v1alpha1",
        "kind": "DNSFailover",
        "metadata": {"name": "shop", "namespace": "team-a"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("{e}: {spec}"));
    let s = &resource.spec;
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        s.degraded_ttl,
        s.hold_failback,
        s.on_all_unhealthy,
        s.min_healthy,
        s.default_weight,
        s.default_geo,
        s.endpoints[0].node_address
    )
}

#[test]
fn an_upgrade_from_0_1_0_keeps_every_setting_whichever_comes_first() {
    let (old_crd, new_crd) = (
        spec_schema("tests/fixtures/crd/dnsfailover-0.1.0.yaml"),
        spec_schema("deploy/kubernetes/crds.yaml"),
    );
    let want = settings(&spec(false));
    assert!(!want.contains("None"), "every setting set: {want}");

    // 0.1.0's resource under 0.1.0's CRD, then the new CRD: stored objects are pruned by
    // the new schema when read.
    let stored = prune(&spec(true), &old_crd);
    assert_eq!(settings(&stored), want, "0.1.0 as it ran");
    assert_eq!(
        settings(&prune(&stored, &new_crd)),
        want,
        "after the new CRD"
    );
    // The new CRD first, then 0.1.0's resource applied again unchanged.
    assert_eq!(
        settings(&prune(&spec(true), &new_crd)),
        want,
        "an old resource under the new CRD"
    );
    // The new CRD, then the resource rewritten in 0.2's spelling.
    assert_eq!(
        settings(&prune(&spec(false), &new_crd)),
        want,
        "the new spelling"
    );
    // Why the CRD goes first: 0.1.0's CRD drops the new spelling (kustomize orders the CRD
    // before the resources; docs/kubernetes.md says to apply it first).
    assert_ne!(settings(&prune(&spec(false), &old_crd)), want);
}

/// A field given in both spellings is refused, not guessed.
#[test]
fn a_field_in_both_spellings_is_refused() {
    let mut both = spec(false);
    both["hold_failback"] = json!(false);
    let parsed = serde_json::from_value::<DNSFailover>(json!({
        "apiVersion": "healthorchestrator.io/v1alpha1",
        "kind": "DNSFailover",
        "metadata": {"name": "shop", "namespace": "team-a"},
        "spec": both,
    }));
    let e = parsed.unwrap_err().to_string();
    assert!(e.contains("duplicate field"), "{e}");
}
