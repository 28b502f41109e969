//! Kuadrant's resources live where the load balancers are known by host name (EKS's),
//! end to end: the real binary watches the Kubernetes API test server (`fakes::kube_api`;
//! no real API server can run here; it keeps objects and serves list, watch, merge patch
//! and status, without admission webhooks, CRD schema validation or garbage collection),
//! resolves the names through a real `pdns_server` (as the cloud's DNS answers them) and
//! publishes through the embedded DNS server, read back with `dig`.

use std::net::SocketAddr;

use ho_testkit::Behaviour;
use serde_json::{json, Value};

use crate::cname_answers::{balancers, LB_ZONE, PORT};
use crate::fakes::kube_api::{KubeApi, TOKEN};
use crate::harness::*;
use crate::kube_tenants::run_operator;
use crate::services::dig::wait_for_answer;
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// team-a may publish under team-a.io through the embedded server (which holds CNAMEs),
/// host names resolved by `pdns`.
fn config(
    dir: &std::path::Path,
    kube: SocketAddr,
    pdns: &PdnsServer,
    dns: SocketAddr,
) -> TestConfig {
    let kubeconfig = KubeApi::kubeconfig_with(kube, dir, TOKEN);
    TestConfig::defaults(&Check::FAST)
        .set("defaults.check.port", i64::from(PORT))
        .with(&format!(
            "[resolver]\nservers = [\"{}:{DNS_PORT}\"]\nmin_refresh = \"1s\"\ntimeout = \"500ms\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"team-a.io\"]\n\n\
             [kubernetes]\ntenants = true\nkuadrant = true\nkubeconfig = {:?}\n\n\
             [[kubernetes.allow]]\nnamespace = \"team-a\"\ndomains = [\"team-a.io\"]\nsinks = [\"dns\"]\n",
            pdns.ip,
            kubeconfig.display().to_string()
        ))
}

fn record(name: &str, host: &str, rtype: &str, target: &str) -> Value {
    json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"rootHost": host, "endpoints": [
            {"dnsName": host, "recordType": rtype, "recordTTL": 30, "targets": [target]}
        ]},
    })
}

fn probe(name: &str, address: &str) -> Value {
    json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"port": PORT, "hostname": "api.team-a.io", "address": address,
                 "path": "/healthz", "protocol": "HTTP", "interval": "1s"},
    })
}

/// Probe `name`'s status (of `team-a`): (healthy, consecutiveFailures, reason).
fn probe_state(kube: &KubeApi, name: &str) -> Option<(Value, u64, String)> {
    crate::harness::probe_state(kube, "team-a", name)
}

/// A record's condition `type_`: (status, message).
fn condition(kube: &KubeApi, record: &str, type_: &str) -> Option<(String, String)> {
    kube_condition(kube, "dnsrecords", "team-a", record, type_).map(|(s, _, m)| (s, m))
}

/// A record that is a CNAME to a load balancer's host name answers that CNAME, and the
/// probe at the host name follows the addresses the name resolves to (unhealthy when one
/// fails, as dns-operator judges it); a Gateway whose status has only a `Hostname` gets its
/// listener's CNAME; a record naming a host name that does not resolve is refused alone
/// (its status and its probe's say so) while every other name answers and later edits
/// still apply; a probe whose address is no address refuses itself alone.
#[tokio::test]
async fn host_name_records_and_probes_work_live_and_a_bad_one_refuses_itself_alone() {
    let pdns = PdnsServer::start(&format!("{LB_ZONE}."));
    let (mut east, west) = balancers(&pdns);
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let dir = tempfile::tempdir().unwrap();
    let dns = SocketAddr::from(([127, 0, 0, 1], free_port_pair()));
    let _process = run_operator(dir.path(), &config(dir.path(), kube_addr, &pdns, dns));
    eventually_async("the embedded DNS server listening", async || {
        tokio::net::TcpStream::connect(dns).await.is_ok()
    })
    .await;
    let (lb_east, lb_west) = (format!("lb-east.{LB_ZONE}"), format!("lb-west.{LB_ZONE}"));

    kube.apply(probe("api-east", &lb_east.to_uppercase()));
    kube.apply(probe("bad", "lb_east!.example"));
    kube.apply(record("api", "api.team-a.io", "CNAME", &lb_east));
    kube.apply(record(
        "gone",
        "gone.team-a.io",
        "CNAME",
        &format!("lb-gone.{LB_ZONE}"),
    ));
    kube.apply(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "team-a"},
        "spec": {"gatewayClassName": "test", "listeners": [
            {"name": "www", "hostname": "www.team-a.io", "port": 80, "protocol": "HTTP"}]},
        "status": {"addresses": [{"type": "Hostname", "value": lb_west}]},
    }));
    kube.apply(json!({
        "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
        "metadata": {"name": "edge", "namespace": "team-a"},
        "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
                 "healthCheck": {"path": "/healthz", "port": PORT, "protocol": "HTTP", "interval": "1s"}},
    }));

    let cname = |host: &str| vec![format!("{host}.")];
    wait_for_answer(dns, "api.team-a.io", &cname(&lb_east)).await;
    wait_for_answer(dns, "www.team-a.io", &cname(&lb_west)).await;
    eventually("the host-name probe healthy", || {
        probe_state(&kube, "api-east").is_some_and(|(h, f, _)| h == json!(true) && f == 0)
    })
    .await;
    // The record's per-endpoint health, as dns-operator reports it.
    let probes = |record: &str| {
        kube.object("dnsrecords", "team-a", record)
            .map(|r| r["status"]["healthCheck"]["probes"].clone())
    };
    eventually(
        "the record healthy, its load balancer's probe listed",
        || {
            condition(&kube, "api", "Healthy")
                .is_some_and(|(s, m)| s == "True" && m == "All healthchecks succeeded")
                && probes("api").is_some_and(|p| {
                    p[0]["ipAddress"] == lb_east.as_str() && p[0]["synced"] == true
                })
        },
    )
    .await;
    eventually("the unresolvable record refused, saying which name", || {
        condition(&kube, "gone", "Accepted")
            .is_some_and(|(s, m)| s == "False" && m.contains("lb-gone") && m.contains("resolve"))
    })
    .await;
    eventually("the bad probe's own status says why", || {
        probe_state(&kube, "bad").is_some_and(|(h, _, r)| {
            h == json!(false) && r.contains("neither an IP address nor a host name")
        })
    })
    .await;

    // East's address fails: the probe at its name says so, as dns-operator writes it.
    east.set(Behaviour::Refuse).unwrap();
    eventually("the host-name probe unhealthy with a reason", || {
        probe_state(&kube, "api-east")
            .is_some_and(|(h, f, r)| h == json!(false) && f >= 1 && !r.is_empty())
    })
    .await;
    eventually("the record not healthy, naming the load balancer", || {
        condition(&kube, "api", "Healthy")
            .is_some_and(|(s, m)| s == "False" && m.contains(&lb_east))
            && probes("api").is_some_and(|p| p[0]["conditions"][0]["status"] == "False")
    })
    .await;
    // An edit beside the refused record still applies: the record moves to west.
    kube.apply(record("api", "api.team-a.io", "CNAME", &lb_west));
    wait_for_answer(dns, "api.team-a.io", &cname(&lb_west)).await;
    // The missing name appears in the cloud's DNS: the refused record publishes.
    pdns.point(LB_ZONE, &format!("lb-gone.{LB_ZONE}"), &ip(&west));
    wait_for_answer(dns, "gone.team-a.io", &cname(&format!("lb-gone.{LB_ZONE}"))).await;
    drop((east, west));
    // Every request this run made is one the shipped Kuadrant RBAC allows.
    crate::deploy_kuadrant::assert_rbac_allows(&kube.requests());
}

/// A gateway on `addr` that answers 200 only to a request carrying `header` (as
/// `Name: value`), 401 to any other.
pub(crate) async fn guarded_gateway(header: &'static str) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let answer: &[u8] = match head.contains(&format!("\r\n{header}\r\n")) {
                    true => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    false => b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                };
                let _ = s.write_all(answer).await;
            });
        }
    });
    addr
}

/// A probe's header Secret (`additionalHeadersRef`) is read and its headers sent: the
/// gateway that answers only with the token is healthy and published, and the token is
/// never in the operator's log; a probe naming a Secret that does not exist refuses itself
/// alone, its status in dns-operator's words, while the other record publishes.
#[tokio::test]
async fn a_probes_header_secret_is_sent_and_a_missing_one_refuses_that_probe_alone() {
    let gw = guarded_gateway("X-Probe-Token: s3cret-token").await;
    let other = ho_testkit::Gateway::start(
        SocketAddr::new(loopback_ip().into(), gw.port()),
        Behaviour::Healthy,
    )
    .unwrap();
    let KuadrantSetup { kube, dir, config } = KuadrantSetup::start(gw.port()).await;
    let _process = run_operator(dir.path(), &config);

    let b64 = |s: &str| data_encoding::BASE64.encode(s.as_bytes());
    kube.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "probe-headers", "namespace": "team-a"},
        "data": {"X-Probe-Token": b64("s3cret-token")},
    }));
    let with_secret = |name: &str, address: String, secret: &str| {
        let mut p = probe(name, &address);
        p["spec"]["port"] = json!(gw.port());
        p["spec"]["additionalHeadersRef"] = json!({"name": secret});
        p
    };
    kube.apply(with_secret("guarded", gw.ip().to_string(), "probe-headers"));
    kube.apply(with_secret("missing", ip(&other), "no-such-secret"));
    kube.apply(record("api", "api.team-a.io", "A", &gw.ip().to_string()));
    kube.apply(record("web", "web.team-a.io", "A", &ip(&other)));

    let file = crate::kube_tenants::hosts(dir.path(), "team-a_dnsrecord.api");
    wait_for_file(&file, "the guarded gateway published", |c| {
        addresses(c) == [gw.ip().to_string()]
    })
    .await;
    eventually("the guarded probe healthy: its header was sent", || {
        probe_state(&kube, "guarded").is_some_and(|(h, _, _)| h == json!(true))
    })
    .await;
    eventually("the probe without its Secret refused alone", || {
        probe_state(&kube, "missing").is_some_and(|(h, _, r)| {
            h == json!(false)
                && r.contains("error retrieving additional headers secret team-a/no-such-secret")
        })
    })
    .await;
    eventually("the record naming its address refused", || {
        condition(&kube, "web", "Accepted").is_some_and(|(s, _)| s == "False")
    })
    .await;
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(!log.contains("s3cret-token"), "the token is in the log");
    // Every request this run made (the Secret read by name) is one the shipped RBAC allows
    // once the namespace grants its header Secret by name.
    crate::deploy_kuadrant::assert_rbac_allows_with(
        &kube.requests(),
        &crate::deploy_kuadrant::header_secret_role("team-a", &["probe-headers", "no-such-secret"]),
    );
}
