//! Kuadrant's DNSHealthCheckProbes on their own, live: every probe of an allowed namespace
//! is run and its status kept as dns-operator keeps it, whether or not a published
//! DNSRecord holds its address, and its verdict reaches no record it does not back. The
//! real binary against the Kubernetes API test server (`fakes::kube_api`; no real API
//! server can run here), probing real gateways on loopback.

use ho_testkit::Behaviour;
use serde_json::json;

use crate::harness::*;
use crate::kube_tenants::{hosts, run_operator, three_gateways};

/// A probe no DNSRecord backs (its address is a gateway no record names) is run with its
/// own check and its status follows the gateway through a seeded script of states: healthy
/// while it answers 200, unhealthy with at least `failureThreshold` failures in a row and
/// the failure as the reason while it answers 503 or refuses (the expectations computed
/// from the script). A record of the namespace at another gateway keeps its answer all
/// along (the probe's verdict reaches no record it does not back), no other name is
/// published, and a probe in a namespace without an allowance is refused on its status and
/// never probed.
#[tokio::test]
async fn a_probe_no_record_backs_is_run_and_its_status_follows_its_gateway() {
    let mut gws = three_gateways();
    let ips: Vec<String> = gws.iter().map(|g| g.addr().ip().to_string()).collect();
    let ip = |i: usize| ips[i].clone();
    let port = gws[0].addr().port();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(port).await;
    let _process = run_operator(dir.path(), &config);

    let fall = 3;
    let probe = |ns: &str, name: &str, address: String| {
        json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"port": port, "hostname": "lone.team-a.io", "address": address,
                     "path": "/healthz", "protocol": "HTTP", "failureThreshold": fall},
        })
    };
    kube.apply(probe("team-a", "lone", ip(0)));
    kube.apply(probe("team-c", "elsewhere", ip(2)));
    kube.apply(json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"rootHost": "web.team-a.io", "endpoints": [
            {"dnsName": "web.team-a.io", "recordType": "A", "recordTTL": 30, "targets": [ip(1)]}
        ]},
    }));
    let web = hosts(dir.path(), "team-a_dnsrecord.web");
    wait_for_file(&web, "the record's answer", |c| addresses(c) == [ip(1)]).await;

    let seed = 0x5eed_u64;
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut script = vec![Behaviour::Healthy];
    let choices = [
        Behaviour::Healthy,
        Behaviour::Status(503),
        Behaviour::Refuse,
    ];
    while script.len() < 6 {
        let next = choices[rng.u64(..3) as usize].clone();
        // Each step changes the verdict, so each is seen.
        let up = |b: &Behaviour| *b == Behaviour::Healthy;
        if up(&next) != up(script.last().unwrap()) {
            script.push(next);
        }
    }
    for (step, behaviour) in script.iter().enumerate() {
        gws[0].set(behaviour.clone()).unwrap();
        let what = format!("seed {seed:#x}, step {step}: the probe's status under {behaviour:?}");
        eventually(&what, || {
            probe_state(&kube, "team-a", "lone").is_some_and(
                |(h, failures, reason)| match behaviour {
                    Behaviour::Healthy => h == json!(true) && failures == 0 && reason.is_empty(),
                    Behaviour::Status(code) => {
                        h == json!(false) && failures >= fall && reason.contains(&code.to_string())
                    }
                    _ => h == json!(false) && failures >= fall && !reason.is_empty(),
                },
            )
        })
        .await;
        let published = std::fs::read_to_string(&web).unwrap_or_default();
        assert_eq!(
            addresses(&published),
            [ip(1)],
            "{what}: the record's answer"
        );
    }
    let files: Vec<String> = std::fs::read_dir(dir.path().join("hosts"))
        .unwrap()
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        ["team-a_dnsrecord.web.hosts"],
        "only the record publishes"
    );
    eventually(
        "the probe of a namespace without an allowance refused",
        || {
            probe_state(&kube, "team-c", "elsewhere").is_some_and(|(h, _, reason)| {
                h == json!(false)
                    && reason.contains("namespace \"team-c\" has no [[kubernetes.allow]]")
            })
        },
    )
    .await;
    assert_eq!(gws[2].requests(), 0, "team-c's probe was run");
}

/// A v1 DNSPolicy whose `healthCheck` names a header Secret (`additionalHeadersRef`) has
/// the Secret's headers sent with every check of the records it governs: the record at a
/// gateway that answers 200 only with the header reads `Healthy`/`AllChecksPassed`. A
/// policy naming a Secret that does not exist is refused alone, its `Accepted` condition in
/// dns-operator's words; a policy in a namespace without an allowance has its Secret never
/// read, nor has one naming a Secret its namespace's `header_secrets` does not list (refused
/// alone, saying so). A probe no record backs sends its own Secret's header too (healthy at a gateway
/// that answers 200 only with it, where the same probe without the Secret fails on 401).
/// Every request is one the shipped RBAC allows once the namespace grants its Secret by
/// name.
#[tokio::test]
async fn a_policys_header_secret_is_sent_with_its_checks_and_a_missing_one_refuses_that_policy() {
    let guarded = crate::kube_kuadrant_hosts::guarded_gateway("X-Probe-Token: p0licy-token").await;
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(guarded.port()).await;
    let listed = ["probe-headers", "no-such-secret"];
    let config = config.set("kubernetes.allow.0.header_secrets", listed.to_vec());
    let _process = run_operator(dir.path(), &config);

    let b64 = |s: &str| data_encoding::BASE64.encode(s.as_bytes());
    for secret in ["probe-headers", "unlisted-headers"] {
        kube.apply(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": "team-a"},
            "data": {"X-Probe-Token": b64("p0licy-token")},
        }));
    }
    let policy = |ns: &str, name: &str, gateway: &str, secret: &str| {
        json!({
            "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway},
                "healthCheck": {"path": "/healthz", "port": guarded.port(), "protocol": "HTTP",
                                "additionalHeadersRef": {"name": secret}},
            },
        })
    };
    let record = |name: &str, listener: &str, host: &str| {
        json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
            "metadata": {"name": name, "namespace": "team-a",
                         "labels": {"kuadrant.io/listener-name": listener}},
            "spec": {"rootHost": host, "endpoints": [
                {"dnsName": host, "recordType": "A", "recordTTL": 30,
                 "targets": [guarded.ip().to_string()]}
            ]},
        })
    };
    kube.apply(crate::kube_tenants::gateway(
        "team-a",
        "gw-g",
        &[guarded.ip()],
    ));
    for gateway in ["gw-m", "gw-u"] {
        kube.apply(crate::kube_tenants::gateway(
            "team-a",
            gateway,
            &[guarded.ip()],
        ));
    }
    kube.apply(policy("team-a", "gw-g-dns", "gw-g", "probe-headers"));
    kube.apply(policy("team-a", "gw-m-dns", "gw-m", "no-such-secret"));
    kube.apply(policy("team-a", "gw-u-dns", "gw-u", "unlisted-headers"));
    kube.apply(policy("team-c", "gw-c-dns", "gw-c", "c-headers"));
    kube.apply(record("gw-g-api", "api", "api.team-a.io"));
    kube.apply(record("gw-m-web", "web", "web.team-a.io"));
    // Probes no record backs, at a gateway of their own that wants the header too.
    let lone = crate::kube_kuadrant_hosts::guarded_gateway("X-Probe-Token: p0licy-token").await;
    let probe = |name: &str, secret: Option<&str>| {
        let mut p = json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"port": lone.port(), "hostname": "lone.team-a.io",
                     "address": lone.ip().to_string(), "path": "/healthz", "protocol": "HTTP"},
        });
        if let Some(secret) = secret {
            p["spec"]["additionalHeadersRef"] = json!({"name": secret});
        }
        p
    };
    kube.apply(probe("with-token", Some("probe-headers")));
    kube.apply(probe("without-token", None));

    let condition = |plural: &str, name: &str, type_: &str| {
        kube_condition(&kube, plural, "team-a", name, type_)
    };
    eventually(
        "the governed record healthy: the policy's header was sent",
        || {
            condition("dnsrecords", "gw-g-api", "Healthy")
                .is_some_and(|(s, r, _)| s == "True" && r == "AllChecksPassed")
        },
    )
    .await;
    let invalid = |policy: &str, says: &str| {
        condition("dnspolicies", policy, "Accepted")
            .is_some_and(|(s, r, m)| s == "False" && r == "Invalid" && m.contains(says))
    };
    eventually("the policy without its Secret refused alone", || {
        invalid(
            "gw-m-dns",
            "error retrieving additional headers secret team-a/no-such-secret: not found",
        )
    })
    .await;
    eventually(
        "the policy naming a Secret the allowance does not list refused alone",
        || {
            invalid(
                "gw-u-dns",
                "additional headers secret team-a/unlisted-headers is not read: it is not among the header_secrets",
            )
        },
    )
    .await;
    assert!(condition("dnspolicies", "gw-g-dns", "Accepted").is_some_and(|(s, _, _)| s == "True"));
    eventually(
        "a probe on its own sends its header; one without it is refused 401",
        || {
            probe_state(&kube, "team-a", "with-token").is_some_and(|(h, _, _)| h == json!(true))
                && probe_state(&kube, "team-a", "without-token")
                    .is_some_and(|(h, _, r)| h == json!(false) && r.contains("401"))
        },
    )
    .await;
    let requests = kube.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.contains("/namespaces/team-c/secrets")),
        "a Secret of a namespace without an allowance was read"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.contains("/secrets/unlisted-headers")),
        "a Secret the allowance does not list was read"
    );
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(!log.contains("p0licy-token"), "the token is in the log");
    crate::deploy_kuadrant::assert_rbac_allows_with(
        &requests,
        &crate::deploy_kuadrant::header_secret_role("team-a", &listed),
    );
}
