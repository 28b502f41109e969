//! Kuadrant's DNSHealthCheckProbes on their own, live: every probe of an allowed namespace
//! is run and its status kept as dns-operator keeps it, whether or not a published
//! DNSRecord holds its address, and its verdict reaches no record it does not back. The
//! real binary against the Kubernetes API test server (`fakes::kube_api`; no real API
//! server can run here), probing real gateways on loopback.

use ho_testkit::Behaviour;
use serde_json::{json, Value};

use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::kube_tenants::{hosts, operator_config, run_operator, three_gateways};

/// A small seeded generator (xorshift), so a failing script names its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A probe's status: (healthy, consecutiveFailures, reason).
fn probe_state(kube: &KubeApi, ns: &str, name: &str) -> Option<(Value, u64, String)> {
    let s = kube.object("dnshealthcheckprobes", ns, name)?["status"].clone();
    Some((
        s["healthy"].clone(),
        s["consecutiveFailures"].as_u64()?,
        s["reason"].as_str()?.to_owned(),
    ))
}

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
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let mut gws = three_gateways();
    let ips: Vec<String> = gws.iter().map(|g| g.addr().ip().to_string()).collect();
    let ip = |i: usize| ips[i].clone();
    let port = gws[0].addr().port();
    let dir = tempfile::tempdir().unwrap();
    let config = operator_config(dir.path(), kube_addr, port).set("kubernetes.kuadrant", true);
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
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut script = vec![Behaviour::Healthy];
    let choices = [
        Behaviour::Healthy,
        Behaviour::Status(503),
        Behaviour::Refuse,
    ];
    while script.len() < 6 {
        let next = choices[rng.below(3) as usize].clone();
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
