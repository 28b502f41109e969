//! `import --from k8gb` on k8gb's own Gslb examples (`tests/fixtures/k8gb/`): every one
//! becomes DNSFailover resources that `check-config --resource` accepts against an
//! operator config, each naming the object k8gb reads as its source, with the strategy's
//! policy for this cluster (failover tier from `primaryGeoTag`, weight from `weight`, geo
//! label from the geo tag); what cannot be read offline or carried over is refused or
//! named.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::cli::repo;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
}

fn fixture(name: &str) -> PathBuf {
    repo(&format!("tests/fixtures/k8gb/{name}"))
}

/// The operator config the resources are judged against: k8gb's example namespaces may
/// claim `cloud.example.com` and publish to the embedded server.
const BASE: &str = r#"
[sinks.dns]
kind = "dns_server"
listen = ["127.0.0.1:0"]
zones = ["cloud.example.com"]

[kubernetes]
tenants = true
"#;

fn base(dir: &Path) -> PathBuf {
    let mut text = BASE.to_owned();
    for ns in ["test-gslb", "test-gslb-gatewayapi", "test-gslb-istio"] {
        text += &format!("\n[[kubernetes.allow]]\nnamespace = \"{ns}\"\ndomains = [\"cloud.example.com\"]\nsinks = [\"dns\"]\n");
    }
    let file = dir.join("base.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// `import --from k8gb ARGS FILES`: (exit code, stdout, stderr).
fn import(args: &[&str], files: &[&str]) -> (i32, String, String) {
    let out = bin()
        .args(["import", "--from", "k8gb"])
        .args(args)
        .args(files.iter().map(|f| fixture(f)))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Imports `files` as cluster `geo_tag`, has `check-config --resource` accept every
/// resource printed, and returns them by name.
fn import_and_check(geo_tag: &str, files: &[&str]) -> (Vec<(String, Value)>, String) {
    let (code, yaml, stderr) = import(&["--geo-tag", geo_tag, "--namespace", "test-gslb"], files);
    assert_eq!(code, 0, "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, &yaml).unwrap();
    let checked = bin()
        .args(["check-config", "--config"])
        .arg(base(dir.path()))
        .arg("--resource")
        .arg(&resources)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{stdout}{}\n{yaml}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let mut parsed = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        let name = value["metadata"]["name"].as_str().unwrap().to_owned();
        assert!(
            stdout.contains(&format!("/{name}: accepted")),
            "{name}: {stdout}"
        );
        parsed.push((name, value));
    }
    (parsed, yaml)
}

fn spec<'a>(resources: &'a [(String, Value)], name: &str) -> &'a Value {
    &resources
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no resource {name}"))
        .1["spec"]
}

#[test]
fn every_k8gb_example_imports_to_resources_admission_accepts() {
    let all = [
        "k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml",
        "k8gb.absa.oss_v1beta1_gslb_cr_failover_gatewayapi_tcproute.yaml",
        "k8gb.absa.oss_v1beta1_gslb_cr_roundrobin_gatewayapi_httproute.yaml",
        "k8gb.io_v1beta1_gslb_cr_multiservice_ingress_ref.yaml",
        "roundrobin-weight1.yaml",
    ];
    let (eu, yaml) = import_and_check("eu", &all);
    assert_eq!(eu.len(), 8, "{yaml}");

    // failover, embedded Ingress: k8gb's Ingress (named like the Gslb), eu first.
    let failover = spec(&eu, "failover-ingress");
    assert_eq!(failover["policy"], "failover");
    assert_eq!(
        failover["endpoints"][0],
        serde_json::json!({"ingress": "failover-ingress", "labels": {"geo": "eu"}, "priority": 1})
    );
    assert_eq!(
        failover["domains"],
        serde_json::json!(["failover.cloud.example.com"])
    );
    assert_eq!(failover["ttl"], "30s", "k8gb's default TTL");
    assert_eq!(failover["check"]["host"], "failover.cloud.example.com");
    assert_eq!(
        failover["check"]["expectStatus"],
        serde_json::json!(["200-499"])
    );

    // A TCPRoute through a shared Gateway: the Gateway as NAMESPACE/NAME, the host from
    // k8gb.io/hostname; its port is unknown, so the operator's check applies (and says so).
    let tcp = spec(&eu, "failover-tcproute");
    assert_eq!(tcp["endpoints"][0]["gateway"], "istio-ingress/gatewayapi");
    assert_eq!(
        tcp["domains"],
        serde_json::json!(["gatewayapi-tcproute.cloud.example.com"])
    );
    assert!(tcp.get("check").is_none());
    assert!(
        yaml.contains("# NOT CARRIED OVER: Gslb test-gslb-gatewayapi/failover-tcproute.spec.resourceRef (TCPRoute failover-tcproute): its listener's port is unknown"),
        "{yaml}"
    );

    // roundRobin without weights: every healthy address.
    let rr = spec(&eu, "roundrobin-httproute");
    assert!(rr.get("policy").is_none());
    assert_eq!(rr["check"]["kind"], "http");

    // Three hosts of one Gslb, each judged by its own Services in k8gb: three resources,
    // each checking its own host; weighted by this cluster's weight.
    for (name, host) in [
        ("test-gslb", "terratest-notfound.cloud.example.com"),
        (
            "test-gslb-terratest-unhealthy",
            "terratest-unhealthy.cloud.example.com",
        ),
        (
            "test-gslb-terratest-roundrobin",
            "terratest-roundrobin.cloud.example.com",
        ),
    ] {
        let s = spec(&eu, name);
        assert_eq!(s["domains"], serde_json::json!([host]));
        assert_eq!(s["check"]["host"], host);
        assert_eq!(s["policy"], "weighted");
        assert_eq!(s["endpoints"][0]["weight"], 5);
        assert_eq!(s["ttl"], "5s");
    }

    // Several paths to several Services: the first path is checked, and that is said.
    assert_eq!(spec(&eu, "multiservice-gslb-all")["check"]["path"], "/blue");
    assert!(yaml.contains("serviceHealthPolicy All judges them together; the check requests the first path (/blue) only"), "{yaml}");

    // The same files in the us cluster: us is the failover cluster's second tier.
    let (us, _) = import_and_check("us", &all[..1]);
    assert_eq!(spec(&us, "failover-ingress")["endpoints"][0]["priority"], 2);
}

/// A Gslb read back from its cluster carries that cluster's geo tag and the addresses k8gb
/// exposes: an Istio VirtualService (whose gateway Service no source can name from the
/// team's namespace) is published at those addresses, said as no longer following.
#[test]
fn an_exported_gslb_brings_its_clusters_geo_tag_and_addresses() {
    let (code, yaml, stderr) = import(&[], &["exported-istio-us.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let value: Value = serde_yaml::from_str(yaml.split("---\n").nth(1).unwrap()).unwrap();
    let source = &value["spec"]["endpoints"][0];
    assert_eq!(
        source,
        &serde_json::json!({"addresses": ["203.0.113.10", "203.0.113.11"], "labels": {"geo": "us"}, "weight": 1})
    );
    assert_eq!(value["spec"]["policy"], "weighted");
    assert!(yaml.contains("no longer follow the gateway's"), "{yaml}");
    assert!(
        yaml.contains("# TO DO: the resources publish to the sink named \"dns\""),
        "{yaml}"
    );
}

/// What k8gb would refuse, or what needs a fact the files do not hold, is refused with
/// what to do.
#[test]
fn what_cannot_be_imported_says_what_is_missing() {
    // No geo tag: neither a status nor --geo-tag.
    let (code, _, stderr) = import(
        &[],
        &["k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml"],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("the failover strategy needs this cluster's geo tag"),
        "{stderr}"
    );
    assert!(stderr.contains("--geo-tag"), "{stderr}");

    // An Istio VirtualService without the addresses k8gb exposed.
    let (code, _, stderr) = import(
        &["--geo-tag", "eu"],
        &["k8gb.absa.oss_v1beta1_gslb_cr_roundrobin_istio.yaml"],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("status.loadBalancer.exposedIps"),
        "{stderr}"
    );

    // A Gslb applied without a namespace (kubectl -n), and none given.
    let (code, _, stderr) = import(&["--geo-tag", "eu"], &["roundrobin-weight1.yaml"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--namespace"), "{stderr}");

    // k8gb refuses failover without a primary geo tag; two clusters' exports at once
    // cannot be one cluster's resources.
    let dir = tempfile::tempdir().unwrap();
    let gslb = |name: &str, strategy: &str, tag: &str| {
        format!("apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  resourceRef: {{apiVersion: networking.k8s.io/v1, kind: Ingress, name: web}}\n  strategy: {{{strategy}}}\nstatus: {{geoTag: {tag}, hosts: web.cloud.example.com}}\n")
    };
    let cases = [
        (
            gslb("a", "type: failover", "eu"),
            "the failover strategy requires strategy.primaryGeoTag",
        ),
        (
            gslb("a", "type: roundRobin", "eu") + "---\n" + &gslb("b", "type: roundRobin", "us"),
            "the Gslbs come from several clusters",
        ),
        (
            gslb("a", "type: random", "eu"),
            "k8gb's strategies are roundRobin, failover and geoip",
        ),
    ];
    for (text, expected) in cases {
        let file = dir.path().join("gslb.yaml");
        std::fs::write(&file, text).unwrap();
        let out = bin()
            .args(["import", "--from", "k8gb"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{expected}");
        assert!(stderr.contains(expected), "{stderr}");
    }

    // The flags are k8gb's.
    let out = bin()
        .args(["import", "--from", "kuadrant", "--geo-tag", "eu"])
        .arg(fixture("roundrobin-weight1.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
