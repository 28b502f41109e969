//! Kuadrant live onto Azure DNS, whose record sets answer every address alike: a `v1`
//! DNSPolicy asking for geo or weighted answers on a namespace whose sink is `azure_dns` is
//! refused in the policy's status with what to do, and nothing of it reaches the zone, while
//! a round-robin policy beside it publishes. The real binary against the Kubernetes API test
//! server and the Azure Resource Manager test server (`fakes::azure_dns`; neither can run
//! for real here), the gateways on loopback.

use serde_json::json;

use crate::fakes::azure_dns::AzureDns;
use crate::harness::*;
use crate::kube_tenants::{gateway, run_operator, three_gateways};

/// A geo `v1` DNSPolicy on an `azure_dns` namespace: its listener's record is refused and
/// the policy's status names it with the sink's reason and the sinks that can answer so;
/// the zone never holds that name. A round-robin policy in the same namespace publishes its
/// listener to the zone (the sink works; only the answer kind is refused), and so does one
/// with a `weight` alone (every gateway of the policy weighs the same: a round robin); a
/// DNSRecord whose names carry different weights is refused on its own `Accepted`
/// condition, with the sink's reason.
#[tokio::test]
async fn geo_and_weighted_answers_on_azure_dns_are_refused_with_what_to_do() {
    let azure = AzureDns::start("team-z.io").await;
    let gws = three_gateways();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(gws[0].addr().port()).await;
    let keys = crate::azure_dns::sink_keys(&azure, dir.path()).replace("tenant-a.io", "team-z.io");
    let config = config
        .with(&format!("[sinks.az]\n{keys}timeout = \"1s\"\n"))
        .with("[[kubernetes.allow]]\nnamespace = \"team-z\"\ndomains = [\"team-z.io\"]\nsinks = [\"az\"]\n");
    let _process = run_operator(dir.path(), &config);

    let listening = |name: &str, host: &str, i: usize| {
        let mut g = gateway("team-z", name, &[gws[i].addr().ip()]);
        g["spec"]["listeners"] =
            json!([{"name": "api", "hostname": host, "port": 443, "protocol": "HTTPS"}]);
        g
    };
    let policy = |name: &str, gateway: &str, load_balancing: serde_json::Value| {
        let mut p = json!({
            "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
            "metadata": {"name": name, "namespace": "team-z"},
            "spec": {
                "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway},
                "healthCheck": {"path": "/healthz", "port": gws[0].addr().port(), "protocol": "HTTP"},
            },
        });
        if !load_balancing.is_null() {
            p["spec"]["loadBalancing"] = load_balancing;
        }
        p
    };
    kube.apply(listening("gw-geo", "geo.team-z.io", 0));
    kube.apply(listening("gw-rr", "rr.team-z.io", 1));
    kube.apply(policy(
        "gw-geo-dns",
        "gw-geo",
        json!({"weight": 120, "geo": "GEO-EU", "defaultGeo": true}),
    ));
    kube.apply(listening("gw-w", "w.team-z.io", 2));
    kube.apply(policy("gw-w-dns", "gw-w", json!({"weight": 120})));
    kube.apply(policy("gw-rr-dns", "gw-rr", serde_json::Value::Null));

    let rr = vec![gws[1].addr().ip().to_string()];
    eventually("the round-robin listener in the zone", || {
        azure.addresses("rr.team-z.io") == Some(rr.clone())
    })
    .await;
    let messages = |policy: &str| {
        let object = kube.object("dnspolicies", "team-z", policy)?;
        let conditions = object["status"]["conditions"].as_array()?.clone();
        let all: Vec<String> = conditions
            .iter()
            .filter_map(|c| c["message"].as_str().map(str::to_owned))
            .collect();
        Some(all.join("\n"))
    };
    eventually(
        "the geo policy's status names the refusal and what to do",
        || {
            messages("gw-geo-dns").is_some_and(|m| {
                m.contains("DNSRecord gw-geo-api (from a listener) is refused")
                    && m.contains("Azure DNS record sets answer every address alike")
                    && m.contains("route53")
            })
        },
    )
    .await;
    assert_eq!(
        azure.addresses("geo.team-z.io"),
        None,
        "the geo name reached Azure"
    );
    // A record whose own names carry different weights (dns-operator's weighted CNAMEs) is
    // refused on its own condition, with the sink's reason.
    let ip = |i: usize| gws[i].addr().ip().to_string();
    let weighted = |leaf: &str, weight: &str| {
        json!({"dnsName": "wr.team-z.io", "recordType": "CNAME", "recordTTL": 60,
               "setIdentifier": leaf, "targets": [format!("{leaf}.wr.team-z.io")],
               "providerSpecific": [{"name": "weight", "value": weight}]})
    };
    let a = |leaf: &str, i: usize| {
        json!({"dnsName": format!("{leaf}.wr.team-z.io"), "recordType": "A",
               "recordTTL": 60, "targets": [ip(i)]})
    };
    kube.apply(json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": "wr", "namespace": "team-z"},
        "spec": {"rootHost": "wr.team-z.io", "endpoints": [
            weighted("a", "120"), weighted("b", "60"), a("a", 0), a("b", 1)
        ]},
    }));
    eventually("the weighted record refused with the sink's reason", || {
        let Some(record) = kube.object("dnsrecords", "team-z", "wr") else {
            return false;
        };
        let conditions = record["status"]["conditions"].as_array().cloned();
        conditions.into_iter().flatten().any(|c| {
            c["type"] == "Accepted"
                && c["status"] == "False"
                && c["message"].as_str().is_some_and(|m| {
                    m.contains("cannot express policy \"weighted\"") && m.contains("route53")
                })
        })
    })
    .await;
    assert_eq!(
        azure.addresses("wr.team-z.io"),
        None,
        "the weighted name reached Azure"
    );
    // A `weight` alone weighs each of the policy's gateways alike: a round robin, which
    // Azure DNS answers.
    let w = vec![gws[2].addr().ip().to_string()];
    eventually("the weight-only policy's listener in the zone", || {
        azure.addresses("w.team-z.io") == Some(w.clone())
    })
    .await;
}
