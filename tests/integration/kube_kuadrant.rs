//! Kuadrant's own resources live (`[kubernetes] kuadrant = true`), end to end: the real
//! binary watches the Kubernetes API test server (`fakes::kube_api`; no real API server can
//! run here) for DNSRecords, DNSHealthCheckProbes, DNSPolicies and Gateways, and publishes
//! through a real hosts-file sink probing real gateways on loopback, under the same
//! namespace allowances as DNSFailovers.

use ho_testkit::{Behaviour, Gateway};
use serde_json::{json, Value};

use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::kube_tenants::{gateway, hosts, run_operator, three_gateways};

/// Kuadrant's resources, live (`[kubernetes] kuadrant = true`): a DNSRecord with its
/// DNSHealthCheckProbe in an allowed namespace is published and reads `Ready=True`; one in a
/// namespace without an allowance is refused on its own status and never reaches a file; a
/// changed record changes the answer; a published record holds the finalizer, so deleting
/// it withdraws its names before it goes.
#[tokio::test]
async fn kuadrant_records_are_published_live_under_the_same_allowances() {
    let gws = three_gateways();
    let ip = |i: usize| gws[i].addr().ip().to_string();
    let port = gws[0].addr().port();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(port).await;
    let _process = run_operator(dir.path(), &config);

    let record = |ns: &str, name: &str, host: &str, targets: &[String]| {
        json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"rootHost": host, "endpoints": [
                {"dnsName": host, "recordType": "A", "recordTTL": 30, "targets": targets}
            ]},
        })
    };
    kube.apply(json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
        "metadata": {"name": "probe", "namespace": "team-a"},
        "spec": {"port": port, "host": "api.team-a.io", "address": ip(0), "path": "/healthz",
                 "protocol": "HTTP", "interval": "1s"},
    }));
    kube.apply(record("team-a", "api", "api.team-a.io", &[ip(0), ip(1)]));
    kube.apply(record("team-c", "api", "api.team-c.io", &[ip(2)]));

    let file = hosts(dir.path(), "team-a_dnsrecord.api");
    wait_for_file(&file, "the record's targets", |c| addresses(c).len() == 2).await;
    let ready =
        |ns: &str| kube_condition(&kube, "dnsrecords", ns, "api", "Ready").map(|(s, r, _)| (s, r));
    eventually("team-a's record Ready", || {
        ready("team-a") == Some(("True".into(), "Published".into()))
    })
    .await;
    eventually("team-c's record refused", || {
        ready("team-c") == Some(("False".into(), "NamespaceNotAllowed".into()))
    })
    .await;
    assert!(!hosts(dir.path(), "team-c_dnsrecord.api").exists());

    kube.apply(record("team-a", "api", "api.team-a.io", &[ip(1)]));
    wait_for_file(&file, "the changed record", |c| addresses(c) == [ip(1)]).await;

    let finalizers = |name: &str| {
        kube.object("dnsrecords", "team-a", name)
            .map(|r| r["metadata"]["finalizers"].clone())
    };
    eventually("the finalizer on the published record", || {
        finalizers("api").is_some_and(|f| f == json!(["healthorchestrator.io/withdraw-records"]))
    })
    .await;
    kube.delete("dnsrecords", "team-a", "api");
    wait_for_file(&file, "the deleted record withdrawn", |c| {
        addresses(c).is_empty()
    })
    .await;
    eventually("the finalizer released, the record gone", || {
        kube.object("dnsrecords", "team-a", "api").is_none()
    })
    .await;
}

/// Kuadrant live, as Kuadrant lays it out: two DNSPolicies on two Gateways of one
/// namespace each govern their own Gateway's records (neither makes the other's
/// `Invalid`); a record whose names answer differently publishes each name's own answer;
/// a policy on a Gateway without records publishes its listeners' hostnames that lie in
/// the namespace's domains at the Gateway's addresses, as the records Kuadrant would make;
/// the policies get `Accepted`/`Enforced` (or `TargetNotFound`) and a probe its
/// `healthy`/`consecutiveFailures`/`reason` as Kuadrant's controllers write them, the
/// probe's following its endpoint; a policy edited into something invalid refuses only
/// the records it governs, which keep publishing (a hosts file read every 20 ms never
/// loses a name) while its status says the old DNS is kept. Runs against the Kubernetes
/// API test server.
#[tokio::test]
async fn kuadrant_policies_attach_by_gateway_and_a_broken_edit_keeps_every_name() {
    let mut gws = three_gateways();
    let ip = |gws: &[Gateway], i: usize| gws[i].addr().ip().to_string();
    let port = gws[0].addr().port();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(port).await;
    let _process = run_operator(dir.path(), &config);

    let policy = |name: &str, gateway: &str, protocol: &str| {
        json!({
            "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway},
                "healthCheck": {"path": "/healthz", "port": port, "protocol": protocol, "interval": "1s"},
            },
        })
    };
    let record = |name: &str, listener: &str, endpoints: Value| {
        json!({
            "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
            "metadata": {"name": name, "namespace": "team-a",
                         "labels": {"kuadrant.io/listener-name": listener}},
            "spec": {"rootHost": endpoints[0]["dnsName"], "endpoints": endpoints},
        })
    };
    let a = |name: &str, targets: &[String]| json!({"dnsName": name, "recordType": "A", "recordTTL": 30, "targets": targets});
    // gw-a exists; gw-b does not.
    kube.apply(gateway("team-a", "gw-a", &[gws[0].addr().ip()]));
    kube.apply(policy("gw-a-dns", "gw-a", "HTTP"));
    kube.apply(policy("gw-b-dns", "gw-b", "HTTP"));
    kube.apply(json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
        "metadata": {"name": "probe-0", "namespace": "team-a"},
        "spec": {"port": port, "hostname": "api.team-a.io", "address": ip(&gws, 0),
                 "path": "/healthz", "protocol": "HTTP", "interval": "1s"},
    }));
    kube.apply(record(
        "gw-a-api",
        "api",
        json!([
            a("api.team-a.io", &[ip(&gws, 0), ip(&gws, 1)]),
            a("admin.team-a.io", &[ip(&gws, 2)])
        ]),
    ));
    kube.apply(record(
        "gw-b-web",
        "web",
        json!([a("web.team-a.io", &[ip(&gws, 1)])]),
    ));

    let files = [
        (
            hosts(dir.path(), "team-a_dnsrecord.gw-a-api"),
            vec![ip(&gws, 0), ip(&gws, 1)],
        ),
        (
            hosts(dir.path(), "team-a_dnsrecord.gw-a-api-2"),
            vec![ip(&gws, 2)],
        ),
        (
            hosts(dir.path(), "team-a_dnsrecord.gw-b-web"),
            vec![ip(&gws, 1)],
        ),
    ];
    for (file, want) in &files {
        wait_for_file(file, "each name's own answer", |c| addresses(c) == *want).await;
    }
    let mut gw_c = gateway("team-a", "gw-c", &[gws[2].addr().ip()]);
    gw_c["spec"]["listeners"] = json!([
        {"name": "api", "hostname": "c-api.team-a.io", "port": 443, "protocol": "HTTPS"},
        {"name": "other", "hostname": "c.team-b.io", "port": 443, "protocol": "HTTPS"},
    ]);
    kube.apply(gw_c);
    kube.apply(policy("gw-c-dns", "gw-c", "HTTP"));
    let listener = hosts(dir.path(), "team-a_dnsrecord.gw-c-api");
    wait_for_file(&listener, "gw-c's listener", |c| {
        addresses(c) == [ip(&gws, 2)]
    })
    .await;
    let kuadrant_condition = |plural: &str, name: &str, type_: &str| {
        kube_condition(&kube, plural, "team-a", name, type_)
    };
    let is = |got: Option<(String, String, String)>, status: &str, reason: &str| {
        got.is_some_and(|(s, r, _)| s == status && r == reason)
    };
    eventually("gw-a-dns accepted and enforced", || {
        is(
            kuadrant_condition("dnspolicies", "gw-a-dns", "Accepted"),
            "True",
            "Accepted",
        ) && is(
            kuadrant_condition("dnspolicies", "gw-a-dns", "Enforced"),
            "True",
            "Enforced",
        )
    })
    .await;
    assert_eq!(
        kube.object("dnspolicies", "team-a", "gw-a-dns").unwrap()["status"]["totalRecords"],
        1
    );
    eventually("gw-c-dns enforced on its listener's record", || {
        is(
            kuadrant_condition("dnspolicies", "gw-c-dns", "Enforced"),
            "True",
            "Enforced",
        ) && kube.object("dnspolicies", "team-a", "gw-c-dns").unwrap()["status"]["totalRecords"]
            == 1
    })
    .await;
    assert!(
        !hosts(dir.path(), "team-a_dnsrecord.gw-c-other").exists(),
        "a team-b name"
    );
    eventually("gw-b-dns: its Gateway is missing", || {
        is(
            kuadrant_condition("dnspolicies", "gw-b-dns", "Accepted"),
            "False",
            "TargetNotFound",
        )
    })
    .await;
    let probe = |field: &str| {
        kube.object("dnshealthcheckprobes", "team-a", "probe-0")
            .map(|p| p["status"][field].clone())
            .unwrap_or_default()
    };
    eventually("the probe healthy", || probe("healthy") == true).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    eventually("the probe follows its endpoint down", || {
        probe("healthy") == false
            && probe("consecutiveFailures").as_u64() >= Some(2)
            && probe("reason").as_str().is_some_and(|r| !r.is_empty())
    })
    .await;
    gws[0].set(Behaviour::Healthy).unwrap();
    eventually("and back up", || probe("healthy") == true).await;
    let files = &files;

    // gw-b's policy edited into a protocol Kuadrant's probes do not speak: only gw-b's
    // record is refused; every name keeps publishing.
    kube.apply(policy("gw-b-dns", "gw-b", "UDP"));
    eventually("gw-b's record refused, with the reason", || {
        kuadrant_condition("dnsrecords", "gw-b-web", "Accepted").is_some_and(|(s, _, m)| {
            s == "False"
                && m.contains("\"UDP\": only HTTP and HTTPS")
                && m.contains("as last accepted it keeps publishing")
        })
    })
    .await;
    eventually("gw-b-dns invalid, the old DNS kept", || {
        kuadrant_condition("dnspolicies", "gw-b-dns", "Accepted").is_some_and(|(s, r, m)| {
            s == "False" && r == "Invalid" && m.ends_with("the DNS it published before is kept")
        })
    })
    .await;
    assert!(is(
        kuadrant_condition("dnsrecords", "gw-a-api", "Accepted"),
        "True",
        "Accepted"
    ));
    let start = tokio::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(1500) {
        for (file, want) in files {
            let now = std::fs::read_to_string(file).unwrap_or_default();
            assert_eq!(addresses(&now), *want, "{}: withdrawn", file.display());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    kube.apply(policy("gw-b-dns", "gw-b", "HTTP"));
    eventually("gw-b's record accepted again", || {
        is(
            kuadrant_condition("dnsrecords", "gw-b-web", "Accepted"),
            "True",
            "Accepted",
        )
    })
    .await;
}

/// The operator against a fresh Kubernetes API test server, Kuadrant's kinds followed and
/// the default policy on, with three gateways and the folder it runs in.
async fn with_default_policy() -> (KubeApi, Vec<Gateway>, tempfile::TempDir, Running) {
    let gws = three_gateways();
    let port = gws[0].addr().port();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(port).await;
    let config = config.set("kubernetes.kuadrant_default_policy", true);
    let process = run_operator(dir.path(), &config);
    (kube, gws, dir, process)
}

/// `[kubernetes] kuadrant_default_policy = true`: a Gateway discovered in an allowed
/// namespace without a DNSPolicy gets the default one (`GATEWAY-dns`), which publishes its
/// listener; one in a namespace without an allowance, or annotated to opt out, gets none.
/// Runs against the Kubernetes API test server.
#[tokio::test]
async fn a_discovered_gateway_gets_the_default_policy_when_asked() {
    let (kube, gws, dir, _process) = with_default_policy().await;
    let listening = |ns: &str, name: &str, host: &str| {
        let mut g = gateway(ns, name, &[gws[0].addr().ip()]);
        g["spec"]["listeners"] =
            json!([{"name": "api", "hostname": host, "port": 443, "protocol": "HTTPS"}]);
        g
    };
    kube.apply(listening("team-a", "gw-d", "d.team-a.io"));
    kube.apply(listening("team-c", "gw-x", "x.team-c.io"));
    let mut opted_out = listening("team-a", "gw-o", "o.team-a.io");
    opted_out["metadata"]["annotations"] =
        json!({"healthorchestrator.io/default-dns-policy": "false"});
    kube.apply(opted_out);

    let file = hosts(dir.path(), "team-a_dnsrecord.gw-d-api");
    wait_for_file(&file, "the default policy's listener", |c| {
        addresses(c) == [gws[0].addr().ip().to_string()]
    })
    .await;
    let made = kube
        .object("dnspolicies", "team-a", "gw-d-dns")
        .expect("the default policy");
    assert_eq!(made["spec"]["targetRef"]["name"], "gw-d");
    // A Gateway applied after them gets its policy: the rounds since have judged gw-x and
    // gw-o too.
    kube.apply(listening("team-a", "gw-e", "e.team-a.io"));
    eventually("the later Gateway's default policy", || {
        kube.object("dnspolicies", "team-a", "gw-e-dns").is_some()
    })
    .await;
    assert!(
        kube.object("dnspolicies", "team-c", "gw-x-dns").is_none(),
        "no allowance"
    );
    assert!(
        kube.object("dnspolicies", "team-a", "gw-o-dns").is_none(),
        "opted out"
    );
    // Creating default policies is among what the shipped Kuadrant RBAC allows.
    crate::deploy_kuadrant::assert_rbac_allows(&kube.requests());
}

/// The default policy's path through a refused edit: a Gateway with two listeners gets its
/// default DNSPolicy, which publishes both hostnames; the policy edited into a protocol
/// Kuadrant's probes do not speak is refused, its status saying why and naming each
/// listener's record it keeps, while both names answer byte for byte as before (hosts
/// files read every 20 ms); the edit reverted, the policy is accepted again with exactly the
/// files and conditions from before; the policy deleted, both names are withdrawn. Runs
/// against the Kubernetes API test server.
#[tokio::test]
async fn kuadrant_listener_names_survive_a_refused_policy_edit_and_leave_on_its_deletion() {
    let (kube, gws, dir, _process) = with_default_policy().await;
    let port = gws[0].addr().port();
    let mut gw = gateway("team-a", "gw-l", &[gws[0].addr().ip(), gws[1].addr().ip()]);
    gw["spec"]["listeners"] = json!([
        {"name": "api", "hostname": "api-l.team-a.io", "port": 443, "protocol": "HTTPS"},
        {"name": "web", "hostname": "web-l.team-a.io", "port": 443, "protocol": "HTTPS"},
    ]);
    kube.apply(gw);
    let files = ["api", "web"].map(|l| hosts(dir.path(), &format!("team-a_dnsrecord.gw-l-{l}")));
    for file in &files {
        wait_for_file(file, "the default policy's listener", |c| {
            addresses(c).len() == 2
        })
        .await;
    }
    let accepted = || accepted_condition(&kube, "gw-l-dns");
    eventually("the default policy accepted", || {
        accepted().is_some_and(|c| c[1] == "True")
    })
    .await;
    let (published, conditions) = (read_all(&files), policy_conditions(&kube, "gw-l-dns"));
    let original = kube.object("dnspolicies", "team-a", "gw-l-dns").unwrap();

    let mut broken = original.clone();
    broken["spec"]["healthCheck"] = json!({"path": "/healthz", "port": port, "protocol": "UDP"});
    kube.apply(broken);
    eventually(
        "the policy refused, naming why and the records it keeps",
        || {
            accepted().is_some_and(|c| {
                let m = c[3].as_str().unwrap_or_default();
                c[1] == "False"
                    && c[2] == "Invalid"
                    && m.contains("\"UDP\"")
                    && ["api", "web"].iter().all(|l| {
                        m.contains(&format!("DNSRecord gw-l-{l} (from a listener) is refused"))
                    })
                    && m.ends_with("the DNS it published before is kept")
            })
        },
    )
    .await;
    let start = tokio::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(1500) {
        assert_eq!(
            read_all(&files),
            published,
            "a listener's name changed while refused"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    kube.apply(original);
    eventually("the conditions from before the edit", || {
        policy_conditions(&kube, "gw-l-dns") == conditions
    })
    .await;
    assert_eq!(
        read_all(&files),
        published,
        "the files from before the edit"
    );
    kube.delete("dnspolicies", "team-a", "gw-l-dns");
    for file in &files {
        wait_for_file(file, "the listener's name withdrawn", |c| {
            addresses(c).is_empty()
        })
        .await;
    }
}

/// The files' contents, in order.
fn read_all(files: &[std::path::PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect()
}

/// Policy `name`'s conditions (of `team-a`) as `[type, status, reason, message]`.
fn policy_conditions(kube: &KubeApi, name: &str) -> Vec<Value> {
    let policy = kube
        .object("dnspolicies", "team-a", name)
        .unwrap_or_default();
    policy["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["type"], c["status"], c["reason"], c["message"]]))
        .collect()
}

/// Policy `name`'s `Accepted` condition, as [`policy_conditions`] gives it.
fn accepted_condition(kube: &KubeApi, name: &str) -> Option<Value> {
    policy_conditions(kube, name)
        .into_iter()
        .find(|c| c[0] == "Accepted")
}
