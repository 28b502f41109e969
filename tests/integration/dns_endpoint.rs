//! The `dns_endpoint` sink on the Kubernetes API test server (no API server can be
//! installed here): its objects are what external-dns's own DNSEndpoint CRD describes
//! (`tests/fixtures/external-dns/`: every field known to the schema, of the schema's
//! type), they follow gateway health (the time from a fault to the object's change is
//! printed), an object of the same name that is not ours is left alone, and a tenant with
//! nothing to publish has its object deleted.

use std::time::{Duration, Instant};

use ho_testkit::Behaviour;
use serde_json::Value;

use crate::cli::repo;
use crate::fakes::kube_api::KubeApi;
use crate::harness::*;

fn sink_table(api_addr: std::net::SocketAddr, dir: &std::path::Path) -> String {
    let kubeconfig = KubeApi::kubeconfig(api_addr, dir);
    format!(
        "[sinks.edns]\nkind = \"dns_endpoint\"\nnamespace = \"dns\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n",
        kubeconfig.display().to_string()
    )
}

/// The fields of `value` the schema `schema` (an OpenAPI v3 schema) does not know, or
/// whose type differs, as paths.
fn off_schema(value: &Value, schema: &serde_yaml::Value, path: &str, out: &mut Vec<String>) {
    let ty = schema.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let ok = match (ty, value) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("boolean", Value::Bool(_)) | ("", _) => true,
        _ => false,
    };
    if !ok {
        out.push(format!("{path}: not of type {ty}"));
        return;
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties");
            let additional = schema.get("additionalProperties");
            for (key, v) in map {
                match properties.and_then(|p| p.get(key.as_str())).or(additional) {
                    Some(s) => off_schema(v, s, &format!("{path}.{key}"), out),
                    None if properties.is_some() => {
                        out.push(format!("{path}.{key}: not in the schema (pruned)"))
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    off_schema(v, s, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn crd_schema() -> serde_yaml::Value {
    let text = std::fs::read_to_string(repo(
        "tests/fixtures/external-dns/dnsendpoints.externaldns.k8s.io.yaml",
    ))
    .unwrap();
    let crd: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn targets(api: &KubeApi, name: &str) -> Option<Vec<String>> {
    let object = api.object("dnsendpoints", "dns", name)?;
    let mut list: Vec<String> = object["spec"]["endpoints"]
        .as_array()?
        .iter()
        .flat_map(|e| e["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    list.sort();
    Some(list)
}

/// Ten faults and recoveries of one gateway: the object drops and restores its address
/// each time; the time from the fault to the object's change is printed (the check's
/// detection bound is 350 ms: interval 200 ms, one fast re-check at 50 ms, timeout 100 ms).
#[actix_rt::test]
async fn objects_are_external_dns_s_and_follow_health() {
    let api = KubeApi::default();
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"shop\"\ndomains = [\"shop.example.com\", \"www.shop.example.com\"]\nsinks = [\"edns\"]\nttl = \"30s\"\n")
        .with(&sink_table(addr, dir.path()))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let mut both: Vec<String> = gws.iter().map(ip).collect();
    both.sort();
    let twice: Vec<String> = {
        let mut t = [both.clone(), both.clone()].concat();
        t.sort();
        t
    };
    eventually("both gateways published", || {
        targets(&api, "ho-shop") == Some(twice.clone())
    })
    .await;

    let object = api.object("dnsendpoints", "dns", "ho-shop").unwrap();
    let mut problems = Vec::new();
    off_schema(&object, &crd_schema(), "", &mut problems);
    assert!(problems.is_empty(), "{problems:?}\n{object:#}");
    assert_eq!(object["apiVersion"], "externaldns.k8s.io/v1alpha1");
    assert_eq!(
        object["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "health-orchestrator"
    );
    assert_eq!(object["spec"]["endpoints"][0]["recordTTL"], 30);

    let up = ip(&gws[1]);
    let mut took = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        gws[0].set(Behaviour::Refuse).unwrap();
        eventually("gw-1 withdrawn", || {
            targets(&api, "ho-shop") == Some(vec![up.clone(), up.clone()])
        })
        .await;
        took.push(start.elapsed());
        gws[0].set(Behaviour::Healthy).unwrap();
        eventually("gw-1 restored", || {
            targets(&api, "ho-shop") == Some(twice.clone())
        })
        .await;
    }
    took.sort();
    println!(
        "fault -> DNSEndpoint updated over 10 faults: p50 {:?}, p99 (the slowest) {:?}",
        took[4], took[9]
    );
}

/// A DNSEndpoint of the tenant's name that someone else made is never changed; a tenant
/// whose gateways are all down with `on_all_unhealthy = "publish_none"` has its object
/// deleted (external-dns then deletes the records).
#[actix_rt::test]
async fn a_foreign_object_is_left_alone_and_a_withdrawn_tenant_deleted() {
    let api = KubeApi::default();
    api.apply(serde_json::json!({
        "apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
        "metadata": {"name": "ho-taken", "namespace": "dns"},
        "spec": {"endpoints": [{"dnsName": "taken.example.com", "recordType": "A", "targets": ["198.51.100.7"]}]}
    }));
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(1);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"taken\"\ndomains = [\"taken.example.com\"]\nsinks = [\"edns\"]\n\n\
               [[tenants]]\nname = \"withdrawn\"\ndomains = [\"withdrawn.example.com\"]\nsinks = [\"edns\"]\non_all_unhealthy = \"publish_none\"\n")
        .with(&sink_table(addr, dir.path()))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "edns", "the foreign object").await;
    assert!(
        error.contains("DNSEndpoint dns/ho-taken exists without this orchestrator's label")
            && error.contains("left alone"),
        "{error}"
    );
    assert_eq!(
        targets(&api, "ho-taken"),
        Some(vec!["198.51.100.7".to_string()])
    );
    eventually("withdrawn published", || {
        targets(&api, "ho-withdrawn").is_some()
    })
    .await;
    gws[0].set(Behaviour::Refuse).unwrap();
    eventually("withdrawn tenant's object deleted", || {
        api.object("dnsendpoints", "dns", "ho-withdrawn").is_none()
    })
    .await;
    holds_for(
        "not made again while withdrawn",
        Duration::from_millis(300),
        || api.object("dnsendpoints", "dns", "ho-withdrawn").is_none(),
    )
    .await;
}
