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
use crate::fakes::cloudflare::{Cloudflare, TOKEN as CLOUDFLARE_TOKEN, ZONE_ID};
use crate::fakes::external_dns::ExternalDnsProvider;
use crate::fakes::google_dns::{GoogleDns, MANAGED_ZONE, PROJECT};
use crate::fakes::kube_api::KubeApi;
use crate::fakes::route53::{Moto, Proxy};
use crate::fakes::webhook::{addresses_of, Receiver, SECRET};
use crate::harness::*;
use crate::services::dig::dig1;
use crate::services::dns_primary::{Flavor, Primary, KEY};
use crate::services::pdns::PdnsServer;

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

struct HostsFiles {
    dir: tempfile::TempDir,
}

impl Backend for HostsFiles {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"hosts_file\"\ndir = {:?}\n{DELIVERY}\n",
            self.path().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let mut list = addresses(&std::fs::read_to_string(self.path().join("conf.hosts")).ok()?);
        list.sort();
        Some(list)
    }
    /// Root ignores permissions, so the outage moves the folder away and puts a file in
    /// its place: every write fails until it is moved back.
    async fn outage_start(&mut self) {
        std::fs::rename(self.path(), self.dir.path().join("away")).unwrap();
        std::fs::write(self.path(), "not a directory").unwrap();
    }
    async fn outage_end(&mut self) {
        std::fs::remove_file(self.path()).unwrap();
        std::fs::rename(self.dir.path().join("away"), self.path()).unwrap();
    }
    async fn lose_state(&mut self) {
        std::fs::remove_file(self.path().join("conf.hosts")).unwrap();
    }
}

impl HostsFiles {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("hosts")
    }
}

struct PowerDns(PdnsServer);

impl Backend for PowerDns {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"tenant-a.io.\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.0.url(),
            self.0.key_file().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        Some(self.0.dig(DOMAIN, "A").await).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.0.stop();
    }
    async fn outage_end(&mut self) {
        self.0.launch();
    }
    async fn lose_state(&mut self) {
        self.0.patch_zone(
            "tenant-a.io.",
            &format!(r#"{{"rrsets":[{{"name":"{DOMAIN}.","type":"A","changetype":"DELETE"}}]}}"#),
        );
    }
}

struct ConfigMap {
    api: KubeApi,
    addr: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl Backend for ConfigMap {
    fn sink_table(&self) -> String {
        let kubeconfig = KubeApi::kubeconfig(self.addr, self.dir.path());
        format!(
            "[sinks.s]\nkind = \"coredns_configmap\"\nnamespace = \"dns\"\nname = \"hosts\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            kubeconfig.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let content = self.api.data("dns", "hosts")?.get("conf.hosts")?.clone();
        let mut list = addresses(&content);
        list.sort();
        Some(list)
    }
    async fn outage_start(&mut self) {
        self.api.set_unavailable(true);
    }
    async fn outage_end(&mut self) {
        self.api.set_unavailable(false);
    }
    async fn lose_state(&mut self) {
        self.api.put("dns", "hosts", &[]);
    }
}

/// external-dns `DNSEndpoint` objects on the Kubernetes API test server (no API server
/// can be installed here; the test server's doc lists what it implements).
struct DnsEndpoints {
    api: KubeApi,
    addr: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl Backend for DnsEndpoints {
    fn sink_table(&self) -> String {
        let kubeconfig = KubeApi::kubeconfig(self.addr, self.dir.path());
        format!(
            "[sinks.s]\nkind = \"dns_endpoint\"\nnamespace = \"dns\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            kubeconfig.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let object = self.api.object("dnsendpoints", "dns", "ho-conf")?;
        let mut list: Vec<String> = object["spec"]["endpoints"]
            .as_array()?
            .iter()
            .filter(|e| e["dnsName"] == DOMAIN)
            .flat_map(|e| e["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        list.sort();
        (!list.is_empty()).then_some(list)
    }
    async fn outage_start(&mut self) {
        self.api.set_unavailable(true);
    }
    async fn outage_end(&mut self) {
        self.api.set_unavailable(false);
    }
    async fn lose_state(&mut self) {
        self.api.delete("dnsendpoints", "dns", "ho-conf");
    }
}

struct Route53 {
    moto: Moto,
    proxy: Proxy,
    url: String,
    zone: String,
}

impl Backend for Route53 {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"route53\"\nhosted_zone_id = \"{}\"\nzone = \"tenant-a.io\"\nregion = \"us-east-1\"\nendpoint_url = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.zone, self.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let mut list: Vec<String> = self
            .moto
            .records(&self.zone)
            .await
            .iter()
            .filter(|l| l.starts_with(&format!("{DOMAIN}. A ")))
            .filter_map(|l| l.rsplit(' ').next().map(str::to_owned))
            .collect();
        list.sort();
        Some(list).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.proxy
            .down
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    async fn outage_end(&mut self) {
        self.proxy
            .down
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
    async fn lose_state(&mut self) {
        self.moto.delete(&self.zone, DOMAIN, "A").await;
    }
}

/// Cloudflare's API, on its test server (no Cloudflare can be run here).
struct CloudflareZone {
    server: Cloudflare,
    token: tempfile::TempDir,
}

impl Backend for CloudflareZone {
    fn sink_table(&self) -> String {
        let file = self.token.path().join("token");
        std::fs::write(&file, CLOUDFLARE_TOKEN).unwrap();
        format!(
            "[sinks.s]\nkind = \"cloudflare\"\nzone_id = \"{ZONE_ID}\"\nzone = \"tenant-a.io\"\napi_token_file = {:?}\nurl = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            file.display().to_string(),
            self.server.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
    fn tenant_keys(&self) -> &'static str {
        "ttl = \"60s\"\n"
    }
}

/// An external-dns webhook provider, on the test server written from external-dns's
/// protocol and its in-memory provider (no provider of a real DNS API can be reached here),
/// raising TTLs under 60 s in `/adjustendpoints` as providers with a minimum do.
struct ExternalDnsWebhook(ExternalDnsProvider);

impl Backend for ExternalDnsWebhook {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"external_dns_webhook\"\nurl = \"{}\"\ntimeout = \"1s\"\nmax_requests_per_second = 100\n{DELIVERY}\n",
            self.0.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.0.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.0.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.0.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.0.lose(DOMAIN);
    }
}

/// Google Cloud DNS's API, on its test server (no Cloud DNS can be run here), with a
/// service account key.
struct GoogleZone {
    server: GoogleDns,
    key: tempfile::TempDir,
}

impl Backend for GoogleZone {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"google_cloud_dns\"\nproject = \"{PROJECT}\"\nmanaged_zone = \"{MANAGED_ZONE}\"\nzone = \"tenant-a.io\"\ncredentials_file = {:?}\nurl = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.server.key_file(self.key.path()).display().to_string(),
            self.server.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
}

/// Azure DNS through Resource Manager, on its test server (no Azure can be run here), with
/// an app registration's client secret.
struct AzureZone {
    server: AzureDns,
    secret: tempfile::TempDir,
}

impl Backend for AzureZone {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\n{}timeout = \"1s\"\n{DELIVERY}\n",
            crate::azure_dns::sink_keys(&self.server, self.secret.path())
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
}

struct Webhook {
    rx: Receiver,
    addr: std::net::SocketAddr,
    secret: tempfile::TempDir,
}

impl Backend for Webhook {
    fn sink_table(&self) -> String {
        let file = self.secret.path().join("secret");
        std::fs::write(&file, SECRET).unwrap();
        format!(
            "[sinks.s]\nkind = \"webhook\"\nurl = \"http://{}/\"\nsecret_file = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.addr,
            file.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.rx.accepted().last().map(|d| addresses_of(d, DOMAIN))
    }
    async fn outage_start(&mut self) {
        *self.rx.failing.lock().unwrap() = true;
    }
    async fn outage_end(&mut self) {
        *self.rx.failing.lock().unwrap() = false;
    }
    async fn lose_state(&mut self) {
        self.rx.forget();
    }
}

/// A primary taking RFC 2136 updates; an outage kills it, a lost state is another tool
/// deleting the records.
struct Rfc2136(Primary);

impl Backend for Rfc2136 {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"rfc2136\"\nserver = \"{}\"\nzone = \"tenant-a.io\"\ntsig = {{ name = \"{KEY}\", secret_file = {:?} }}\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.0.addr,
            self.0.key_file().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        Some(dig1(self.0.addr, &[DOMAIN, "A"]).await.sorted()).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.0.stop();
    }
    async fn outage_end(&mut self) {
        self.0.launch().await;
    }
    async fn lose_state(&mut self) {
        self.0.nsupdate(&format!("update delete {DOMAIN} A"));
    }
}

/// The embedded server on a loopback address of its own: a serving back end.
struct DnsServer(std::net::SocketAddr);

impl Backend for DnsServer {
    const SERVING: bool = true;
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"dns_server\"\nlisten = [\"{}\"]\nzones = [\"tenant-a.io\"]\n{DELIVERY}\n",
            self.0
        )
    }
    /// `None` while the server answers SERVFAIL (a name pending its first verdicts); an
    /// empty NOERROR answer is `Some([])`, which no step accepts.
    async fn published(&self) -> Option<Vec<String>> {
        let answer = dig1(self.0, &[DOMAIN, "A"]).await;
        (answer.status != "SERVFAIL").then(|| answer.sorted())
    }
    async fn outage_start(&mut self) {
        unreachable!("a serving back end has no outage")
    }
    async fn outage_end(&mut self) {
        unreachable!("a serving back end has no outage")
    }
    async fn lose_state(&mut self) {
        unreachable!("a serving back end loses nothing behind its back")
    }
    /// Until the stopped engine's sockets are closed: in one process, a server started on
    /// the address of a running one takes it over with what it answers (as a reload does),
    /// and step 5 is about a start from nothing.
    async fn released(&self) {
        eventually("the stopped engine's DNS sockets closed", || {
            std::net::UdpSocket::bind(self.0).is_ok() && std::net::TcpListener::bind(self.0).is_ok()
        })
        .await;
    }
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
    tokio::time::sleep(Duration::from_millis(300)).await;
    let burst_writes = writes(engine, "changed") - changed_before;
    assert!(
        burst_writes <= 2,
        "5 changes during the outage took {burst_writes} writes after it"
    );
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
