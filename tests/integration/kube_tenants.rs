//! `DNSFailover` resources end to end: the real binary watches the Kubernetes API test
//! server (`fakes::kube_api`: list, watch with resume and 410, status subresource,
//! finalizers) and publishes through a real hosts-file sink probing real gateways on
//! loopback. Two namespaces with their allowances, refusals with their conditions, a
//! conflict, Nodes, a Gateway and an Ingress discovered and removed, a watch that drops and one
//! that must list again, finalizer cleanup; nothing from a refused resource ever reaches
//! a file; with two replicas under leader election, only the writer writes statuses and
//! finalizers, and the standby takes over.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use ho_testkit::{Behaviour, Gateway};
use serde_json::{json, Value};

use crate::fakes::kube_api::{KubeApi, TOKEN};
use crate::harness::*;

/// The operator's config: one hosts-file sink, team-a may claim `team-a.io` and Nodes,
/// team-b `team-b.io`; no tenant in the file.
/// The orchestrator run with `config` in `dir`, logging at `info` to `dir/log`.
pub(crate) fn run_operator(dir: &Path, config: &TestConfig) -> Running {
    let mut cmd = run_config(dir, config);
    cmd.env("RUST_LOG", "info");
    spawn_logged(&mut cmd, &dir.join("log"))
}

pub(crate) fn operator_config(dir: &Path, kube: SocketAddr, port: u16) -> TestConfig {
    operator_config_as(dir, kube, port, TOKEN)
}

/// [`operator_config`] for a replica presenting `token`.
fn operator_config_as(dir: &Path, kube: SocketAddr, port: u16, token: &str) -> TestConfig {
    let kubeconfig = KubeApi::kubeconfig_with(kube, dir, token);
    TestConfig::defaults(&Check::FAST)
        .set("defaults.check.port", i64::from(port))
        .with(&hosts_sink(&dir.join("hosts")))
        .with(&format!(
            "[kubernetes]\ntenants = true\nkubeconfig = {:?}\n\n\
             [[kubernetes.allow]]\nnamespace = \"team-a\"\ndomains = [\"team-a.io\"]\nsinks = [\"local\"]\nnodes = true\n\n\
             [[kubernetes.allow]]\nnamespace = \"team-b\"\ndomains = [\"team-b.io\"]\nsinks = [\"local\"]\n",
            kubeconfig.display().to_string()
        ))
}

pub(crate) fn failover(ns: &str, name: &str, domain: &str, endpoints: Value) -> Value {
    json!({
        "apiVersion": "healthorchestrator.io/v1alpha1", "kind": "DNSFailover",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"domains": [domain], "sinks": ["local"], "endpoints": endpoints},
    })
}

fn node(name: &str, role: &str, address: IpAddr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"role": role}},
        "status": {"addresses": [{"type": "ExternalIP", "address": address.to_string()}]},
    })
}

pub(crate) fn gateway(ns: &str, name: &str, addresses: &[IpAddr]) -> Value {
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"type": "IPAddress", "value": a.to_string()}))
        .collect();
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"gatewayClassName": "test", "listeners": []},
        "status": {"addresses": addresses},
    })
}

fn ingress(ns: &str, name: &str, address: IpAddr) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rules": [{"host": "shop.team-b.io"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": address.to_string()}]}},
    })
}

/// The condition `type_` of a resource: (status, reason, message).
fn condition(
    kube: &KubeApi,
    ns: &str,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let object = kube.object("dnsfailovers", ns, name)?;
    let c = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

pub(crate) async fn wait_for_condition(
    kube: &KubeApi,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> String {
    let mut last = None;
    eventually(&format!("{ns}/{name} {type_}={status} ({reason})"), || {
        last = condition(kube, ns, name, type_);
        last.as_ref()
            .is_some_and(|(s, r, _)| s == status && r == reason)
    })
    .await;
    last.unwrap().2
}

pub(crate) fn hosts(dir: &Path, tenant: &str) -> PathBuf {
    dir.join("hosts").join(format!("{tenant}.hosts"))
}

/// Three gateways on one port, each on its own loopback address.
pub(crate) fn three_gateways() -> Vec<Gateway> {
    let first = Gateway::start(loopback(), Behaviour::Healthy).unwrap();
    let port = first.addr().port();
    let mut gws = vec![first];
    for _ in 0..2 {
        let addr = SocketAddr::new(loopback_ip().into(), port);
        gws.push(Gateway::start(addr, Behaviour::Healthy).unwrap());
    }
    gws
}

#[tokio::test]
async fn resources_are_admitted_isolated_discovered_reported_and_cleaned_up() {
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = three_gateways();
    let ip = |i: usize| gws[i].addr().ip();
    let dir = tempfile::tempdir().unwrap();
    let config = operator_config(dir.path(), kube_addr, gws[0].addr().port());
    let _process = run_operator(dir.path(), &config);

    kube.apply(node("n1", "gw", ip(0)));
    kube.apply(node("other", "db", ip(2)));
    kube.apply(gateway("team-b", "edge", &[ip(1)]));
    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"nodes": {"role": "gw"}}]),
    ));
    kube.apply(failover(
        "team-b",
        "web",
        "web.team-b.io",
        json!([{"gateway": "edge"}]),
    ));
    kube.apply(ingress("team-b", "shop", ip(2)));
    kube.apply(failover(
        "team-b",
        "shop",
        "shop.team-b.io",
        json!([{"ingress": "shop"}]),
    ));
    kube.apply(failover(
        "team-b",
        "steal",
        "pay.team-a.io",
        json!([{"addresses": [ip(1).to_string()]}]),
    ));
    kube.apply(failover(
        "team-c",
        "x",
        "x.team-c.io",
        json!([{"addresses": [ip(1).to_string()]}]),
    ));
    kube.apply(failover(
        "team-a",
        "dup",
        "api.team-a.io",
        json!([{"addresses": [ip(1).to_string()]}]),
    ));
    kube.apply(failover(
        "team-a",
        "bad",
        "bad.team-a.io",
        json!([{"addresses": ["gw.example"]}]),
    ));

    let api_file = hosts(dir.path(), "team-a_api");
    let web_file = hosts(dir.path(), "team-b_web");
    wait_for_file(&api_file, "the node's address", |c| {
        addresses(c) == [ip(0).to_string()]
    })
    .await;
    wait_for_file(&web_file, "the gateway's address", |c| {
        addresses(c) == [ip(1).to_string()]
    })
    .await;
    wait_for_file(
        &hosts(dir.path(), "team-b_shop"),
        "the Ingress's address",
        |c| addresses(c) == [ip(2).to_string()],
    )
    .await;

    let message = wait_for_condition(&kube, "team-a", "api", "Ready", "True", "Published").await;
    assert_eq!(message, "published and written to every sink");
    let api = kube.object("dnsfailovers", "team-a", "api").unwrap();
    assert_eq!(api["status"]["observedGeneration"], 1);
    assert_eq!(
        api["status"]["published"]["addresses"],
        json!([ip(0).to_string()])
    );
    assert_eq!(api["status"]["endpoints"]["healthy"], 1);
    assert_eq!(api["status"]["sinks"][0]["name"], "local");
    assert_eq!(
        api["metadata"]["finalizers"],
        json!(["healthorchestrator.io/withdraw-records"])
    );

    let refused = [
        ("team-b", "steal", "DomainNotAllowed"),
        ("team-c", "x", "NamespaceNotAllowed"),
        ("team-a", "dup", "DomainClaimed"),
        ("team-a", "bad", "Invalid"),
    ];
    for (ns, name, reason) in refused {
        wait_for_condition(&kube, ns, name, "Accepted", "False", reason).await;
        let (ready, _, _) = condition(&kube, ns, name, "Ready").unwrap();
        assert_eq!(ready, "False");
    }
    let (_, _, message) = condition(&kube, "team-a", "bad", "Accepted").unwrap();
    assert_eq!(
        message,
        "spec.endpoints[0].addresses[0]: \"gw.example\" is not an IP address (a load balancer's host name goes under hosts)"
    );
    let (_, _, message) = condition(&kube, "team-a", "dup", "Accepted").unwrap();
    assert!(message.contains("DNSFailover team-a/api"), "{message}");

    // A new gateway node joins, without anyone editing anything; an old one leaves.
    kube.apply(node("n2", "gw", ip(2)));
    wait_for_file(&api_file, "the new node", |c| addresses(c).len() == 2).await;
    kube.delete("nodes", "", "n1");
    wait_for_file(&api_file, "the old node gone", |c| {
        addresses(c) == [ip(2).to_string()]
    })
    .await;

    // A watch that drops resumes where it was; one too old to resume lists again.
    kube.drop_watches();
    kube.apply(gateway("team-b", "edge", &[ip(1), ip(0)]));
    wait_for_file(&web_file, "the gateway's second address", |c| {
        addresses(c).len() == 2
    })
    .await;
    kube.compact();
    kube.drop_watches();
    kube.apply(gateway("team-b", "edge", &[ip(0)]));
    wait_for_file(&web_file, "the gateway's new address", |c| {
        addresses(c) == [ip(0).to_string()]
    })
    .await;

    // Deleting a resource withdraws its records before the finalizer lets it go.
    kube.delete("dnsfailovers", "team-b", "web");
    assert!(
        kube.object("dnsfailovers", "team-b", "web").is_some(),
        "the finalizer holds it"
    );
    wait_for_file(&web_file, "the records withdrawn", |c| {
        addresses(c).is_empty()
    })
    .await;
    eventually("the finalizer released", || {
        kube.object("dnsfailovers", "team-b", "web").is_none()
    })
    .await;

    // Nothing from a refused resource ever reached a file, and only this replica's
    // service account wrote statuses.
    for tenant in ["team-b_steal", "team-c_x", "team-a_dup", "team-a_bad"] {
        assert!(
            !hosts(dir.path(), tenant).exists(),
            "{tenant} was published"
        );
    }
    let writes: Vec<(String, String)> = kube
        .requests_with_tokens()
        .into_iter()
        .filter(|(r, _)| r.starts_with("PATCH") && r.contains("/status"))
        .collect();
    assert!(!writes.is_empty());
    assert!(writes.iter().all(|(_, token)| token == TOKEN));
}

/// Replica `name` under leader election (Lease `dns/ho`, 3 s), presenting `test-{name}`.
fn replica(name: &str, kube: SocketAddr, port: u16) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = operator_config_as(dir.path(), kube, port, &format!("test-{name}")).with(&format!(
        "[leader_election]\nenabled = true\nnamespace = \"dns\"\nname = \"ho\"\nidentity = \"{name}\"\n\
         lease_duration = \"3s\"\nrenew_deadline = \"2s\"\nretry_period = \"300ms\"\nkubeconfig = {:?}\n",
        dir.path().join("kubeconfig").display().to_string()
    ));
    let mut cmd = run_config(dir.path(), &config);
    cmd.env("RUST_LOG", "info");
    let process = spawn_logged(&mut cmd, &dir.path().join("log"));
    (process, dir)
}

/// The tokens that patched `DNSFailover`s (statuses and finalizers).
fn resource_writers(kube: &KubeApi) -> std::collections::BTreeSet<String> {
    kube.requests_with_tokens()
        .into_iter()
        .filter(|(r, _)| r.starts_with("PATCH") && r.contains("/dnsfailovers/"))
        .map(|(_, token)| token)
        .collect()
}

#[tokio::test]
async fn only_the_writer_replica_writes_statuses_and_the_standby_takes_over() {
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = three_gateways();
    let port = gws[0].addr().port();
    let mut replicas = vec![replica("a", kube_addr, port), replica("b", kube_addr, port)];
    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": [gws[0].addr().ip().to_string()]}]),
    ));
    wait_for_condition(&kube, "team-a", "api", "Ready", "True", "Published").await;
    let mut leader = None;
    eventually("a leader", || {
        leader = kube.lease_holder("dns", "ho");
        leader.is_some()
    })
    .await;
    let leader = leader.unwrap();
    assert_eq!(
        resource_writers(&kube),
        [format!("test-{leader}")].into(),
        "only the leader writes statuses and finalizers"
    );

    // The leader dies: the standby takes the Lease and reports the next resource.
    let (dead, standby) = if leader == "a" { (0, "b") } else { (1, "a") };
    drop(replicas.remove(dead));
    eventually("the standby leads", || {
        kube.lease_holder("dns", "ho").as_deref() == Some(standby)
    })
    .await;
    kube.apply(failover(
        "team-a",
        "www",
        "www.team-a.io",
        json!([{"addresses": [gws[1].addr().ip().to_string()]}]),
    ));
    wait_for_condition(&kube, "team-a", "www", "Ready", "True", "Published").await;
    assert!(resource_writers(&kube).contains(&format!("test-{standby}")));
}

/// A sink that cannot take the withdrawal keeps the finalizer, and the status names it;
/// once it answers again, the records go and so does the resource.
#[tokio::test]
async fn an_unreachable_sink_holds_the_deletion_and_says_so() {
    use crate::fakes::webhook::{Receiver, SECRET};
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let receiver = Receiver::default();
    let hook = receiver.clone().start().await;
    let gws = three_gateways();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let config = operator_config(dir.path(), kube_addr, gws[0].addr().port())
        .set("kubernetes.allow.0.sinks", vec!["local", "hook"])
        .with(&format!(
            "[sinks.hook]\nkind = \"webhook\"\nurl = \"http://{hook}/\"\nsecret_file = {:?}\ntimeout = \"1s\"\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n",
            secret.display().to_string()
        ));
    let _process = run_operator(dir.path(), &config);
    let mut resource = failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": [gws[0].addr().ip().to_string()]}]),
    );
    resource["spec"]["sinks"] = json!(["local", "hook"]);
    kube.apply(resource);
    wait_for_condition(&kube, "team-a", "api", "Ready", "True", "Published").await;

    *receiver.failing.lock().unwrap() = true;
    kube.delete("dnsfailovers", "team-a", "api");
    let file = hosts(dir.path(), "team-a_api");
    wait_for_file(&file, "the local records withdrawn", |c| {
        addresses(c).is_empty()
    })
    .await;
    let message = wait_for_condition(&kube, "team-a", "api", "Ready", "False", "Withdrawing").await;
    let mut message = message;
    eventually("the failing sink named", || {
        message = condition(&kube, "team-a", "api", "Ready")
            .map(|c| c.2)
            .unwrap_or_default();
        message.contains("sink \"hook\" cannot be written")
    })
    .await;
    assert!(
        kube.object("dnsfailovers", "team-a", "api").is_some(),
        "the finalizer holds it: {message}"
    );

    *receiver.failing.lock().unwrap() = false;
    eventually("the finalizer released", || {
        kube.object("dnsfailovers", "team-a", "api").is_none()
    })
    .await;
}

/// An accepted resource edited into something refused keeps publishing its last accepted
/// generation: a hosts file read every 20 ms never loses its records, the status says which
/// generation is refused and which one serves; a valid edit then replaces it. Runs against
/// the Kubernetes API test server (no real API server can run here).
#[tokio::test]
async fn a_refused_edit_never_takes_the_name_down() {
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = three_gateways();
    let ip = |i: usize| gws[i].addr().ip();
    let dir = tempfile::tempdir().unwrap();
    let config = operator_config(dir.path(), kube_addr, gws[0].addr().port());
    let _process = run_operator(dir.path(), &config);

    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": [ip(0).to_string()]}]),
    ));
    let file = hosts(dir.path(), "team-a_api");
    wait_for_file(&file, "the first generation", |c| {
        addresses(c) == [ip(0).to_string()]
    })
    .await;
    wait_for_condition(&kube, "team-a", "api", "Ready", "True", "Published").await;

    // Edited into an address that is not one, then into a domain the namespace may not claim.
    let edits = [
        (
            json!([{"addresses": ["gw.example"]}]),
            "api.team-a.io",
            "Invalid",
        ),
        (
            json!([{"addresses": [ip(1).to_string()]}]),
            "api.team-b.io",
            "DomainNotAllowed",
        ),
    ];
    for (endpoints, domain, reason) in edits {
        kube.apply(failover("team-a", "api", domain, endpoints));
        let message = wait_for_condition(&kube, "team-a", "api", "Accepted", "False", reason).await;
        assert!(
            message.contains("refused; generation 1 keeps publishing"),
            "{message}"
        );
        let start = tokio::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(1500) {
            let now = std::fs::read_to_string(&file).unwrap_or_default();
            assert_eq!(
                addresses(&now),
                [ip(0).to_string()],
                "{reason}: records withdrawn"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let (ready, _, message) = condition(&kube, "team-a", "api", "Ready").unwrap();
        assert_eq!(ready, "True", "{message}");
        assert!(message.contains("serving generation 1"), "{message}");
    }

    // A valid edit replaces what is published.
    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": [ip(1).to_string()]}]),
    ));
    wait_for_file(&file, "the valid edit", |c| {
        addresses(c) == [ip(1).to_string()]
    })
    .await;
    wait_for_condition(&kube, "team-a", "api", "Accepted", "True", "Accepted").await;
}

/// A restart while a refused edit is in place keeps serving the last accepted generation:
/// `<state_dir>/accepted.json` carries it over, so the new process publishes it again and a
/// hosts file read every 20 ms across the restart never loses the record. Runs against the
/// Kubernetes API test server (no real API server can run here).
#[tokio::test]
async fn a_restart_with_a_refused_edit_in_place_keeps_the_last_accepted_answer() {
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = three_gateways();
    let ip = |i: usize| gws[i].addr().ip();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = operator_config(dir.path(), kube_addr, gws[0].addr().port())
        .set("state_dir", state.display().to_string());
    let process = run_operator(dir.path(), &config);

    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": [ip(0).to_string()]}]),
    ));
    let file = hosts(dir.path(), "team-a_api");
    wait_for_file(&file, "the first generation", |c| {
        addresses(c) == [ip(0).to_string()]
    })
    .await;
    kube.apply(failover(
        "team-a",
        "api",
        "api.team-a.io",
        json!([{"addresses": ["gw.example"]}]),
    ));
    wait_for_condition(&kube, "team-a", "api", "Accepted", "False", "Invalid").await;
    assert!(state.join("accepted.json").exists());

    drop(process);
    let restarted = run_operator(dir.path(), &config);
    let start = tokio::time::Instant::now();
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    // The new process admits the refused resource as its last accepted generation.
    let mut admitted = false;
    while start.elapsed() < std::time::Duration::from_secs(4) {
        let now = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(
            addresses(&now),
            [ip(0).to_string()],
            "withdrawn across the restart"
        );
        admitted |= log().contains("accepted=1");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(admitted, "{}", log());
    drop(restarted);
}
