//! The sink conformance suite: the behaviour every sink owes, tested the same way for each
//! (hosts_file on real files, PowerDNS on a real `pdns_server` through DNS, webhook on a
//! real receiver, the CoreDNS ConfigMap and external-dns DNSEndpoints on the Kubernetes API
//! test server, Route53 on moto,
//! Cloudflare, Google Cloud DNS and Azure DNS on their API test servers, an external-dns
//! webhook provider on its protocol's test server, RFC 2136 on real BIND 9 and Knot DNS through
//! DNS, and the embedded `dns_server` through DNS):
//! 1. it converges to the latest state after a back-end outage,
//! 2. it coalesces a burst of changes during the outage into few writes,
//! 3. it is idempotent: periodic reconciles of an unchanged state write nothing,
//! 4. a write the back end lost after answering success (or records removed behind its
//!    back) is restored by the next periodic reconcile,
//! 5. a restart of the orchestrator never publishes an empty or partial set before the
//!    endpoints have verdicts.
//!
//! A serving back end (the embedded server, in the orchestrator's own process) has no outage
//! to ride out and nothing that can be lost behind its back, so 1, 2 and 4 do not apply to
//! it; across a restart it holds nothing, and owes SERVFAIL (a resolver keeps what it has or
//! asks another server) rather than an empty or partial answer until every verdict is in.

use std::time::Duration;

use ho_engine::hysteresis::Health;
use ho_engine::Engine;
use ho_testkit::{Behaviour, Gateway};

use crate::fakes::azure_dns::AzureDns;
use crate::fakes::cloudflare::Cloudflare;
use crate::fakes::external_dns::ExternalDnsProvider;
use crate::fakes::google_dns::GoogleDns;
use crate::fakes::kube_api::KubeApi;
use crate::fakes::route53::{Moto, Proxy};
use crate::fakes::webhook::Receiver;
use crate::harness::*;
use crate::services::dns_primary::{Flavor, Primary};
use crate::services::pdns::PdnsServer;
use backends::*;

mod backends;

const DOMAIN: &str = "conf.tenant-a.io";
const DELIVERY: &str =
    "delivery = { backoff_min = \"50ms\", backoff_max = \"200ms\", reconcile_interval = \"1s\" }";

/// What the suite needs from a back end.
trait Backend {
    /// The back end is the orchestrator's own server (see the module doc).
    const SERVING: bool = false;
    /// The `[sinks.s]` table.
    fn sink_table(&self) -> String;
    /// The addresses the back end serves for [`DOMAIN`] now, sorted; `None` if it holds
    /// nothing for it.
    async fn published(&self) -> Option<Vec<String>>;
    /// Makes writes fail.
    async fn outage_start(&mut self);
    /// Makes writes succeed again.
    async fn outage_end(&mut self);
    /// Makes the back end lose what it holds for [`DOMAIN`], as if the last write had
    /// answered success without applying.
    async fn lose_state(&mut self);
    /// Tenant keys the back end needs (a TTL its API takes).
    fn tenant_keys(&self) -> &'static str {
        ""
    }
    /// Waits until the stopped engine has let go of the back end (step 5 starts a new one).
    async fn released(&self) {}
}

fn engine_config(check: &Check, gws: &[Gateway], backend: &impl Backend) -> TestConfig {
    let tail = format!(
        "[[tenants]]\nname = \"conf\"\ndomains = [\"{DOMAIN}\"]\nsinks = [\"s\"]\n{}\n{}",
        backend.tenant_keys(),
        backend.sink_table()
    );
    TestConfig::new(check, &gws.iter().collect::<Vec<_>>()).with(&tail)
}

fn writes(engine: &Engine, result: &'static str) -> u64 {
    sink_writes_with(engine, "s", result)
}

async fn wait_published(backend: &impl Backend, want: &[String]) {
    let start = tokio::time::Instant::now();
    let mut want = want.to_vec();
    want.sort();
    loop {
        let got = backend.published().await;
        if got.as_deref() == Some(&want[..]) {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "wanted {want:?}, the back end holds {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Steps 1 and 2: an outage, a burst of changes to gw-1 ending with it down, recovery: the
/// latest state, in few writes.
async fn outage_and_burst(
    engine: &Engine,
    backend: &mut impl Backend,
    gws: &mut [Gateway],
    all: &[String],
) {
    backend.outage_start().await;
    for round in 0..3 {
        gws[0].set(Behaviour::Refuse).unwrap();
        wait_for_status(engine, "gw-1 down", |s| state_of(s, "gw-1") == Health::Down).await;
        if round < 2 {
            gws[0].set(Behaviour::Healthy).unwrap();
            wait_for_status(engine, "gw-1 up", |s| state_of(s, "gw-1") == Health::Up).await;
        }
    }
    eventually("the outage making writes fail", || {
        writes(engine, "error") > 0
    })
    .await;
    let changed_before = writes(engine, "changed");
    backend.outage_end().await;
    wait_published(backend, &all[1..]).await;
    // Held over the 300 ms after recovery (checked all along, not once at its end).
    holds_for(
        "5 changes during the outage took at most 2 writes after it",
        Duration::from_millis(300),
        || writes(engine, "changed") - changed_before <= 2,
    )
    .await;
}

async fn run_suite<B: Backend>(mut backend: B) {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let all: Vec<String> = gws.iter().map(ip).collect();
    let engine = start_engine(
        dir.path(),
        &engine_config(&Check::FAST, &gws, &backend).render(),
    )
    .await;
    wait_published(&backend, &all).await;

    if B::SERVING {
        gws[0].set(Behaviour::Refuse).unwrap();
        wait_published(&backend, &all[1..]).await;
    } else {
        outage_and_burst(&engine, &mut backend, &mut gws, &all).await;
    }

    // 3: idempotent. Two reconciles (1 s apart) of an unchanged state change nothing.
    let changed = writes(&engine, "changed");
    let unchanged = writes(&engine, "unchanged");
    let start = tokio::time::Instant::now();
    while writes(&engine, "unchanged") < unchanged + 2 && start.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        writes(&engine, "changed"),
        changed,
        "a reconcile rewrote an unchanged state"
    );
    assert!(
        writes(&engine, "unchanged") >= unchanged + 2,
        "reconciles ran and found nothing to do"
    );
    wait_published(&backend, &all[1..]).await;

    // 4: the back end loses the state; the next reconcile (1 s) writes it again. Nothing
    // else would: no verdict changes, so no snapshot comes.
    if !B::SERVING {
        backend.lose_state().await;
        assert_ne!(backend.published().await.as_deref(), Some(&all[1..]));
        wait_published(&backend, &all[1..]).await;
    }

    // 5: restart. While gw-1 is back up but gw-3 hangs (no verdict for > 1 s), the new
    // engine writes nothing: the back end keeps the full last set.
    drop(engine);
    backend.released().await;
    gws[0].set(Behaviour::Healthy).unwrap();
    gws[2].set(Behaviour::Hang).unwrap();
    let slow = Check {
        fall: 4,
        timeout: "190ms",
        ..Check::FAST
    };
    // The default start-up grace (3 x 200 ms) would end the wait on purpose; make it long.
    let text = engine_config(&slow, &gws, &backend)
        .set("defaults.startup_grace", "10s")
        .render();
    let restart_dir = tempfile::tempdir().unwrap();
    let engine = start_engine(restart_dir.path(), &text).await;
    // What the back end holds until every verdict is in: the last set written, or (a
    // serving back end, which holds nothing across a restart) SERVFAIL.
    let kept = (!B::SERVING).then(|| all[1..].to_vec());
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_millis(600) {
        assert_eq!(
            backend.published().await,
            kept,
            "published before every verdict was in"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_published(&backend, &all[..2]).await;
    // The first engine's sink is gone: no reconcile of its old state comes back while the
    // new engine's sink reconciles (every second) twice.
    let reconciled = writes(&engine, "unchanged");
    eventually("two reconciles of the new engine", || {
        writes(&engine, "unchanged") >= reconciled + 2
    })
    .await;
    wait_published(&backend, &all[..2]).await;
    assert_eq!(backend.published().await.as_deref(), Some(&all[..2]));
    drop(engine);
}

#[actix_rt::test]
async fn hosts_file_conforms() {
    run_suite(HostsFiles {
        dir: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn powerdns_conforms() {
    run_suite(PowerDns(PdnsServer::start("tenant-a.io."))).await;
}

#[actix_rt::test]
async fn webhook_conforms() {
    let rx = Receiver::default();
    let addr = rx.clone().start().await;
    run_suite(Webhook {
        rx,
        addr,
        secret: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn coredns_configmap_conforms() {
    let api = KubeApi::default();
    api.put("dns", "hosts", &[("Corefile", ".:53 {}")]);
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    run_suite(ConfigMap { api, addr, dir }).await;
}

#[actix_rt::test]
async fn dns_endpoint_conforms() {
    let api = KubeApi::default();
    let addr = api.start().await;
    run_suite(DnsEndpoints {
        api,
        addr,
        dir: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn route53_conforms() {
    let moto = Moto::start().await;
    let zone = moto.create_zone("tenant-a.io").await;
    let proxy = Proxy::default();
    let url = proxy.start(&moto.url).await;
    run_suite(Route53 {
        moto,
        proxy,
        url,
        zone,
    })
    .await;
}

#[actix_rt::test]
async fn cloudflare_conforms() {
    run_suite(CloudflareZone {
        server: Cloudflare::start("tenant-a.io").await,
        token: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn external_dns_webhook_conforms() {
    run_suite(ExternalDnsWebhook(
        ExternalDnsProvider::start(&["tenant-a.io"], 60).await,
    ))
    .await;
}

#[actix_rt::test]
async fn google_cloud_dns_conforms() {
    run_suite(GoogleZone {
        server: GoogleDns::start("tenant-a.io").await,
        key: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn azure_dns_conforms() {
    run_suite(AzureZone {
        server: AzureDns::start("tenant-a.io").await,
        secret: tempfile::tempdir().unwrap(),
    })
    .await;
}

#[actix_rt::test]
async fn dns_server_conforms() {
    run_suite(DnsServer(std::net::SocketAddr::new(
        loopback_ip().into(),
        5353,
    )))
    .await;
}

#[actix_rt::test]
async fn rfc2136_on_bind_conforms() {
    run_suite(Rfc2136(Primary::start(Flavor::Bind).await)).await;
}

#[actix_rt::test]
async fn rfc2136_on_knot_conforms() {
    run_suite(Rfc2136(Primary::start(Flavor::Knot).await)).await;
}
