//! The k8gb cut-over of docs/coming-from.md, performed: a Gslb and its Ingress as `kubectl
//! get -o yaml` prints them are imported, the DNSFailover applied to the Kubernetes API
//! test server, and the orchestrator (the real binary, in operator mode) publishes into the
//! parent zone, served by its embedded server, which still delegates `cloud.example.com`
//! to k8gb's CoreDNS. While the delegation stands, resolvers are referred to k8gb and the
//! canary reports the name as stale with the referral; the ledger counts it unanswered.
//! Removing the delegation (the cut-over) makes the parent answer the decided addresses,
//! the canary agrees and the ledger counts it answered. Every expectation is read off the
//! script: the Gateways' addresses, the delegation's name servers.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use ho_testkit::{Behaviour, Gateway};
use serde::Deserialize;
use serde_json::Value;

use crate::answer_canary::{availability, secs};
use crate::fakes::kube_api::{KubeApi, TOKEN};
use crate::harness::*;
use crate::kube_tenants::run_operator;
use crate::services::dig::dig;

const NAME: &str = "shop.cloud.example.com";
/// k8gb's CoreDNS for the `eu` cluster, as k8gb names its delegation's name servers.
const K8GB_NS: &str = "gslb-ns-eu-cloud.example.com";

/// The Gslb (failover, this cluster `eu`) and its Ingress, as exported from the cluster.
fn exported(addresses: &[String]) -> String {
    let ingress: Vec<String> = addresses
        .iter()
        .map(|a| format!("      - ip: {a}\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: List\nitems:\n\
         - apiVersion: k8gb.io/v1beta1\n  kind: Gslb\n  metadata:\n    name: shop\n    namespace: shop\n  \
         spec:\n    resourceRef:\n      apiVersion: networking.k8s.io/v1\n      kind: Ingress\n      name: shop\n    \
         strategy:\n      type: failover\n      primaryGeoTag: eu\n      dnsTtlSeconds: 5\n  \
         status:\n    geoTag: eu\n\
         - apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: shop\n    namespace: shop\n  \
         spec:\n    rules:\n    - host: {NAME}\n  status:\n    loadBalancer:\n      ingress:\n{}",
        ingress.concat()
    )
}

/// The operator's config: the parent zone `example.com` on the embedded server, with
/// `delegation` (zone-file text) in its static records.
fn config(
    dir: &Path,
    kube: SocketAddr,
    port: u16,
    server: SocketAddr,
    delegation: &str,
) -> TestConfig {
    let kubeconfig = KubeApi::kubeconfig_with(kube, dir, TOKEN);
    TestConfig::defaults(&Check::FAST)
        .set("defaults.check.port", i64::from(port))
        .set("api.listen", format!("{}:8080", server.ip()))
        .set("reload.watch", true)
        .set("reload.interval", "100ms")
        .set("state_dir", dir.join("state").display().to_string())
        .with(&format!(
            "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.com\"]\n\
             static_records = {delegation:?}\ncanary = {{ every = \"200ms\", grace = \"1s\" }}\n\n\
             [kubernetes]\ntenants = true\nkubeconfig = {:?}\n\n\
             [[kubernetes.allow]]\nnamespace = \"shop\"\ndomains = [\"cloud.example.com\"]\nsinks = [\"dns\"]\n",
            kubeconfig.display().to_string()
        ))
}

/// `import --from k8gb --sink dns` of `file`: the resources, as JSON values.
fn import(file: &Path) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .args(["import", "--from", "k8gb", "--sink", "dns"])
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_json::to_value(serde_yaml::Value::deserialize(d).unwrap()).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// The sorted A answer of the parent for the name, and whether it is a referral (not
/// authoritative, NS in the authority section).
async fn parent(server: SocketAddr) -> (Vec<String>, bool) {
    let answer = dig(server, &[NAME, "A"]).await.into_iter().next();
    let answer = answer.expect("the parent answers");
    let referral = !answer.has_flag("aa") && answer.authority.iter().any(|t| t == "NS");
    (answer.sorted(), referral)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k8gb_cut_over_is_a_referral_until_the_delegation_goes_then_our_answer() {
    // k8gb's import checks HTTP on port 80, as k8gb does: gateways there, each on its own
    // loopback address.
    let gws: Vec<Gateway> = (0..2)
        .map(|_| {
            let at = SocketAddr::new(loopback_ip().into(), 80);
            Gateway::start(at, Behaviour::Healthy).unwrap()
        })
        .collect();
    let addresses: Vec<String> = gws.iter().map(ip).collect();
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let api = SocketAddr::new(server.ip(), 8080);
    let delegation = format!(
        "cloud 300 NS {K8GB_NS}.\ngslb-ns-eu-cloud 300 A {}\n",
        loopback_ip()
    );
    let port = gws[0].addr().port();
    let settings = |delegation: &str| config(dir.path(), kube_addr, port, server, delegation);

    // 1. Import what k8gb's users export; apply the Ingress and the DNSFailover.
    let export = dir.path().join("export.yaml");
    std::fs::write(&export, exported(&addresses)).unwrap();
    let ingress: Value = serde_json::to_value(
        serde_yaml::from_str::<serde_yaml::Value>(&exported(&addresses)).unwrap()["items"][1]
            .clone(),
    )
    .unwrap();
    kube.apply(ingress);
    let resources = import(&export);
    assert!(!resources.is_empty(), "the import made no resource");
    for resource in resources {
        assert_eq!(resource["kind"], "DNSFailover", "{resource}");
        kube.apply(resource);
    }

    // 2. Our records published while the delegation stands: the parent refers resolvers to
    //    k8gb, and the canary says so.
    let _operator = run_operator(dir.path(), &settings(&delegation));
    eventually_async("the parent refers the name to k8gb", async || {
        try_api_get(api, "/status").await.is_some() && parent(server).await == (Vec::new(), true)
    })
    .await;
    let referred = SystemTime::now();
    eventually_async("the canary reports the referral", async || {
        canary_stale(api, "dns").await.iter().any(|s| {
            s["name"] == NAME
                && s["served_referral"].as_str().is_some_and(|r| {
                    r.contains("below a delegation at cloud.example.com") && r.contains(K8GB_NS)
                })
        })
    })
    .await;
    wait_questions(api, "dns", "differs", 3.0).await;

    // 3. The cut-over: the delegation goes; the parent answers what was decided.
    std::fs::write(dir.path().join("config.toml"), settings("").render()).unwrap();
    let cut = SystemTime::now();
    eventually_async("the parent answers the Gateways' addresses", async || {
        parent(server).await == (sorted(&addresses), false)
    })
    .await;
    let answered = SystemTime::now();
    wait_stale(api, "dns", &[NAME.to_owned()], false).await;
    wait_questions(api, "dns", "match", 3.0).await;

    let v = availability(api, NAME, referred, SystemTime::now()).await;
    let script = answered.duration_since(referred).unwrap().as_secs_f64();
    let reload = answered.duration_since(cut).unwrap().as_secs_f64();
    println!(
        "unanswered {:.3} s (script {script:.3} s, of which the reload {reload:.3} s)",
        secs(&v, "seconds_unanswered")
    );
    assert!(
        (secs(&v, "seconds_unanswered") - script).abs() <= 0.5,
        "referred until the cut-over: {v}"
    );
    assert_eq!(secs(&v, "seconds_dead_address"), 0.0, "{v}");
    assert!(secs(&v, "seconds_answered") > 0.0, "{v}");
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}
