//! `[ring]` with real processes: three replicas of the binary share the probing of twelve
//! gateways through their own Leases on the Kubernetes API test server (`fakes::kube_api`,
//! which implements Leases and equality label selectors, the calls the ring makes) and
//! stream their verdicts to each other over loopback sockets. Each replica writes its own
//! hosts file from every verdict, its own and the others'.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ho_testkit::{Behaviour, Gateway};
use tokio::time::Instant;

use crate::fakes::kube_api::KubeApi;
use crate::harness::*;

const GATEWAYS: usize = 12;

struct Replica {
    name: String,
    process: Option<Running>,
    api: SocketAddr,
    dir: tempfile::TempDir,
}

impl Replica {
    fn start(name: &str, kube: SocketAddr, gws: &[Gateway], secret: &str) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = KubeApi::kubeconfig_with(kube, dir.path(), &format!("test-{name}"));
        let ip = loopback_ip();
        let api = SocketAddr::new(ip.into(), 8080);
        let secret_file = dir.path().join("ring-secret");
        std::fs::write(&secret_file, secret).unwrap();
        let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
            .set("api.listen", api.to_string())
            // Longer than the test: `/readyz` passes on verdicts alone, never on the grace.
            .set("defaults.startup_grace", "60s")
            .with(&format!(
                "[ring]\nenabled = true\nname = \"ho\"\nnamespace = \"dns\"\nidentity = \"{name}\"\n\
                 lease_duration = \"2s\"\nrenew_period = \"300ms\"\nlisten = \"{ip}:7947\"\n\
                 secret_file = {:?}\nkubeconfig = {:?}\n\n\
                 [[tenants]]\nname = \"a\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"local\"]\n\n\
                 [sinks.local]\nkind = \"hosts_file\"\ndir = {:?}\n",
                secret_file.display().to_string(),
                kubeconfig.display().to_string(),
                dir.path().join("hosts").display().to_string(),
            ));
        let mut cmd = run_config(dir.path(), &config);
        cmd.env("RUST_LOG", "info");
        let process = spawn_logged(&mut cmd, &dir.path().join("log"));
        Replica {
            name: name.to_owned(),
            process: Some(process),
            api,
            dir,
        }
    }

    fn hosts_file(&self) -> PathBuf {
        self.dir.path().join("hosts").join("a.hosts")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    async fn ring(&self) -> Option<serde_json::Value> {
        let status: serde_json::Value =
            serde_json::from_str(&try_api_get(self.api, "/status").await?).ok()?;
        Some(status["ring"].clone())
    }

    /// Targets this replica probes now, once it answers.
    async fn probing(&self) -> Option<u64> {
        self.ring().await?["probing"].as_u64()
    }

    /// Whether `/readyz` passes.
    async fn ready(&self) -> bool {
        try_api_get(self.api, "/readyz").await.as_deref() == Some("ready\n")
    }

    async fn members(&self) -> Option<usize> {
        Some(self.ring().await?["members"].as_array()?.len())
    }

    fn kill(&mut self) {
        drop(self.process.take());
    }
}

/// Waits until `ready` holds for the replicas' `/status`, or fails naming `what`.
async fn wait_for(
    replicas: &[&Replica],
    what: &str,
    mut ready: impl AsyncFnMut(&[&Replica]) -> bool,
) {
    let start = Instant::now();
    while !ready(replicas).await {
        assert!(
            start.elapsed() < LIMIT,
            "never {what}:\n{}",
            replicas
                .iter()
                .map(|r| format!("--- {}\n{}", r.name, r.log()))
                .collect::<String>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Probing shares summed over the replicas.
async fn probing_sum(replicas: &[&Replica]) -> Option<u64> {
    let mut sum = 0;
    for r in replicas {
        sum += r.probing().await?;
    }
    Some(sum)
}

/// Requests per second the gateways take together, over the time they take `count`
/// (polled every 20 ms, not a fixed window).
async fn request_rate(gws: &[Gateway], count: u64) -> f64 {
    let total = || gws.iter().map(Gateway::requests).sum::<u64>();
    let (before, start) = (total(), Instant::now());
    while total() - before < count {
        assert!(start.elapsed() < LIMIT, "the gateways are not probed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (total() - before) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::test]
async fn three_replicas_share_the_probing_and_every_one_answers_every_verdict() {
    let mut gws = gateways(GATEWAYS);
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let all: Vec<String> = gws.iter().map(ip).collect();

    // One replica alone probes everything: the baseline of probe traffic.
    let mut a = Replica::start("a", kube_addr, &gws, "s3cret");
    wait_for(&[&a], "a alone probes every target", async |r| {
        r[0].probing().await == Some(GATEWAYS as u64)
    })
    .await;
    wait_for_file(&a.hosts_file(), "a publishes every gateway", |c| {
        addresses(c).len() == GATEWAYS
    })
    .await;
    let alone = request_rate(&gws, 120).await;

    // Three replicas: each target has two owners once the make-before-break grace (the
    // Lease duration) has passed.
    let b = Replica::start("b", kube_addr, &gws, "s3cret");
    let c = Replica::start("c", kube_addr, &gws, "s3cret");
    wait_for(&[&a, &b, &c], "two owners per target", async |r| {
        probing_sum(r).await == Some(2 * GATEWAYS as u64) && r[0].members().await == Some(3)
    })
    .await;
    // A joining replica answers from the owners' verdicts before it owns anything: it is
    // ready then, with no warning about targets its peers probe.
    wait_for(&[&b, &c], "the joining replicas ready", async |r| {
        r[0].ready().await && r[1].ready().await
    })
    .await;
    for r in [&b, &c] {
        assert!(
            !r.log().contains("targets without a verdict"),
            "{} warned about its peers' targets",
            r.name
        );
    }
    // The first seconds after the gates settle still carry the handover: owners that just
    // took a target probe it at once (a burst of first probes); the rate is measured after.
    request_rate(&gws, 240).await;
    let shared = request_rate(&gws, 240).await;
    let ratio = shared / alone;
    println!("probe requests/s: one replica {alone:.1}, three replicas of replication 2 {shared:.1} (x{ratio:.2})");
    assert!(
        (1.6..=2.4).contains(&ratio),
        "three replicas probed x{ratio:.2} of one"
    );
    // Every member takes a share. ("Fewer than all" would fail by chance: the targets' keys
    // carry the gateways' random ports, and a member is among a target's two owners with
    // probability 2/3, so it owns all 12 in (2/3)^12 = 0.8 % of runs; it owns none in
    // (1/3)^12 = 0.0002 %.)
    for r in [&a, &b, &c] {
        let mine = r.probing().await.unwrap();
        assert!(mine > 0, "{} probes none of the targets", r.name);
        wait_for_file(
            &r.hosts_file(),
            "every replica publishes every gateway",
            |c| addresses(c) == all,
        )
        .await;
    }

    // A gateway fails: every replica's answer drops it, whoever probes it.
    gws[3].set(Behaviour::Refuse).unwrap();
    let failed = Instant::now();
    let rest: Vec<String> = all.iter().filter(|a| **a != ip(&gws[3])).cloned().collect();
    for r in [&a, &b, &c] {
        wait_for_file(
            &r.hosts_file(),
            "every replica withdraws the failed gateway",
            |c| addresses(c) == rest,
        )
        .await;
    }
    println!(
        "gateway failed -> withdrawn by all three replicas in {:?}",
        failed.elapsed()
    );
    gws[3].set(Behaviour::Healthy).unwrap();
    for r in [&a, &b, &c] {
        wait_for_file(&r.hosts_file(), "every replica restores it", |c| {
            addresses(c) == all
        })
        .await;
    }
    // Each replica took the others' batches and timed them.
    for r in [&a, &b, &c] {
        let metrics = api_get(r.api, "/metrics").await;
        let count = metric(
            &metrics,
            "health_orchestrator_ring_stream_lag_seconds_count",
        );
        let sum = metric(&metrics, "health_orchestrator_ring_stream_lag_seconds_sum");
        let (Some(count), Some(sum)) = (count, sum) else {
            panic!("{} exports no ring_stream_lag_seconds", r.name);
        };
        assert!(count >= 2.0, "{} timed {count} batches", r.name);
        println!(
            "{}: {count} batches taken, mean lag {:.2} ms",
            r.name,
            1000.0 * sum / count
        );
    }

    // SIGKILL one: the two left take its targets within the Lease duration and a listing,
    // and no answer loses a healthy gateway meanwhile.
    let mut c = c;
    c.kill();
    let killed = Instant::now();
    let mut dropped = false;
    wait_for(&[&a, &b], "two replicas probing everything", async |r| {
        for x in r {
            let content = std::fs::read_to_string(x.hosts_file()).unwrap_or_default();
            dropped |= addresses(&content) != all;
        }
        probing_sum(r).await == Some(2 * GATEWAYS as u64) && r[0].members().await == Some(2)
    })
    .await;
    println!(
        "SIGKILL -> two owners per target again in {:?}",
        killed.elapsed()
    );
    assert!(
        !dropped,
        "a healthy gateway left an answer while a replica died"
    );

    // A replica with the wrong secret joins the ring but its verdicts are refused.
    let intruder = Replica::start("x", kube_addr, &gws, "not-the-secret");
    wait_for(&[&a], "a refuses the intruder's stream", async |r| {
        r[0].log()
            .contains("did not prove it knows this ring's secret")
    })
    .await;
    drop(intruder);
    a.kill();
}
